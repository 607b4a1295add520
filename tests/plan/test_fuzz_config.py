"""Hostile and malformed configs (hypothesis): every one gives a one-line error naming the
field, never a traceback, and through the CLI no job starts; config files of any bytes give one
line or a config; and what the planner accepts does run (plans => runs)."""

import copy
import json
import os
import signal
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from conftest import BIN, REPO, SMALL, left_behind, snakemake
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hwsweep.analysis import validation
from hwsweep.contracts.records import RunRecord
from hwsweep.contracts.spec import canonical_json
from hwsweep.contracts.typed import SpecError
from hwsweep.plan import placement
from hwsweep.plan.config import MAX_BYTES, RESERVED_SUITES, ConfigError, load_file, resolve

NASTY = ["a b", "a;b", "a/b", "..", "../x", "$(id)", "`id`", "a|b", "a&b", "a>b", "x\ny", "é", "名前", "", "-x",
         "a" * 65, "a'b", 'a"b', "a*b", "~root", "a\\b", " lead"]  # fmt: skip
WRONG_TYPES = [None, "text", 1.5, -1, [], {}, [1, 2], True, 10**30]


def _leaf(cfg, dotted):
    *parents, leaf = dotted.split(".")
    node = cfg
    for p in parents:
        node = node.setdefault(p, {})
    return node, leaf


def setter(dotted):
    def apply(cfg, value):
        node, leaf = _leaf(cfg, dotted)
        node[leaf] = value

    return apply


def deleter(dotted):
    def apply(cfg, _):
        node, leaf = _leaf(cfg, dotted)
        del node[leaf]

    return apply


def renamer(section, kind):
    def apply(cfg, name):
        node, leaf = _leaf(cfg, section)
        first = next(iter(node[leaf]))
        node[leaf][name] = node[leaf].pop(first)
        if kind == "hardware" and cfg["baseline"] == first:
            cfg["baseline"] = name

    return apply


