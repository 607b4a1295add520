"""Config validation and matrix expansion, through the library and through the snakemake CLI."""

import os
import re
import shutil
import subprocess
import sys
import time

import pytest
import yaml
from conftest import REPO, snakemake
from hypothesis import given, settings
from hypothesis import strategies as st

from hwsweep.contracts import spec as layout
from hwsweep.plan.config import ConfigError, load_file, resolve


def test_default_config_expands_to_suites_variants_seeds_hardware():
    matrix = resolve(yaml.safe_load((REPO / "config/config.yaml").read_text()))
    cells = len(matrix.cells)
    assert cells == 2  # one suite sweeping two widths
    assert len(matrix.runs()) == cells * len(matrix.seeds) * len(matrix.hardware) == 12
    assert {c.variant for c in matrix.cells} == {"width-64", "width-128"}


def test_sweep_over_two_keys_is_a_product(small_config):
    small_config["suites"]["tiny"]["sweep"] = {"model.width": [16, 32], "optimizer.lr": [0.001, 0.01, 0.1]}
    matrix = resolve(small_config)
    assert len(matrix.cells) == 6
    assert "width-16_lr-0.01" in {c.variant for c in matrix.cells}
    cell = next(c for c in matrix.cells if c.variant == "width-16_lr-0.01")
    assert cell.recipe.model.width == 16 and cell.recipe.optimizer.lr == 0.01


def test_suite_hardware_subset_and_overrides(small_config):
    small_config["hardware"]["cpu4"] = {"accelerator": "cpu", "devices_per_node": 4}
    small_config["suites"]["other"] = {"overrides": {"model": {"depth": 2}}, "hardware": ["cpu1", "cpu4"]}
    matrix = resolve(small_config)
    assert len(matrix.runs("tiny")) == 3 * 2 and len(matrix.runs("other")) == 2 * 2
    assert {r.hardware for r in matrix.runs("other")} == {"cpu1", "cpu4"}
    spec = matrix.spec("other", "default", "cpu4", 1)
    assert spec.recipe.model.depth == 2 and spec.recipe.model.width == 32  # override on top of the base
    assert spec.recipe.optimizer.lr == 0.003  # schema default filled in


def _set(cfg, dotted, value):
    node = cfg
    *parents, leaf = dotted.split(".")
    for p in parents:
        node = node[p]
    node[leaf] = value


BAD = [
    # (what to change, value, words the one-line message must contain)
    ("suites.tiny.hardware", ["cpu1", "gpu9"], ["suites.tiny.hardware", "'gpu9'", "add it"]),
    ("recipe.global_batch", 30, ["recipe.global_batch: 30", "world_size 1 x micro_batch 8", "hardware cpu1", "use global_batch 24 or 32, or micro_batch 5 or 6 or 10"]),
    ("baseline", "cpu 1", ["baseline", "letters, digits"]),
    ("baseline", "a;rm -rf x", ["baseline", "letters, digits"]),
    ("baseline", "../etc", ["baseline", "letters, digits"]),
    ("baseline", "a/b", ["baseline", "letters, digits"]),
    ("seeds", [0, -3], ["seeds.1", "-3", ">= 0"]),
    ("recipe.optimiser", {"lr": 1}, ["recipe.optimiser", "unknown key", "allowed keys"]),
    ("recipe.model.widht", 3, ["recipe.model.widht", "unknown key"]),
    ("recipe.precision", "fp8", ["recipe.precision", "use one of fp32, bf16-mixed, fp16-mixed"]),
    ("baseline", "cpu3", ["baseline", "'cpu3'", "cpu1, cpu2"]),
    ("recipe.schedule.warmup_steps", 60, ["recipe.schedule.warmup_steps", "below steps"]),
    ("suites.tiny.sweep", {"model.wdth": [1]}, ["suites.tiny.sweep.model.wdth", "not a recipe key"]),
    ("suites.tiny.sweep", {"model.width": ["x"]}, ["suites.tiny.sweep.model.width", "'x'", "integer"]),
    ("seeds", [], ["seeds", "at least 1"]),
    ("hardware.cpu2.devices_per_node", 0, ["hardware.cpu2.devices_per_node", ">= 1"]),
    ("recipe.tf32", True, ["recipe.tf32", "reproducibility"]),
    ("hardware.cpu2", {"accelerator": "cuda", "gres": "gpu:a100:2", "gpu_model": "a100", "gpu_type": "A100-80GB"},
     ["hardware.cpu2.gpu_model", "either gres or gpu_model"]),
    # Numbers that pass every minimum and maximum (YAML .nan), or have none to fail (.inf).
    ("recipe.optimizer", {"lr": float("nan")}, ["recipe.optimizer.lr: nan is not a finite number"]),
    ("hardware.cpu2.price_per_hour", float("nan"), ["hardware.cpu2.price_per_hour: nan is not a finite number"]),
    ("guard", {"chance_loss": float("inf")}, ["guard.chance_loss: inf is not a finite number"]),
    ("guard", {"factor": float("nan")}, ["guard.factor: nan"]),
    ("metrics", {"final_loss": {"goal": "min", "key": "loss", "margin": float("nan")}}, ["metrics.final_loss.margin: nan"]),
    ("metrics", {"m": {"goal": "max", "stage": "eval", "bounds": [0, float("inf")]}}, ["metrics.m.bounds.1: inf"]),
    # Metrics the built-in trainer or evaluator never reports: refused before a run trains in full.
    ("metrics", {"bleu": {"goal": "max"}}, ["metrics.bleu", "built-in trainer logs loss", "not bleu"]),
    ("metrics", {"eval_exact_accuracy": {"goal": "max"}}, ["metrics.eval_exact_accuracy", "eval_every > 0"]),
    ("metrics", {"bleu": {"goal": "max", "stage": "eval"}}, ["metrics.bleu", "built-in evaluator does not report"]),
    # The device type belongs to the accelerator.
    ("hardware.cpu2.gpu_type", "H100-80GB", ["hardware.cpu2.gpu_type: H100-80GB is a GPU, but accelerator is cpu"]),
    ("hardware.cpu2", {"accelerator": "cuda"}, ["hardware.cpu2.gpu_type: cpu on a cuda entry"]),
    # Names snakemake would not match or would refuse, and paths too long for the file system.
    ("hardware", {"cpu1\n": {"accelerator": "cpu"}}, ["hardware: name 'cpu1\\n' is not allowed"]),
    ("suites", {"tiny\n": {}}, ["suites: name 'tiny\\n' is not allowed"]),
    ("baseline", "cpu1\n", ["baseline: 'cpu1\\n' is invalid"]),
    ("hardware", {"cpu" + "1" * 20: {"accelerator": "cpu"}}, ["hardware: name", "'1' repeated 20 times", "periodic"]),
    ("suites", {"s" + "ab" * 20: {}}, ["suites: name", "'ab' repeated 20 times"]),
    ("suites.tiny.sweep", {"args.tag": ["x" + "z" * 25]}, ["suites.tiny.sweep: variant name", "'z' repeated"]),
    ("suites.tiny.sweep", {f"args.k{i}": ["v" + "w" * 62 + "x"] for i in range(8)},
     ["suites.tiny.sweep: variant name", "characters long; use at most 128"]),
    ("suites.tiny.sweep", {"args.tag": ["a\n"]}, ["suites.tiny.sweep.args.tag.0: 'a\\n' is invalid"]),
    # A bound on the matrix, counted before any variant is made.
    ("suites.tiny.sweep", {f"args.k{i}": list(range(64)) for i in range(8)},
     ["suites: the matrix has 1,125,899,906,842,624 runs", "more than the 10,000"]),
]


