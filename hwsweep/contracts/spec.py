"""RunSpec: everything one run needs, fully resolved, and where its files go.

The trainer and evaluator read a RunSpec and nothing else, so a run can be launched by
hand (`torchrun ... -m hwsweep.run.train spec.json`) and a user's own trainer can honour the
same two files (spec.json in, train.json out)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from hwsweep.contracts.command import Evaluation, Trainer
from hwsweep.contracts.guard import GuardConfig
from hwsweep.contracts.hardware import BatchPlan, Hardware
from hwsweep.contracts.metrics import Metric
from hwsweep.contracts.recipe import Recipe
from hwsweep.contracts.target import Target
from hwsweep.contracts import typed
from hwsweep.contracts.typed import Typed

# One place for the output layout; workflow/rules/common.smk builds its patterns from these.
RUN_DIR = "results/{suite}/{variant}/{hardware}/seed{seed}"
LOG_DIR = "logs/{suite}/{variant}/{hardware}/seed{seed}"
SPEC_FILE = "spec.json"
# Which trackers see the run live: beside spec.json, not in it, so naming another tracker retrains nothing.
TRACKING_FILE = "tracking.json"
TRAIN_RECORD = "train.json"
FINAL_CHECKPOINT = "final.pt"  # written by hwsweep.runtime (the built-in trainer, runtime-API scripts)
# A sharded (FSDP) run's final checkpoint stays sharded: DCP's shards in this folder, final.pt a small file naming it.
FINAL_SHARDS = "final"
EVAL_RECORD = "eval.json"
PREDICTIONS_FILE = "results/predictions.csv"  # what `hwsweep recommend` predicted (hwsweep.plan.predictions)
REPAIRS_LOG = "repairs.log"  # in the run's log folder: what `all` set right in the run's files, one line each
METRICS_FILE = "metrics.jsonl"  # what the runtime logs per step (the JSON-lines metric contract)
CHECKPOINT_DIR = "checkpoints"  # not a workflow output, so a failed job's checkpoints survive
CHECKPOINTS = "step*"  # in CHECKPOINT_DIR: a file step<N>.pt, or a folder step<N>/ of a sharded (FSDP) run
CHECKPOINT_TEMPORARIES = ".step*.tmp"  # one being written: a hidden file, or a sharded one's folder (renamed when done)

# The names that become folders: suites and hardware (the config's own) and variants (made from sweep values).
# One rule, read by the planner (hwsweep.plan.config) and by the workflow's wildcard constraints. The lengths
# keep a folder name far below the file system's 255 bytes and a run's paths below PATH_MAX.
NAME_MAX, VARIANT_MAX = 64, 128
NAME = rf"[A-Za-z0-9][A-Za-z0-9_-]{{0,{NAME_MAX - 1}}}"
VARIANT = rf"[A-Za-z0-9][A-Za-z0-9_.+-]{{0,{VARIANT_MAX - 1}}}"
# snakemake refuses a wildcard value that ends in one block repeated 20 times or more (PeriodicWildcardError).
PERIODIC = re.compile(r"(.+?)\1{19,}\Z", re.DOTALL)


def name_problem(name: str, variant: bool = False) -> str | None:
    """Why `name` cannot name a folder of the workflow (a phrase with the fix), or None."""
    pattern, limit, chars = (VARIANT, VARIANT_MAX, "_.+-") if variant else (NAME, NAME_MAX, "_-")
    if any(not c.isprintable() for c in name):
        return "contains a control character (a newline?); remove it"
    if len(name) > limit:
        return f"is {len(name)} characters long; use at most {limit}"
    if not re.fullmatch(pattern, name):
        return f"use only letters, digits and {chars}, starting with a letter or digit"
    repeat = PERIODIC.search(name)
    if repeat:
        times = len(repeat.group(0)) // len(repeat.group(1))
        return (f"ends in {repeat.group(1)!r} repeated {times} times, which snakemake refuses as a periodic "
                "wildcard; use a shorter repeat")  # fmt: skip
    return None


@dataclass(frozen=True)
class RunSpec(Typed):
    suite: str
    variant: str
    hardware_name: str
    seed: int
    recipe: Recipe
    hardware: Hardware
    plan: BatchPlan
    run_dir: str
    sweep_values: dict
    trainer: Trainer
    evaluation: Evaluation
    metrics: list[Metric]
    keep_checkpoints: bool
    guard: GuardConfig = GuardConfig()  # the divergence guard, chance_loss resolved to a number or None
    # The suite's targets where recipe.schedule.stop_at is target (the runtime stops once all are reached); else
    # empty, so declaring targets only to measure time to target changes no run.
    targets: list[Target] = field(default_factory=list)

    def metrics_of(self, stage: str) -> list[Metric]:
        return [m for m in self.metrics if m.stage == stage]

    @classmethod
    def load(cls, path) -> "RunSpec":
        return cls.from_dict(json.loads(Path(path).read_text()), "spec")

    def path(self, name: str) -> Path:
        return Path(self.run_dir) / name

    def log_path(self, name: str) -> Path:
        return Path(LOG_DIR.format(suite=self.suite, variant=self.variant, hardware=self.hardware_name,
                                   seed=self.seed)) / name  # fmt: skip


# What hwsweep writes in a run folder itself: a file the config names there (a script's metrics file, its resume
# marker) may not be one of them, or the script's file and hwsweep's would overwrite each other. (CHECKPOINT_DIR is
# shared: a command such as Lightning's checkpoints there, as the runtime does.)
OWN_FILES = (SPEC_FILE, TRACKING_FILE, TRAIN_RECORD, FINAL_CHECKPOINT, EVAL_RECORD)


def inside_problem(name: str) -> str | None:
    """Why `name`, a file or glob the config names inside a run folder, could lead out of it or onto hwsweep's own
    files (a phrase with the fix), or None. Checked at planning; the run checks the file itself (`inside`)."""
    path = PurePosixPath(name)
    if path.is_absolute() or name.startswith("~"):
        return "is not inside the run folder; give a path relative to it"
    if ".." in name.split("/"):
        return "has a '..' part, which leads out of the run folder; name a file inside it"
    if path.parts and path.parts[0] in OWN_FILES:
        return f"is hwsweep's own {path.parts[0]} in the run folder; give the script's file another name"
    return None


def inside(folder, name: str) -> Path | None:
    """folder/name, or None where it resolves outside `folder` (a symbolic link that leads out of it)."""
    path = Path(folder, name)
    return path if path.resolve().is_relative_to(Path(folder).resolve()) else None


def canonical_json(spec: RunSpec) -> str:
    """spec.json's exact text: one spec, one text, one hash. Made once per spec object and kept on it (a spec is
    frozen): the workflow asks for a run's text several times while its DAG is built (the train job's parameter,
    settling spec.json)."""
    text = spec.__dict__.get("_canonical_json")
    if text is None:
        text = json.dumps(typed.shared_dict(spec), sort_keys=True) + "\n"
        object.__setattr__(spec, "_canonical_json", text)
    return text


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def run_dir(suite: str, variant: str, hardware: str, seed: int) -> str:
    return RUN_DIR.format(suite=suite, variant=variant, hardware=hardware, seed=seed)
