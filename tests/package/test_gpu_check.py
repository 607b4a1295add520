"""bench/gpu_check.py (issue 39): its --smoke run end to end on the CPU, a section over its budget or failing, the
wheel folder's contents, and the offline install into a venv that sees the machine's own torch."""

import importlib.util
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from conftest import REPO

BENCH = REPO / "bench"
sys.path.insert(0, str(BENCH))

from gpucheck import hrm, table, wheels  # noqa: E402
from gpucheck.record import Recorder  # noqa: E402


def _gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", BENCH / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


# -- the whole check, --smoke, on this CPU -------------------------------------------------------------------
# Rows that check a function, not a speed or a GPU memory figure: --smoke judges them on the CPU as on a GPU.
JUDGED = {
    "workflow": ["the sweep finishes (2 seeds: train, evaluate, aggregate)", "provenance records the GPU",
                 "evaluated on the device that trained", "deterministic repeat bitwise equal"],
    "hrm": ["trains on the device", "evaluated on the device that trained", "FLOPs per step: estimate / spent"],
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(1300)  # the check stops itself at its --smoke deadline (1,020 s) on a machine loaded that much
def test_smoke_runs_every_section_and_writes_the_json_and_the_table(tmp_path):
    """66-71 s of CPU (user + sys) for the whole --smoke at a load of 16-18 on 2 cores (2026-11-26); 4.5 to 9 minutes
    of wall clock at a load of 20."""
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(BENCH / "gpu_check.py"), "--smoke", "--out", str(out)],
                          capture_output=True, text=True, timeout=1250, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((out / "gpu_check.json").read_text())
    gpu_check = _gpu_check()
    assert [s["key"] for s in result["sections"]] == gpu_check.ORDER
    assert result["smoke"] is True and result["device"]["torch"] and result["device"]["python"]
    for section in result["sections"]:
        assert section["status"] in ("ok", "goals missed"), section
        assert section["rows"], section["key"]
        for row in section["rows"]:  # nothing broken, nothing skipped but what --smoke leaves out
            assert row["status"] in ("pass", "info") or row["detail"].startswith("--smoke:"), (section["key"], row)
    rows = {(s["key"], r["name"]): r for s in result["sections"] for r in s["rows"]}
    for key, names in JUDGED.items():
        for name in names:
            assert rows[(key, name)]["status"] == "pass", rows[(key, name)]
    assert rows[("hrm", "trains on the device")]["shown"].startswith(f"**{hrm.STEPS} steps** on")  # the section's
    assert len([k for k in rows if k[0] == "speed"]) == 4  # fp32 and bf16-mixed, eager and compiled
    assert len([k for k in rows if k[0] == "memory"]) == 6  # ddp/fsdp x 2 precisions + micro_batch auto x 2
    markdown = (out / "gpu_check.md").read_text()
    assert markdown == table.markdown(result)
    for section in result["sections"]:
        for row in section["rows"]:
            assert f"| {section['title']} | {row['name']} |" in markdown
    assert "(--smoke" in markdown and result["device"]["torch"] in markdown
    assert "workflow" in (out / "gpu_check.log").read_text()


# -- a section's end, as the parent sees it (no torch: a stand-in program in the section's place) -----------
def _section(tmp_path, program: str, allowed: float):
    gpu_check = _gpu_check()
    log = gpu_check.Log(tmp_path / "gpu_check.log")
    section = gpu_check.Section("speed", "trainer vs bare loop", 60, 60)
    cmd = [sys.executable, "-c", program, str(BENCH)]
    t0 = time.monotonic()
    found = gpu_check._run_section(section, allowed, 60, tmp_path, True, {}, {}, log, cmd=cmd)
    return found, time.monotonic() - t0


