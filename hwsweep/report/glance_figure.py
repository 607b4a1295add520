"""The landing page's small forest figure (issue 68), beside the first-screen table: per hardware (and variant)
against its baseline, each primary metric's difference as a share of its margin with the TOST interval, against
the shaded margin band (inside it: equivalent), and the speedup with its interval against 1, on a log scale.
Marker shape per metric and a word per verdict in the table beside it, so it reads printed in grey. Returned as a
data URI: the landing page is one text and carries no files."""

from __future__ import annotations

import base64
import math
from io import BytesIO

import pandas as pd

from hwsweep.analysis.words import finite, side
from hwsweep.report.plots import DPI, VERDICT_STYLE, plt
from hwsweep.report.tables import hardware_order, in_order

CLIP = 3.0  # margins: a difference beyond is drawn to the edge with an arrow (the table has its number)
SPEED_LIMITS = (1 / 16, 16)  # the speed axis at most; beyond, an arrow at the edge
MARKERS = ["o", "s", "D", "^", "v", "P"]
SPEED_COLOURS = {"better": "tab:green", "worse": "tab:red", "unclear": "tab:orange"}
WIDTH = 4.0  # inches: beside the table at 1400 px, below it on a narrow page
SHARPNESS = 2  # pixels per CSS pixel: sharp on high-density screens and in print


def _rows(comparison: pd.DataFrame) -> pd.DataFrame:
    base = comparison[comparison.baseline.astype(bool)]
    order = hardware_order(comparison, str(base.hardware.iloc[0]) if len(base) else "")
    return in_order(comparison, order)[lambda f: ~f.baseline.astype(bool)]


def _clipped(ax, low: float, high: float, y: float, limits: tuple[float, float], colour: str, lw: float) -> None:
    """An interval drawn inside `limits`, an arrow head where it runs past one."""
    a, b = max(low, limits[0]), min(high, limits[1])
    if a < b:
        ax.plot([a, b], [y, y], color=colour, lw=lw, solid_capstyle="butt", alpha=0.8)
    for end, edge, mark in ((low, limits[0], "<"), (high, limits[1], ">")):
        if (end < edge) if mark == "<" else (end > edge):
            ax.plot(edge, y, marker=mark, color=colour, ms=5, ls="none")


TICKS = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 0.67, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 4, 8, 16)
COARSE = (1 / 16, 1 / 4, 1, 4, 16)


def _speed_ticks(low: float, high: float) -> list[float]:
    """Three or four ticks a reader names: halves and doubles, finer steps on a short axis, fours on a long one."""
    ticks = [t for t in TICKS if low <= t <= high]
    while len(ticks) > 4:
        thinner = [t for t in ticks if t in COARSE or math.log2(t).is_integer()] if len(ticks) > 7 else ticks[::2]
        ticks = thinner if len(thinner) < len(ticks) else ticks[::2]
        if 1 not in ticks:
            ticks = sorted({*ticks, 1})
    return ticks


def _tick(x: float) -> str:
    """'2×', '0.8×', '1/16×' (a power of two below one as its fraction: shorter than 0.0625)."""
    return f"1/{1 / x:g}×" if x < 0.5 and math.log2(x).is_integer() else f"{x:g}×"


