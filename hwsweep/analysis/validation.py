"""Records validation: what a run's files say about it, decided in one place that `status` and the
workflow both ask, so they never disagree about what is done.

A record is checked against its schema (every key, each value's type), for plausibility (final metrics
finite and inside their declared bounds, times not negative, finite losses, as many loss steps as the
plan, final train metrics that agree with their own curves) and against the run it sits in (the same suite,
variant, hardware and seed; the spec of the current config, else it is stale); an evaluation to be redone
needs the run's final checkpoint, else the run is retrained. Reading only: moving a damaged record aside is
hwsweep.analysis.quarantine's job."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing
from dataclasses import dataclass
from pathlib import Path

from hwsweep.contracts import failure
from hwsweep.contracts.command import as_passed
from hwsweep.contracts.metrics import REDUCE
from hwsweep.contracts.records import EvalRecord, RecordError, RunRecord, read
from hwsweep.contracts.spec import EVAL_RECORD, FINAL_CHECKPOINT, FINAL_SHARDS, TRAIN_RECORD, RunSpec, canonical_json
from hwsweep.contracts.typed import hints_of

DONE, TRAINED, STALE, CORRUPT, FAILED, MISSING = "done", "trained", "stale", "corrupt", "failed", "missing"
NOT_NEGATIVE = ("train_seconds", "startup_seconds", "wall_seconds", "samples_per_second", "restarts", "eval_seconds")


@dataclass(frozen=True)
class Verdict:
    state: str  # done | trained | stale | corrupt | failed | missing
    path: Path | None = None  # the damaged record (corrupt only); the records after it go with it
    reason: str = ""


def _is(value, kinds: tuple) -> bool:
    """Whether a JSON value has a declared field type, given as _kinds of it (int is not a bool; a float field takes
    an int)."""
    for base in kinds:
        if base is type(None) and value is None:
            return True
        if base is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if base is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        if base in (bool, str, list, dict) and isinstance(value, base):
            return True
    return False


def _kinds(hint) -> tuple:
    """The plain types a field type accepts (X | None: X and NoneType; list[X]: list)."""
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    return tuple(typing.get_origin(o) or o for o in options)


NUMBERS = {int, float}  # a JSON number's types as read (bool is a type of its own)


def _numbers(values) -> bool:
    """Whether every value is a number (not a bool): asked of each curve, so by type, not one call a value."""
    return set(map(type, values)) <= NUMBERS


@functools.cache
def _checks(cls) -> tuple:
    """(name, the plain types it accepts, the type's name) of each field of a record class, resolved once: every
    record read asks."""
    hints = hints_of(cls)
    return tuple((f.name, _kinds(hints[f.name]), getattr(hints[f.name], "__name__", hints[f.name]))
                 for f in dataclasses.fields(cls))  # fmt: skip


def schema_problems(record) -> list[str]:
    """Fields whose value is not of the declared type, or a number that cannot be right."""
    out = []
    for name, kinds, shown in _checks(type(record)):
        value = getattr(record, name)
        if not _is(value, kinds):
            out.append(f"{name} is {value!r}, not {shown}")
        elif name in NOT_NEGATIVE and value is not None and not (math.isfinite(value) and value >= 0):
            out.append(f"{name} is {value!r}, not a finite number >= 0")
    return out


def _normal(data):
    return json.loads(json.dumps(data))


def _loss_curves(record: RunRecord, spec: RunSpec) -> list[str]:
    keys = {m.name for m in spec.metrics if m.json_key == "loss" or m.name.endswith("loss")}
    return [name for name in record.curves if name == "loss" or name in keys]


def train_problems(record: RunRecord, spec: RunSpec, schema: list[str] | None = None) -> list[str]:
    """Why train.json cannot be the record of this run (empty when it can); `schema`: its schema_problems, where the
    caller has them."""
    out = schema_problems(record) if schema is None else list(schema)
    if out:
        return out
    mine = (spec.suite, spec.variant, spec.hardware_name, spec.seed)
    if (record.suite, record.variant, record.hardware, record.seed) != mine:
        return [f"it is the record of {record.suite}/{record.variant}/{record.hardware}/seed{record.seed}"]
    if record.plan.get("steps") != spec.plan.steps:
        out.append(f"plan.steps is {record.plan.get('steps')!r}, the plan says {spec.plan.steps}")
    stopped = record.stopped_at_step
    if stopped is not None and not (spec.targets and 0 < stopped < spec.plan.steps):
        out.append(f"stopped_at_step is {stopped}, but the plan trains {spec.plan.steps} steps"
                   + ("" if spec.targets else " and has no target to stop at"))  # fmt: skip
    for name in record.curves:
        try:
            curve = record.curve(name)
        except Exception as e:  # noqa: BLE001 - any malformed curve is a damaged record
            out.append(f"curve {name} is malformed ({e})")
            continue
        if len(curve.steps) != len(curve.values) or not _numbers(curve.values):
            out.append(f"curve {name} is malformed (steps and values differ in length or are not numbers)")
        elif curve.steps and max(curve.steps) > spec.plan.steps:
            out.append(f"curve {name} reaches step {max(curve.steps)}, beyond the plan's {spec.plan.steps}")
    for name in _loss_curves(record, spec):
        values = record.curves[name].get("values", []) if isinstance(record.curves[name], dict) else []
        bad = None if _numbers(values) and all(map(math.isfinite, values)) else next(
            (i for i, v in enumerate(values) if not (type(v) in NUMBERS and math.isfinite(v))), None)  # fmt: skip
        if bad is not None:
            out.append(f"curve {name} has {values[bad]!r} at its entry {bad + 1}, not a finite loss")
        trained = stopped or spec.plan.steps  # a run stopped at its targets trained up to there
        if record.trainer == "builtin" and len(values) != trained:
            out.append(f"curve {name} has {len(values)} steps, the {'run stopped at' if stopped else 'plan says'} {trained}")
    return out or _contradicted(record, spec)


def _contradicted(record: RunRecord, spec: RunSpec) -> list[str]:
    """Final train metrics their own curve contradicts (a hand-edited or mixed-up record). The built-in trainer's
    final value is its curve reduced; a command's may add values logged without a step, which only ever lower a
    min and raise a max."""
    out = []
    for m in spec.metrics_of("train"):
        name = m.name if m.name in record.curves else m.json_key
        final, values = record.metrics.get(m.name), record.curves.get(name, {}).get("values")
        if final is None or not values:
            continue
        expected = REDUCE[m.reduce](values)
        close = math.isclose(final, expected, rel_tol=1e-9, abs_tol=1e-12)
        if record.trainer == "builtin":
            agrees = close
        else:
            agrees = close or {"min": final < expected, "max": final > expected}.get(m.reduce, True)
        if not agrees:
            out.append(f"metric {m.name} is {final!r}, but the {m.reduce} of its curve {name} is {expected!r}")
    return out


def eval_problems(record: EvalRecord, spec: RunSpec) -> list[str]:
    out = schema_problems(record)
    if out:
        return out
    if (record.suite, record.variant, record.hardware, record.seed) != (spec.suite, spec.variant, spec.hardware_name,
                                                                        spec.seed):  # fmt: skip
        out.append(f"it is the record of {record.suite}/{record.variant}/{record.hardware}/seed{record.seed}")
    return out


def check(cls, path: Path, spec: RunSpec, record=None, schema: list[str] | None = None, data: dict | None = None):
    """The record at `path`, checked; RecordError naming the file and the first problem otherwise. `record`: the
    file as records.read read it, where the caller has (it is not read again); `schema`: its schema_problems;
    `data`: the file's JSON, where the caller has read it."""
    if record is None:
        record = read(cls, path, spec.metrics, data)  # keys, status, finite metrics inside their bounds
    if cls is RunRecord:
        found = train_problems(record, spec, schema)
    else:
        found = eval_problems(record, spec)
    if found:
        raise RecordError(f"{path}: {found[0]}")
    return record


def _log_reason(spec: RunSpec, name: str, root: Path = Path(".")) -> str | None:
    """Why a stage failed, from its log (hwsweep.contracts.failure); None when the stage never started."""
    log = root / spec.log_path(name)
    return failure.log_reason(log) if log.exists() else None


def run_state(spec: RunSpec, evaluated: bool = True, root: Path = Path("."), read_json: dict | None = None) -> Verdict:
    """What the run's files say, in pipeline order: a damaged record makes the run corrupt (the records
    after it are made from it); a record of another config makes it stale. `root`: the sweep's folder (another
    machine's, for an import); `read_json`: record name -> its file's JSON where the caller has read it (None, or
    no entry: read here)."""
    read_json = read_json or {}
    folder = root / spec.run_dir
    train_path, eval_path = folder / TRAIN_RECORD, folder / EVAL_RECORD
    if not train_path.exists():
        why = _log_reason(spec, "train.log", root)  # a started run without a record failed, or still runs
        return Verdict(MISSING) if why is None else Verdict(FAILED, reason=why)
    try:
        record = read(RunRecord, train_path, spec.metrics, read_json.get(TRAIN_RECORD))
        recorded = _normal(as_passed(spec, json.loads(canonical_json(spec)))[1])  # as runner records it
        schema = schema_problems(record)
        if record.spec != recorded and not schema:
            return Verdict(STALE)
        check(RunRecord, train_path, spec, record, schema)
    except RecordError as e:
        return Verdict(CORRUPT, train_path, str(e))
    if not evaluated:
        return Verdict(DONE)
    lost = lost_checkpoint(spec, root)  # an evaluation to be (re)done without it retrains the run
    if not eval_path.exists():  # an evaluation that failed (or still runs) says why in its log
        return Verdict(CORRUPT, train_path, lost) if lost else Verdict(TRAINED, reason=_log_reason(spec, "evaluate.log", root) or "")
    try:
        check(EvalRecord, eval_path, spec, data=read_json.get(EVAL_RECORD))
    except RecordError as e:
        return Verdict(CORRUPT, train_path, f"{lost}; and {e}") if lost else Verdict(CORRUPT, eval_path, str(e))
    return Verdict(DONE, reason=f"{lost} (not needed: the run is evaluated)" if lost else "")


MANIFEST_BYTES = 16384  # a final.pt that names shards is a few hundred bytes; any model's weights are more


def lost_checkpoint(spec: RunSpec, root: Path = Path(".")) -> str:
    """Why the built-in evaluator cannot evaluate the trained run (its final checkpoint is gone or empty), or ''.
    A retrain resumes from the newest complete checkpoint left in checkpoints/, so it costs at most the steps
    after it."""
    if spec.evaluation.kind != "builtin":
        return ""  # a command evaluates the run from whatever its script keeps
    path = root / spec.path(FINAL_CHECKPOINT)
    size = path.stat().st_size if path.exists() else 0
    if not size:
        return f"{path}: the final checkpoint is {'empty' if path.exists() else 'missing'}"
    # A sharded run's final.pt is a small file naming its shards' folder (DCP's metadata in it is written last);
    # one written whole (before the shards stayed sharded) holds the weights itself.
    shards = root / spec.path(FINAL_SHARDS)
    named = spec.recipe.parallel.sharded and size < MANIFEST_BYTES
    if (shards.exists() or named) and not (shards / ".metadata").is_file():
        return f"{shards}: the final checkpoint's shards are {'incomplete' if shards.exists() else 'missing'}"
    return ""