# The stand-in: records one row, declares a second, then does what the test says.
STAND_IN = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from gpucheck.record import Recorder
context = json.load(open(sys.argv[sys.argv.index("--context") + 1]))
rec = Recorder(context["rows"], "speed")
open(context["work"] + "/pid", "w").write(str(__import__("os").getpid()))
rec.declare(["tiny fp32 eager", "tiny fp32 compiled"])
rec.row("tiny fp32 eager", "pass", "**0.990**", ">= 0.97", 0.99)
"""


def test_a_section_over_its_budget_is_stopped_and_keeps_its_rows(tmp_path):
    found, seconds = _section(tmp_path, STAND_IN + "time.sleep(600)\n", allowed=3)
    assert seconds < 3 + 10, "a section over its budget was not stopped"
    _gone(tmp_path)
    assert found["status"] == "over budget" and "stopped after" in found["line"]
    rows = {r["name"]: r for r in found["rows"]}
    assert rows["tiny fp32 eager"]["status"] == "pass"  # finished before the stop: kept
    assert rows["tiny fp32 compiled"]["status"] == "skipped"
    assert "were over" in rows["tiny fp32 compiled"]["detail"]


def test_a_section_that_stops_ignoring_sigterm_is_killed(tmp_path):
    program = STAND_IN + "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)\n"
    found, seconds = _section(tmp_path, program, allowed=2)
    assert found["status"] == "over budget"
    assert seconds < 2 + 10 + 15  # the grace period, then SIGKILL
    _gone(tmp_path)


def _gone(tmp_path) -> None:
    pid = int((tmp_path / "speed" / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the section's process is gone (reaped), not left running on the GPU


def test_a_section_that_fails_says_why_in_one_line(tmp_path):
    found, _ = _section(tmp_path, STAND_IN + "raise SystemExit('hwsweep: the device said no')\n", allowed=60)
    assert found["status"] == "error"
    assert found["line"] == "exit 1: hwsweep: the device said no"
    assert {r["status"] for r in found["rows"]} == {"pass", "skipped"}
    assert "the device said no" in found["output_tail"]


# A program the section runs (snakemake, the launcher, torchrun): 50 numbered lines, then what the test says.
PROGRAM = "for i in $(seq 1 50); do echo program line $i; done; "


def test_a_program_that_fails_puts_its_logs_tail_into_gpu_check_log(tmp_path):
    """The first H100 run lost snakemake's and the launcher's logs with the work folder: a timeout said nothing of
    where they were. Now the program's last 40 lines go into gpu_check.log and its row says how it ended."""
    program = STAND_IN + (
        "from gpucheck import proc\n"
        "with rec.guarded('tiny fp32 compiled'):\n"
        f"    proc.run(['bash', '-c', {PROGRAM + 'exit 3'!r}], context['work'] + '/program.log', 60)\n"
    )
    found, _ = _section(tmp_path, program, allowed=60)
    rows = {r["name"]: r for r in found["rows"]}
    assert rows["tiny fp32 compiled"]["status"] == "error"
    assert rows["tiny fp32 compiled"]["detail"] == "Failed: bash exited 3: program line 50"
    log = (tmp_path / "gpu_check.log").read_text()
    assert "program line 11\n" in log and "program line 50\n" in log and "program line 10\n" not in log


def test_a_program_over_its_timeout_is_stopped_and_its_tail_said(tmp_path):
    program = STAND_IN + (
        "from gpucheck import proc\n"
        "with rec.guarded('tiny fp32 compiled'):\n"
        f"    proc.run(['bash', '-c', {PROGRAM + 'sleep 600'!r}], context['work'] + '/program.log', 2)\n"
    )
    found, seconds = _section(tmp_path, program, allowed=60)
    assert seconds < 30
    detail = {r["name"]: r for r in found["rows"]}["tiny fp32 compiled"]["detail"]
    assert detail.startswith("Failed: bash timed out after 2 s; its log's last line: program line 50")
    assert "program line 50\n" in (tmp_path / "gpu_check.log").read_text()