def forest(comparison: pd.DataFrame, equivalence: pd.DataFrame, confidence: float = 0.95) -> str:
    """The figure as a data:image/png URI; '' where nothing is compared (one hardware, or no rows)."""
    rows = _rows(comparison)
    if rows.empty:
        return ""
    several = rows.variant.nunique() > 1
    labels = [f"{v} · {h}" if several else str(h) for v, h in zip(rows.variant, rows.hardware)]
    primary = equivalence[equivalence.primary.astype(bool) & equivalence.margin.notna()] if len(equivalence) else \
        equivalence  # fmt: skip
    metrics = list(dict.fromkeys(primary.metric)) if len(primary) else []
    height = 0.95 + 0.3 * len(rows) + (0.25 if metrics else 0)
    fig, (left, right) = plt.subplots(1, 2, figsize=(WIDTH, height), sharey=True, layout="constrained",
                                      gridspec_kw={"width_ratios": [1.15, 1]})  # fmt: skip
    tost = 100 - 2 * (100 - confidence * 100)
    left.axvspan(-1, 1, color="tab:green", alpha=0.15, lw=0)
    left.axvline(0, color="black", lw=0.7)
    for k, metric in enumerate(metrics):
        offset = (k - (len(metrics) - 1) / 2) * min(0.22, 0.6 / len(metrics))
        sub = primary[primary.metric == metric].set_index(["variant", "hardware"])
        for y, key in enumerate(zip(rows.variant, rows.hardware)):
            if key not in sub.index:
                continue
            r = sub.loc[key]
            state = "shifted" if r.verdict == "equivalent" and bool(r.shifted) else r.verdict
            colour = VERDICT_STYLE.get(state, ("", "grey"))[1]
            m = float(r.margin)
            if finite(r.tost_ci_low) and finite(r.tost_ci_high) and m > 0:
                _clipped(left, r.tost_ci_low / m, r.tost_ci_high / m, y + offset, (-CLIP, CLIP), colour, 2.2)
            if finite(r.difference) and m > 0:
                x = max(-CLIP, min(CLIP, r.difference / m))
                left.plot(x, y + offset, marker=MARKERS[k % len(MARKERS)], color=colour, mec="black", mew=0.5, ms=5,
                          ls="none")  # fmt: skip
    left.set_xlim(-CLIP - 0.2, CLIP + 0.2)
    left.set_xticks([-CLIP, -1, 0, 1, CLIP], [f"−{CLIP:g}", "−1", "0", "+1", f"+{CLIP:g}"], fontsize=7)
    left.set_title(f"results: difference ÷ margin\n({tost:g}% TOST; band ±1: equivalent)", fontsize=8)
    left.set_yticks(range(len(labels)), labels, fontsize=8)
    left.set_ylim(len(labels) - 0.5, -0.5)
    values = [v for r in rows.itertuples() for v in (r.speedup, r.speedup_ci_low, r.speedup_ci_high) if finite(v)
              and v > 0]  # fmt: skip
    low = max(SPEED_LIMITS[0], min([1.0, *values]) / 1.25)
    high = min(SPEED_LIMITS[1], max([1.0, *values]) * 1.25)
    right.axvline(1, color="black", lw=0.7)
    for y, r in enumerate(rows.itertuples()):
        if not (finite(r.speedup) and r.speedup > 0):
            right.text(math.sqrt(low * high), y, "no timing", ha="center", va="center", fontsize=7, color="grey")
            continue
        colour = SPEED_COLOURS[side(r.speedup_ci_low, r.speedup_ci_high, 1.0, "max")]
        if finite(r.speedup_ci_low) and finite(r.speedup_ci_high):
            _clipped(right, r.speedup_ci_low, r.speedup_ci_high, y, (low, high), colour, 2.2)
        right.plot(min(max(r.speedup, low), high), y, marker="o", color=colour, mec="black", mew=0.5, ms=5)
    right.set_xscale("log")
    right.set_xlim(low / 1.05, high * 1.05)
    right.set_xticks(_speed_ticks(low, high), [_tick(x) for x in _speed_ticks(low, high)])
    right.xaxis.set_minor_formatter(plt.NullFormatter())
    right.tick_params(axis="x", labelsize=7)
    right.set_title(f"speed vs baseline\n({confidence:.0%} CI; right: faster)", fontsize=8)
    for ax in (left, right):
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(axis="y", length=0)
    if metrics:
        handles = [plt.Line2D([], [], marker=MARKERS[k % len(MARKERS)], color="white", mec="black", mew=0.6, ms=5,
                              ls="none", label=m.replace("_", " ")) for k, m in enumerate(metrics)]  # fmt: skip
        fig.legend(handles=handles, loc="outside lower center", ncol=min(3, len(handles)), frameon=False, fontsize=7,
                   handletextpad=0.2, columnspacing=0.8)  # fmt: skip
    buffer = BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI * SHARPNESS)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def width_px() -> int:
    """The figure's width on the page in CSS pixels (its PNG holds SHARPNESS times as many)."""
    return round(WIDTH * DPI)
