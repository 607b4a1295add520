"""Time to target in the report (issue 23): the headline's sentences, the table page and the figure, from
target_comparison.csv and target_curves.csv (hwsweep.analysis.target). Directions only where an interval
shows one (words.in_words); a comparison with censored runs says how many did not reach the target."""

from __future__ import annotations

import math

import pandas as pd

from hwsweep.analysis.target import seeds_to_flag, smallest_p
from hwsweep.analysis.words import COST, SOONER, STEPS, duration, figures, finite, in_words, money, percent, plain, times
from hwsweep.report.tables import _interval, _num, _td, page, verdict_cell

MAX_TARGET_PANELS = 3  # (metric, variant) rows in the figure
# The fixed-steps figures' notice when every run stopped at its targets (schedule.stop_at: target).
ALL_STOPPED = "every run stopped at its target (schedule.stop_at: target): not available at the fixed steps; see time to target"


def target_name(metric: str, value: float) -> str:
    return f"{plain(value, 6)} {metric.replace('_', ' ')}"


def steps_words(r, confidence: float) -> str:
    """What the steps comparison showed, with the interval it tested: 'the same within ±10% (90% interval
    0.96–1.05×, paired TOST on log steps)', or the difference in words and why it is not shown the same."""
    within, tost = f"±{percent(r['steps_margin'])}", 1 - 2 * (1 - confidence)
    low, high, _, _ = tost_ends(r)
    tested = f"{tost:.0%} interval {low}–{high}×, {r['steps_test']} at the evaluations' resolution"
    if r["steps_verdict"] == "equivalent" and r.get("steps_shifted") is True:  # one verdict: never a ⚠ beside it
        return (f"equivalent, but shifted: {times(r['steps_ratio'], 1.0)} the steps, inside {within} ({tested}; "
                f"shift p = {plain(r['steps_shift_p'], 2)})")  # fmt: skip
    if r["steps_verdict"] == "equivalent":
        return f"the same within {within} ({tested})"
    said = in_words(STEPS, r["steps_ratio"], r["steps_ci_low"], r["steps_ci_high"], confidence)
    if r["steps_verdict"] == "different":
        return f"{said}, beyond {within}"
    why = r.get("note") if isinstance(r.get("note"), str) else ""
    return f"{said}; not shown to be within {within} ({tested})" + (f" — {why}" if why else "")


def median_words(r: dict, prefix: str = "") -> str:
    """A median of steps-to-target, or 'not reached by step 40' where half the runs or more never reached it."""
    median = r.get(f"{prefix}steps_to_target_median", math.nan)
    if finite(median):
        return _num(median)
    censored = r.get(f"{prefix}censored_at_step", math.nan)
    return f"not reached by step {_num(censored)}" if finite(censored) else "not reached"


def sentence(r: dict, baseline: str, confidence: float = 0.95) -> str:
    """'cpu2 reaches 0.99 token accuracy 1.3× sooner (95% CI …); more expensive: 1.2× the baseline's cost to reach
    the target (95% CI …); steps to target: the same within ±10% (90% interval …, paired TOST on log steps …).'"""
    hw, what = r["hardware"], target_name(r["metric"], r["target"])
    shares = (f"in {r['n_reached']:.0f} of {r['n_runs']:.0f} runs against {r['baseline_n_reached']:.0f} of "
              f"{r['baseline_n_runs']:.0f} on {baseline}")  # fmt: skip
    if not isinstance(r.get("steps_test"), str) or not r["steps_test"]:
        why = r.get("note") or "not compared"
        text = f"{hw} reaches {what} {shares}: time, cost and steps to target **{why}**"
    else:
        speed = in_words(SOONER, r["speedup"], r["speedup_ci_low"], r["speedup_ci_high"], confidence)
        cost = r.get("cost_ratio", math.nan)
        cost = (in_words(COST, cost, r["cost_ratio_ci_low"], r["cost_ratio_ci_high"], confidence,
                         per="to reach the target") if finite(cost) else "cost not known (no price per hour)")  # fmt: skip
        speed = f"with {speed}" if speed.startswith("no clear") else speed  # '... reaches 0.99 accuracy with no clear ...'
        text = f"{hw} reaches {what} {speed}; {cost}; steps to target: {steps_words(r, confidence)}"
        mean = r.get("time_to_target_seconds", math.nan)
        if finite(mean):
            money_text = f" and {money(r['cost_to_target'], r['currency'])}" if finite(r.get("cost_to_target")) else ""
            text += f" (mean {duration(mean)}{money_text} to the target)"
    flag = r.get("rcp_flag")
    if isinstance(flag, str) and flag:
        text += (f". ⚠ **Converges {flag}** than {baseline}'s seeds allow (RCP-style check: median {median_words(r)} "
                 f"against {median_words(r, 'baseline_')} steps, p = {plain(r['rcp_p'], 2)}, {r['rcp_method']})")  # fmt: skip
    note = r.get("rcp_note")
    if isinstance(note, str) and note:
        text += f"; the RCP-style check: {note}"
    return text + "."