@pytest.mark.parametrize("key,value,words", BAD, ids=[f"{k}={v!r}" for k, v, _ in BAD])
def test_bad_config_gives_one_line_naming_the_field(small_config, key, value, words):
    _set(small_config, key, value)
    with pytest.raises(ConfigError) as err:
        resolve(small_config)
    message = str(err.value)
    assert "\n" not in message
    for word in words:
        assert word in message, message


def test_bad_suite_name_is_refused(small_config):
    small_config["suites"]["bad name"] = {}
    with pytest.raises(ConfigError, match=r"^suites: name 'bad name' is not allowed; use only letters"):
        resolve(small_config)


@pytest.mark.parametrize("key,value,words", BAD[:4] + BAD[6:8], ids=lambda x: str(x)[:20])
def test_cli_refuses_bad_config_before_any_job(tmp_path, small_config, key, value, words):
    _set(small_config, key, value)
    proc = snakemake(tmp_path, small_config, "--cores", "1")
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("hwsweep config error:")]
    assert len(errors) == 1 and words[0] in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not (tmp_path / "results").exists()


def test_dry_run_schedules_exactly_the_matrix(tmp_path, small_config):
    small_config["suites"]["second"] = {"sweep": {"model.depth": [1, 2]}}
    proc = snakemake(tmp_path, small_config, "-n", "--cores", "1")
    assert proc.returncode == 0, proc.stderr
    counts = _job_counts(proc.stdout)
    runs = (1 + 2) * 2 * 2
    assert counts["train"] == counts["evaluate"] == runs and "spec" not in counts  # spec.json: written, no job
    assert counts["aggregate_suite"] == counts["plot_suite"] == 2

    proc = snakemake(tmp_path, small_config, "-n", "--cores", "1", "suite_second")
    counts = _job_counts(proc.stdout)
    assert counts["train"] == counts["evaluate"] == 2 * 2 * 2
    assert counts["aggregate_suite"] == 1 and "combine" not in counts


def _job_counts(stdout: str) -> dict:
    counts, table = {}, False
    for line in stdout.splitlines():
        parts = line.split()
        if parts[:2] == ["job", "count"]:
            table = True
        elif table and len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    return counts


def test_declared_metrics_replace_the_reference_defaults_and_get_their_own_defaults(small_config):
    defaults = resolve(small_config)
    assert defaults.metric_names() == ["token_accuracy", "exact_accuracy", "final_loss"]
    small_config["metrics"] = {"token_accuracy": {"goal": "max", "margin": 0.01, "stage": "eval"}}
    small_config["statistics"] = {"confidence": 0.9}
    matrix = resolve(small_config)
    (metric,) = matrix.metrics
    assert (metric.name, metric.margin, metric.primary, metric.reduce) == ("token_accuracy", 0.01, True, "last")
    assert matrix.statistics["confidence"] == 0.9 and matrix.statistics["resamples"] == 9999
    small_config["metrics"] = {"val_acc": {"goal": "max", "stage": "eval"}}
    with pytest.raises(ConfigError, match="metrics.val_acc: the built-in evaluator does not report it"):
        resolve(small_config)