# Each kind: (mutation, strategy of values, field the message must name).
KINDS = [
    (setter("recipe.global_batch"), st.sampled_from(WRONG_TYPES[:4] + [0, -5]), "recipe.global_batch"),
    (setter("recipe.micro_batch"), st.sampled_from(["big", 0, -1, 1.5, None]), "recipe.micro_batch"),
    (setter("recipe.precision"), st.sampled_from(["fp8", "FP32", "", None, 16]), "recipe.precision"),
    (setter("recipe.tf32"), st.sampled_from(["yes", 1, None]), "recipe.tf32"),
    (setter("recipe.reproducibility"), st.sampled_from(["exact", "", 3]), "recipe.reproducibility"),
    (setter("recipe.schedule.steps"), st.sampled_from([0, -1, "100", 1.5, 10**12]), "recipe.schedule.steps"),
    (setter("recipe.schedule.warmup_steps"), st.sampled_from([-1, "5", 10**9]), "recipe.schedule.warmup_steps"),
    (setter("recipe.schedule.decay"), st.sampled_from(["step", None]), "recipe.schedule.decay"),
    (setter("recipe.schedule.epochs"), st.integers(1, 10), "recipe.schedule.epochs"),
    (setter("recipe.model.width"), st.sampled_from([0, 3, "64", None, 10**9]), "recipe.model.width"),
    (setter("recipe.model.heads"), st.sampled_from([0, "4", 3, 5, 7]), "recipe.model"),
    (setter("recipe.model.depth"), st.sampled_from([0, -2, "deep"]), "recipe.model.depth"),
    (setter("recipe.model.name"), st.sampled_from(["gpt2", "../../etc", ""]), "recipe.model.name"),
    (setter("recipe.task.name"), st.sampled_from(["sudoku9", "rm -rf /"]), "recipe.task.name"),
    (setter("recipe.task.length"), st.sampled_from([1, 0, 10**6, "8"]), "recipe.task.length"),
    (setter("recipe.task.vocab_size"), st.sampled_from([1, -3, 1.5]), "recipe.task.vocab_size"),
    (setter("recipe.optimizer.lr"), st.sampled_from([0, -0.1, "fast", 1e9]), "recipe.optimizer.lr"),
    (setter("recipe.optimizer.beta1"), st.sampled_from([1, 1.5, -0.1]), "recipe.optimizer.beta1"),
    (setter("recipe.optimizer.name"), st.sampled_from(["adam", "SGD", None]), "recipe.optimizer.name"),
    (setter("recipe.learning_rate"), st.floats(0.001, 1), "recipe.learning_rate"),
    (setter("recipe.model.dropout"), st.floats(0, 1), "recipe.model.dropout"),
    (setter("recipe"), st.sampled_from(WRONG_TYPES[:5]), "recipe"),
    (setter("recipe.model"), st.sampled_from(["transformer", 3, []]), "recipe.model"),
    (setter("recipe.batch_policy"), st.sampled_from(["elastic", 1]), "recipe.batch_policy"),
    (setter("recipe.lr_scaling"), st.sampled_from(["linear", "sqrt"]), "recipe.lr_scaling"),
    (setter("recipe.checkpoint_every"), st.sampled_from([0, -1, "often"]), "recipe.checkpoint_every"),
    (setter("seeds"), st.sampled_from([[], [-1], [0, 0], ["1"], [1.5], "0", None, [2**40]]), "seeds"),
    (setter("seeds"), st.lists(st.integers(-(10**6), -1), min_size=1, max_size=3), "seeds"),
    (deleter("seeds"), st.none(), "seeds"),
    (deleter("hardware"), st.none(), "hardware"),
    (deleter("suites"), st.none(), "suites"),
    (deleter("baseline"), st.none(), "baseline"),
    (setter("suites"), st.sampled_from([{}, [], "tiny", None]), "suites"),
    (setter("hardware"), st.sampled_from([{}, [], "cpu1", None]), "hardware"),
    (setter("baseline"), st.sampled_from(NASTY), "baseline"),
    (setter("baseline"), st.sampled_from(["gpu0", "cpu9", "CPU1"]), "baseline"),
    (setter("baseline"), st.sampled_from(WRONG_TYPES), "baseline"),
    (renamer("suites", "suite"), st.sampled_from(NASTY), "suites"),
    (renamer("hardware", "hardware"), st.sampled_from(NASTY), "hardware"),
    (setter("hardware.cpu2.devices_per_node"), st.sampled_from([0, -1, "2", 10**6, None]), "hardware.cpu2.devices_per_node"),
    (setter("hardware.cpu2.nodes"), st.sampled_from([0, "1", 1.5]), "hardware.cpu2.nodes"),
    (setter("hardware.cpu2.accelerator"), st.sampled_from(["gpu", "tpu", None, "CUDA"]), "hardware.cpu2.accelerator"),
    (setter("hardware.cpu2.gpu_type"), st.sampled_from(NASTY[:12] + ["B300", "A100"]), "hardware.cpu2.gpu_type"),
    (setter("hardware.cpu2.partition"), st.sampled_from(NASTY[:12]), "hardware.cpu2.partition"),
    (setter("hardware.cpu2.gres"), st.sampled_from(["gpu:2;rm", "gpu 2", "$(x)", "--x"]), "hardware.cpu2.gres"),
    (setter("hardware.cpu2.mem_mb"), st.sampled_from([0, "4G", -1]), "hardware.cpu2.mem_mb"),
    (setter("hardware.cpu2.runtime"), st.sampled_from([0, "1h", 1.5]), "hardware.cpu2.runtime"),
    (setter("hardware.cpu2.memory_gb"), st.sampled_from([0, -1, "80"]), "hardware.cpu2.memory_gb"),
    (setter("hardware.cpu2.slurm_extra"), st.text(max_size=10), "hardware.cpu2.slurm_extra"),
    (deleter("hardware.cpu2.accelerator"), st.none(), "hardware.cpu2.accelerator"),
    (setter("hardware.cpu2"), st.sampled_from(WRONG_TYPES[:5]), "hardware.cpu2"),
    (setter("suites.tiny.hardware"), st.sampled_from([[], ["gpu7"], ["cpu1", "cpu1"], "cpu1", [NASTY[1]]]), "suites.tiny.hardware"),
    (setter("suites.tiny.hardware"), st.just(["cpu2"]), "suites.tiny.hardware"),
    (setter("suites.tiny.sweep"), st.sampled_from([{"model.width": []}, {"model.width": "32"}, {"model.nope": [1]},
                                                    {"Model.Width": [1]}, {"model.width": [{"a": 1}]},
                                                    {"model.width": ["a b"]}, {"model.width": [1, 1]}]), "suites.tiny.sweep"),
    (setter("suites.tiny.sweep"), st.just({"model.width": [32, 33]}), "suites.tiny"),
    (setter("suites.tiny.overrides"), st.sampled_from([{"model": {"widht": 3}}, {"gpu": 1}, "x", {"seeds": [1]}]), "suites.tiny.overrides"),
    (setter("suites.tiny.extra"), st.integers(), "suites.tiny.extra"),
    (setter("suites.tiny"), st.sampled_from(WRONG_TYPES[:5]), "suites.tiny"),
    (setter("statistics"), st.sampled_from([{"confidence": 1.5}, {"resamples": 5}, {"margins": {"bleu": 1}}]), "statistics"),
    (setter("advisor"), st.sampled_from([{"target_utilisation": 0}, {"target_utilisation": 2}, {"x": 1}]), "advisor"),
    (setter("unknown_top_level"), st.integers(), "unknown_top_level"),
    (setter("recipe.global_batch"), st.sampled_from([7, 9, 15, 17, 31, 33]), "recipe.global_batch"),
    # Integers that are floats would plan and then crash inside torchrun.
    (setter("recipe.global_batch"), st.sampled_from([32.0, 64.0]), "recipe.global_batch"),
    (setter("recipe.schedule.steps"), st.just(40.0), "recipe.schedule.steps"),
    (setter("hardware.cpu2.devices_per_node"), st.just(2.0), "hardware.cpu2.devices_per_node"),
    (setter("seeds"), st.just([0.0, 1.0]), "seeds"),
    # The command contract and declared metrics.
    (setter("trainer.command"), st.sampled_from([[], "python train.py", [""], ["a b"], ["$(id)"], ["x;y"], [None]]),
     "trainer.command"),
    (setter("trainer.command"), st.sampled_from([["python", "nothere.py"], ["no-such-tool-xyz"], ["./nope.sh"]]),
     "trainer.command"),
    (setter("trainer.arg_style"), st.sampled_from(["-k v", "", None]), "trainer.arg_style"),
    (setter("trainer.args"), st.sampled_from([{"bs": "micro_bach"}, {"a b": "seed"}]), "trainer"),
    (setter("trainer.launch"), st.sampled_from(["mpirun", None]), "trainer.launch"),
    (setter("trainer.workdir"), st.sampled_from(["a b", "$(id)", ""]), "trainer.workdir"),
    (setter("recipe.args"), st.sampled_from([{"n": "a b"}, {"n": "$(id)"}, {"a;b": 1}, {"n": [1]}]), "recipe.args"),
    (setter("metrics"), st.sampled_from([{}, {"Bad Name": {"goal": "max"}}, {"m": {"goal": "up"}}, {"m": {}},
                                         {"m": {"goal": "max", "margin": -1}}, "token_accuracy"]), "metrics"),
    (setter("metrics"), st.sampled_from([{"m": {"goal": "max", "pattern": "("}}, {"m": {"goal": "max", "pattern": "x"}},
                                         {"m": {"goal": "max", "bounds": [1, 0]}}]), "metrics.m"),
    (setter("metrics"), st.just({"token_accuracy": {"goal": "max", "margin": 0.01, "stage": "train"},
                                 "bleu": {"goal": "max", "stage": "eval"}}), "metrics.bleu"),
    (setter("evaluation"), st.sampled_from(["yes", 3, {"command": []}, {"workdir": "."}]), "evaluation"),
    (setter("suites"), st.just({"partial": {}}), "suites"),
    # Names the workflow keeps for itself, and hardware this machine cannot provide under the local executor.
    (setter("suites"), st.sampled_from([{name: {}} for name in RESERVED_SUITES]), "suites"),
    (setter("hardware.cpu2"), st.sampled_from([{"accelerator": "cuda", "devices_per_node": n, "gpu_type": "H100-80GB"}
                                               for n in (1, 2, 4)]), "hardware.cpu2.accelerator"),
    (setter("hardware.cpu2"), st.sampled_from([{"accelerator": "cpu", "nodes": n} for n in (2, 4)]),
     "hardware.cpu2.nodes"),
    (setter("guard"), st.sampled_from([{"action": "warn"}, {"factor": 0.5}, {"patience": 0}, {"chance_loss": -1},
                                       {"early_steps": 1.0}, {"other": 1}]), "guard"),
]  # fmt: skip

NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}  # as if this machine had no GPU, whatever it has


def plan_locally(cfg: dict):
    """What `snakemake` under the local executor and `hwsweep plan` accept: the config, then placement."""
    matrix = resolve(cfg)
    placement.refuse(matrix.hardware, placement.LOCAL, NO_GPU)
    return matrix


def test_there_are_at_least_fifty_kinds():
    assert len(KINDS) >= 50


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_malformed_config_gives_one_line_naming_the_field(data):
    mutate, values, field = data.draw(st.sampled_from(KINDS))
    cfg = copy.deepcopy(SMALL)
    mutate(cfg, data.draw(values))
    with pytest.raises(ConfigError) as err:
        plan_locally(cfg)
    message = str(err.value)
    assert "\n" not in message and len(message) < 400
    assert field.split(".")[0] in message, message
    assert field in message or field.rsplit(".", 1)[0] in message, message


@pytest.mark.slow
@pytest.mark.parametrize("kind,value", [(0, 0), (26, [-1]), (34, "a;b"), (38, "$(id)"), (44, "gpu:2;rm"),
                                        (53, {"model.nope": [1]})])  # fmt: skip
def test_cli_starts_no_job_for_malformed_config(tmp_path, kind, value):
    mutate, _, field = KINDS[kind]
    cfg = copy.deepcopy(SMALL)
    mutate(cfg, value)
    proc = snakemake(tmp_path, cfg, "--cores", "1")
    errors = [line for line in proc.stderr.splitlines() if line.startswith("hwsweep config error:")]
    assert proc.returncode != 0 and len(errors) == 1, proc.stderr[-2000:]
    assert field.split(".")[0] in errors[0]
    assert "Traceback" not in proc.stderr and not (tmp_path / "results").exists()


