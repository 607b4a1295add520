"""The landing page's first screen (issue 68), from synthetic suites' own tables (no runs, no browser): one row per
compared cell with its verdict, speed and cost with their intervals, time to target; many hardware, identical
repeats, a target nobody reached, runs not done, a suite on one hardware; the page's text through docutils as the
report renders it. The browser's view is tests/report/test_report.py's."""

import base64
import html
import math
import re
import types

import numpy as np
import pandas as pd
import pytest
from jinja2 import Environment
from test_pages_simulation import SETTINGS, suite

from hwsweep.analysis import stats, variants
from hwsweep.analysis import target as tt
from hwsweep.report import glance, glance_figure, landing
from hwsweep.report.tables import VERDICTS

TEMPLATE = landing.Path(__file__).resolve().parents[2] / "workflow" / "report" / "workflow.rst"


def tables_of(runs: pd.DataFrame, ttt: pd.DataFrame | None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """comparison, equivalence and time-to-target tables as aggregate makes them."""
    prices = {h: 1.0 for h in runs.hardware.unique()}
    equivalence = stats.equivalence(runs, "cpu1", SETTINGS)
    speed = stats.speedup(runs, "cpu1", SETTINGS, prices)
    comparison = stats.comparison(stats.seed_summary(runs, SETTINGS), equivalence, speed, "cpu1", SETTINGS)
    return comparison, equivalence, tt.compare(ttt, "cpu1", {}) if ttt is not None else pd.DataFrame()


def many(n: int) -> pd.DataFrame:
    """Runs of n hardware x 3 seeds, each hardware its own speed and accuracy shift."""
    rng = np.random.default_rng(n)
    rows = []
    for h in range(n):
        for s in range(3):
            seconds = 100 / (1 + h % 4) * math.exp(rng.normal(0, 0.02))
            rows.append(dict(suite="s", variant="a", hardware=f"cpu{h + 1}", seed=s, world_size=1 + h % 4,
                             gpu_type="cpu", train_seconds=seconds, samples_per_second=1000 / seconds,
                             startup_seconds=1.0, eval_seconds=0.1, flops_per_step=1e9, steps=100,
                             token_accuracy=0.9 + 0.002 * (h % 3) + rng.normal(0, 0.001),
                             final_loss=0.3 + rng.normal(0, 0.002)))  # fmt: skip
    return pd.DataFrame(rows)


def rows_of(table: str) -> dict[str, dict[str, tuple[str, str]]]:
    """The table's rows by their first cell's name: data-kind -> (bold answer, small detail), unescaped."""
    out = {}
    for tr in re.findall(r"<tr>(.*?)</tr>", table, flags=re.S):
        cells = re.findall(r'<td[^>]*data-kind="(\w+)"[^>]*>(?:<b>(.*?)</b>)?(?:<small>(.*?)</small>)?(.*?)</td>', tr)
        if cells:
            found = {k: (html.unescape(b or rest), html.unescape(small)) for k, b, small, rest in cells}
            out[found["hardware"][0]] = found
    return out


def numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"\d+(?:\.\d+)?", text)]


def close(printed: float, true: float) -> bool:
    """A number printed to at least three significant digits (words.figures) against the table's value."""
    return abs(printed - true) <= 0.006 * abs(true) + 1e-12