def sentences(table: pd.DataFrame, confidence: float = 0.95) -> dict[str, list[str]]:
    """Variant -> the time-to-target sentences of every hardware and target (the headline's first)."""
    out: dict[str, list[str]] = {}
    for variant, rows in table.groupby("variant", sort=False):
        base = rows[rows.baseline.astype(bool)]
        if base.empty:
            continue
        baseline = base.hardware.iloc[0]
        said = [f"The baseline {baseline} reaches {target_name(r['metric'], r['target'])} in {r['n_reached']:.0f} "
                f"of {r['n_runs']:.0f} runs." for r in base.to_dict("records") if r["n_reached"] < r["n_runs"]]
        said += [sentence(r, baseline, confidence) for r in rows[~rows.baseline.astype(bool)].to_dict("records")]
        out[variant] = said
    return out


def stopped_sentences(runs: pd.DataFrame) -> dict[str, list[str]]:
    """Variant -> what the fixed-steps comparisons leave out: runs stopped at their targets (schedule.stop_at)."""
    if "stopped_at_step" not in runs:
        return {}
    out = {}
    for variant, rows in runs.groupby("variant", sort=False):
        stopped = rows[rows.stopped_at_step.notna()]
        if len(stopped):
            low, high = (_num(f(stopped.stopped_at_step)) for f in (min, max))
            where = f"step {low}" if low == high else f"steps {low}–{high}"
            out[variant] = [f"{len(stopped)} of {len(rows)} runs stopped at the target (schedule.stop_at: target, "
                            f"{where}): "
                            "final metrics, speedup and cost at the fixed steps are **not available** for them "
                            "(the comparisons below leave them out)."]  # fmt: skip
    return out


NOTE = ("Steps-to-target: known only to the evaluations, after the one before and by the first at or past the target "
        "(steps_to_target_low, steps_to_target); time-to-target likewise, from startups plus measured step times, "
        "periodic evaluation excluded. Every test holds for any placement of the true steps and time inside these "
        "intervals (the t intervals' union over them, the largest p), so a grid coarser than the margin shows no "
        "'same' and the note says how often to evaluate. Runs that never reach the target are censored at their "
        "last evaluation, never dropped: with any such run the steps and time are <b>inconclusive</b> (no average "
        "of the runs that got there). Steps: TOST on log steps at ±steps_margin, paired by seed (Welch with its "
        "smallest df otherwise). RCP-style flag: t-test on log steps, or with censored runs an exact sign test by "
        "seed (from {pairs} shared seeds: with {pairs_less} its smallest p is {p_pairs:.3g}) or else a log-rank "
        "permutation test over every run (from {per} seeds per hardware: with {per_less} each its smallest p is "
        "{p_per:.2g}), both valid under censoring at the same step budget. Identical repeats (every seed the same "
        "curve) are not compared.")


def tost_ends(r: dict) -> list[str]:
    """The steps TOST's interval and the margin's ends as ratios, with digits enough that an end of the one never
    prints as an end of the other."""
    margin = r["steps_margin"]
    return figures(r["steps_tost_ci_low"], r["steps_tost_ci_high"], 1 / (1 + margin), 1 + margin)


def tost_interval(r: dict) -> str:
    """'[0.96, 1.05] in [0.909, 1.1]': the steps TOST's interval beside the margin's ('' where nothing was tested)."""
    if not all(finite(r.get(k)) for k in ("steps_tost_ci_low", "steps_tost_ci_high", "steps_margin")):
        return ""
    low, high, margin_low, margin_high = tost_ends(r)
    return f"[{low}, {high}] in [{margin_low}, {margin_high}]"


