"""mkdocs hooks (mkdocs.yml `hooks:`): the reference pages are generated on every build from their single sources
(tools/reference.py), and a docs block the tests do not run shows why on the page."""

import re
import sys
from pathlib import Path

from mkdocs.structure.files import File

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools import reference  # noqa: E402

GENERATED = {
    "reference/configuration.md": reference.config_reference,
    "reference/cli.md": reference.cli_reference,
    "reference/api.md": reference.api_reference,
}
# The markers tests/docs_blocks.py reads before a block: the reader sees why a block is not run and what stands in
# for "your script"; the others only steer the tests. Each becomes its own paragraph (a raw HTML comment right
# before a fence would start an HTML block in Markdown).
MARKER = re.compile(reference.MARKER.pattern[:-1] + r"\n", re.M)


def _shown(m: re.Match) -> str:
    kind, text = m.groups()
    if kind == "not-run":
        return f"*Not run by the tests: {text}.*\n\n"
    if kind == "parse-only":
        return f"*Not run by the tests, only read: {text}.*\n\n"
    if kind == "stands-in":
        path, source = (s.strip() for s in text.split("="))
        return f"*The tests run this page with `{source}` as `{path}`.*\n\n"
    return ""


def on_files(files, config):
    for path, make in GENERATED.items():
        files.append(File.generated(config, path, content=make()))
    return files


def on_page_markdown(markdown, page, config, files):
    return MARKER.sub(_shown, markdown)