@pytest.mark.parametrize("case", range(6))
def test_each_compared_cell_reads_verdict_speed_and_cost_with_their_intervals(case):
    """Random suites: each hardware against the baseline has its verdict (mark and word), its speedup and cost ratio
    as the comparison table holds them with their intervals, the direction only where the interval is one-sided."""
    comparison, equivalence, target = tables_of(*suite(np.random.default_rng(68 + case), repeats=False))
    table = glance.suite_table(comparison, equivalence, target)
    rows = rows_of(table)
    several = comparison.variant.nunique() > 1
    for r in comparison.itertuples():
        row = rows[f"{r.variant} · {r.hardware}" if several else r.hardware]
        if r.baseline:
            assert row["verdict"][0] == f"{VERDICTS['baseline'][0]} baseline"
            continue
        mark = row["verdict"][0].split()[0]
        assert mark in (VERDICTS[r.verdict][0], VERDICTS["shifted"][0]) and r.verdict in row["verdict"][0], row
        for kind, value, low, high, up, down in (("speed", r.speedup, r.speedup_ci_low, r.speedup_ci_high, "faster",
                                                  "slower"),
                                                 ("cost", r.cost_ratio, r.cost_ratio_ci_low, r.cost_ratio_ci_high,
                                                  "more expensive", "cheaper")):  # fmt: skip
            main, detail = row[kind]
            text = main + " " + detail
            printed = numbers(text.replace("95% CI", ""))
            inverse = "slower" in main  # printed as its inverse, like the sentences
            shown = [1 / value, 1 / high, 1 / low] if inverse else [value, low, high]
            assert all(close(p, t) for p, t in zip(printed, shown)) and len(printed) == 3, (kind, text, shown)
            if low > 1:
                assert up in main, (kind, main)
            elif high < 1:
                assert down in main, (kind, main)
            else:
                assert main == "no clear difference", (kind, main)


def test_many_hardware_give_one_row_each_baseline_first_and_a_figure_of_every_one():
    comparison, equivalence, _ = tables_of(many(12), None)
    table = glance.suite_table(comparison, equivalence, pd.DataFrame())
    rows = rows_of(table)
    assert len(rows) == 12 and next(iter(rows)) == "cpu1"
    assert "Time to" not in table  # no targets: no column for them
    png = base64.b64decode(glance_figure.forest(comparison, equivalence).split(",", 1)[1])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    height = int.from_bytes(png[20:24], "big")
    few = base64.b64decode(glance_figure.forest(*tables_of(many(2), None)[:2]).split(",", 1)[1])
    assert height > 2 * int.from_bytes(few[20:24], "big")  # a row each, not squeezed into one size


def test_identical_repeats_claim_no_direction_and_say_why():
    runs, ttt = suite(np.random.default_rng(5), repeats=True)
    comparison, equivalence, target = tables_of(runs, ttt)
    rows = rows_of(glance.suite_table(comparison, equivalence, target))
    compared = [r for name, r in rows.items() if r["verdict"][0] != f"{VERDICTS['baseline'][0]} baseline"]
    assert compared
    for row in compared:
        assert row["verdict"][0] == "? inconclusive" and row["verdict"][1], row
        for kind in ("speed", "cost"):
            main, detail = row[kind]
            if main == "no clear difference":  # no interval: why not, in the words of the table's note
                assert "CI" in detail, row
        assert not any(w in row["target"][0] for w in ("sooner", "later")), row


def test_a_target_nobody_reached_says_so_and_is_not_the_first_column():
    runs, ttt = suite(np.random.default_rng(7), repeats=False)
    ttt = ttt.assign(reached=False, steps_to_target=5000.0, steps_to_target_low=5000.0)
    comparison, equivalence, target = tables_of(runs, ttt)
    table = glance.suite_table(comparison, equivalence, target)
    heads = re.findall(r"<th>(.*?)(?:<small>|</th>)", table)
    assert heads[-1].startswith("Time to 0.9 token accuracy") and heads[1].startswith("Same results")
    rows = rows_of(table)
    for name, row in rows.items():
        if row["verdict"][0].endswith("baseline"):
            assert row["target"] == ("–", "not reached by step 5000"), row
        else:
            assert row["target"][0] == "? not reached" and "by step 5000" in row["target"][1], row


def test_runs_not_done_are_rows_that_say_so():
    comparison, equivalence, _ = tables_of(many(3), None)
    table = glance.suite_table(comparison, equivalence, pd.DataFrame(),
                               expected=[("a", f"cpu{i}") for i in range(1, 5)])  # fmt: skip
    assert re.search(r'<b>cpu4</b></td><td colspan="3" data-kind="missing">– no finished runs', table), table