def page_html(table: pd.DataFrame, confidence: float = 0.95) -> str:
    tost = f"{1 - 2 * (1 - confidence):.0%}"
    header = ["variant", "hardware", "target", "reached", "steps (median)", "steps ratio [CI]",
              f"steps TOST interval ({tost}) and margin", "steps verdict", "RCP-style flag (p)", "time speedup [CI]",
              "cost ratio [CI]", "note"]  # fmt: skip
    rows = []
    for r in table.to_dict("records"):
        flag = r.get("rcp_flag") if isinstance(r.get("rcp_flag"), str) else ""
        p = f" (p = {plain(r['rcp_p'], 2)})" if finite(r.get("rcp_p", math.nan)) else ""
        rows.append([
            _td(r["variant"], "text"), _td(r["hardware"], "text"), _td(target_name(r["metric"], r["target"]), "text"),
            _td(f"{r['n_reached']} of {r['n_runs']}"), _td(median_words(r)),
            _td(f"{_num(r.get('steps_ratio', math.nan))} {_interval(r.get('steps_ci_low'), r.get('steps_ci_high'))}"),
            _td(tost_interval(r), "text"), verdict_cell(r["steps_verdict"]), _td((flag or "–") + p, "text"),
            _td(f"{_num(r.get('speedup', math.nan))} {_interval(r.get('speedup_ci_low'), r.get('speedup_ci_high'))}"),
            _td(f"{_num(r.get('cost_ratio', math.nan))} "
                f"{_interval(r.get('cost_ratio_ci_low'), r.get('cost_ratio_ci_high'))}"),
            _td(r.get("note") if isinstance(r.get("note"), str) else "", "text"),
        ])  # fmt: skip
    alpha = 1 - confidence
    pairs, per = seeds_to_flag(alpha, True), seeds_to_flag(alpha, False)
    note = NOTE.format(pairs=pairs, pairs_less=pairs - 1, p_pairs=smallest_p(pairs - 1), per=per, per_less=per - 1,
                       p_per=smallest_p(2 * per - 2, per - 1))  # fmt: skip
    return page("Time to target", f"{note} Intervals at {confidence:.0%}, the TOST's at {1 - 2 * alpha:.0%}.", header, rows)


def figure(curves: pd.DataFrame, runs: pd.DataFrame, targets: list, baseline: str, path) -> None:
    """Each target metric against steps (left) and wall-clock seconds (right) per run, the target as a dashed
    line, a censored run's last evaluation marked ×."""
    from hwsweep.report import plots  # matplotlib only here

    plt = plots.plt
    pairs = [(m, v) for m in dict.fromkeys(curves.metric) for v in curves.variant.drop_duplicates()][:MAX_TARGET_PANELS]
    fig, axes = plt.subplots(max(len(pairs), 1), 2, figsize=(plots.MAX_WIDTH, min(2.6 * max(len(pairs), 1) + 0.8,
                                                                                   plots.MAX_HEIGHT)), squeeze=False)  # fmt: skip
    colours = plots.hardware_colours(list(dict.fromkeys([baseline, *curves.hardware])), baseline)
    for (metric, variant), row in zip(pairs, axes):
        sub = curves[(curves.metric == metric) & (curves.variant == variant)]
        for (hw, seed), run in sub.groupby(["hardware", "seed"], sort=False):
            for ax, x in zip(row, ("step", "seconds")):
                ax.plot(run[x], run.value, color=colours[hw], lw=1, alpha=0.8, label=hw if seed == sub.seed.min() else None)
            done = runs[(runs.metric == metric) & (runs.variant == variant) & (runs.hardware == hw) & (runs.seed == seed)]
            if len(done) and not done.reached.astype(bool).all():  # censored for at least one target line
                last = run.iloc[-1]
                for ax, x in zip(row, ("step", "seconds")):
                    ax.plot(last[x], last.value, "x", color=colours[hw], ms=8)
        for ax, x in zip(row, ("steps", "seconds from the start (periodic evaluation excluded)")):
            for value in (v for m, v in targets if m == metric):
                ax.axhline(value, ls="--", color="grey", lw=1)
            ax.set_xlabel(x)
            ax.set_ylabel(metric.replace("_", " "))
        row[0].set_title(f"{variant}: against steps", fontsize=9)
        row[1].set_title(f"{variant}: against time (× a target not reached)", fontsize=9)
        row[0].legend(fontsize=7)
    fig.tight_layout()
    plots._save(fig, path)