def test_a_section_stopped_while_its_program_runs_leaves_neither_it_nor_silence(tmp_path):
    """The parent stops the section (its time over) while a program of its own process group runs: the parent stops
    that group too and puts the program's tail into gpu_check.log; the row in progress says what it had reached."""
    program = STAND_IN + (
        "from gpucheck import proc\n"
        "rec.row('tiny fp32 compiled', 'pending', detail='compiled, 1 pair of 3')\n"
        f"started = proc.Program(['bash', '-c', {PROGRAM + 'sleep 600'!r}], context['work'] + '/logs/program.log')\n"
        "open(context['work'] + '/child', 'w').write(str(started.proc.pid))\n"
        "time.sleep(600)\n"
    )
    found, seconds = _section(tmp_path, program, allowed=3)
    assert found["status"] == "over budget" and seconds < 3 + 10 + 15
    child = int((tmp_path / "speed" / "child").read_text())
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.killpg(child, 0)  # the program's group is gone, not left running on the GPU
    log = (tmp_path / "gpu_check.log").read_text()
    assert "logs/program.log was still running when the section ended" in log and "program line 50\n" in log
    assert any(n.startswith("stopped while program.log ran") and n.endswith("program line 50") for n in found["notes"])
    row = {r["name"]: r for r in found["rows"]}["tiny fp32 compiled"]
    assert row["status"] == "skipped"
    assert row["detail"] == "not reached: the section's 3 s were over; reached: compiled, 1 pair of 3"


def test_a_row_that_raises_is_an_error_row_and_the_section_goes_on(tmp_path):
    rec = Recorder(tmp_path / "rows.json", "memory")
    rec.declare(["a", "b"])
    with rec.guarded("a"):
        raise RuntimeError("CUDA out of memory\nthe rest of torch's message")
    with rec.guarded("b"):
        rec.row("b", "pass", "1.0", "1")
    rows = json.loads((tmp_path / "rows.json").read_text())["rows"]
    assert rows[0]["status"] == "error" and rows[0]["detail"].startswith("RuntimeError: CUDA out of memory")
    assert rows[1]["status"] == "pass"


def test_each_section_gets_its_budget_and_what_the_ones_before_left_within_the_deadline(tmp_path, monkeypatch):
    gpu_check = _gpu_check()
    facts = ({"torch": "x", "python": "3"}, {"accelerator": "cuda", "gpu_type": "H100-80GB"}, None)
    monkeypatch.setattr(gpu_check, "_device", lambda work, log: facts)
    calls, stages = [], []

    def run_stage(runs, *args, **kwargs):
        stages.append([section.key for section, _, _ in runs])
        found = []
        for section, allowed, _ in runs:
            calls.append((section.key, allowed))
            found.append({"key": section.key, "title": section.title, "status": "ok", "line": "", "notes": [],
                          "rows": [{"name": "r", "status": "pass"}]})  # fmt: skip
        return found

    monkeypatch.setattr(gpu_check, "_run_stage", run_stage)
    code = gpu_check.main(["--out", str(tmp_path), "--sections", "startup", "memory", "speed", "--deadline", "200"])
    assert code == 0 and [k for k, _ in calls] == ["startup", "memory", "speed"]
    allowed = dict(calls)
    assert allowed["startup"] == 50 and allowed["memory"] == 50  # their budgets: the later ones keep theirs
    assert 195 < allowed["speed"] <= 200  # its 230 s and what the others left, but not past the deadline
    calls.clear()
    gpu_check.main(["--out", str(tmp_path), "--sections", "memory", "--deadline", "200"])
    assert 195 < calls[0][1] <= 200  # alone: the whole deadline
    calls.clear()
    stages.clear()
    gpu_check.main(["--out", str(tmp_path), "--sections", "hrm", "workflow", "speed", "--deadline", "300"])
    assert stages == [["hrm", "workflow"], ["speed"]]  # side by side: one stage, counted once in the budgets
    allowed = dict(calls)
    assert allowed["hrm"] == 75 and allowed["workflow"] == 90 and 295 < allowed["speed"] <= 300
    calls.clear()
    code = gpu_check.main(["--out", str(tmp_path), "--sections", "startup", "memory", "--deadline", "3"])
    assert calls == [] and code == 1  # under 5 s left: not run, and the exit code says the check is incomplete
    result = json.loads((tmp_path / "gpu_check.json").read_text())
    assert [s["status"] for s in result["sections"]] == ["skipped", "skipped"]
    assert all(s["line"].startswith("not run: ") and "were left" in s["line"] for s in result["sections"])
    assert "**skipped**: not run" in (tmp_path / "gpu_check.md").read_text()


