"""The metric contract: metrics are declared in the config, never listed in code.

A declared metric says where its values come from (the train or the eval stage; a JSON-lines
key or a regular expression over the script's output), whether higher or lower is better, its
equivalence margin and whether it is primary. Parsing turns a script's output into
observations (metric, step, value); `summarise` turns observations into the record's final
values and per-step curves. Torch-free: the launcher and the planner import it."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from hwsweep.contracts.typed import Typed

FLOAT = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"
# A step number on the same line: "step 120", "iter 120:", "step=120", "[step 120/500]".
STEP_PATTERN = r"\b(?:step|iter|iteration|global_step)\b\s*[:=#]?\s*(\d+)"
# The word before a name, when only blanks part them: "test loss 5.7" is the metric test_loss, not loss. A default
# pattern matches whole names only; words saying when, not what, may lead ("final val_loss 0.4" is val_loss).
LEADING_WORD = re.compile(r"(?<![\w.])([A-Za-z][A-Za-z0-9]*)[ \t]+$")
WHEN_WORDS = ("final", "last")
NUMBER_WORDS = ("nan", "inf", "infinity")  # the value of the metric before it ("val_loss nan acc 0.5")
REDUCE = {
    "last": lambda v: v[-1],
    "min": min,
    "max": max,
    "mean": lambda v: sum(v) / len(v),
}


@dataclass(frozen=True)
class Metric(Typed):
    name: str
    goal: str  # max | min: which direction is better
    margin: float | None  # equivalence margin in the metric's units; None: reported, not compared
    primary: bool  # primary metrics decide whether hardware is equivalent; others are reported
    stage: str  # train | eval: which record holds it
    pattern: str | None  # regex over output lines: one group, or named groups value (and step)
    key: str | None  # key in a JSON-lines metrics file (default: the name)
    reduce: str  # last | min | max | mean: the run's value from its observations
    bounds: list | None  # [low, high]: a value outside is a damaged or implausible run
    description: str = ""

    @property
    def json_key(self) -> str:
        return self.key or self.name

    def regex(self) -> re.Pattern:
        if self.pattern:
            return re.compile(self.pattern)
        # Default: "name value", "name: value", "name=value"; '_' in the name also matches a
        # space, so val_loss finds "val loss 1.23" (nanoGPT) as well as "val_loss=1.23".
        words = r"[_ ]".join(re.escape(w) for w in self.name.split("_"))
        return re.compile(rf"(?<![\w.]){words}\s*[:=]?\s*({FLOAT})(?![\w.])", re.IGNORECASE)

    def out_of_bounds(self, value: float) -> bool:
        return self.bounds is not None and not (self.bounds[0] <= value <= self.bounds[1])


def milestone_name(metric: str, threshold: float) -> str:
    """The metric holding the step at which `metric` first reached `threshold` (training
    efficiency): steps_to_exact_accuracy_90 for (exact_accuracy, 0.9); 0.995 -> ..._99_5."""
    return f"steps_to_{metric}_{threshold * 100:.4g}".replace(".", "_")


def check_pattern(pattern: str) -> str | None:
    """Why a user's pattern cannot be used, or None."""
    try:
        rx = re.compile(pattern)
    except re.error as e:
        return f"does not compile ({e})"
    if "value" not in rx.groupindex and rx.groups != 1:
        return f"has {rx.groups} groups; give exactly one capturing group, or a named group (?P<value>...)"
    return None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class TextParser:
    """Observations from lines of a script's output (stdout or a log)."""

    def __init__(self, metrics: list[Metric], step_pattern: str = STEP_PATTERN):
        self.metrics = [(m, m.regex()) for m in metrics]
        self.step = re.compile(step_pattern)
        self.longer: dict[str, set[str]] = {}  # metric -> the longer names it was seen inside ("test loss")

    def feed(self, line: str) -> list[dict]:
        matches = [(metric, rx, match) for metric, rx in self.metrics for match in rx.finditer(line)]
        # A match inside a longer one belongs to the longer: "val loss 1.2" is val_loss, not loss.
        matches = [(m, rx, x) for m, rx, x in matches
                   if not any(y is not x and y.start() <= x.start() and x.end() <= y.end() for _, _, y in matches)]  # fmt: skip
        whole = []
        for m, rx, x in matches:
            if m.pattern or whole_name(line, x.start()):
                whole.append((m, rx, x))
            else:  # kept to name in the one line of a metric never found
                word = LEADING_WORD.search(line, 0, x.start()).group(1)
                self.longer.setdefault(m.name, set()).add(f"{word} {line[x.start() : x.start(1)].rstrip(' :=')}")
        matches = whole
        found = []
        line_step = self.step.search(line)
        for metric, rx, match in matches:
            value = _number(match.group("value") if "value" in rx.groupindex else match.group(1))
            if value is None:
                continue
            if "step" in rx.groupindex and match.group("step"):
                step = int(match.group("step"))
            else:
                step = int(line_step.group(1)) if line_step else None
            found.append({"metric": metric.name, "step": step, "value": value})
        return found


def whole_name(line: str, start: int) -> bool:
    """Whether a name found at `start` is the whole name printed there, not the end of a longer one ("test loss")."""
    word = LEADING_WORD.search(line, 0, start)
    return word is None or word.group(1).lower() in WHEN_WORDS + NUMBER_WORDS


def parse_jsonl_line(line: str, metrics: list[Metric]) -> list[dict]:
    """Observations from one line of a JSON-lines metrics file ({"step": 10, "val_loss": 1.2})."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError:
        return []  # a line being written, or not ours
    return observations(obj, metrics) if isinstance(obj, dict) else []


def observations(obj: dict, metrics: list[Metric]) -> list[dict]:
    """Observations from one logged object: its "step" (if any) and a number per declared key."""
    step = obj.get("step")
    step = int(step) if isinstance(step, (int, float)) and not isinstance(step, bool) else None
    out = []
    for m in metrics:
        value = obj.get(m.json_key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append({"metric": m.name, "step": step, "value": float(value)})
    return out


def summarise(observations: list[dict], metrics: list[Metric]) -> tuple[dict, dict]:
    """(final values by metric, curves by metric) from observations in the order they came.
    A step logged twice (a resumed run replays the steps after its checkpoint) keeps the
    later value; observations without a step count for the final value only."""
    finals, curves = {}, {}
    for m in metrics:
        mine = [o for o in observations if o["metric"] == m.name]
        if not mine:
            continue
        by_step = {}
        for o in mine:
            if o["step"] is not None:
                by_step[o["step"]] = o["value"]
        if by_step:
            steps = sorted(by_step)
            curves[m.name] = {"steps": steps, "values": [by_step[s] for s in steps]}
        # The curve (deduplicated) plus step-less values, in output order, feed the reduction.
        values = [by_step[s] for s in sorted(by_step)] + [o["value"] for o in mine if o["step"] is None]
        finals[m.name] = float(REDUCE[m.reduce](values))
    return finals, curves


def problems(values: dict, metrics: list[Metric]) -> list[str]:
    """Implausible final values: not finite, or outside a metric's declared bounds."""
    out = []
    for m in metrics:
        if values.get(m.name) is not None:
            v = values[m.name]
            if not math.isfinite(v):
                out.append(f"metric {m.name} is {v}")
            elif m.out_of_bounds(v):
                out.append(f"metric {m.name} is {v}, outside its bounds {m.bounds}")
    return out
