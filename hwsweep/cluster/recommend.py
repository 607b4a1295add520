"""`hwsweep recommend`: which hardware answers soonest, and at what cost. For one run of a cell (suite x variant)
on every hardware entry of the config and every entry `hwsweep resources` would offer on this cluster that keeps the
locked global batch and precision:

    time to result = queue wait (SLURM's estimate, hwsweep.cluster.queue) + job start + startup
                     + steps x seconds per step (hwsweep.plan.throughput: measured, scaled or catalog) + evaluation
    cost           = world size x steps x seconds per step x price per device-hour (the report's training cost)

ranked by time to result, with the binding constraint named, the entries to paste for the best few, and each
prediction recorded in results/predictions.csv (hwsweep.plan.predictions checks them once the runs finished).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import yaml

from hwsweep.cluster import queue, resources, slurm
from hwsweep.contracts import catalog
from hwsweep.contracts.hardware import DEFAULT_RUNTIME_MIN
from hwsweep.contracts.spec import RunSpec
from hwsweep.contracts.typed import SpecError
from hwsweep.plan import estimate, predictions, throughput
from hwsweep.plan.config import DEFAULT_CONFIG, ConfigError, load_or_exit, resolve

TOP = 3  # entries to paste


@dataclass(frozen=True)
class Option:
    name: str
    spec: RunSpec
    entry: dict | None  # the entry to paste (a cluster entry); None: the config's own
    minutes: int  # the train job's time limit the queue is asked about

    @property
    def hardware(self):
        return self.spec.hardware


@dataclass(frozen=True)
class Outcome:
    option: Option
    step: throughput.StepTime
    wait: queue.Wait
    job_start: float
    eval_seconds: float

    @property
    def run(self) -> tuple[float, float, float] | None:
        """(seconds, low, high) of startup + training; None where nothing predicts the step."""
        s, steps = self.step, self.option.spec.plan.steps
        if s.seconds is None:
            return None
        return tuple(s.startup_seconds + steps * t for t in (s.seconds, s.low, s.high))

    @property
    def to_result(self) -> float | None:
        if self.run is None or not self.wait.known:
            return None
        return self.wait.seconds + self.job_start + self.run[0] + self.eval_seconds

    @property
    def cost(self) -> float | None:
        spec = self.option.spec
        price = catalog.price_per_hour(spec.hardware.gpu_type, spec.hardware.price_per_hour)
        if price is None or self.step.seconds is None:
            return None
        return spec.plan.world_size * spec.plan.steps * self.step.seconds / 3600 * price


def suggested_minutes(high_seconds: float | None) -> int:
    """A pasted entry's runtime: the run's upper end with a quarter more and 5 min, at least 10 (a short limit
    lets backfill start the job sooner)."""
    return DEFAULT_RUNTIME_MIN if high_seconds is None else max(10, math.ceil(1.25 * high_seconds / 60) + 5)


def locked(spec: RunSpec) -> bool:
    return spec.plan.comparable and spec.plan.global_batch == spec.recipe.global_batch and \
        spec.plan.precision == spec.recipe.precision and "precision" not in spec.plan.warnings  # fmt: skip


def cluster_options(raw: dict, nodes: list[slurm.Node], cell: tuple[str, str], taken: set, config_dir: Path) -> list:
    """(name, entry, spec) of every entry resources offers (free now or not) on a catalog device type that keeps the
    recipe's global batch and precision; a name the config already uses is the config's entry."""
    out = []
    for group in resources.gpu_groups(nodes):
        device, _ = resources.device_type(group.kind)
        for name, entry in resources.candidates(group, device) if device else []:
            if name in taken:
                continue
            try:
                matrix = resolve(resources.only_hardware(raw, name, entry), config_dir=config_dir)
            except (ConfigError, SpecError):
                continue  # cannot hold the global batch (resources says why)
            spec = matrix.spec(*cell, name, matrix.seeds[0])
            if locked(spec):
                out.append((name, entry, spec))
    return out


def outcomes(raw: dict, nodes: list[slurm.Node], cell: tuple[str, str] | None = None, root: Path = Path("."),
             config_dir: Path = Path("."), waiter=queue.wait) -> list[Outcome]:  # fmt: skip
    """Every option's prediction and queue wait, best first; `waiter(hardware, minutes)` asks the queue."""
    matrix = resolve(raw, config_dir=config_dir)
    cell = cell or (matrix.cells[0].suite, matrix.cells[0].variant)
    settings = matrix.estimate
    seed = matrix.seeds[0]
    specs = [(name, None, matrix.spec(*cell, name, seed)) for name in matrix.hardware]
    specs += cluster_options(raw, nodes, cell, set(matrix.hardware), config_dir)
    runs = throughput.observed(specs[0][2], root)
    serials = throughput.report_serials(*cell, root)
    found = []
    for name, entry, spec in specs:
        step = throughput.predict_step(spec, runs, settings, serials)
        evaluation = 0.0 if matrix.evaluation.kind == "none" else (estimate.eval_job_seconds(spec, settings) or 0.0)
        high = None if step.high is None else step.startup_seconds + spec.plan.steps * step.high + evaluation
        minutes = spec.hardware.runtime or (suggested_minutes(high) if entry else DEFAULT_RUNTIME_MIN)
        if entry is not None:
            entry = entry | {"runtime": minutes}
        option = Option(name, spec, entry, minutes)
        found.append(Outcome(option, step, waiter(spec.hardware, minutes), estimate.job_start(settings), evaluation))
    return sorted(found, key=lambda o: (o.to_result is None, o.to_result or 0, o.cost or math.inf, o.option.name))


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def wait_words(o: Outcome) -> str:
    if not o.wait.known:
        return "no start"
    return "now" if o.wait.seconds < 60 else f"~{duration(o.wait.seconds)}"


