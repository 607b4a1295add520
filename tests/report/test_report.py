"""The report as a reader gets it: built after a --keep-going sweep in which one suite fails (the plain-DDP
example's, conftest's plain_ddp_swept), and opened in headless Chromium (Debian's package, installed by the test
setup when missing and root)."""

import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest
from browser import Browser, chromium
from conftest import example_snakemake

from hwsweep.analysis import words

# Debian's chromium writes nothing to the console for a clean report; the snakemake template's own
# libraries log nothing either. Any error is ours.
SETTLE = 0.4  # seconds at most for React to render a menu after a click


@pytest.mark.slow
def test_report_builds_after_a_failed_suite_and_says_why(plain_ddp_swept):
    folder, sweep, proc = plain_ddp_swept  # suite plain_ddp runs, every run of suite broken fails
    assert sweep.returncode != 0, "the broken suite must fail the sweep"
    assert (folder / "results/plain_ddp/comparison.csv").exists(), sweep.stderr[-3000:]
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = (folder / "report.html").read_text()
    assert "results/plain_ddp/tables/comparison.html" in html and "results/broken/" not in html
    landing = (folder / ".snakemake/hwsweep/landing.rst").read_text()
    assert "**Suite broken** — the script refuses a flag\n\n**No results** — of 4 runs 4 failed." in landing
    assert "train.py: error: unrecognized arguments: --bogus=1 (logs/broken/default/cpu1/seed0/train.log)" in landing
    # Leaving the failed suite out is the report's business only: the next `all` retries its runs.
    again = example_snakemake(folder, None, "plain_ddp", "-n", "--cores", "2", "all")
    assert re.search(r"rule train:.*?suite=broken", again.stdout, flags=re.S), again.stdout[-2000:]


def _click(b: Browser, text: str) -> None:
    """Click the report menu's link whose text is `text` (as a reader would); on once the menu changed."""
    before = b.evaluate("document.querySelector('#app nav').innerText")
    found = b.evaluate(f"""(() => {{ const a = Array.from(document.querySelectorAll('#app nav a'))
        .find(a => a.innerText.trim() === {text!r}); if (!a) return false; a.click(); return true; }})()""")
    assert found, f"no menu entry {text!r} in: {b.evaluate('document.querySelector(`#app nav`).innerText')}"
    b.until(f"document.querySelector('#app nav').innerText !== {json.dumps(before)}", timeout=SETTLE)


def _until_shown(b: Browser, path: str) -> None:
    """Wait until the content pane shows the report's item `path` (its image decoded, or its page's iframe)."""
    b.until(f"""(() => {{ const uri = results[{path!r}].data_uri;
        const pane = document.querySelector('#app > div').children[2];
        const img = pane.querySelector('img'); const frame = pane.querySelector('iframe');
        return (img && img.src === uri && img.naturalWidth > 0) || (frame && frame.src === uri); }})()""")


def _shown(b: Browser) -> dict:
    """What the content pane shows: an image or an iframe, by its data URI."""
    return b.evaluate("""(() => { const pane = document.querySelector('#app > div').children[2];
        const img = pane.querySelector('img'); const frame = pane.querySelector('iframe');
        return {img: img ? img.src : null, width: img ? img.naturalWidth : 0, frame: frame ? frame.src : null}; })()""")


