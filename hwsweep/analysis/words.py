"""The report's numbers and verdicts in words, in one place (issue 20).

`in_words` owns the verdict vocabulary: a direction (faster, slower, cheaper, more expensive,
better, worse) is written only when the whole interval lies on one side of "no difference";
otherwise the sentence says "no clear difference" and gives the interval. Headline, tables and
findings all call it, so a sentence never says more than its interval.

`figures`, `plain`, `percent`, `change`, `money`, `duration` and `flops` write numbers for people (the one formatting module,
issue 68): enough significant digits that different numbers read different and a margin reads at its own precision
(0.005 as ±0.5%, never ±0%), nothing rounded onto a landmark it is not (+99.5% never +100%), numbers read against
each other in the ratio they have, and never exponent notation (1,590×, not 1.59e+03)."""

from __future__ import annotations

import math
import numbers

SPEED = "speed"  # estimate: speedup = baseline time / this hardware's time; no difference at 1
COST = "cost"  # estimate: cost per run, this hardware / the baseline; no difference at 1
SOONER = "time to target"  # estimate: baseline time-to-target / this hardware's; no difference at 1 (issue 23)
STEPS = "steps"  # estimate: steps-to-target, this hardware / the baseline; no difference at 1 (issue 23)
# A speedup's words: (better, worse, what is compared).
WAYS = {SPEED: ("faster", "slower", "speed"), SOONER: ("sooner", "later", "time to target")}
SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}
MAX_DIGITS = 8  # figures gives up making numbers distinct beyond this (they are then equal for a reader)


def finite(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)


def plain(value: float, digits: int = 3, signed: bool = False) -> str:
    """`value` to `digits` significant digits in positional notation, never exponent notation: '1,590', '0.00031',
    '12.5'; signed: '+0.39'. Non-finite: 'n/a'."""
    if not finite(value):
        return "n/a"
    rounded = float(f"{float(value):.{digits}g}")  # %g's rounding, then written out: 1.59e+03 as 1,590
    if rounded == 0:
        return "+0" if signed else "0"
    decimals = max(digits - 1 - math.floor(math.log10(abs(rounded))), 0)
    text = f"{rounded:+,.{decimals}f}" if signed else f"{rounded:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text  # as %g: no trailing zeros


def percent(share: float, signed: bool = False, digits: int = 3) -> str:
    """A share as a percentage at its own precision: 0.005 '0.5%', 0.125 '12.5%', 0.1 '10%', 0.995 '99.5%'; more
    digits where rounding would land on 0 or ±100% and the share is neither (0.9996: '99.96%')."""
    if not finite(share):
        return "n/a"
    v = float(share) * 100
    for d in range(digits, MAX_DIGITS + 1):
        text = plain(v, d, signed)
        shown = abs(float(text.replace(",", "")))
        if not (shown in (0, 100) and abs(v) != shown):
            break
    return f"{text}%"


def change(ratio: float) -> str:
    """A ratio as a change: '+28%', '-0.3%' (never '-0%'), '+99.5%' and '-99.5%' (never ±100%: double, or
    nothing at all), '+0%' for a ratio of 1 up to float noise (-4e-14%)."""
    if not finite(ratio):
        return "n/a"
    if abs(ratio - 1) < 5e-6:
        return "+0%"
    return percent(ratio - 1, signed=True, digits=2)


def times(ratio: float, *others: float) -> str:
    """A ratio as '1.22×', '1,590×' (never '1.59e+03×'), with digits enough to differ from `others`."""
    return f"{figures(ratio, *others)[0]}×" if finite(ratio) else "n/a"


def figures(*values: float, digits: int = 3, signed: bool = False) -> list[str]:
    """Each value with at least `digits` significant digits and more where two different values
    would otherwise print the same (1.0004 against 1: '1.0004', '1'); signed: '+0.39'; never exponent notation."""
    for d in range(digits, MAX_DIGITS + 1):
        text = [plain(v, d, signed) for v in values]
        if all(a == b or ta != tb for a, ta in zip(values, text) for b, tb in zip(values, text)):
            return text
    return text


