"""Startup in parts that add up, a train process that imports no analysis libraries, and CPU ranks pinned to
disjoint cores where the machine allows (real torchrun, gloo)."""

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, launcher, one_thread

from hwsweep.contracts import host, io
from hwsweep.contracts.records import PARTS
from hwsweep.contracts.spec import EVAL_RECORD, TRAIN_RECORD
from hwsweep.plan.config import resolve
from hwsweep.run.startup import StartupClock, total

STEPS = 12


def _train(tmp_path, small_config, prefix: list[str] = ()) -> dict:
    """One world-size-2 run of the built-in trainer (1 thread per process), optionally under `prefix` (taskset)."""
    small_config["recipe"]["schedule"] = {"steps": STEPS, "warmup_steps": 2}
    small_config["seeds"] = [3]
    spec = resolve(small_config).spec("tiny", "default", "cpu2", 3).to_dict()
    spec["run_dir"] = str(tmp_path / "run")
    path = tmp_path / "spec.json"
    io.write_json(path, spec)
    cmd = [*prefix, *launcher(2), "-m", "hwsweep.run.train", str(path), "--threads", "2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=one_thread())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads((tmp_path / "run" / TRAIN_RECORD).read_text())


@pytest.mark.slow
@pytest.mark.alone  # pinned only where no other hwsweep run is on the node
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning two ranks needs 2 allowed CPUs")
def test_startup_parts_add_up_and_two_cpu_ranks_get_disjoint_cores(tmp_path, small_config):
    record = _train(tmp_path, small_config)
    (segment,) = record["segments"]
    parts = segment["startup_parts"]
    assert set(parts) == set(PARTS) and all(v >= 0 for v in parts.values())
    assert parts["imports"] > 0.1 and parts["process_group"] > 0 and parts["first_step"] > 0  # each really measured
    # The parts come from perf_counter marks, the startup from the kernel's process start (10 ms ticks).
    assert sum(parts.values()) == pytest.approx(segment["startup_seconds"], abs=0.05)
    assert record["startup_parts"] == parts and record["startup_seconds"] == segment["startup_seconds"]
    # The first step is startup: the training time is the other steps'.
    assert len(record["step_seconds"]) == STEPS - 1
    assert record["train_seconds"] == pytest.approx(sum(record["step_seconds"]))
    assert record["startup_seconds"] + record["train_seconds"] <= record["wall_seconds"] + 0.05

    affinity = record["provenance"]["contention"]["affinity"]
    assert affinity["pinned"], affinity
    first, second = affinity["cpus_per_rank"]
    assert len(first) == len(second) == 1 and set(first).isdisjoint(second)


@pytest.mark.slow
@pytest.mark.alone
def test_ranks_are_not_pinned_when_they_would_share_a_core(tmp_path, small_config):
    cpu = min(os.sched_getaffinity(0))
    record = _train(tmp_path, small_config, ["taskset", "-c", str(cpu)])
    affinity = record["provenance"]["contention"]["affinity"]
    assert not affinity["pinned"]
    assert "1 CPU(s) allowed < 2 process(es) x 1 CPU(s) each" in affinity["reason"]
    assert affinity["cpus_per_rank"] == [[cpu], [cpu]]


def test_pin_cores_takes_the_rank_s_block_of_the_allowed_cpus(monkeypatch):
    chosen = []
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {2, 5, 7, 9, 11, 12})
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cpus: chosen.append(list(cpus)))
    monkeypatch.setattr(host, "other_runs", lambda: 1)  # another run on the machine, seeing the same CPUs
    assert host.pin_cores("cpu", 1, 3, 2) == {"pinned": True, "cpus": [7, 9], "spare": [], "reason": chosen and
                                              "6 of 6 allowed CPU(s), 2 per process"}  # fmt: skip
    assert chosen == [[7, 9]]
    assert not host.pin_cores("cpu", 0, 4, 2)["pinned"] and chosen == [[7, 9]]  # 6 < 4 x 2: left alone
    assert not host.pin_cores("cuda", 0, 1, 1)["pinned"]
    # Beside another run only a run that fills the allowed CPUs pins (its allocation); alone, any run does.
    alongside = host.pin_cores("cpu", 0, 1, 2)
    assert not alongside["pinned"] and "1 other hwsweep run(s)" in alongside["reason"] and chosen == [[7, 9]]
    assert host.pin_cores("cpu", 2, 3, 2)["pinned"] and chosen == [[7, 9], [11, 12]]
    monkeypatch.setattr(host, "other_runs", lambda: 0)
    alone = host.pin_cores("cpu", 0, 1, 2)
    assert alone["pinned"] and chosen[-1] == [2, 5] and alone["spare"] == [7, 9, 11, 12]  # the tracker's CPUs