@pytest.mark.slow
def test_report_in_a_browser(plain_ddp_swept, tmp_path):
    folder, _, proc = plain_ddp_swept
    assert proc.returncode == 0, proc.stderr[-3000:]
    binary = chromium()
    shots = Path(os.environ.get("HWSWEEP_SCREENSHOTS", tmp_path / "screenshots"))  # to look at them
    shots.mkdir(parents=True, exist_ok=True)
    comparison = pd.read_csv(folder / "results/plain_ddp/comparison.csv")
    equivalence = pd.read_csv(folder / "results/plain_ddp/equivalence.csv")
    with Browser(binary) as b:
        b.open((folder / "report.html").as_uri())
        assert b.until("document.querySelector('#app nav') && document.body.innerText.includes('What the runs show')")
        b.screenshot(shots / "landing.png")

        # The headline is on the landing page and says what comparison.csv and equivalence.csv say.
        items = b.evaluate("Array.from(document.querySelectorAll('#what-the-runs-show li, #what-the-runs-show p'))"
                           ".map(e => e.innerText)")  # fmt: skip
        speed = pd.read_csv(folder / "results/plain_ddp/speedup.csv").set_index("hardware")
        for r in comparison[~comparison.baseline].itertuples():
            # faster / slower / no clear difference as the interval says (words.in_words owns the wording)
            pace = words.in_words(words.SPEED, r.speedup, r.speedup_ci_low, r.speedup_ci_high)
            assert any(t.startswith(f"{r.hardware}: {pace}") for t in items), (pace, items)
            # The overall verdict of each hardware is on the landing page, not only in the table.
            assert any(t.startswith("Overall against") and f"{r.hardware} {r.verdict}" in t for t in items), items
            # A speedup measured under contention is flagged exactly where speedup.csv says so.
            line = next(t for t in items if t.startswith(f"{r.hardware}: {pace}"))
            contended = isinstance(speed.loc[r.hardware, "contention"], str)
            assert ("Measured under contention" in line) == contended and ("timing: exclusive" in line) == contended
        for r in equivalence.itertuples():
            word = {"equivalent": "equivalent to", "different": "differs from",
                    "inconclusive": "inconclusive"}[r.verdict]  # fmt: skip
            said = [t for t in items if r.hardware in t and r.metric.replace("_", " ") in t and word in t]
            assert said, (r.hardware, r.metric, r.verdict, items)
            overall = comparison.set_index("hardware").loc[r.hardware, "verdict"]
            if overall == "equivalent":
                assert not any(r.hardware in t and ("differs" in t or "inconclusive" in t) for t in items
                               if not t.startswith("Overall"))  # the overall line names every hardware's verdict
        assert any(t.startswith("No results — of 4 runs 4 failed") and "unrecognized arguments: --bogus=1" in t
                   for t in items), items  # fmt: skip
        # Both hardware compute in fp32: no precision warning anywhere (the plan's warnings column is empty).
        assert "precision" not in b.evaluate("document.body.innerText").lower().split("how the runs were made")[0]
        assert pd.read_csv(folder / "results/plan.tsv", sep="\t").warnings.isna().all()

        # Every item renders under its own heading: images load, HTML tables open inline, and the view
        # is the item clicked (not the previous one).
        results = b.evaluate("results")
        categories = b.evaluate("categories")
        assert set(categories) == {"plain_ddp", "All suites"}
        # Job parameters shown beside each item are a line or two, never the plan or the metrics.
        blobs = {p: r["job_properties"]["params"] for p, r in results.items() if len(r["job_properties"]["params"]) > 400}
        assert not blobs, blobs
        seen = 0
        for category, subcategories in categories.items():
            _click(b, category)
            for subcategory, paths in subcategories.items():
                if len(subcategories) > 1:
                    _click(b, subcategory)
                rows = b.evaluate("Array.from(document.querySelectorAll('#app nav table tbody tr'))"
                                  ".map(r => r.querySelector('td').innerText.trim())")  # fmt: skip
                assert len(rows) == len(paths), (category, subcategory, rows)
                for i, label in enumerate(rows):
                    path = next(p for p in paths if label in results[p]["labels"].values())
                    entry = results[path]
                    if not entry["mime_type"].startswith(("image/", "text/html")):
                        assert entry["data_uri"].startswith("data:") and len(entry["data_uri"]) > 40  # a download
                        continue
                    b.evaluate(f"document.querySelectorAll('#app nav table tbody tr')[{i}]"
                               ".querySelector('a[iconname=eye]').click()")  # fmt: skip
                    _until_shown(b, path)
                    shown = _shown(b)
                    if entry["mime_type"].startswith("image/"):
                        assert shown["img"] == entry["data_uri"] and shown["width"] > 100, (path, shown["img"][:60])
                    else:
                        assert shown["frame"] == entry["data_uri"], path
                        # The iframe's own document, loaded: until its navigation commits it still holds the one
                        # before (about:blank, complete and empty, or the previous item's page).
                        b.frame_until(f"document.URL === {json.dumps(entry['data_uri'])} && document.readyState === 'complete'")
                        cells = b.frame_evaluate("document.querySelectorAll('td').length")
                        assert cells > 0, path
                        if "comparison" in path or "equivalence" in path:
                            marks = b.frame_evaluate("Array.from(document.querySelectorAll('td.verdict'))"
                                                     ".map(td => td.innerText)")  # fmt: skip
                            assert marks and all(re.match(r"^(✓~?|✗|\?|◆|–) \w", m) for m in marks), marks
                        if "speedup" in path and path.endswith(".html"):  # the speedup/cost section's MFU column
                            heads = b.frame_evaluate("Array.from(document.querySelectorAll('th')).map(t => t.innerText)")
                            assert "MFU" in heads and "measured under contention" in heads, heads
                    b.screenshot(shots / f"{seen:02d}-{re.sub(r'[^a-z0-9]+', '-', path.lower())}.png")
                    seen += 1
                if len(subcategories) > 1:
                    _click(b, category)  # back to the category's subcategories
            _click(b, "Results")
        assert seen >= 10
        assert not b.errors, b.errors