def test_speed_rows_reach_the_section_and_an_unknown_one_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    gpu_check = _gpu_check()
    facts = ({"torch": "x", "python": "3"}, {"accelerator": "cuda", "gpu_type": "H100-80GB"}, None)
    monkeypatch.setattr(gpu_check, "_device", lambda work, log: facts)
    seen = []

    def run_stage(runs, work, smoke, device, hardware, log, options=None):
        seen.append(options)
        return [{"key": s.key, "title": s.title, "status": "ok", "line": "", "notes": [],
                 "rows": [{"name": "r", "status": "pass"}]} for s, _, _ in runs]  # fmt: skip

    monkeypatch.setattr(gpu_check, "_run_stage", run_stage)
    rows = ["medium fp32 eager", "large bf16-mixed eager"]
    assert gpu_check.main(["--out", str(tmp_path), "--sections", "speed", "--speed-rows", *rows]) == 0
    assert seen == [{"speed_rows": rows}]
    with pytest.raises(SystemExit):
        gpu_check.main(["--out", str(tmp_path), "--speed-rows", "medium fp16 eager"])
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "--speed-rows" in x and "error" in x]
    assert "'medium fp16 eager' is no row of the speed section" in line and "'tiny fp32 eager'" in line


def test_the_budgets_fit_the_deadline_with_the_install():
    """The stages' budgets on a GPU (sections side by side counted once) leave the offline install and the device's
    reading 25 s of the 8 minutes (22 s on the first H100 run)."""
    gpu_check = _gpu_check()
    staged = gpu_check.stages(gpu_check.SECTIONS)
    assert [[s.key for s in stage] for stage in staged] == [["startup"], ["memory"], ["mfu"], ["hrm", "workflow"],
                                                            ["speed"]]  # fmt: skip
    assert sum(max(s.budget_s for s in stage) for stage in staged) <= gpu_check.DEADLINE_S - 25


