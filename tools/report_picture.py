"""docs/report_landing.png: the landing page of a real report, as the tests' headless Chromium shows it.

    .venv/bin/snakemake --profile profiles/local all && .venv/bin/snakemake --report report.html
    .venv/bin/python tools/report_picture.py report.html docs/report_landing.png

(tests/browser.py is the client; it installs Debian's chromium with apt-get when missing and root.)"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from browser import Browser, ensure_installed  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=950)
    args = parser.parse_args()
    with Browser(ensure_installed(), width=args.width, height=args.height) as b:
        b.open(args.report.resolve().as_uri())
        if not b.until("document.querySelector('#app nav') && document.body.innerText.includes('What the runs show')",
                       timeout=60):  # fmt: skip
            sys.exit(f"{args.report}: the landing page did not render within 60 s")
        b.until("Array.from(document.querySelectorAll('.hw-glance img')).every(i => i.complete && i.naturalWidth > 0)",
                timeout=10)  # the first screen's figures decoded
        b.screenshot(args.png)
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