@pytest.mark.parametrize(
    "path, value, expected",
    [
        (("recipe", "global_batch"), 32.0, "recipe.global_batch: 32.0 is invalid; write 32, an integer without a dot or an exponent"),
        (("recipe", "schedule", "steps"), 40.0, "recipe.schedule.steps: 40.0 is invalid; write 40, an integer without a dot or an exponent"),
        (("hardware", "cpu2", "devices_per_node"), 2.0, "hardware.cpu2.devices_per_node: 2.0 is invalid"),
        (("seeds",), [0.0, 1.0], "an integer without a dot"),
        (("suites",), {"partial": {}}, "suites: name 'partial' is reserved"),
        (("suites",), {"status": {}}, "suites: name 'status' is reserved"),
    ],
)
def test_values_that_would_plan_and_then_crash_are_refused(small_config, path, value, expected):
    node = small_config
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ConfigError, match=expected.replace(".", r"\.").replace("(", r"\(")):
        resolve(small_config)


def test_sweeping_a_key_with_digits(small_config):
    small_config["recipe"]["reproducibility"] = "comparable"
    small_config["advisor"] = {"allow_precision_mismatch": True}  # a CPU has no TF32
    small_config["suites"]["tiny"]["sweep"] = {"tf32": [False, True]}
    assert [c.variant for c in resolve(small_config).cells] == ["tf32-false", "tf32-true"]


# -- what this machine or profile can place, and config files that cannot be read ---------------------

from hwsweep.contracts.hardware import Hardware  # noqa: E402
from hwsweep.plan import placement  # noqa: E402


def _hw(**kw):
    return Hardware.from_dict({"accelerator": "cpu", "nodes": 1, "devices_per_node": 1, "gpu_type": "cpu",
                               "cpus_per_task": 1} | kw)  # fmt: skip


@pytest.mark.parametrize(
    "hw, executor, gpus, nodes, words",
    [
        (_hw(accelerator="cuda"), "local", 0, 0, ["hardware.x.accelerator: cuda", "0 visible", "--profile slurm"]),
        (_hw(accelerator="cuda", devices_per_node=4), "local", 2, 0, ["cuda x 4 per node", "2 visible"]),
        (_hw(nodes=2), "local", 0, 0, ["hardware.x.nodes: 2 nodes", "no SLURM allocation", "nodes: 1"]),
        (_hw(nodes=4), "local", 0, 2, ["an allocation of 2 node(s)"]),
    ],
)
def test_hardware_this_machine_cannot_provide_is_named(hw, executor, gpus, nodes, words):
    message = placement.problem("x", hw, executor, gpus, nodes)
    assert message and "\n" not in message
    for word in words:
        assert word in message, message


@pytest.mark.parametrize(
    "hw, executor, gpus, nodes",
    [
        (_hw(accelerator="cuda", devices_per_node=8, nodes=4), "slurm", 0, 0),  # the GPUs are elsewhere
        (_hw(accelerator="cuda", devices_per_node=2), "local", 2, 0),
        (_hw(nodes=2), "local", 0, 2),  # snakemake inside a 2-node allocation: srun places the launchers
        (_hw(accelerator="cuda"), None, 0, 0),  # executor not known (a job re-reading the Snakefile)
        (_hw(devices_per_node=64), "local", 0, 0),  # CPU processes: gloo oversubscribes fine
    ],
)
def test_hardware_the_executor_can_place_is_accepted(hw, executor, gpus, nodes):
    assert placement.problem("x", hw, executor, gpus, nodes) is None