@settings(max_examples=300, deadline=None)
@given(content=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode),
                         st.sampled_from([b"recipe: {a: [1\n", b"\tseeds: [0]\n", b"- 1\n", b"", b"a: b: c\n",
                                          b"\xef\xbb\xbfseeds: [0]\n", b"seeds: *x\n", b"{", b"seeds: !!python/name:os.system\n"])))  # fmt: skip
def test_any_config_file_gives_a_config_or_one_line(content):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "config.yaml")
        path.write_bytes(content)
        try:
            raw = load_file(path)
        except ConfigError as e:
            assert "\n" not in str(e) and str(e).startswith(f"{path}: "), str(e)
            return
        assert isinstance(raw, dict)
        try:
            resolve(raw)
        except (ConfigError, SpecError) as e:
            assert "\n" not in str(e)


# -- plans => runs: a config the planner accepts starts training and finishes it -------------------------------

PLAUSIBLE = {
    "recipe.global_batch": st.sampled_from([8, 12, 16, 32]),
    "recipe.micro_batch": st.sampled_from([1, 2, 4, 8, "auto"]),
    "recipe.precision": st.sampled_from(["fp32", "bf16-mixed"]),
    "recipe.reproducibility": st.sampled_from(["comparable", "deterministic", "strict"]),
    "recipe.tf32": st.booleans(),
    "recipe.model.width": st.sampled_from([8, 12, 16, 32]),
    "recipe.model.heads": st.sampled_from([1, 2, 3, 4]),
    "recipe.model.depth": st.sampled_from([1, 2]),
    "recipe.task.vocab_size": st.sampled_from([4, 16]),
    "recipe.task.length": st.sampled_from([2, 8]),
    "recipe.schedule.steps": st.sampled_from([2, 3]),
    "recipe.schedule.warmup_steps": st.sampled_from([0, 1, 2]),
    "recipe.checkpoint_every": st.sampled_from([1, 2]),
    "hardware.cpu2.devices_per_node": st.sampled_from([1, 2, 3]),
    "advisor.allow_precision_mismatch": st.booleans(),
    "suites.tiny.sweep": st.sampled_from([{}, {"tf32": [False, True]}, {"optimizer.lr": [0.001, 0.01]}]),
    "guard.action": st.sampled_from(["fail", "flag", "off"]),
}