def amount(value: float, scale: float = 1.0, signed: bool = False) -> str:
    """A difference or margin in the metric's units: shares (scale 100) in percentage points."""
    if value is None or not finite(float(value)):
        return "n/a"
    text = plain(value * scale, 3, signed)
    return f"{text} points" if scale == 100 else text


PREFIXES = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def flops(count: float, *others: float, unit: str = "FLOP") -> str:
    """A FLOP count with an SI prefix: '1.59 TFLOP', '512 GFLOP', '3.2 PFLOP' (never '1.59e+12'); read against
    `others` in one prefix, the largest's, with digits enough to differ: '1.59 TFLOP' against '0.81 TFLOP'."""
    values = [float(x) for x in (count, *others) if finite(x)]
    if not finite(count):
        return "n/a"
    top = max((abs(v) for v in values), default=0.0)
    scale, prefix = next(((s, p) for s, p in PREFIXES if top >= s), (1.0, ""))
    return f"{figures(*(v / scale for v in values))[0]} {prefix}{unit}"


RATIO_TOLERANCE = 0.05  # printed amounts read against each other keep their ratio to within this share


def _misread(values: list[float], decimals: int) -> bool:
    """Whether these amounts printed at `decimals` would read the wrong way: two different ones the same, or
    a ratio of the printed numbers more than RATIO_TOLERANCE from the true one ($0.02 against $0.01 for 1.45×)."""
    shown = [round(v, decimals) for v in values]
    if len(set(shown)) < len(set(values)):
        return True
    return any(s == 0 or abs((s / t) / (v / u) - 1) > RATIO_TOLERANCE
               for v, s in zip(values, shown) for u, t in zip(values, shown) if v > 0 and u > 0)  # fmt: skip


def money(value: float, currency: str = "USD", *others: float) -> str:
    """$0.04, $0.00031, $1,234.50: cents (or two significant digits below a cent), never in
    exponent notation, and more decimals where `others` (the numbers it is read against) would
    otherwise print the same or in the wrong ratio: $0.0175 against $0.0200, not $0.02 against $0.02;
    $0.0145 against $0.0100, not $0.01 against $0.01 nor $0.02 against $0.01."""
    values = [abs(float(x)) for x in (value, *others) if finite(x)]
    small = min((v for v in values if v > 0), default=1.0)
    decimals = 2 if small >= 0.01 else 1 - math.floor(math.log10(small))
    while decimals < 12 and _misread(values, decimals):
        decimals += 1
    text = f"{abs(float(value)):,.{decimals}f}" if float(value) != 0 else "0"
    symbol = SYMBOLS.get(currency)
    return f"{symbol}{text}" if symbol else f"{text} {currency}"


DURATION_TOLERANCE = 0.01  # durations read against each other keep their ratio to within this share


def duration(seconds: float, *others: float) -> str:
    """'10 h 2 min', '3 min 5 s', '4.2 s': hours and minutes for what lasts hours, never '3.61e+04 s'. Under a
    minute, more decimals where `others` (the durations it is read against) would otherwise read in another ratio
    than they have: '9.5 s against 11.6 s' for 1.22×, never '9.5 s against 12 s'."""
    if not finite(seconds):
        return "n/a"
    sign, s = ("-" if seconds < 0 else ""), abs(float(seconds))
    if round(s) >= 3600:
        h, m = divmod(round(s / 60), 60)
        return f"{sign}{h} h {m} min" if m else f"{sign}{h} h"
    if round(s) >= 60:
        m, r = divmod(round(s), 60)
        return f"{sign}{m} min {r} s" if r else f"{sign}{m} min"
    values = [s] + [abs(float(x)) for x in others if finite(x) and 0 < abs(float(x)) < 60]
    digits = 2 if s < 10 else 0  # significant digits below 10 s, decimals above
    for extra in range(MAX_DIGITS):
        shown = [float(f"{v:.{2 + extra}g}") if v < 10 else round(v, extra) for v in values]
        if all(b > 0 and abs((a / b) / (v / u) - 1) <= DURATION_TOLERANCE
               for v, a in zip(values, shown) for u, b in zip(values, shown)):  # fmt: skip
            break
    text = plain(s, digits + extra) if s < 10 else f"{s:.{extra}f}"
    return f"{sign}{text} s"