def test_visible_gpus_follow_the_driver_and_cuda_visible_devices(tmp_path):
    for i in range(4):
        (tmp_path / f"0000:0{i}:00.0").mkdir()
    assert placement.visible_gpus({}, tmp_path) == 4
    assert placement.visible_gpus({"CUDA_VISIBLE_DEVICES": "1,3"}, tmp_path) == 2
    assert placement.visible_gpus({"CUDA_VISIBLE_DEVICES": "0,-1,2"}, tmp_path) == 1  # CUDA stops at -1
    assert placement.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, tmp_path) == 0
    assert placement.visible_gpus({"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5"}, tmp_path) == 4
    assert placement.allocated_nodes({"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "3"}) == 3
    assert placement.allocated_nodes({}) == 0


def test_the_executor_is_read_from_the_command_line_and_the_profile():
    assert placement.executor_named([]) == "local"
    assert placement.executor_named(["--executor", "slurm"]) == "slurm"
    assert placement.executor_named(["--profile", str(REPO / "profiles/slurm")]) == "slurm"
    assert placement.executor_named(["--profile", str(REPO / "profiles/local")]) == "local"


@pytest.mark.parametrize("place", [None, "profiles/default", "default", "workflow/profiles/default",
                                   "$SNAKEMAKE_PROFILE"])  # fmt: skip
def test_without_a_profile_the_executor_is_local_without_snakemake_s_parser_and_any_profile_is_read(tmp_path, place):
    """`hwsweep plan` in a folder: where no profile can apply, local, snakemake's CLI not imported (0.5 CPU-s); a
    workflow profile where snakemake looks for one (here, or beside the Snakefile), or $SNAKEMAKE_PROFILE, is read."""
    (tmp_path / "workflow").mkdir()
    (tmp_path / "workflow/Snakefile").write_text("rule all:\n    input: []\n")
    env = {k: v for k, v in os.environ.items() if k != "SNAKEMAKE_PROFILE"}
    if place == "$SNAKEMAKE_PROFILE":
        env["SNAKEMAKE_PROFILE"] = str(REPO / "profiles/slurm")
    elif place:
        shutil.copytree(REPO / "profiles/slurm", tmp_path / place)
    code = ("import sys; from hwsweep.plan import placement; "
            "print(placement.executor_named([]), 'snakemake.cli' in sys.modules)")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == (["local", "False"] if place is None else ["slurm", "True"]), (place, proc.stdout)



def test_a_dry_run_that_cannot_read_its_profile_from_inside_directory_refuses_what_local_could_not_place():
    """Issue 25: snakemake reads a relative --profile before it moves to --directory; the workflow cannot."""
    message = placement.problem("x", _hw(nodes=2), placement.UNKNOWN, 0, 0)
    assert message.startswith("hardware.x.nodes: a dry run with --directory cannot tell") and "\n" not in message
    assert "absolute path" in message
    assert placement.problem("x", _hw(), placement.UNKNOWN, 0, 0) is None  # placed by every executor alike


def test_a_relative_profile_is_out_of_sight_only_with_directory(monkeypatch):
    monkeypatch.delenv("SNAKEMAKE_PROFILE", raising=False)
    seen = placement.profile_out_of_sight
    assert seen(["--profile", "profiles/local", "--directory", "run1", "-n"]) == "profiles/local"
    assert seen(["--profile", "./local", "-d", "/abs/run1"]) == "./local"
    assert seen(["--workflow-profile", "profiles/local", "-d", "run1"]) == "profiles/local"
    assert seen(["--profile", "profiles/local", "-n"]) is None  # no move: read from where snakemake runs
    assert seen(["--profile", str(REPO / "profiles/local"), "-d", "run1"]) is None
    assert seen(["--profile", "slurm", "-d", "run1"]) is None  # a name: looked up among the user's profiles
    assert seen(["--profile", "profiles/local", "-d", "."]) is None
    monkeypatch.setenv("SNAKEMAKE_PROFILE", "profiles/slurm")
    assert seen(["-d", "run1"]) == "profiles/slurm"


def test_snakemake_dry_run_with_directory_and_a_relative_profile_refuses_in_one_line(tmp_path, small_config):
    """The dry run used to accept a 2-node entry that the real run, under the local profile, refuses."""
    from conftest import snakemake_command, write_config

    small_config["hardware"]["two_nodes"] = {"accelerator": "cpu", "nodes": 2, "devices_per_node": 1}
    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    (tmp_path / "run1").mkdir()
    cmd, env = snakemake_command(tmp_path / "run1", small_config, "-n", "--profile", "profiles/local")
    cmd[cmd.index("--directory") + 1] = "run1"
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert proc.returncode == 1 and len(errors) == 1, proc.stderr[-3000:]
    assert errors[0].startswith("hwsweep config error: hardware.two_nodes.nodes: a dry run with --directory")
    assert "rule train" not in proc.stdout

UNREADABLE = [
    (lambda p: None, "config file not found; pass an existing file"),
    (lambda p: p.mkdir(), "is a directory, not a config file"),
    (lambda p: p.write_bytes(b"seeds: [\xff\xfe]\n"), "not UTF-8 text (byte 8); save the file as UTF-8"),
    (lambda p: p.write_text("recipe: {a: [1\n"), "line 2, column 1: expected ',' or ']'"),
    (lambda p: p.write_text("recipe:\n\tsteps: 3\n"), "line 2, column 1: a tab; YAML indents with spaces only"),
    (lambda p: p.write_text("- 1\n- 2\n"), "the top level is list, not a mapping"),
    (lambda p: p.write_text(""), "is empty (nothing but comments or blanks)"),
]


@pytest.mark.parametrize("make, words", UNREADABLE, ids=["missing", "directory", "latin1", "syntax", "tab", "list",
                                                          "empty"])  # fmt: skip
def test_hwsweep_commands_give_one_line_for_a_config_file_they_cannot_read(tmp_path, make, words):
    from conftest import BIN

    path = tmp_path / "my.yaml"
    make(path)
    for command in (["plan"], ["detect"], ["resources"]):
        proc = subprocess.run([str(BIN / "hwsweep"), *command, "--configfile", str(path)], capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"hwsweep config error: {path}: ") and words in lines[0], lines


def test_hwsweep_plan_refuses_local_cuda_and_accepts_it_for_the_slurm_profile(tmp_path, small_config):
    from conftest import BIN, write_config

    small_config["hardware"]["gpu2"] = {"accelerator": "cuda", "devices_per_node": 2, "gpu_type": "H100-80GB"}
    small_config["hardware"]["two_nodes"] = {"accelerator": "cpu", "nodes": 2, "devices_per_node": 1}
    path = write_config(tmp_path, small_config)
    env = os.environ | {"CUDA_VISIBLE_DEVICES": ""}  # whatever this machine has: none visible
    plan = [str(BIN / "hwsweep"), "plan", "--configfile", str(path)]
    proc = subprocess.run(plan, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1 and proc.stderr.startswith("hwsweep config error: hardware.gpu2.accelerator: cuda")
    for extra in (["--profile", str(REPO / "profiles/slurm")], ["--executor", "slurm"]):
        proc = subprocess.run(plan + extra, capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert {"gpu2", "two_nodes"} <= {line.split()[2] for line in proc.stdout.splitlines()[1:]}


def test_snakemake_refuses_what_the_local_executor_cannot_place_and_the_slurm_executor_accepts(tmp_path, small_config,
                                                                                              monkeypatch):  # fmt: skip
    small_config["hardware"]["gpu1"] = {"accelerator": "cuda", "devices_per_node": 1, "gpu_type": "H100-80GB"}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the snakemake child inherits it: no GPU visible, on any machine
    for args in (["-n"], ["--cores", "1"]):
        proc = snakemake(tmp_path, small_config, *args)
        errors = [line for line in proc.stderr.splitlines() if line.startswith("hwsweep config error:")]
        assert proc.returncode == 1 and len(errors) == 1 and "hardware.gpu1.accelerator" in errors[0], proc.stderr
        assert "Traceback" not in proc.stderr and not (tmp_path / "results").exists()
    # The whole matrix once; through the profile, gpu1's run alone: it is refused or placed like the matrix, and
    # a dry run with evaluate jobs imports torch for their SLURM runtimes (3 CPU-s)
    gpu1_run = "results/tiny/default/gpu1/seed0/train.json"
    profile = ["-n", "--profile", str(REPO / "profiles/slurm"), gpu1_run]
    for args in (["-n", "--executor", "slurm", "--jobs", "1"], profile):
        proc = snakemake(tmp_path, small_config, *args)
        assert proc.returncode == 0 and "gpu1" in proc.stdout, proc.stderr[-2000:]


# -- names, alias bombs and the size of the matrix (issue 26) ------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(name=st.one_of(st.text(alphabet="ab_-.+1\n\t ", max_size=140),
                      st.builds(lambda head, block, n: head + block * n, st.text("xy", max_size=5),
                                st.text("ab1", min_size=1, max_size=3), st.integers(15, 25))))  # fmt: skip
def test_a_name_the_planner_accepts_is_one_snakemake_matches_and_does_not_call_periodic(name):
    from snakemake.io import PeriodicityDetector

    for variant, pattern in ((False, layout.NAME), (True, layout.VARIANT)):
        ok = layout.name_problem(name, variant) is None
        # snakemake matches a wildcard with the constraint, then refuses a periodic value
        matched = re.fullmatch(pattern, name) is not None
        assert ok == (matched and PeriodicityDetector().is_periodic(name) is None), (name, variant)
        assert not ok or len(name) <= 128


def _alias_bomb(top: str) -> str:
    """A billion laughs: nine levels of nine aliases of the level below (9**9 values), under 1 KB."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    base = {"recipe": "{}", "suites": "{tiny: {}}", "seeds": "[0]", "hardware": "{cpu1: {accelerator: cpu}}",
            "baseline": "cpu1"}  # fmt: skip
    return "\n".join(lines + [f"{k}: {'*a8' if k == top else v}" for k, v in base.items()]) + "\n"


@pytest.mark.parametrize("top", ["seeds", "recipe", "suites"])
def test_an_alias_bomb_is_refused_at_once(tmp_path, top):
    path = tmp_path / "config.yaml"
    path.write_text(_alias_bomb(top))
    assert path.stat().st_size < 1024
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r": more than 20,000 values once its YAML aliases \(\*name\) are expanded"):
        resolve(load_file(path))
    # Expanding 9**9 values would take minutes and gigabytes; the bound is loose so a loaded CI machine passes.
    assert time.perf_counter() - t0 < 10


def test_both_entry_points_refuse_an_alias_bomb_in_one_line(tmp_path):
    (tmp_path / "config.yaml").write_text(_alias_bomb("seeds"))
    env = os.environ | {"PYTHONPATH": str(REPO)}
    plan = [sys.executable, "-m", "hwsweep.cli", "plan", "--configfile", str(tmp_path / "config.yaml")]
    for proc in (subprocess.run(plan, capture_output=True, text=True, env=env, timeout=60),
                 snakemake(tmp_path, None, "--cores", "1", timeout=60)):  # fmt: skip
        errors = [line for line in proc.stderr.splitlines() if line.startswith("hwsweep config error:")]
        assert proc.returncode != 0 and len(errors) == 1 and "YAML aliases" in errors[0], proc.stderr[-2000:]
    assert not (tmp_path / "results").exists()


def test_the_value_bound_leaves_anchors_of_ordinary_configs_alone(small_config):
    shared = {"accelerator": "cpu", "devices_per_node": 1}
    small_config["hardware"] = {f"cpu{i}": shared for i in range(1, 40)}  # one anchor used 39 times
    assert len(resolve(small_config).hardware) == 39


def test_snakemake_refuses_a_name_with_a_newline_or_a_periodic_end_in_one_line(tmp_path, small_config):
    for name in ("cpu9\n", "cpu" + "9" * 20):
        small_config["hardware"] = {"cpu1": {"accelerator": "cpu"}, name: {"accelerator": "cpu"}}
        proc = snakemake(tmp_path, small_config, "--cores", "1")
        errors = [line for line in proc.stderr.splitlines() if line.startswith("hwsweep config error:")]
        assert proc.returncode != 0 and len(errors) == 1 and errors[0].startswith("hwsweep config error: hardware: name")
        assert "Traceback" not in proc.stderr and not (tmp_path / "results").exists()


def test_the_schemas_name_pattern_is_the_workflows_name_rule():
    from hwsweep.plan.config import load_schema

    assert load_schema()["$defs"]["name"]["pattern"] == f"^{layout.NAME}$"


# -- configs built to hang or overflow (issue 36): bounded in time and depth, one line ------------------------------

HOSTILE = [
    ("self-list", "seeds: &a [*a]\n", "line 1, column 12: alias *a is used inside its own anchor &a"),
    ("self-map", "recipe: &a {b: *a}\n", "line 1, column 16: alias *a is used inside its own anchor &a"),
    ("self-deep", "recipe: &r {model: {x: [1, {y: *r}]}}\n", "alias *r is used inside its own anchor &r"),
    ("deep", "recipe: " + "[" * 3000 + "]" * 3000 + "\n", "nested more than 32 levels deep"),
    ("deep-block", "".join(f"{'  ' * i}k{i}:\n" for i in range(40)), "nested more than 32 levels deep"),
    ("huge-int", "seeds: [" + "1" * 5000 + "]\n", "Exceeds the limit (4300 digits) for integer string conversion"),
    ("huge-file", "description: " + "x" * 1_000_001 + "\n", "larger than 1,000,000 bytes"),
]


@pytest.mark.parametrize("text, words", [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_a_config_built_to_hang_or_overflow_is_refused_in_one_line_at_once(tmp_path, text, words):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        resolve(load_file(path))
    message = str(err.value)
    assert message.startswith(f"{path}: ") and words in message and "\n" not in message and len(message) < 400, message
    assert time.perf_counter() - t0 < 1.5  # a second, with room for a loaded machine


def _nested(depth: int):
    value = [1]
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("make, words", [
    (lambda: (lambda a: (a.append(a), a)[1])([]), "seeds: the value contains itself"),
    (lambda: (lambda d: (d.update(b=d), d)[1])({}), "seeds: the value contains itself"),
    (lambda: _nested(500), "nested more than 32 levels deep"),
    (lambda: "x" * 1_000_001, "seeds: the config's text passes 1,000,000 characters"),
    (lambda: list(range(30_000)), "seeds: 30,000 entries, more than the 20,000 values"),
], ids=["self-list", "self-map", "deep", "long-text", "long-list"])  # fmt: skip
def test_a_document_as_snakemake_hands_it_over_is_walked_in_bounded_time(small_config, make, words):
    """snakemake loads --configfile itself: the workflow gets the objects, cycles and depth included."""
    small_config["seeds"] = make()
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        resolve(small_config)
    assert words in str(err.value) and "\n" not in str(err.value) and len(str(err.value)) < 400, str(err.value)
    assert time.perf_counter() - t0 < 1.5


@pytest.mark.slow
def test_both_entry_points_refuse_a_self_referencing_anchor_and_deep_nesting_in_one_line(tmp_path):
    from conftest import BIN

    for name, text in (("anchor", "seeds: &a [*a]\n"), ("deep", "seeds: " + "[" * 200 + "]" * 200 + "\n")):
        (tmp_path / "config.yaml").write_text(text)
        plan = [str(BIN / "hwsweep"), "plan", "--configfile", str(tmp_path / "config.yaml")]
        for proc in (subprocess.run(plan, capture_output=True, text=True, timeout=60),
                     snakemake(tmp_path, None, "-n", timeout=60)):  # fmt: skip
            errors = [line for line in proc.stderr.splitlines() if line.startswith("hwsweep config error:")]
            assert proc.returncode == 1 and len(errors) == 1 and "Traceback" not in proc.stderr, (name, proc.stderr[-2000:])
            assert ("contains itself" if name == "anchor" else "nested more than 32 levels") in errors[0]
    assert not (tmp_path / "results").exists()


FAILS_IN_SNAKEMAKE = [  # (make the file, snakemake's last line as docs/safety.md gives it, hwsweep plan's words)
    (lambda p: p.mkdir(), "IsADirectoryError: [Errno 21] Is a directory", "is a directory, not a config file"),
    (lambda p: (p.parent / "loop").symlink_to(p) or p.symlink_to(p.parent / "loop"),
     "OSError: [Errno 40] Too many levels of symbolic links", "Too many levels of symbolic links"),
    (lambda p: p.write_bytes("seeds: [0]\n".encode("utf-16")), "UnicodeDecodeError: 'utf-8' codec can't decode byte",
     "not UTF-8 text (byte 0)"),
    (lambda p: p.write_text("seeds: " + "[" * 3000 + "]" * 3000), "RecursionError: maximum recursion depth exceeded",
     "nested more than 32 levels deep"),
    (lambda p: p.write_text("recipe: &a {b: *a}\n"), "RecursionError: maximum recursion depth exceeded",
     "alias *a is used inside its own anchor &a"),
    (lambda p: p.write_text("seeds: [" + "1" * 5000 + "]\n"), "ValueError: Exceeds the limit (4300 digits)",
     "Exceeds the limit (4300 digits)"),
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("make, last, words", FAILS_IN_SNAKEMAKE,
                         ids=["directory", "symlink-loop", "utf-16", "deep", "self-map", "huge-int"])  # fmt: skip
def test_a_configfile_snakemake_cannot_read_fails_before_the_workflow_as_documented(tmp_path, make, last, words):
    """snakemake reads --configfile before any workflow code: docs/safety.md says what it prints; hwsweep plan
    names the same file in one line."""
    from conftest import BIN

    path = tmp_path / "config.yaml"
    make(path)
    proc = snakemake(tmp_path, None, "-n", timeout=120)
    out = proc.stdout + proc.stderr  # snakemake prints an error it meets before its logging is set up on stdout
    lines = [line for line in out.splitlines() if line.strip()]
    assert proc.returncode == 1 and lines[-1].startswith(last) and "ConfigSettings" in out, out[-1500:]
    assert last.split(":")[0] in (REPO / "docs/safety.md").read_text()
    assert not (tmp_path / "results").exists() and not (tmp_path / ".snakemake").exists()
    plan = subprocess.run([str(BIN / "hwsweep"), "plan", "--configfile", str(path)], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert plan.returncode == 1 and plan.stderr.count("\n") == 1 and words in plan.stderr, plan.stderr[-1500:]


# -- the schema's enums, as documented (issue 36: an unquoted `off` in the schema was YAML's False) -------------------

def _enums(schema: dict, root: dict, prefix: str):
    """(dotted config key, enum list) for every enum under `schema`'s properties (through $ref and anyOf)."""
    from hwsweep.plan.config.schema import _deref

    for key, sub in _deref(schema, root).get("properties", {}).items():
        sub = _deref(sub, root)
        for option in [sub, *(_deref(o, root) for o in sub.get("anyOf", []))]:
            if "enum" in option:
                yield f"{prefix}{key}", option
            if option.get("type") == "object" and key not in ("task", "model"):
                yield from _enums(option, root, f"{prefix}{key}.")


def _enum_nodes(node, inside_condition=False):
    """Every enum list of the schema's text, but those of if/then branches (they narrow a family's task names)."""
    if isinstance(node, dict):
        if "enum" in node and not inside_condition:
            yield node["enum"]
        for key, value in node.items():
            yield from _enum_nodes(value, inside_condition or key in ("if", "then"))
    elif isinstance(node, list):
        for value in node:
            yield from _enum_nodes(value, inside_condition)


# The schema as its text spells it: YAML's base loader keeps every scalar a string, so a bare off stays "off" here
# however the safe loader (and so the validator) reads it.
SPELLED = yaml.load((REPO / "hwsweep/schemas/config.schema.yaml").read_text(), Loader=yaml.BaseLoader)  # noqa: S506
_D = SPELLED["$defs"]
ENUM_ROOTS = [(SPELLED, ""), (_D["task"], "recipe.task."), (_D["model"], "recipe.model."),
              (_D["hardware"], "hardware.cpu2."), (_D["metric"], "metrics.token_accuracy.")]  # fmt: skip
ENUM_ROOTS += [(_D["models"][m], f"recipe.model[{m}].") for m in _D["models"]]
ENUM_ROOTS += [(_D["tasks"][t], f"recipe.task[{t}].") for t in _D["tasks"]]
ENUMS = list(dict.fromkeys((key, int(v) if node.get("type") == "integer" else v) for root, prefix in ENUM_ROOTS
                           for key, node in _enums(root, SPELLED, prefix) for v in node["enum"]))  # fmt: skip


def test_the_walk_finds_every_enum_of_the_schema():
    found = {id(node["enum"]) for root, prefix in ENUM_ROOTS for _, node in _enums(root, SPELLED, prefix)}
    assert found == {id(e) for e in _enum_nodes(SPELLED)}
    assert {"trainer.observe", "guard.action", "recipe.precision", "hardware.cpu2.accelerator", "evaluation",
            "recipe.model[hrm].act_mode", "tracking.wandb.mode", "metrics.token_accuracy.goal", "timing"} <= {
        k for k, _ in ENUMS}  # fmt: skip


def _command(cfg: dict) -> None:
    """A config on the plain DDP example's script, so trainer and evaluation keys apply."""
    cfg["recipe"] = {k: v for k, v in cfg["recipe"].items() if k not in ("task", "model")}
    cfg["trainer"] = {"command": ["python", "train.py"], "workdir": str(REPO / "examples/plain_ddp"),
                      "args": {"batch_size": "micro_batch", "grad_accum": "accumulation", "nproc": "world_size"}}  # fmt: skip
    cfg["metrics"] = {"loss": {"goal": "min"}}


def _family(model: str, task: str):
    def apply(cfg: dict) -> None:
        cfg["recipe"] |= {"model": {"name": model}, "task": {"name": task}}

    return apply


# What else a documented value needs to plan (the rules across keys stay in force; the enum value itself is the test).
ENUM_CONTEXT = {
    "trainer.": _command,
    "evaluation.": lambda cfg: (_command(cfg), cfg.update(evaluation={"command": ["python", "train.py"],
                                                                       "workdir": str(REPO / "examples/plain_ddp")})),
    ("evaluation", "none"): lambda cfg: cfg.update(metrics={"final_loss": {"goal": "min", "key": "loss"}}),
    "recipe.model[": lambda cfg: None,  # set below, with the family's task
    ("recipe.task.name", "sudoku"): _family("hrm", "sudoku"),
    ("recipe.task.name", "arc"): _family("hrm", "arc"),
    ("recipe.model.name", "hrm"): _family("hrm", "sudoku"),
    ("recipe.model.name", "deep_transformer"): _family("deep_transformer", "sudoku"),
    "recipe.task[": _family("hrm", "sudoku"),
    ("recipe.lr_scaling", "linear"): lambda cfg: cfg["recipe"].update(batch_policy="grow"),
    ("recipe.lr_scaling", "sqrt"): lambda cfg: cfg["recipe"].update(batch_policy="grow"),
    ("recipe.schedule.stop_at", "target"): lambda cfg: (cfg["recipe"].update(eval_every=10),
                                                        cfg.update(targets=[{"metric": "token_accuracy", "value": 0.9}])),
    ("recipe.precision", "fp16-mixed"): lambda cfg: cfg.update(advisor={"allow_precision_mismatch": True}),
    ("recipe.precision", "bf16-mixed"): lambda cfg: cfg.update(advisor={"allow_precision_mismatch": True}),
    ("hardware.cpu2.precision", "fp16-mixed"): lambda cfg: cfg.update(advisor={"allow_precision_mismatch": True}),
    ("hardware.cpu2.precision", "bf16-mixed"): lambda cfg: cfg.update(advisor={"allow_precision_mismatch": True}),
    ("hardware.cpu2.accelerator", "cuda"): lambda cfg: cfg["hardware"]["cpu2"].update(gpu_type="H100-80GB"),
    ("metrics.token_accuracy.stage", "train"): lambda cfg: (cfg["recipe"].update(eval_every=10),
                                                            cfg["metrics"]["token_accuracy"].update(key="eval_token_accuracy")),
    "metrics.": lambda cfg: cfg.update(metrics={"token_accuracy": {"goal": "max", "stage": "eval"}}),
    "tracking.": lambda cfg: cfg.update(tracking={"backends": ["wandb"], "wandb": {"project": "p"}}),
}  # fmt: skip


def _put(cfg: dict, key: str, value) -> None:
    """Set a dotted key; recipe.model[hrm].x sets x of the hrm family."""
    if "[" in key:
        section, rest = key.split("[")
        family, leaf = rest.split("].")
        node = cfg["recipe"].setdefault(section.split(".")[1], {})
        node.clear()
        node.update(name=family, **{leaf: value})
        if section.endswith("model"):
            cfg["recipe"]["task"] = {"name": "sudoku"}
        return
    *parents, leaf = key.split(".")
    node = cfg
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = value


@pytest.mark.parametrize("key, value", ENUMS, ids=[f"{k}={v}" for k, v in ENUMS])
def test_every_documented_value_of_every_enum_is_accepted_from_a_config_file(tmp_path, small_config, key, value):
    for where in (key, (key, value)):
        for prefix, apply in ENUM_CONTEXT.items():
            if (isinstance(prefix, str) and isinstance(where, str) and where.startswith(prefix)) or prefix == where:
                apply(small_config)
    _put(small_config, key, value)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(small_config))  # as a user writes it: strings YAML would misread are quoted
    resolve(load_file(path), config_dir=tmp_path)


def test_a_bare_yaml_boolean_where_an_enum_word_belongs_says_to_quote_it(tmp_path, small_config):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(small_config) + "guard: {action: off}\n")
    with pytest.raises(ConfigError, match=r'^guard.action: False is invalid; use one of fail, flag, off \(YAML reads '
                                          r'a bare off as false: write "off"\)$'):  # fmt: skip
        resolve(load_file(path))