def test_startup_clock_parts_add_up_and_an_unmarked_part_is_zero():
    clock = StartupClock()
    clock.mark("process_group")
    clock.mark("model")  # no loader: data is 0, its time is the model's
    clock.mark("model")  # a second mark changes nothing
    parts = clock.parts()
    assert parts["data"] == 0 and parts["first_step"] == 0 and parts["imports"] == clock.imports
    clock.mark("first_step")
    assert clock.parts()["model"] == parts["model"] and clock.parts()["first_step"] >= 0
    with pytest.raises(ValueError, match="unknown startup part"):
        clock.mark("imports")
    segments = [{"startup_parts": dict.fromkeys(PARTS, 1.0)}, {"startup_parts": dict.fromkeys(PARTS, 0.5)}]
    assert total(segments) == dict.fromkeys(PARTS, 1.5)
    assert total(segments + [{"start_step": 3}]) is None  # a segment not broken down: no parts


@pytest.mark.slow
def test_a_train_process_imports_no_analysis_libraries():
    """pandas, scipy and matplotlib cost a second of startup each; the launch and train path never needs them."""
    code = ("import sys, hwsweep.run.launch, hwsweep.run.tether, hwsweep.run.train; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'scipy', 'matplotlib'}))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"
    # The check itself sees such an import (it is not vacuous).
    seen = subprocess.run([sys.executable, "-c", code.replace("import sys,", "import sys, pandas,")],
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    assert "pandas" in seen.stdout


@pytest.mark.slow
def test_the_collector_is_held_through_the_imports_of_the_trainer_s_own_process_only(tmp_path, small_config):
    """hwsweep.run.train and hwsweep.run.evaluate as their own processes (__main__): the cyclic collector off
    through torch's and TorchDynamo's imports (0.3-0.7 CPU-s of collections a process), on again from
    runtime.init's return (the trainer) or main's start (the evaluator); imported as modules by another program
    they leave its collector alone."""
    imported = ("import gc, hwsweep.run.train, hwsweep.run.evaluate; "
                "print(gc.isenabled(), gc.get_freeze_count())")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", imported], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["True", "0"]
    small_config["recipe"]["schedule"] = {"steps": 3, "warmup_steps": 1}
    spec = resolve(small_config).spec("tiny", "default", "cpu1", 0).to_dict() | {"run_dir": str(tmp_path / "run")}
    io.write_json(tmp_path / "spec.json", spec)
    # The run as `python -m hwsweep.run.train` runs it: the collector's state where runtime.init is entered.
    watch = """
from hwsweep.run import runtime
real = runtime.init
def init(*args, **kwargs):
    seen.append(gc.isenabled())
    return real(*args, **kwargs)
runtime.init = init
"""
    assert "collector [False] True" in _collector_seen("hwsweep.run.train", tmp_path / "spec.json", watch=watch)
    assert json.loads((tmp_path / "run" / TRAIN_RECORD).read_text())["status"] == "complete"
    # Its evaluation as `python -m hwsweep.run.evaluate` runs it: held at its imports, on where main reads the spec.
    watch = """
from hwsweep.contracts.spec import RunSpec
from hwsweep.run import startup
hold, load = startup.hold_collection, RunSpec.load
startup.hold_collection = lambda name: seen.append(hold(name)) or seen[-1]
def read(*args, **kwargs):
    seen.append(gc.isenabled())
    return load(*args, **kwargs)
RunSpec.load = read
"""
    assert "collector [True, True] True" in _collector_seen("hwsweep.run.evaluate", tmp_path / "spec.json", watch=watch)
    assert (tmp_path / "run" / EVAL_RECORD).is_file()


def test_torchruns_agent_imports_torch_with_the_collector_held_and_frozen():
    """The launcher's torchrun (hwsweep.run.torchrun, torch's agent itself): the collector off when the agent's
    import of torch starts, then on, with what the imports made frozen (0.5-0.6 CPU-s an agent); the agent runs
    its worker (here `true`) and exits 0."""
    watch = _imports_seen("torch") + """
from hwsweep.run import startup
resume = startup.resume_collection
startup.resume_collection = lambda held: resume(held) or seen.append(gc.get_freeze_count() > 100_000)
"""
    out = _collector_seen("hwsweep.run.torchrun", "--standalone", "--nproc_per_node", "1", "--no-python", "true",
                          watch=watch)  # fmt: skip
    assert "collector [False, True] True" in out


def _imports_seen(*names: str) -> str:
    """Code that appends the collector's state to `seen` as the import of each of `names` starts."""
    return f"""
class Imports:
    def find_spec(self, name, path=None, target=None):
        if name in {names!r}:
            seen.append(gc.isenabled())
sys.meta_path.insert(0, Imports())
"""


def _collector_seen(module: str, *args, watch: str) -> str:
    """`python -m module args...` in a process of its own, `watch` (code that appends what it sees to `seen`) run
    first; its output, whose last line is `collector <seen> <the collector on at the process's end>`."""
    code = "import atexit, gc, runpy, sys\nseen = []\n" + watch + f"""
atexit.register(lambda: print("collector", seen, gc.isenabled(), flush=True))
sys.argv = {[module, *map(str, args)]!r}
runpy.run_module({module!r}, run_name="__main__")
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=one_thread())  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    return run.stdout


def test_contention_rule():
    assert host.contended(None) == "" and host.contended({"other_runs": 0, "load_1m": 2.0, "cpus_allowed": 2}) == ""
    assert "1 other hwsweep run" in host.contended({"other_runs": 1, "load_1m": 0.1, "cpus_allowed": 2})
    assert "load 3.5 on 2" in host.contended({"other_runs": 0, "load_1m": 3.5, "cpus_allowed": 2})


def test_the_hwsweep_command_runs_without_the_collector_and_a_caller_keeps_its_own():
    """`hwsweep …` as a command (its arguments from the command line): the collector off and what the command made
    frozen at its end (its exit's collection walks nothing: 0.4-0.6 CPU-s of a `hwsweep plan`); cli.main(argv)
    called by a program leaves that program's collector alone."""
    code = ("import gc, sys\nfrom hwsweep import cli\n"
            "print('called', cli.main(['workflow']), gc.isenabled(), gc.get_freeze_count())\n"
            "sys.argv = ['hwsweep', 'workflow']\n"
            "print('command', cli.main(), gc.isenabled(), gc.get_freeze_count() > 1000)\n")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    seen = [line for line in out.stdout.splitlines() if line.startswith(("called", "command"))]
    assert seen == ["called 0 True 0", "command 0 False True"], out.stdout


@pytest.mark.parametrize("script", sorted(p.stem for p in (REPO / "workflow" / "scripts").glob("*.py")
                                          if p.stem != "write_text"))  # fmt: skip
def test_each_workflow_script_imports_with_the_collector_held(tmp_path, script):
    """A workflow script's job is a process of its own: its imports (pandas, matplotlib, hwsweep's analysis) run
    with the collector off, then it is on again with them frozen (0.15-0.4 CPU-s a job). write_text imports
    nothing worth it."""
    code = "import builtins, gc, runpy, sys, types\nseen = []\n" + _imports_seen(
        "pandas", "hwsweep.analysis", "hwsweep.plan", "hwsweep.report") + f"""
from hwsweep.run import startup
resume = startup.resume_collection
startup.resume_collection = lambda held: seen.append(f"resumed {{held}}") or resume(held)
builtins.snakemake = types.SimpleNamespace(log=[{str(tmp_path / "log")!r}])  # what snakemake's preamble gives
try:
    runpy.run_path({str(REPO / "workflow" / "scripts" / f"{script}.py")!r}, run_name="__main__")
except Exception:  # past its imports, the script reads what this stand-in lacks
    pass
print(seen, gc.isenabled())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    seen = out.stdout.strip().splitlines()[-1]
    assert seen.startswith("[False") and seen.endswith(", 'resumed True'] True") and "True," not in seen, seen
