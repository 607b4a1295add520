"""The seconds per optimizer step of a recipe on a hardware entry, from this recipe's finished runs where they
exist (on any hardware), with an interval and the word of what it rests on (`hwsweep recommend`).

The model, deliberately small (a locked global batch: every hardware does the same work per step):

    measured here        runs of this suite and variant on this hardware entry (else on one of the same device
                         type, device count and arithmetic): their mean; interval their min to max, widened by MEASURED_MARGIN
    scaled from <hw>     runs on other hardware, each scaled by
                             t = t_source x (peak_source / peak_target) x A(n_target) / A(n_source),
                             A(n) = f + (1 - f) / n   (Amdahl; n: devices over the fit's reference count)
                         i.e. the source's measured efficiency (its MFU) carried to the target's peak FLOP/s, and
                         the device count by Amdahl's serial fraction f: the report's fit (results/<suite>/
                         speedup.csv, with its interval) for the device type, else a two-point fit from runs of
                         one type at two counts, else NO_FIT (an assumption). Sources of the target's device type
                         are preferred; from another type the interval is widened by TYPE_SPREAD both ways (MFU is
                         not the same across architectures: memory bandwidth, kernels).
    catalog only         no run of this recipe: hwsweep plan --estimate's FLOPs / (devices x peak x assumed MFU),
                         the interval from the assumed MFU times MFU_RANGE
    unknown              none of these (a user's script with no finished run): no prediction

A run's startup comes from the same runs (their mean), else estimate.startup_seconds.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from pathlib import Path

from hwsweep.contracts import catalog, io
from hwsweep.contracts.spec import TRAIN_RECORD, RunSpec
from hwsweep.contracts.typed import SpecError
from hwsweep.plan import estimate

MEASURED_MARGIN = 0.10  # a measured step time moves this much between days and nodes (contention, clocks)
TYPE_SPREAD = 1.5  # another device type's efficiency may differ this much either way
NO_FIT = (0.0, 0.05, 0.3)  # Amdahl's serial fraction where nothing measured says: low, assumed, high
MFU_RANGE = (0.5, 1.5)  # the assumed MFU may be off this much (multiplied) either way
# The recipe's parts that set the work of one step: two runs that share them did the same step.
SAME_WORK = ("task", "model", "global_batch", "precision", "tf32", "compile", "parallel",
             "activation_checkpointing", "args")  # fmt: skip


@dataclass(frozen=True)
class Observed:
    """One finished run of the recipe, as the model uses it."""

    hardware: str  # the run's hardware entry name
    gpu_type: str
    arithmetic: str
    world_size: int
    peak: float | None  # FLOP/s per device (catalog); None: not known
    seconds_per_step: float
    startup_seconds: float


@dataclass(frozen=True)
class Serial:
    """Amdahl's serial fraction of one device type, relative to `reference` devices."""

    f: float
    low: float
    high: float
    reference: int
    basis: str  # "the report's fit", "runs at 1 and 2 devices", "assumed"


@dataclass(frozen=True)
class StepTime:
    seconds: float | None
    low: float | None
    high: float | None
    basis: str  # measured here | scaled from <hw> | catalog only | unknown
    detail: str
    startup_seconds: float | None
    source: str = ""  # the hardware it was scaled from ('' otherwise)


def same_work(recipe: dict, spec: RunSpec) -> bool:
    mine = spec.recipe.to_dict()
    return all(recipe.get(k) == mine.get(k) for k in SAME_WORK)


def observed(spec: RunSpec, root: Path = Path(".")) -> list[Observed]:
    """Every complete run of the spec's suite and variant under `root`/results that did the same work per step,
    on any hardware (the folder's, not only the config's: a run of an entry since removed still measures)."""
    out = []
    for path in sorted((Path(root) / "results" / spec.suite / spec.variant).glob(f"*/seed*/{TRAIN_RECORD}")):
        try:
            record = io.read_json(path)
            ran = RunSpec.from_dict(record["spec"], str(path))
        except (OSError, ValueError, KeyError, TypeError, SpecError):
            continue
        timing = estimate.step_timing(record)
        if record.get("status") != "complete" or timing is None or not same_work(record["spec"]["recipe"], spec):
            continue
        peak = catalog.device_peak(ran.hardware, ran.plan, record.get("plan", {}).get("threads_per_process"))
        out.append(Observed(ran.hardware_name, ran.hardware.gpu_type, catalog.arithmetic(ran.plan.precision, ran.plan.tf32),
                            ran.plan.world_size, peak, *timing))  # fmt: skip
    return out


def report_serials(suite: str, variant: str, root: Path = Path(".")) -> dict[str, Serial]:
    """Device type -> the report's Amdahl fit (results/<suite>/speedup.csv), relative to the type's smallest count."""
    try:
        with open(Path(root) / "results" / suite / "speedup.csv") as f:
            rows = [r for r in csv.DictReader(f) if r.get("variant") == variant]
    except OSError:
        return {}
    out = {}
    for r in rows:
        try:
            f_, low, high = (float(r[k]) for k in ("amdahl_serial_fraction", "amdahl_serial_fraction_ci_low",
                                                   "amdahl_serial_fraction_ci_high"))  # fmt: skip
        except (KeyError, ValueError):
            continue
        if f_ == f_:  # not NaN
            ref = min(int(float(x["world_size"])) for x in rows if x["gpu_type"] == r["gpu_type"])
            out[r["gpu_type"]] = Serial(f_, low, high, ref, "the report's fit")
    return out