def advice(ranked: list[Outcome]) -> str:
    """The binding constraint, in one sentence: the queue, or the speed of the run."""
    known = [o for o in ranked if o.to_result is not None]
    if not known:
        return "no option has both a predicted run time and a start SLURM can give: see the notes"
    best = known[0]
    fastest = min(known, key=lambda o: o.run[0])
    start = "starts now" if best.wait.seconds < 60 else f"waits ~{duration(best.wait.seconds)}"
    if fastest is best:
        return f"{best.option.name} finishes first (~{duration(best.to_result)}): it runs fastest and {start}"
    ratio = best.step.seconds / fastest.step.seconds
    return (f"{fastest.option.name} runs fastest ({duration(fastest.run[0])}) but waits ~{duration(fastest.wait.seconds)} "
            f"in the queue; {best.option.name} {start} and finishes first (~{duration(best.to_result)}) despite "
            f"{ratio:.1f}x the step time")  # fmt: skip


def lines(ranked: list[Outcome], cell: tuple[str, str], now: datetime, top: int = TOP) -> list[str]:
    steps = ranked[0].option.spec.plan.steps if ranked else 0
    out = [f"one run of {cell[0]}[{cell[1]}] ({steps} steps) per option, soonest result first ({now:%Y-%m-%d %H:%M}):",
           f"  {'#':>2}  {'hardware':<16} {'partition':<12} {'wait':>9} {'run [interval]':>24} {'result in':>10} "
           f"{'cost ' + catalog.CURRENCY:>10}  rests on"]  # fmt: skip
    for i, o in enumerate(ranked, 1):
        run = "?" if o.run is None else f"{duration(o.run[0])} [{duration(o.run[1])}-{duration(o.run[2])}]"
        cost = "?" if o.cost is None else f"{o.cost:.2f}" if o.cost >= 0.01 else f"{o.cost:.1g}"
        out.append(f"  {i:>2}  {o.option.name:<16} {o.option.hardware.partition or '(default)':<12} {wait_words(o):>9} "
                   f"{run:>24} {duration(o.to_result):>10} {cost:>10}  {o.step.basis}: {o.step.detail}")  # fmt: skip
    out += ["", f"advice: {advice(ranked)}"]
    out += [f"  {o.option.name}: {o.wait.note}" for o in ranked if not o.wait.known or o.wait.seconds >= 60]
    out.append("the waits are SLURM's backfill estimates now (sbatch --test-only): they assume running jobs use their "
               "whole time limit and move as jobs end early or higher-priority jobs arrive")  # fmt: skip
    paste = [o for o in ranked if o.option.entry is not None and o.to_result is not None][:top]
    if paste:
        out += ["", f"ready to paste under hardware: in your config (the best {len(paste)} the cluster offers):"]
        out += ["  " + yaml.safe_dump({o.option.name: o.option.entry}, default_flow_style=None, sort_keys=False,
                                      width=1000).rstrip() for o in paste]  # fmt: skip
    return out


