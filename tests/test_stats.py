"""Statistics on fixed data with known answers."""

import pandas as pd
import pytest

from hwsweep import stats


def test_two_gpu_example_from_seed_003():
    # 1 GPU 25 h -> 2 GPUs 14 h: 1.79x, 0.89 efficiency, +12% GPU-hours.
    out = stats.known_speedup(25, 14, 1, 2)
    assert out["speedup"] == pytest.approx(1.786, abs=1e-3)
    assert out["efficiency"] == pytest.approx(0.893, abs=1e-3)
    assert out["gpu_hours_ratio"] == pytest.approx(1.12, abs=1e-3)


def _runs():
    rows = []
    for seed, (t1, t2, acc1, acc2) in enumerate([(25, 14, 0.90, 0.91), (26, 13, 0.92, 0.90), (24, 15, 0.91, 0.92)]):
        for hw, t, acc, n in (("g1", t1, acc1, 1), ("g2", t2, acc2, 2)):
            rows.append(dict(suite="s", variant="v", hardware=hw, seed=seed, train_seconds=t, world_size=n,
                             samples_per_second=1000 / t, token_accuracy=acc, exact_accuracy=acc / 2,
                             final_loss=1 - acc, gpu_type="x", startup_seconds=1.0, eval_seconds=0.5))  # fmt: skip
    return pd.DataFrame(rows)


def test_speedup_is_paired_by_seed_and_summary_is_per_hardware():
    comp = stats.comparison(_runs(), baseline="g1").set_index("hardware")
    expected = (25 / 14 + 26 / 13 + 24 / 15) / 3
    assert comp.loc["g2", "speedup"] == pytest.approx(expected)
    assert comp.loc["g2", "efficiency"] == pytest.approx(expected / 2)
    assert comp.loc["g2", "gpu_hours_ratio"] == pytest.approx(2 / expected)
    assert comp.loc["g1", "speedup"] == 1.0 and bool(comp.loc["g1", "baseline"])
    assert comp.loc["g2", "token_accuracy_mean"] == pytest.approx(0.91)
    assert comp.loc["g1", "token_accuracy_std"] == pytest.approx(0.01)
    assert comp.loc["g2", "n_seeds"] == 3


def test_a_missing_seed_is_left_out_of_the_pairing():
    runs = _runs()
    runs = runs[~((runs.hardware == "g2") & (runs.seed == 1))]
    comp = stats.comparison(runs, baseline="g1").set_index("hardware")
    assert comp.loc["g2", "n_pairs"] == 2 and comp.loc["g2", "n_seeds"] == 2
    assert comp.loc["g2", "speedup"] == pytest.approx((25 / 14 + 24 / 15) / 2)
