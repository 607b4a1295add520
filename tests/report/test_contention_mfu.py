"""MFU and throughput from the records to runs.csv, the speedup table and the headline; speedups measured under
contention flagged by name with the advice (fixed tables, no runs)."""

import math

import pandas as pd
import pytest

from hwsweep.analysis import stats
from hwsweep.contracts.records import PARTS, SPEED_COLUMNS, STARTUP_COLUMNS, RunRecord, run_row
from hwsweep.report import headline, tables

SETTINGS = stats.Settings(metrics=("acc",), margins={"acc": 0.01}, primary=("acc",))


def _runs(contended: dict | None = None) -> pd.DataFrame:
    """cpu1 (baseline) and cpu2, three seeds each; `contended`: (hardware, seed) -> reason."""
    rows = []
    for seed in range(3):
        for hw, n, t, mfu in (("cpu1", 1, 10.0 + seed, 0.20), ("cpu2", 2, 6.0 + seed, 0.15)):
            rows.append(dict(suite="s", variant="v", hardware=hw, seed=seed, world_size=n, gpu_type="cpu",
                             train_seconds=t, samples_per_second=100 / t, samples_per_second_per_device=100 / t / n,
                             flops_per_step=1e9, tflops_per_device=mfu * 0.1, mfu=mfu + 0.01 * seed, acc=0.9,
                             startup_seconds=2.0, eval_seconds=0.1,
                             contended=(contended or {}).get((hw, seed), "")))  # fmt: skip
    return pd.DataFrame(rows)


def _record(**changes) -> RunRecord:
    spec = {"hardware": {"gpu_type": "cpu"}, "trainer": {"kind": "builtin"}}
    fields = dict(status="complete", suite="s", variant="v", hardware="cpu2", seed=0, trainer="builtin", spec=spec,
                  plan={"world_size": 2}, metrics={}, curves={}, train_seconds=5.0, startup_seconds=3.0,
                  wall_seconds=9.0, samples_per_second=10.0, data_order={"sampler": "global-order"}, segments=[],
                  restarts=0, resumed_from_step=None, samples_per_second_per_device=5.0, flops_per_step=2e9,
                  tflops_per_device=0.004, mfu=0.03, startup_parts=dict(zip(PARTS, (1.0, 0.5, 0.25, 1.0, 0.25))),
                  provenance={"contention": {"other_runs": 1, "load_1m": 0.5, "cpus_allowed": 2}})  # fmt: skip
    return RunRecord(**(fields | changes))


def test_runs_csv_rows_carry_mfu_throughput_startup_parts_and_the_contention_verdict():
    row = run_row(_record(), None, [])
    assert {c: row[c] for c in SPEED_COLUMNS} == {"samples_per_second_per_device": 5.0, "flops_per_step": 2e9,
                                                  "tflops_per_device": 0.004, "mfu": 0.03}  # fmt: skip
    assert [row[c] for c in STARTUP_COLUMNS] == [1.0, 0.5, 0.25, 1.0, 0.25]
    assert row["contended_by"] == 1 and row["contended"] == "1 other hwsweep run(s) on the node"
    clean = run_row(_record(provenance={"contention": {"other_runs": 0, "load_1m": 1.0, "cpus_allowed": 2}},
                            startup_parts=None), None, [])  # fmt: skip
    assert clean["contended"] == "" and all(clean[c] is None for c in STARTUP_COLUMNS)


def test_speedup_table_carries_mfu_per_hardware_and_names_contended_cells():
    runs = _runs({("cpu2", 1): "1 other hwsweep run(s) on the node"})
    sp = stats.speedup(runs, "cpu1", SETTINGS).set_index("hardware")
    assert sp.loc["cpu1", "mfu"] == pytest.approx(0.21) and sp.loc["cpu2", "mfu"] == pytest.approx(0.16)
    assert sp.loc["cpu2", "tflops_per_device"] == pytest.approx(0.015)
    assert sp.loc["cpu2", "contention"] == "cpu2: 1 of 3 runs (1 other hwsweep run(s) on the node)"
    assert sp.loc["cpu1", "contention"] == ""
    # A contended baseline taints every speedup computed against it.
    sp = stats.speedup(_runs({("cpu1", 0): "load 5 on 2 allowed CPU(s)"}), "cpu1", SETTINGS).set_index("hardware")
    assert sp.loc["cpu2", "contention"] == "cpu1: 1 of 3 runs (load 5 on 2 allowed CPU(s))"
    summary = stats.seed_summary(_runs(), SETTINGS).set_index("hardware")
    assert summary.loc["cpu2", "mfu"] == pytest.approx(0.16) and summary.loc["cpu1", "startup_seconds"] == 2.0