def records(ranked: list[Outcome], now: datetime) -> list[dict]:
    """One predictions.csv row per option (hwsweep.plan.predictions.COLUMNS)."""
    rows = []
    for i, o in enumerate(ranked, 1):
        spec, run = o.option.spec, o.run or (None, None, None)
        rows.append({
            "predicted_at": now.isoformat(timespec="seconds"), "suite": spec.suite, "variant": spec.variant,
            "hardware": o.option.name, "gpu_type": spec.hardware.gpu_type, "world_size": spec.plan.world_size,
            "partition": spec.hardware.partition, "rank": i, "basis": o.step.basis, "detail": o.step.detail,
            "steps": spec.plan.steps, "step_seconds": o.step.seconds, "step_low": o.step.low, "step_high": o.step.high,
            "startup_seconds": o.step.startup_seconds, "run_seconds": run[0], "run_low": run[1], "run_high": run[2],
            "job_start_seconds": o.job_start, "eval_seconds": o.eval_seconds, "wait_seconds": o.wait.seconds,
            "wait_note": o.wait.note, "time_to_result_seconds": o.to_result, "cost": o.cost,
            "currency": catalog.CURRENCY,
        })  # fmt: skip
    return rows


def add_parser(sub) -> None:
    r = sub.add_parser("recommend", help="which hardware gives one run's result soonest, with the queue's wait and cost")
    r.add_argument("--configfile", type=Path, help="the config whose recipe is planned (default: config/config.yaml)")
    r.add_argument("--suite", help="the suite of the run (default: the config's first)")
    r.add_argument("--variant", help="its variant (default: the suite's first)")
    r.add_argument("--top", type=int, default=TOP, help=f"cluster entries to paste (default {TOP})")
    r.add_argument("--no-record", action="store_true", help=f"do not add the predictions to {predictions.PREDICTIONS}")
    r.set_defaults(handler=main)


def pick_cell(raw: dict, suite: str | None, variant: str | None, config_dir: Path) -> tuple[str, str]:
    cells = [(c.suite, c.variant) for c in resolve(raw, config_dir=config_dir).cells]
    mine = [c for c in cells if (suite is None or c[0] == suite) and (variant is None or c[1] == variant)]
    if not mine:
        raise ConfigError(f"no cell {suite or '*'}[{variant or '*'}]; the config has: "
                          + ", ".join(f"{s}[{v}]" for s, v in cells))  # fmt: skip
    return mine[0]


def main(args: argparse.Namespace) -> int:
    configfile = args.configfile or DEFAULT_CONFIG
    raw = load_or_exit(configfile)
    now = datetime.now()
    cell = resources.answered("recommend", lambda: pick_cell(raw, args.suite, args.variant, configfile.parent))
    ranked = cell and resources.answered("recommend", lambda: outcomes(raw, slurm.read_nodes(), cell, Path("."),
                                                                       configfile.parent))  # fmt: skip
    if ranked is None or cell is None:
        return 1
    print("\n".join(lines(ranked, cell, now, args.top)))
    if not args.no_record:
        predictions.append(records(ranked, now))
        print(f"\nrecorded in {predictions.PREDICTIONS} (results/<suite>/predicted_vs_actual.csv checks them)")
    return 0
