"""A suite's CSV tables as the trackers show them: rows of cells (W&B's tables), Markdown (TensorBoard's text)."""

from __future__ import annotations

import csv
from pathlib import Path

TEXT_ROWS = 200  # rows of a table shown as text in TensorBoard


def read_table(path: Path) -> tuple[list[str], list[list]]:
    """A CSV table's header and rows, numbers as floats."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))

    def cell(text: str):
        try:
            return float(text)
        except ValueError:
            return text

    return (rows[0] if rows else []), [[cell(c) for c in row] for row in rows[1:]]


def markdown_table(path: Path) -> str:
    """A CSV table as Markdown (what TensorBoard's text view renders), its first TEXT_ROWS rows."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        return "(empty table)"
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1 : TEXT_ROWS + 1]]
    if len(rows) > TEXT_ROWS + 1:
        lines.append(f"\n({len(rows) - 1 - TEXT_ROWS} more rows in {Path(path).name})")
    return "\n".join(lines)
