"""Aggregating 10,000 run records across 1,000 cells (250 variants x 4 hardware x 10 seeds),
bootstrap included (goal <= 5 s on 2 cores). The reference measured in the same run is a plain
pandas groupby mean/std over the same rows, so the ratio says what the statistics cost.

    .venv/bin/python bench/aggregate_stats.py
"""

import time

import numpy as np
import pandas as pd

from hwsweep.analysis import diagnose, stats

HARDWARE = {"g1": 1, "g2": 2, "g4": 4, "g8": 8}


def synthetic_runs(variants=250, seeds=10, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for v in range(variants):
        for hw, n in HARDWARE.items():
            for s in range(seeds):
                acc = rng.normal(0.9, 0.01)
                rows.append(dict(suite=f"s{v % 10}", variant=f"v{v}", hardware=hw, seed=s, world_size=n, gpu_type="H100-80GB",
                                 train_seconds=100 * (0.1 + 0.9 / n) * rng.normal(1, 0.02), samples_per_second=1000 * n,
                                 startup_seconds=5.0, eval_seconds=1.0, token_accuracy=acc, exact_accuracy=acc - 0.1,
                                 final_loss=rng.normal(0.1, 0.01), global_batch=256, comparable=True, steps=1000,
                                 warmup_steps=10, lr=1e-3, precision="bf16-mixed", tf32=False,
                                 reproducibility="deterministic", data_order="x", torch="2.13", cuda="12", nccl="2"))  # fmt: skip
    return pd.DataFrame(rows)


def main():
    runs = synthetic_runs()
    margins = {"token_accuracy": 0.005, "exact_accuracy": 0.005, "final_loss": 0.01}
    settings = stats.Settings(metrics=tuple(margins), margins=margins)
    t0 = time.perf_counter()
    ref = runs.groupby(stats.CELL)[list(settings.metrics)].agg(["mean", "std"])
    reference = time.perf_counter() - t0
    t0 = time.perf_counter()
    summary = stats.seed_summary(runs, settings)
    equivalence = stats.equivalence(runs, "g1", settings)
    diagnosis = diagnose.diagnose(runs, equivalence, "g1")
    speedup = stats.speedup(runs, "g1", settings)
    stats.comparison(summary, equivalence, speedup, "g1", settings)
    ours = time.perf_counter() - t0
    assert len(summary) == len(ref) == 1000 and len(diagnosis) >= 0
    print(f"{len(runs)} records, {len(summary)} cells: full statistics {ours:.2f} s "
          f"(goal <= 5 s); plain groupby mean/std {reference * 1e3:.1f} ms; ratio {ours / reference:.0f}x")


if __name__ == "__main__":
    main()
