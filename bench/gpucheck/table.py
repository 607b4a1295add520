"""gpu_check.json as the markdown table docs/benchmarks.md takes (torch-free)."""

from __future__ import annotations

from gpucheck.device import line as device_line

COUNTED = ("pass", "fail", "info", "skipped", "error")


def summary(result: dict) -> dict:
    rows = [r for s in result["sections"] for r in s["rows"]]
    return {status: sum(r["status"] == status for r in rows) for status in COUNTED} | {
        "sections_not_ok": [s["key"] for s in result["sections"] if s["status"] != "ok"]
    }


def _cell(text) -> str:
    return str(text if text is not None else "").replace("|", "\\|").replace("\n", " ")


def markdown(result: dict) -> str:
    smoke = " (--smoke: a code-path check at tiny sizes, its figures mean nothing)" if result["smoke"] else ""
    device = result.get("device") or {}
    head = [
        f"GPU check{smoke}: {device_line(device) if device else 'device not read'}; {result['started']}, commit "
        f"{result.get('git_commit') or '?'}, {result.get('seconds', 0):.0f} s in all (`bench/gpu_check.py`).",
        "",
        "| section | check | measured | goal | result |",
        "|---|---|---|---|---|",
    ]
    body, lines = [], []
    for section in result["sections"]:
        for row in section["rows"]:
            measured = row.get("shown") or ""
            if row["status"] in ("skipped", "error") and not measured:
                measured = row.get("detail", "")
            body.append(f"| {_cell(section['title'])} | {_cell(row['name'])} | {_cell(measured)} | "
                        f"{_cell(row.get('goal'))} | {row['status']} |")  # fmt: skip
        if not section["rows"]:
            body.append(f"| {_cell(section['title'])} | (none) | {_cell(section['line'])} | | {section['status']} |")
        if section["status"] != "ok":
            lines.append(f"- {section['title']}: **{section['status']}**: {section['line']}")
        lines += [f"- {section['title']}: {note}" for note in section.get("notes", [])]
    details = [f"- {s['title']}, {r['name']}: {r['detail']}" for s in result["sections"] for r in s["rows"]
               if r.get("detail")]  # fmt: skip
    counts = result.get("summary") or summary(result)
    tail = ["", ", ".join(f"{counts[k]} {k}" for k in COUNTED) + "."]
    return "\n".join(head + body + tail + ([""] + lines if lines else []) + ["", "Details:", ""] + details) + "\n"