@pytest.mark.slow
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_config_the_planner_accepts_runs(data):
    cfg = copy.deepcopy(SMALL)
    cfg["recipe"]["task"]["train_size"] = 64
    # SMALL's 60 steps are not drawn here; a few, with a checkpoint among them, run what they ran, at a 20th the CPU
    cfg["recipe"]["schedule"] = {"steps": 3, "warmup_steps": 1}
    cfg["recipe"]["checkpoint_every"] = 2
    for key in data.draw(st.lists(st.sampled_from(sorted(PLAUSIBLE)), unique=True, max_size=8), label="keys"):
        setter(key)(cfg, data.draw(PLAUSIBLE[key], label=key))
    try:
        matrix = plan_locally(cfg)
    except ConfigError:
        assume(False)  # refused with one line: nothing to run
    run = data.draw(st.sampled_from(matrix.runs()), label="run")
    spec = matrix.spec(run.suite, run.variant, run.hardware, run.seed)
    with tempfile.TemporaryDirectory() as folder:
        spec = type(spec).from_dict(spec.to_dict() | {"run_dir": str(Path(folder, "run"))})
        Path(folder, "spec.json").write_text(canonical_json(spec))
        Path(folder, "tmp").mkdir()
        proc = subprocess.run([str(BIN / "python"), "-m", "hwsweep.run.launch", "spec.json", "--threads", "2"], cwd=folder,
                              capture_output=True, text=True, timeout=300,
                              env=os.environ | NO_GPU | {"TMPDIR": str(Path(folder, "tmp"))})  # fmt: skip
        assert proc.returncode == 0, f"{json.dumps(cfg)}\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}"
        assert left_behind(Path(folder, "tmp")) == []  # torchrun's log folder included
        validation.check(RunRecord, spec.path("train.json"), spec)  # a complete, plausible record


# -- issue 36's kinds: paths out of the run folder, YAML's booleans for enum words, memory that fits nowhere ---------

def command_with(key: str):
    """A command trainer (the plain DDP example's script) with trainer.<key> set to the drawn value."""

    def apply(cfg, value):
        cfg["recipe"] = {k: v for k, v in cfg["recipe"].items() if k not in ("task", "model")}
        cfg["trainer"] = {"command": ["python", "train.py"], "workdir": str(REPO / "examples/plain_ddp"),
                          "args": {"batch_size": "micro_batch", "grad_accum": "accumulation"}}  # fmt: skip
        cfg["metrics"] = {"loss": {"goal": "min"}}
        setter(f"trainer.{key}")(cfg, value)

    return apply


def fsdp_at(precision):
    def apply(cfg, _):
        cfg["recipe"]["parallel"] = {"strategy": "fsdp"}
        cfg["hardware"]["cpu2"]["precision"] = precision
        cfg["advisor"] = {"allow_precision_mismatch": True}

    return apply


ESCAPING = ["a/../../../../etc/passwd", "x/..", "out/../../up.jsonl", "train.json", "spec.json", "final.pt", "eval.json",
            "tracking.json"]  # fmt: skip
KINDS += [
    (command_with("metrics_file"), st.sampled_from(ESCAPING), "trainer.metrics_file"),
    (command_with("resume"), st.sampled_from([{"when": w, "args": ["--resume"]} for w in
                                              ["*/../../../*", "a/../../*", "spec.json", "train.json", "a/../b"]]),
     "trainer.resume"),
    (command_with("observe"), st.sampled_from([False, True]), "trainer.observe"),  # a bare off / on
    (setter("guard.action"), st.sampled_from([False, True]), "guard.action"),
    (setter("hardware.cpu2.memory_gb"), st.sampled_from([0.00001, 0.00005, 0.0001]), "recipe.parallel.strategy"),
    (fsdp_at("fp16-mixed"), st.none(), "recipe.parallel.strategy"),
    (setter("seeds"), st.recursive(st.lists(st.integers(0, 3), max_size=2), lambda inner: st.lists(inner, max_size=2),
                                   max_leaves=40).filter(lambda v: any(isinstance(x, list) for x in v)), "seeds"),
]  # fmt: skip


# -- hostile YAML through both entry points, each case bounded in time ------------------------------------------------

TOP = ["seeds", "recipe", "suites", "hardware", "baseline", "metrics", "extra"]


def _nest(depth: int, style: str) -> str:
    if style == "flow-list":
        return "[" * depth + "1" + "]" * depth
    if style == "flow-map":
        return "{a: " * depth + "1" + "}" * depth
    return "\n" + "".join(f"{'  ' * (i + 1)}k{i}:\n" for i in range(depth)) + "  " * (depth + 1) + "1"