FIRST_TABLE = """(() => { const t = document.querySelector('#what-the-runs-show table.hw-first');
    if (!t) return null; const r = t.getBoundingClientRect(), s = t.closest('.hw-scroll').getBoundingClientRect();
    const graph = document.querySelector('#rulegraph'); const h1 = document.querySelector('#what-the-runs-show h1');
    return {top: r.top, bottom: r.bottom, scrollRight: s.right, left: h1.getBoundingClientRect().left,
            graph: graph ? graph.getBoundingClientRect().top : null, width: innerWidth, height: innerHeight,
            rows: Array.from(t.querySelectorAll('tbody tr')).map(tr => Object.fromEntries(
                Array.from(tr.querySelectorAll('td')).map(td => [td.dataset.kind, td.innerText.trim()]))),
            figure: Array.from(document.querySelectorAll('.hw-glance img')).map(i => i.naturalWidth)}; })()"""


def _ratio(text: str) -> tuple[float, float, float]:
    """'1.24×, 95% CI 0.0761–20.3' or '1.57× faster\\n95% CI 1.41–1.73' -> the three numbers."""
    found = [float(x) for x in re.findall(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?", text.replace("95% CI", ""))]
    assert len(found) == 3, text
    return found[0], found[1], found[2]


@pytest.mark.slow
def test_first_screen_answers_each_suite_without_scrolling(plain_ddp_swept, tmp_path):
    """Issue 68: at 1400×950 the first table is whole above the fold (snakemake's job graph below it), and for each
    compared cell it holds the verdict, the speedup with its interval and the cost ratio with its interval as
    comparison.csv has them; at phone width the page starts at its left edge, the table scrolls inside the page."""
    folder, _, proc = plain_ddp_swept
    assert proc.returncode == 0, proc.stderr[-3000:]
    binary = chromium()
    shots = Path(os.environ.get("HWSWEEP_SCREENSHOTS", tmp_path / "screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    comparison = pd.read_csv(folder / "results/plain_ddp/comparison.csv")
    for width, height, name in ((1400, 950, "first_screen_wide.png"), (400, 850, "first_screen_phone.png")):
        with Browser(binary, width=width, height=height) as b:
            b.open((folder / "report.html").as_uri())
            assert b.until("document.querySelector('table.hw-first') && document.querySelector('#rulegraph svg, "
                           "#rulegraph canvas') && Array.from(document.querySelectorAll('.hw-glance img'))"
                           ".every(i => i.complete && i.naturalWidth > 0)", timeout=20)  # fmt: skip
            b.screenshot(shots / name)
            seen = b.evaluate(FIRST_TABLE)
            assert not b.errors, b.errors
            assert seen["left"] >= 0 and seen["scrollRight"] <= width + 1, seen  # nothing cut off at the left
            assert all(w > 100 for w in seen["figure"]) and len(seen["figure"]) == 1, seen  # plain_ddp's; broken has none
            if width == 1400:
                assert 0 <= seen["top"] and seen["bottom"] <= height, seen  # the whole table above the fold
                assert seen["graph"] >= height, seen  # the job graph off the first screen
            else:
                assert seen["top"] < height, seen  # the table starts on the phone's first screen
        rows = {r["hardware"].split("\n")[0]: r for r in seen["rows"]}
        for r in comparison.itertuples():
            row = rows[r.hardware]
            if r.baseline:
                assert row["verdict"] == "◆ baseline", row
                continue
            assert r.verdict in row["verdict"] and row["verdict"].split()[0] in ("✓", "✓~", "✗", "?"), row
            speed = _ratio(row["speed"])
            shown = (1 / r.speedup, 1 / r.speedup_ci_high, 1 / r.speedup_ci_low) if "slower" in row["speed"] else \
                (r.speedup, r.speedup_ci_low, r.speedup_ci_high)  # fmt: skip
            assert all(abs(p - t) <= 0.006 * t for p, t in zip(speed, shown)), (row["speed"], shown)
            cost = _ratio(row["cost"])
            shown = (r.cost_ratio, r.cost_ratio_ci_low, r.cost_ratio_ci_high)
            assert all(abs(p - t) <= 0.006 * t for p, t in zip(cost, shown)), (row["cost"], shown)