def side(low: float, high: float, reference: float, goal: str = "max") -> str:
    """'better' when the whole interval lies on the goal's side of `reference`, 'worse' when on the
    other, 'unclear' when it includes the reference or is not known."""
    if not (finite(low) and finite(high)):
        return "unclear"
    if low > reference:
        return "better" if goal == "max" else "worse"
    if high < reference:
        return "worse" if goal == "max" else "better"
    return "unclear"


def span(low: float, high: float, scale: float = 1.0, *against: float) -> str:
    """'+0.39 to +0.49 points': an interval in the metric's units, with digits enough that neither end prints
    as one of `against` (a margin it is read against) unless it is one."""
    ends = figures(*(x * scale for x in (low, high, *against, *(-a for a in against))), signed=True)
    return f"{ends[0]} to {ends[1]}" + (" points" if scale == 100 else "")


def in_words(what: str, estimate: float, low: float, high: float, confidence: float = 0.95, goal: str = "max",
             scale: float = 1.0, per: str = "per run", why: str = "fewer than 2 seeds") -> str:  # fmt: skip
    """The one vocabulary of a comparison with the baseline. `what`: SPEED (a speedup), COST (a
    cost ratio) or a metric's name (a difference, this hardware - the baseline, judged by the
    metric's `goal`; shares with scale 100 in points).

    '1.57× faster (95% CI 1.21–2.04)', '2× slower (95% CI 1.82–2.22)', 'no clear difference in
    speed (1.5×, 95% CI 0.82–2.73)'; 'cheaper: 0.8× the baseline's cost per run (95% CI ...)';
    'better token accuracy: +0.3 points (95% CI +0.1 to +0.5 points)'. `why`: what a missing interval is
    missing for."""
    level = f"{confidence:.0%} CI"
    known = finite(low) and finite(high)
    if what in (SPEED, SOONER, COST, STEPS):
        if not finite(estimate):
            return f"no {what} measured"
        if what in WAYS:
            better, worse, noun = WAYS[what]
            way = side(low, high, 1.0, "max")
            if way == "better":
                s, lo, hi, _ = figures(estimate, low, high, 1.0)
                return f"{s}× {better} ({level} {lo}–{hi})"
            if way == "worse":
                s, lo, hi, _ = figures(1 / estimate, 1 / high, 1 / low, 1.0)
                return f"{s}× {worse} ({level} {lo}–{hi})"
            s, lo, hi, _ = figures(estimate, low, high, 1.0) if known else (*figures(estimate), "", "", "")
            ci = f"{level} {lo}–{hi}" if known else f"no CI: {why}"
            if what == SPEED:
                return f"no clear difference in speed ({s}× the baseline's speed, {ci})"
            return f"no clear difference in {noun} (speedup {s}×, {ci})"
        way = side(low, high, 1.0, "min")
        c, lo, hi, _ = figures(estimate, low, high, 1.0) if known else (*figures(estimate), "", "", "")
        ci = f"{level} {lo}–{hi}" if known else f"no CI: {why}"
        if what == STEPS:
            if way == "unclear":
                return f"no clear difference in steps ({c}× the baseline's, {ci})"
            return f"{'fewer' if way == 'better' else 'more'} steps: {c}× the baseline's ({ci})"
        if way == "unclear":
            return f"no clear difference in cost ({c}× the baseline's {per}, {ci})"
        return f"{'cheaper' if way == 'better' else 'more expensive'}: {c}× the baseline's cost {per} ({ci})"
    name = what.replace("_", " ")
    way = side(low, high, 0.0, goal)
    bound = amount(low, scale, True).removesuffix(" points")  # the unit once, after the upper bound
    ci = f"{level} {bound} to {amount(high, scale, True)}" if known else "no CI"
    if way == "unclear":
        return f"no clear difference in {name} ({amount(estimate, scale, True)}, {ci})"
    return f"{way} {name}: {amount(estimate, scale, True)} ({ci})"


def devices(row) -> str:
    """What a run trained on, as tables name it: '2 × H100-80GB', with ', FSDP' (', HSDP') when the model was
    sharded."""
    sharded = row.get("strategy") in ("fsdp", "hsdp")
    return f"{int(row['world_size'])} × {row['gpu_type']}{', ' + row['strategy'].upper() if sharded else ''}"
