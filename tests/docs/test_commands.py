"""The commands the pages give, as a literal follower types them: each page's `hwsweep` and `snakemake` are the venv's
(`.venv/bin/…`, as Getting started writes them) unless the page said first where they come from (an activated
environment, a package installed); a snakemake that trains names the local profile (or its timing slot), so two
runs never share the cores; and the examples, all run from the repository's root, write results of their own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from docs_blocks import SHELL, blocks, pages

# A command's start: the line's, or after `&&`, `||`, `;`, `|` (`/usr/bin/time -f FORMAT` before it aside).
COMMAND = re.compile(r"(?:^|&&|\|\||;|\|)\s*(?:/usr/bin/time -f (?:\"[^\"]*\"|'[^']*'|\S+) )?"
                     r"(?P<prefix>[\w./-]*?)(?P<tool>hwsweep|snakemake)(?=\s|$)(?P<args>[^;&|#]*)")  # fmt: skip
SUBSTITUTION = re.compile(r'"?\$\(([^)]*)\)"?')  # a command's output as an argument: a command of its own
VENV = ".venv/bin/"
GUIDE = "docs/getting_started.md"
# A line that tells the reader where bare commands come from: an activated environment, one on PATH, an install.
SAYS_WHERE = re.compile(r"\bactivate\b|on your PATH|\bpip install\b")


def page_files() -> list[Path]:
    return pages() + sorted(REPO.glob("examples/*/README.md"))


def commands(page: Path) -> list[tuple[int, str, str, list[str]]]:
    """(line, prefix, tool, arguments) of each hwsweep or snakemake a page's shell blocks run (a console block's
    `$ ` lines only)."""
    out = []
    for block in blocks(page):
        if block.lang not in SHELL:
            continue
        for i, line in enumerate(block.text.split("\n")):
            if block.lang == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            line = line.split("  #")[0]
            for text in [SUBSTITUTION.sub("OUTPUT", line), *SUBSTITUTION.findall(line)]:
                for m in COMMAND.finditer(text):
                    out.append((block.line + 1 + i, m["prefix"], m["tool"], m["args"].split()))
    return out


def venv_problems(page: Path) -> list[str]:
    """The commands of a page a follower of it could not run as written: a bare name before the page says where
    it comes from, or a prefix other than the venv's."""
    lines = page.read_text().split("\n")
    said = next((n for n, line in enumerate(lines, 1) if SAYS_WHERE.search(line)), None)
    problems = []
    for line, prefix, tool, _ in commands(page):
        if prefix == "" and (said is None or said > line):
            problems.append(f"{page.relative_to(REPO)}:{line}: bare `{tool}`: write {VENV}{tool}, as {GUIDE} does")
        elif prefix not in ("", VENV):
            problems.append(f"{page.relative_to(REPO)}:{line}: `{prefix}{tool}`: write {VENV}{tool}")
    return problems


def profile_problems(page: Path) -> list[str]:
    """A page's snakemake commands that run jobs (any target but `status`; a report or a dry run runs none) without
    the local profile or its one timing slot: their training runs would share the cores."""
    from snakemake.cli import get_argument_parser

    parser = get_argument_parser()
    problems = []
    for line, _, tool, argv in commands(page):
        if tool != "snakemake":
            continue
        args = parser.parse_args(argv)
        if args.report or args.dryrun or args.unlock or (args.targets or ["all"]) == ["status"]:
            continue
        if not args.profile and "timing_slot=1" not in argv:
            problems.append(f"{page.relative_to(REPO)}:{line}: snakemake without --profile profiles/local")
    return problems


def test_every_page_says_where_hwsweep_and_snakemake_come_from():
    found = [c for page in page_files() for c in commands(page)]
    assert len(found) > 40 and sum(prefix == VENV for _, prefix, _, _ in found) > 20
    assert [p for page in page_files() for p in venv_problems(page)] == []


@pytest.fixture
def page(tmp_path, monkeypatch) -> Path:
    """A page of a repository in tmp_path."""
    monkeypatch.setattr("docs_blocks.REPO", tmp_path)
    monkeypatch.setattr("test_commands.REPO", tmp_path)
    return tmp_path / "page.md"


def test_a_bare_command_on_a_page_that_never_says_where_it_comes_from_is_named(page):
    page.write_text("# A page\n\n```bash\nhwsweep plan --configfile my.yaml\n.venv/bin/snakemake -n all\n```\n\n"
                    "```console\n$ snakemake --cores 1 -f status && .venv/bin/hwsweep plan\nhwsweep: a message\n```\n")
    assert venv_problems(page) == [f"page.md:4: bare `hwsweep`: write .venv/bin/hwsweep, as {GUIDE} does",
                                   f"page.md:9: bare `snakemake`: write .venv/bin/snakemake, as {GUIDE} does"]
    page.write_text("# A page\n\nIn the environment you activate:\n\n```bash\nhwsweep plan\nsnakemake -n all\n```\n")
    assert venv_problems(page) == []  # said once, above


def test_every_snakemake_that_trains_names_the_local_profile():
    assert [p for page in page_files() for p in profile_problems(page)] == []


def test_a_snakemake_that_trains_without_the_profile_is_named(page):
    page.write_text("```bash\n.venv/bin/snakemake --cores all --configfile my.yaml all\n"
                    ".venv/bin/snakemake --cores 1 -f status\n.venv/bin/snakemake --report report.html\n"
                    ".venv/bin/snakemake --cores 2 results/s/default/cpu1/seed0/train.json\n```\n")
    assert profile_problems(page) == ["page.md:2: snakemake without --profile profiles/local",
                                      "page.md:5: snakemake without --profile profiles/local"]


def test_the_examples_run_from_one_folder_write_results_of_their_own():
    """The pages run every example (and the default config) from the repository's root: results/SUITE/ of one must
    not be another's."""
    owners: dict[str, list[str]] = {}
    for config in [REPO / "config/config.yaml", *sorted(REPO.glob("examples/*/config.yaml"))]:
        for suite in yaml.safe_load(config.read_text())["suites"]:
            owners.setdefault(suite, []).append(str(config.relative_to(REPO)))
    assert {s: o for s, o in owners.items() if len(o) > 1} == {} and len(owners) >= 4