def test_names_are_escaped():
    comparison, equivalence, _ = tables_of(many(2).replace({"cpu2": "<i>x&y</i>"}), None)
    table = glance.suite_table(comparison, equivalence, pd.DataFrame())
    assert "<i>" not in table and "&lt;i&gt;x&amp;y&lt;/i&gt;" in table


class Matrix:
    """What landing.write asks of hwsweep.plan.matrix.Matrix."""

    def __init__(self, cells: dict):
        self.cells, self.statistics, self.compare = cells, {"confidence": 0.95}, {}
        self.evaluation = types.SimpleNamespace(kind="none")

    @property
    def suites(self):
        return list(self.cells)

    def runs(self, suite):
        return [types.SimpleNamespace(suite=suite, variant=v, hardware=h, seed=s, run_dir=f"/nonexistent/{v}{h}{s}")
                for v, h in self.cells[suite] for s in range(3)]  # fmt: skip


def rendered(tmp_path, monkeypatch, cells: dict, complete: dict) -> str:
    """The landing page as the report renders it: Jinja, then docutils' HTML body."""
    from docutils.core import publish_parts

    monkeypatch.chdir(tmp_path)
    rst = landing.write(Matrix(cells), complete, TEMPLATE, tmp_path / "landing.rst")
    config = types.SimpleNamespace(config={"seeds": [0, 1, 2], "baseline": "cpu1"})
    text = Environment().from_string(rst.read_text(encoding="utf-8")).render(snakemake=config)
    return publish_parts(text, writer_name="html", settings_overrides={"report_level": 5})["html_body"]


def test_the_first_screen_holds_every_suite_before_the_words(tmp_path, monkeypatch):
    """Twelve hardware (a figure whose data URI is longer than a line docutils takes), a suite on one hardware with
    variants, a failed suite: each has its block before 'In words', the tables parse as HTML tables."""
    results = tmp_path / "results"
    comparison, equivalence, _ = tables_of(many(12), None)
    for name, frames in {"big": (comparison, equivalence)}.items():
        (results / name).mkdir(parents=True)
        frames[0].to_csv(results / name / "comparison.csv", index=False)
        frames[1].to_csv(results / name / "equivalence.csv", index=False)
    runs = many(1)
    shift = 0.05 + np.random.default_rng(1).normal(0, 0.002, len(runs))
    runs = pd.concat([runs, runs.assign(variant="b", token_accuracy=runs.token_accuracy + shift)])
    one = tables_of(runs, None)
    (results / "one").mkdir()
    one[0].to_csv(results / "one" / "comparison.csv", index=False)
    one[1].to_csv(results / "one" / "equivalence.csv", index=False)
    contrast = variants.variants(runs, "a", SETTINGS)
    contrast.to_csv(results / "one" / "variants.csv", index=False)
    cells = {"big": [("a", f"cpu{i}") for i in range(1, 13)], "one": [("a", "cpu1"), ("b", "cpu1")],
             "broken": [("default", "cpu1")]}  # fmt: skip
    page = rendered(tmp_path, monkeypatch, cells, {"big": True, "one": True, "broken": False})
    assert "System Message" not in page and "line-length" not in page
    first, words = page.split("In words", 1)
    assert first.count('class="hw-glance"') == 3 and first.count('<table class="hw-first">') == 2
    assert len(re.findall(r"<tr>", first.split("Suite one")[0])) == 13  # the head and 12 hardware
    overall = str(contrast.overall.iloc[0])
    assert re.search(f"<b>b against a</b>.*<b>{VERDICTS[overall][0]} {overall}</b>", first.split("Suite one")[1]), first
    assert "<b>No results</b> — of 3 runs 3 missing" in first
    assert first.index("Suite big") < first.index("Suite one") < first.index("Suite broken")
    assert "Suite big" in words and "Overall against cpu1" in words  # the sentences stay, as the detail