HOSTILE = st.one_of(
    st.builds(lambda d, s: _nest(d, s), st.integers(20, 3000), st.sampled_from(["flow-list", "flow-map", "block"])),
    st.sampled_from(["&a [*a]", "&a {b: *a}", "&a [1, {c: [*a]}]", "&a {b: [1, 2, {c: *a}]}", "*undefined",
                     "&a [1, &a [*a]]"]),
    st.builds(lambda levels, fan: "l0: &l0 [" + ", ".join(["x"] * fan) + "]\n" + "".join(
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fan)}]\n" for i in range(1, levels)) + f"bomb: *l{levels - 1}",
              st.integers(2, 9), st.integers(2, 12)),
    st.sampled_from(["!!python/object/apply:os.system ['id']", "!!python/name:os.system", "!!binary aGVsbG8=",
                     "!!set {a, b}", "!!timestamp 2001-12-14t21:59:43.10-05:00", "!!omap [{a: 1}]", "!custom 3",
                     "!!int x", "!!float [1]", "!!str [1, 2]", "{? [1, 2] : x}", "{<<: 3}", "off", "~", ".nan",
                     "-.inf", "0x_", "2001-01-01"]),
    st.builds(lambda n: "[" + ", ".join(["1"] * n) + "]", st.sampled_from([10, 1000, 150_000])),
    st.builds(lambda n: "x" * n, st.sampled_from([100, 10_000, MAX_BYTES + 10])),
    st.builds(lambda n: "1" * n, st.sampled_from([20, 4301, 10_000])),
    st.builds(lambda n: "{" + ", ".join(f"k{i}: {i}" for i in range(n)) + "}", st.sampled_from([10, 5000])),
)  # fmt: skip


def hostile_document(top: str, fragment: str) -> str:
    """SMALL as YAML with `top`'s value replaced by the hostile fragment (anchors defined elsewhere come first)."""
    head, _, value = fragment.rpartition("\nbomb: ") if "\nbomb: " in fragment else ("", "", fragment)
    cfg = {k: v for k, v in copy.deepcopy(SMALL).items() if k != top}
    body = yaml.safe_dump(cfg, default_flow_style=False)
    return (f"{head}\n" if head else "") + body + f"{top}: {value}\n"


@contextmanager
def bounded(seconds: float):
    """Fail, instead of hanging, when the body takes longer (SIGALRM: the main thread, where hypothesis runs)."""

    def expire(signum, frame):
        raise TimeoutError(f"took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(top=st.sampled_from(TOP), fragment=HOSTILE)
def test_hostile_yaml_is_a_config_or_one_line_within_seconds(top, fragment):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "config.yaml")
        path.write_text(hostile_document(top, fragment))
        t0 = time.perf_counter()
        with bounded(10):  # a second is the goal: ten leaves room for a loaded machine, none for a hang
            try:
                resolve(load_file(path))
            except (ConfigError, SpecError) as e:
                assert "\n" not in str(e) and len(str(e)) < 600, str(e)[:2000]
        assert time.perf_counter() - t0 < 10


# What snakemake prints when it fails reading --configfile itself, before any workflow code (docs/safety.md).
BEFORE_THE_WORKFLOW = ("RecursionError: maximum recursion depth exceeded", "ValueError: Exceeds the limit",
                       "UnicodeDecodeError:", "IsADirectoryError:", "OSError: [Errno 40]")  # fmt: skip


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(top=st.sampled_from(TOP), fragment=HOSTILE)
def test_hostile_yaml_through_both_entry_points_is_one_line_within_a_bound(top, fragment):
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        (folder / "config.yaml").write_text(hostile_document(top, fragment))
        plan = subprocess.run([str(BIN / "hwsweep"), "plan", "--configfile", str(folder / "config.yaml")],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert "Traceback" not in plan.stderr, plan.stderr[-2000:]
        assert plan.returncode == 0 or (plan.returncode == 1 and plan.stderr.count("\n") == 1), plan.stderr[-2000:]
        dry = snakemake(folder, None, "-n", timeout=120)
        out = dry.stdout + dry.stderr
        errors = [line for line in dry.stderr.splitlines() if line.startswith("hwsweep config error:")]
        before = [line for line in out.splitlines() if line.strip()][-1:]
        if dry.returncode == 0:
            assert plan.returncode == 0, plan.stderr
        elif "ConfigSettings" in out:  # snakemake failed reading the file, before any workflow code (documented)
            assert before and before[0].startswith(BEFORE_THE_WORKFLOW), out[-2000:]
        else:
            assert len(errors) == 1 and "Traceback" not in out, out[-3000:]
        assert not (folder / "results").exists()
