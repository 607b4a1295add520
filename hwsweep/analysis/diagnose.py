"""Why a hardware's result is not equivalent to the baseline: what differs between the runs'
recorded plans and provenance, in the order the usual suspects break parity (seed 000's list)."""

from __future__ import annotations

import pandas as pd

from hwsweep.analysis.stats import untestable

CHECKLIST = [
    ("global batch", ["global_batch", "comparable"]),
    ("schedule", ["steps", "warmup_steps", "lr"]),
    ("precision/TF32", ["precision", "tf32"]),
    ("reproducibility level", ["reproducibility"]),
    ("parallel strategy", ["strategy"]),
    ("data order", ["data_order"]),
    ("software versions", ["torch", "cuda", "nccl"]),
    ("device type", ["gpu_type"]),
]
NOTHING = "nothing differs in plan or provenance: seed or reduction-order noise; try reproducibility: strict or more seeds"


def _values(runs: pd.DataFrame, column: str) -> str:
    if column not in runs:
        return "?"
    return "/".join(sorted({str(v) for v in runs[column]}))


def differences(runs: pd.DataFrame, base: pd.DataFrame) -> list[str]:
    found = []
    for label, columns in CHECKLIST:
        pairs = [(c, _values(runs, c), _values(base, c)) for c in columns]
        diffs = [f"{c} {mine} vs {theirs}" for c, mine, theirs in pairs if mine != theirs]
        if diffs:
            found.append(f"{label}: {', '.join(diffs)}")
    return found


def _state(row) -> str:
    return "shifted" if row.get("verdict") == "equivalent" and row.get("shifted") else row["verdict"]


def diagnose(runs: pd.DataFrame, equivalence: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """One row per suite x variant x hardware that is not equivalent on some metric, or
    equivalent but shifted inside the margin (a shift has a cause too). A metric that could not be tested
    (identical repeats, a bound on every seed: stats.untestable) is diagnosed by why, never as seed noise
    that more seeds would settle."""
    rows = []
    cells = {key: frame for key, frame in runs.groupby(["suite", "variant", "hardware"], sort=False)}
    shifted = equivalence["shifted"].fillna(False).astype(bool) if "shifted" in equivalence else False
    open_cells = equivalence[(equivalence.verdict != "equivalent") | shifted]
    for (suite, variant, hw), sub in open_cells.groupby(["suite", "variant", "hardware"], sort=False):
        found = differences(cells[(suite, variant, hw)], cells[(suite, variant, baseline)])
        notes = sub.note if "note" in sub else pd.Series([""] * len(sub))
        why = list(dict.fromkeys(n for n in notes if untestable(n)))
        tested = any(not untestable(n) for n in notes)  # some metric was tested and is still open
        rows.append({"suite": suite, "variant": variant, "hardware": hw,
                     "metrics": ", ".join(f"{m} {_state(r)}" for m, (_, r) in zip(sub.metric, sub.iterrows())),
                     "diagnosis": "; ".join(found + ([NOTHING] if tested and not found else []) + why)})  # fmt: skip
    return pd.DataFrame(rows, columns=["suite", "variant", "hardware", "metrics", "diagnosis"])
