"""The plan table: one row per suite x variant x hardware, as the `plan` command and rule show it (a script's
values as it gets them, and the recipe settings it gets not: not_passed)."""

from __future__ import annotations

from hwsweep.contracts.command import as_passed, not_passed, plan_value

COLUMNS = [
    "suite", "variant", "hardware", "gpu_type", "nodes", "devices_per_node", "strategy", "micro_batch", "accumulation",
    "global_batch", "est_memory_gb", "memory_source", "memory_gb", "steps", "epochs", "lr", "precision", "tf32",
    "reproducibility", "comparable", "not_passed", "warnings",
]  # fmt: skip


def plan_rows(matrix) -> list[dict]:
    rows = []
    for cell in matrix.cells:
        for hw in cell.hardware:
            spec = matrix.spec(cell.suite, cell.variant, hw, matrix.seeds[0])
            plan = spec.plan
            # A script's values as it gets them (lr 20 from recipe.args), and the settings it gets none of.
            shown = as_passed(spec)[0] if spec.trainer.kind == "command" else plan.__dict__
            unpassed = not_passed(spec.trainer, spec.recipe.args) if spec.trainer.kind == "command" else []
            row = {"suite": cell.suite, "variant": cell.variant, "hardware": hw} | shown
            row["not_passed"] = " ".join(plan_value(key) for key in unpassed)
            row["warnings"] = "; ".join(plan.warnings + [w for w in matrix.warnings if f": {hw} (" in w and cell.variant in w])
            rows.append({k: row[k] for k in COLUMNS})
    return rows


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def format_table(rows: list[dict], sep: str | None = None, columns: list[str] = COLUMNS) -> str:
    """Aligned text (sep None) or separated values (e.g. sep='\\t')."""
    cells = [columns] + [[_cell(r[c]) for c in columns] for r in rows]
    if sep is not None:
        return "\n".join(sep.join(line) for line in cells) + "\n"
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() for line in cells) + "\n"