def _comparison(runs: pd.DataFrame) -> pd.DataFrame:
    speed = stats.speedup(runs, "cpu1", SETTINGS)
    return stats.comparison(stats.seed_summary(runs, SETTINGS), pd.DataFrame(), speed, "cpu1", SETTINGS)


def test_headline_gives_mfu_and_flags_a_speedup_measured_under_contention():
    clean = headline.suite_headline(_comparison(_runs()), pd.DataFrame())["v"][-1]
    assert clean.startswith("cpu2: 1.58× faster (95% CI") and "MFU 0.16 (0.015 TFLOP/s per device) against MFU 0.21" in clean
    assert "contention" not in clean
    flagged = headline.suite_headline(_comparison(_runs({("cpu2", 2): "2 other hwsweep run(s) on the node"})),
                                      pd.DataFrame())["v"][-1]  # fmt: skip
    assert "**Measured under contention** (cpu2: 1 of 3 runs (2 other hwsweep run(s)" in flagged
    assert "`timing: exclusive`" in flagged


def test_speedup_page_shows_mfu_and_the_contention_mark():
    speed = stats.speedup(_runs({("cpu2", 0): "load 9 on 2 allowed CPU(s)"}), "cpu1", SETTINGS)
    speed = pd.read_csv(pd.io.common.StringIO(speed.to_csv(index=False)))  # as the tables job reads it
    page = tables.speedup_page(speed)
    assert "<th>MFU</th>" in page and "<th>TFLOP/s per device</th>" in page
    assert "⚠ cpu2: 1 of 3 runs (load 9 on 2 allowed CPU(s))" in page and "timing: exclusive" in page
    assert '<td class="num">0.21</td>' in page  # the baseline's MFU, rounded to 2 digits


def test_a_record_without_contention_reads_as_clean():
    assert not headline.flagged(math.nan) and not headline.flagged(None) and headline.flagged("cpu2: 1 of 3")


def test_time_breakdown_stacks_the_startup_parts_and_shows_a_command_s_startup_whole(tmp_path):
    from hwsweep.report import plots

    summary = stats.seed_summary(_runs().assign(**{c: 0.4 for c in STARTUP_COLUMNS}), SETTINGS)
    summary.loc[summary.hardware == "cpu2", STARTUP_COLUMNS] = math.nan  # cpu2: a command, not broken down
    layers = {name: values for name, values, _ in plots.time_layers(summary)}
    assert list(layers)[:5] == [f"startup: {p}" for p in PARTS] and "startup (not broken down)" in layers
    cpu1, cpu2 = (summary.hardware == "cpu1").to_numpy(), (summary.hardware == "cpu2").to_numpy()
    assert layers["startup: imports"][cpu1] == pytest.approx(0.4) and layers["startup: imports"][cpu2] == 0
    assert layers["startup (not broken down)"][cpu2] == 2.0 and layers["startup (not broken down)"][cpu1] == 0
    total = sum(layers.values())
    assert total[cpu2] == pytest.approx(2.0 + summary.train_seconds[cpu2].iloc[0] + 0.1)
    plots.time_breakdown(summary, "cpu1", tmp_path / "time.png")
    assert (tmp_path / "time.png").stat().st_size > 1000
    before = stats.seed_summary(_runs(), SETTINGS).drop(columns=STARTUP_COLUMNS, errors="ignore")
    plain = {name for name, _, _ in plots.time_layers(before)}
    assert plain == {"startup", "train", "eval"}  # tables written before the parts: one startup bar