def test_without_a_gpu_the_full_check_says_so_in_one_line_and_runs_nothing(tmp_path):
    proc = subprocess.run([sys.executable, str(BENCH / "gpu_check.py"), "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 1
    assert "bench/gpu_check.py: no CUDA device visible here; the check's sizes need one (--smoke runs" in proc.stdout
    result = json.loads((tmp_path / "gpu_check.json").read_text())
    assert {s["status"] for s in result["sections"]} == {"skipped"} and len(result["sections"]) == 6
    assert all(s["line"].startswith("not run: no CUDA device visible here") for s in result["sections"])


# -- the GPU rows, planned on this machine (what a GPU run would train and measure) ---------------------------
@pytest.mark.parametrize("gpu", [("H100-80GB", 79.6), ("H200-141GB", 139.8)])
def test_every_gpu_row_plans_on_this_machine_within_its_step_bounds(gpu):
    """The sections' GPU paths that --smoke cannot take here: each speed row's spec for an H100 and an H200 (as
    `hwsweep detect` describes them), its steps between MIN_STEPS and the bench's own count, and the global batch
    of micro_batch auto, which the plan must split at the largest micro-batch that fits."""
    from types import SimpleNamespace

    import memory_plan
    import trainer_vs_bare_loop as tvb
    from gpucheck import memory, speed

    from hwsweep.contracts.hardware import GB
    from hwsweep.plan.batch import Advisor, device_need

    gpu_type, memory_gb = gpu
    hardware = {"accelerator": "cuda", "devices_per_node": 1, "memory_gb": memory_gb, "gpu_type": gpu_type}
    ctx = SimpleNamespace(smoke=False, gpu_type=gpu_type, hardware=hardware, accelerator="cuda", speed_rows=None)
    rows = speed._rows(ctx)
    assert len(rows) == 12 and len(set(rows)) == 12
    assert sorted(speed._name(*row) for row in rows) == sorted(_gpu_check().SPEED_ROWS)  # what --speed-rows takes
    chosen = SimpleNamespace(smoke=False, speed_rows=["large fp32 compiled", "tiny fp32 eager"])
    assert speed._rows(chosen) == [("tiny", "fp32", False), ("large", "fp32", True)]  # in the section's order
    assert rows[:4] == [("tiny", "fp32", False), ("medium", "fp32", False), ("medium", "bf16-mixed", False),
                        ("large", "bf16-mixed", False)]  # issue 12's rows first  # fmt: skip
    for size, precision, compiled in rows:
        spec = speed._spec(ctx, size, precision, compiled, speed.RUN_SECONDS)
        assert spec.plan.accelerator == "cuda" and spec.plan.gpu_type == gpu_type and spec.recipe.compile == compiled
        assert speed.MIN_STEPS <= spec.plan.steps <= tvb.SIZES[size][1]["cuda"][1]
        assert spec.plan.tf32 == (precision != "fp32")
    recipe, _ = memory_plan.plan_at(tvb.SIZES["large"][0], 2, 1, "bf16-mixed", hardware, True)
    budget = Advisor.target_utilisation * memory_gb * GB
    low = memory.largest_fit(recipe, "cuda", "bf16-mixed", budget)
    assert device_need(recipe, "cuda", "bf16-mixed", low, 1, 0) <= budget < device_need(recipe, "cuda", "bf16-mixed",
                                                                                           low + 1, 1, 0)  # fmt: skip
    global_batch = memory.auto_global_batch(low)
    _, spec = memory_plan.plan_at(tvb.SIZES["large"][0], global_batch, "auto", "bf16-mixed", hardware, True)
    assert 0.8 * low <= spec.plan.micro_batch <= low and spec.plan.accumulation in (4, 5)


def test_the_auto_rows_global_batch_leaves_a_micro_batch_within_20_percent_of_any_measured_fit():
    """Whatever the memory probe measures the largest fitting micro-batch to be, between G/8 and G/4 of the global
    batch the check plans, a micro-batch the plan may take (hwsweep.run.probe.candidates: the divisors) is at least
    80% of it; the H100's 2 x 1052 = 2104 left 526 for a fit of 1051."""
    from gpucheck import memory

    from hwsweep.run.probe import candidates

    assert max(d for d in candidates(2104, None) if d <= 1051) == 526  # the batch the first runs planned
    for fit in range(memory.SPLITS // 4, 3000, 7):
        g = memory.auto_global_batch(fit)
        assert g % memory.SPLITS == 0 and fit <= g / 4 < fit + memory.SPLITS / 4
        allowed = candidates(g, None)
        for measured in range(g // 8, g // 4 + 1, max(1, g // 400)):
            assert max(d for d in allowed if d <= measured) >= 0.8 * measured, (fit, g, measured)
    assert memory.auto_global_batch(8) == 16  # a CPU's --smoke: a few micro-batches


@pytest.mark.parametrize("name, memory_gib, gpu_type", [("NVIDIA H100 80GB HBM3", 79.2, "H100-80GB"),
                                                          ("NVIDIA H200", 139.8, "H200-141GB")])  # fmt: skip
def test_the_gpus_the_check_is_written_for_have_their_peaks_in_the_catalog(name, memory_gib, gpu_type):
    """torch's names of the H100 and H200 the check is written for find their catalog type, whose dense peaks the
    MFU rows divide by."""
    from hwsweep.contracts import catalog

    assert catalog.match(name, memory_gib).name == gpu_type
    assert catalog.peak_flops(gpu_type, "bf16-mixed", True) == 989.5e12
    assert catalog.peak_flops(gpu_type, "fp32", True) == 494.5e12 and catalog.peak_flops(gpu_type, "fp32", False) == 67e12


# -- the wheel folder and the offline install ------------------------------------------------------------------
def test_the_wheel_folder_holds_the_closure_the_tests_ran_with_less_the_gpu_images_packages():
    import importlib.metadata as metadata

    found = wheels.closure("3.12")
    for name in ("snakemake", "jsonschema", "rpds-py", "pulp", "nvidia-ml-py", "pyyaml", "tqdm", "connection-pool"):
        assert found[name] == metadata.version(name)
    for name in ("torch", "numpy", "pandas", "scipy", "matplotlib", "tensorboard", "grpcio", "nvidia-nccl-cu13"):
        assert name not in found


def _wheel(folder: Path, name: str, version: str, module: str) -> None:
    """A one-module pure-Python wheel, written by hand (no network, no build backend)."""
    stem = f"{name.replace('-', '_')}-{version}"  # a wheel's file and folder names spell the name with '_'
    dist = f"{stem}.dist-info"
    files = {f"{module}.py": "WHERE = __file__\n",
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}  # fmt: skip
    files[f"{dist}/RECORD"] = "".join(f"{path},,\n" for path in files) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(folder / f"{stem}-py3-none-any.whl", "w") as whl:
        for path, text in files.items():
            whl.writestr(path, text)


@pytest.mark.slow
def test_the_offline_install_sees_the_machines_torch_and_installs_the_folder(tmp_path):
    """bootstrap() from this venv's python as the 'machine' (itself a venv, as the GPU image's python is): the new
    venv imports torch from the machine, the carried package from the folder (pip with --no-index and no config),
    hwsweep from the repository, and has a torchrun; then it runs the program it was given."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    _wheel(folder, "carried-pkg", "1.0", "carried_pkg")
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    (folder / wheels.MANIFEST).write_text(json.dumps({"python_version": here, "roots": ["carried-pkg"]}))
    probe = tmp_path / "probe.py"
    probe.write_text("import json, sys, shutil, torch, carried_pkg, hwsweep\n"
                     "print(json.dumps({'torch': torch.__file__, 'carried': carried_pkg.WHERE, 'hwsweep': hwsweep.__file__,"
                     " 'prefix': sys.prefix, 'torchrun': shutil.which('torchrun'), 'argv': sys.argv[1:]}))\n")  # fmt: skip
    env = os.environ | {"TMPDIR": str(tmp_path), "PYTHONPATH": ""}
    program = (f"import sys; sys.path.insert(0, {str(BENCH)!r}); from gpucheck import wheels; "
               f"wheels.bootstrap({str(folder)!r}, {str(REPO)!r}, [{str(probe)!r}, '--flag'])")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    venv = tmp_path / "hwsweep-venv-for-gpu-check"
    assert seen["prefix"] == str(venv)
    assert seen["torch"].startswith(sys.prefix)  # the machine's torch, not a copy
    assert seen["carried"].startswith(str(venv))  # installed from the folder
    assert seen["hwsweep"].startswith(str(REPO))
    assert seen["torchrun"] == str(venv / "bin" / "torchrun") and seen["argv"] == ["--flag"]


def test_a_wheel_folder_for_another_python_is_refused_in_one_line(tmp_path):
    (tmp_path / wheels.MANIFEST).write_text(json.dumps({"python_version": "2.7", "roots": []}))
    program = (f"import sys; sys.path.insert(0, {str(BENCH)!r}); from gpucheck import wheels; "
               f"wheels.bootstrap({str(tmp_path)!r}, {str(REPO)!r}, ['x'])")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
                          env=os.environ | {"TMPDIR": str(tmp_path)})  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith(f"bench/gpu_check.py: {tmp_path} was made for Python 2.7")
    assert "--python-version" in proc.stderr
