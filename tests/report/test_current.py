"""Whether an "All suites" table is current (hwsweep.report.current), and the landing line for one that is not."""

import os

import yaml

from hwsweep.plan.config import resolve
from hwsweep.report import current, landing


def _write(path, text, mtime):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (mtime, mtime))
    return path


def test_a_combined_table_older_than_a_suite_table_or_with_other_suites_is_stale(tmp_path):
    table = _write(tmp_path / "comparison.csv", "suite,hardware\na,x\nb,x\n", 2000)
    a = _write(tmp_path / "a/comparison.csv", "suite\na\n", 1000)
    b = _write(tmp_path / "b/comparison.csv", "suite\nb\n", 1000)
    assert current.why_stale(table, [a, b], "suite", ["a", "b"]) is None
    assert current.why_stale(tmp_path / "none.csv", [a, b], "suite", ["a", "b"]) is None  # nothing to leave out

    c = _write(tmp_path / "c/comparison.csv", "suite\nc\n", 3000)  # a suite run after the table was combined
    assert current.why_stale(table, [a, b, c], "suite", ["a", "b", "c"]) == f"{table} was written before {c}"
    os.utime(c, (1000, 1000))  # made earlier, but not combined into it
    assert current.why_stale(table, [a, b, c], "suite", ["a", "b", "c"]) == f"{table} lacks suite c"
    assert current.why_stale(table, [a], "suite", ["a"]) == f"{table} holds suite b, which the config no longer has"
    # Names that may have no rows (a comparison whose sides share no hardware): only extra ones count.
    assert current.why_stale(table, [a, b], "suite", ["a", "b", "c"], every=False) is None


def test_a_table_made_from_an_out_of_date_table_is_out_of_date(tmp_path):
    table = _write(tmp_path / "comparison.csv", "suite\na\nb\n", 2000)
    a = _write(tmp_path / "a/comparison.csv", "suite\na\n", 1000)
    b = _write(tmp_path / "b/comparison.csv", "suite\nb\n", 1000)
    assert current.why_stale(table, [a, b], "suite", ["a", "b"], outdated=[str(tmp_path / "c/runs.csv")]) is None
    assert current.why_stale(table, [a, b], outdated=[str(b)]) == f"{table} was made from {b}, which is out of date"
    assert current.why_stale(table, [a, b], outdated=[a, b]) == f"{table} was made from {a} and 1 more, all out of date"


def test_the_plan_is_stale_when_it_is_not_this_configs_plan(tmp_path):
    plan = _write(tmp_path / "plan.tsv", "suite\tsteps\ntiny\t60\n", 1000)
    assert current.why_stale(plan, text="suite\tsteps\ntiny\t60\n") is None
    assert current.why_stale(plan, text="suite\tsteps\ntiny\t80\n") == f"{plan} was made from another config"


def test_the_landing_page_names_each_table_left_out_and_leaves_out_a_stale_comparison_across_suites(
    tmp_path, small_config, monkeypatch
):
    small_config["suites"]["other"] = {"overrides": {"model": {"depth": 2}}}
    small_config["compare"] = {"deeper": {"variant": "other/default", "reference": "tiny/default"}}
    matrix = resolve(yaml.safe_load(yaml.safe_dump(small_config)))
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "results/compare.csv", "comparison\ndeeper\n", 1000)  # would be read if it were current
    template = _write(tmp_path / "workflow.rst", "How the runs were made\n", 1000)
    stale = {"results/compare.csv": "results/compare.csv was written before results/other/runs.csv"}
    path = landing.write(matrix, {"tiny": False, "other": False}, template, tmp_path / "landing.rst", stale=stale)
    text = path.read_text()
    assert ("- results/compare.csv was written before results/other/runs.csv: left out of this report; "
            "\\`snakemake all\\`, then the report again, brings it up to date") in text  # fmt: skip
    assert "Comparisons across suites" not in text


def test_a_suite_with_out_of_date_tables_shows_why_instead_of_its_verdicts(tmp_path, small_config, monkeypatch):
    matrix = resolve(yaml.safe_load(yaml.safe_dump(small_config)))
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "results/tiny/comparison.csv", "not read: the suite is out of date\n", 1000)
    template = _write(tmp_path / "workflow.rst", "How the runs were made\n", 1000)
    why = "results/tiny/comparison.csv is out of date: of the 4 runs suite tiny has now, 4 were trained under another config"
    text = landing.write(matrix, {"tiny": True}, template, tmp_path / "landing.rst", stale_suites={"tiny": why}).read_text()
    assert f"**Suite tiny**\n\n**Out of date** — {why}: left out of this report; \\`snakemake all\\`" in text