def two_point_serial(runs: list[Observed]) -> Serial | None:
    """Amdahl's f from runs of one device type at its smallest and largest count (t2 / t1 = f + (1 - f) / n):
    the means give f, the runs' extremes its range; None where one count was measured."""
    counts = sorted({r.world_size for r in runs})
    if len(counts) < 2:
        return None
    small = [r.seconds_per_step for r in runs if r.world_size == counts[0]]
    large = [r.seconds_per_step for r in runs if r.world_size == counts[-1]]
    n = counts[-1] / counts[0]

    def f_of(ratio):
        return min(1.0, max(0.0, (ratio - 1 / n) / (1 - 1 / n)))

    f_, a, b = f_of(statistics.fmean(large) / statistics.fmean(small)), f_of(min(large) / max(small)), f_of(max(large) / min(small))
    return Serial(f_, min(a, b), max(a, b), counts[0], f"runs at {counts[0]} and {counts[-1]} devices")


def serial_for(gpu_type: str, arithmetic: str, runs: list[Observed], report: dict) -> Serial:
    if gpu_type in report:
        return report[gpu_type]
    fitted = two_point_serial([r for r in runs if (r.gpu_type, r.arithmetic) == (gpu_type, arithmetic)])
    return fitted or Serial(NO_FIT[1], NO_FIT[0], NO_FIT[2], 1, "assumed")


def amdahl(f: float, devices: int, reference: int) -> float:
    return f + (1 - f) * reference / devices


def _scaled(spec: RunSpec, peak: float, runs: list[Observed], serial: Serial) -> tuple[float, float, float]:
    """(mean, low, high) seconds per step of the target from one source hardware's runs."""
    src = runs[0]
    n_t, n_s = spec.plan.world_size, src.world_size

    def at(t, f):
        return t * (src.peak / peak) * amdahl(f, n_t, serial.reference) / amdahl(f, n_s, serial.reference)

    times = [r.seconds_per_step for r in runs]
    ends = [at(t, f) for t in (min(times), max(times)) for f in (serial.low, serial.high)]
    return at(statistics.fmean(times), serial.f), min(ends), max(ends)


def predict_step(spec: RunSpec, runs: list[Observed], settings: dict, report: dict | None = None) -> StepTime:
    """The spec's seconds per step from `runs` (observed()), with `report` (report_serials()) where it has a fit."""
    report = report or {}
    arith = catalog.arithmetic(spec.plan.precision, spec.plan.tf32)
    shape = (spec.hardware.gpu_type, arith)
    alike = [r for r in runs if (r.gpu_type, r.arithmetic, r.world_size) == (*shape, spec.plan.world_size)]
    here = [r for r in alike if r.hardware == spec.hardware_name] or alike  # its own runs, else its shape's
    if here:
        times = [r.seconds_per_step for r in here]
        return StepTime(statistics.fmean(times), min(times) * (1 - MEASURED_MARGIN), max(times) * (1 + MEASURED_MARGIN),
                        "measured here", f"{len(here)} run(s)", statistics.fmean(r.startup_seconds for r in here))  # fmt: skip
    peak = catalog.device_peak(spec.hardware, spec.plan)
    usable = [r for r in runs if r.peak and peak]
    same_type = [r for r in usable if (r.gpu_type, r.arithmetic) == shape]
    sources = same_type or usable
    if sources:
        by_hw: dict[str, list[Observed]] = {}
        for r in sources:
            by_hw.setdefault(r.hardware, []).append(r)
        serial = serial_for(*shape, runs, report)
        if not same_type and serial.basis == "assumed":  # the target's type has no fit: the source's own may
            serial = serial_for(sources[0].gpu_type, sources[0].arithmetic, runs, report)
        scaled = [_scaled(spec, peak, group, serial) for group in by_hw.values()]
        spread = 1.0 if same_type else TYPE_SPREAD
        low = min(s[1] for s in scaled) / spread * (1 - MEASURED_MARGIN)
        high = max(s[2] for s in scaled) * spread * (1 + MEASURED_MARGIN)
        names = ", ".join(by_hw)
        detail = (f"{len(sources)} run(s); peak x{(sources[0].peak / peak):.3g}; Amdahl f {serial.f:.2f} "
                  f"[{serial.low:.2f}, {serial.high:.2f}] ({serial.basis})"
                  + ("" if same_type else f"; another device type: x{TYPE_SPREAD:g} either way"))  # fmt: skip
        return StepTime(statistics.median(s[0] for s in scaled), low, high, f"scaled from {names}", detail,
                        statistics.median(r.startup_seconds for r in sources), names)  # fmt: skip
    flops, mfu = estimate.step_flops(spec.recipe, spec.plan), estimate.assumed_mfu(spec.hardware, settings)
    startup = settings.get("startup_seconds", 10.0)
    if not (flops and peak and mfu):
        return StepTime(None, None, None, "unknown", "no finished run of this recipe and no FLOP count or peak", None)
    per_step = flops / (spec.plan.world_size * peak * mfu)
    lo, hi = MFU_RANGE
    return StepTime(per_step, per_step / hi, per_step / lo, "catalog only",
                    f"assumed MFU {mfu:.2g} (range {mfu * lo:.2g}-{mfu * hi:.2g})", startup)  # fmt: skip