def _schema_patterns(node):
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            yield node["pattern"]
        for value in node.values():
            yield from _schema_patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from _schema_patterns(value)


@pytest.mark.parametrize("pattern", sorted(set(_schema_patterns(yaml.safe_load(
    (REPO / "hwsweep/schemas/config.schema.yaml").read_text())))))  # fmt: skip
def test_a_pattern_refusal_states_the_rule_of_that_pattern(pattern):
    """The refusal of a command argument named the names' rule ("no '/', '..'") though arguments may hold both."""
    from hwsweep.plan.config.schema import _ecma
    from hwsweep.plan.config.wording import _pattern_rule

    rule = _pattern_rule(pattern)
    if rule.startswith("match the pattern"):
        return  # a compound pattern (sweep keys, resume.args) is quoted as it is
    allowed, _, limits = rule.partition("; ")
    for example, shown in (("a/b", "'/'"), ("a..b", "'..'")):
        fits = _ecma(pattern).search(example) is not None
        assert (shown in limits.split("no ")[1]) != fits, (pattern, rule)
    for char in "/.-_@":
        assert (f"'{char}'" in allowed) == (_ecma(pattern).search(f"a{char}b") is not None), (pattern, char, rule)
    longest = int(re.search(r"at most (\d+) characters", limits).group(1))
    first = "a" if _ecma(pattern).search("a") else "1"
    assert _ecma(pattern).search(first * longest) and not _ecma(pattern).search(first * (longest + 1))


def test_a_command_argument_is_refused_with_the_arguments_rule(small_config):
    small_config["trainer"] = {"command": ["python", "train.py", "--out=$(id)"]}
    with pytest.raises(ConfigError) as err:
        resolve(small_config)
    assert str(err.value) == (
        "trainer.command.2: '--out=$(id)' is invalid; use only letters, digits, '_', '.', ',', ':', '+', '/', '@', '=' "
        "and '-'; at most 500 characters, no spaces, quotes or shell characters")
