"""The shell and YAML blocks of README.md and docs/*.md, and how tests/docs/test_docs.py runs them.

A page's blocks run in order, each in a fresh bash from the folder the page works in (a copy of the repository's
workflow, configs, profiles and examples). In that bash:
- `hwsweep` runs for real (a fake `sinfo`/`squeue` answers as a cluster would, the slurm profile is installed
  unless the page installs it); `plan`, `detect` and `resources` with the same arguments, files and profile
  as one before are answered from that one (HWSWEEP_DOCS_CACHE);
- `snakemake` is recorded and, after every page has run, dry-run (`-n`) once per config, profile and folder
  options, with every target the docs name for them together; one with `--report` is parsed by snakemake's own
  argument parser only (a report needs finished runs);
- what cannot run here (`pip`, `python`, `torchrun`, `nvidia-smi`, `conda`, servers, `mkdocs`) is checked as far as
  it can be without running it (a script or module it names exists) and recorded: a block that reaches one must
  carry `<!-- not-run: REASON -->` on the line before it, and a block with that marker must hold something that
  was not run as written (else the marker is stale).

Markers, an HTML comment on the line before a block (the site shows not-run, parse-only and stands-in):
- `<!-- not-run: REASON -->`  the block, or part of it, cannot run in the tests, and why;
- `<!-- parse-only: REASON -->`  nothing in the block runs, `hwsweep` included (it would take minutes): its
  commands are recorded, its snakemake commands parsed by snakemake's parser, not dry-run;
- `<!-- file: NAME -->`       a YAML block is also written to NAME in the page's folder for the blocks after it;
- `<!-- yaml-under: KEY -->`   a YAML block is a fragment of the config under KEY (dotted), e.g. trainer;
- `<!-- invalid: REASON -->`   a YAML block the schema must refuse (an example of a refusal);
- `<!-- stands-in: PATH = REPO_PATH -->`  before the page runs, REPO_PATH is copied to PATH (relative to the
  page's folder), e.g. `../my-project = examples/plain_ddp` for a page about "your script".
A page's folder holds `my.yaml`, a copy of config/config.yaml, unless a block writes its own.
A ```console block is `$ command` lines, each followed by lines its output must contain (`…` matches anything).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tools.reference import MARKER  # noqa: E402

SHELL = ("bash", "sh", "console")
FENCE = re.compile(r"^```([A-Za-z0-9_-]*)\s*$")
# Commands the tests cannot run as written: they install, need a GPU or a cluster's own tools, serve until stopped,
# run for minutes, or copy from another machine. A block reaching one needs a not-run marker.
STUBS = ("pip", "pip3", "python", "python3", "torchrun", "nvidia-smi", "conda", "mlflow", "tensorboard", "wandb",
         "mkdocs", "sbatch", "srun", "scancel", "rsync", "scp")  # fmt: skip


@dataclass
class Block:
    page: str  # path relative to the repository
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    markers: dict = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    return [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown page, with the markers on the lines right before it."""
    lines = path.read_text().split("\n")
    out, i = [], 0
    while i < len(lines):
        opened = FENCE.match(lines[i].strip()) if lines[i].lstrip().startswith("```") else None
        if not opened:
            i += 1
            continue
        indent = len(lines[i]) - len(lines[i].lstrip())
        start, i = i, i + 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:])
            i += 1
        markers, j = {}, start - 1
        while j >= 0 and (m := MARKER.match(lines[j].strip())):
            markers[m.group(1)] = m.group(2)
            j -= 1
        out.append(Block(str(path.relative_to(REPO)), start + 1, opened.group(1), "\n".join(body), markers))
        i += 1
    return out


def script(block: Block) -> str:
    """The bash the block runs as: `.venv/bin/X` is the X on PATH (the test's), `/usr/bin/time -f ...` dropped."""
    text = block.text
    if block.lang == "console":
        text = "\n".join(f"{line[2:]} || true" for line in text.split("\n") if line.startswith("$ "))
    text = re.sub(r"(?<![\w/])\.venv/bin/", "", text)
    text = re.sub(r"/usr/bin/time -f (\"[^\"]*\"|'[^']*'|\S+) ", "", text)
    return "set -eo pipefail\n" + text + "\n"


def expected_output(block: Block) -> list[tuple[str, list[str]]]:
    """A console block's (command, lines its output must contain)."""
    out: list[tuple[str, list[str]]] = []
    for line in block.text.split("\n"):
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif line.strip() and out:
            out[-1][1].append(line.strip())
    return out


def shows(output: str, expected: str) -> bool:
    """Whether an output line holds the expected line (its parts around `…` in order)."""
    parts = [re.escape(p.strip()) for p in expected.split("…")]
    pattern = re.compile(".*?".join(parts))
    return any(pattern.search(line) for line in output.split("\n"))


def preamble(tool: Path, log: Path, parse_only: bool = False) -> str:
    """Bash functions that stand for the recorded and stubbed commands (the real hwsweep is on PATH, except in a
    parse-only block)."""
    record = f'{shlex.quote(sys.executable)} {shlex.quote(str(tool))} {shlex.quote(str(log))}'
    lines = [f'snakemake() {{ {record} snakemake "$@"; }}']
    lines += [f'{name}() {{ {record} stub {name} "$@"; }}' for name in STUBS + (("hwsweep",) if parse_only else ())]
    if not parse_only:
        lines.append(f'hwsweep() {{ {record} hwsweep "$@"; }}')
    return "\n".join(lines) + "\n"


# hwsweep's commands that only read: the same arguments, files and profile give the same answer
CACHED = ("plan", "detect", "resources")


def hwsweep(args: list[str]) -> int:
    """The real hwsweep (the one on PATH), or a read-only command's answer from the cache."""
    import hashlib
    import shutil
    import subprocess

    key = None
    if args[:1] and args[0] in CACHED and os.environ.get("HWSWEEP_DOCS_CACHE"):
        read = [Path(a) for a in args if Path(a).is_file()] + [Path("config/config.yaml")]
        profile = args[args.index("--profile") + 1] if "--profile" in args else os.environ.get("SNAKEMAKE_PROFILE")
        if profile:
            read += [Path(profile, "config.yaml"), Path(os.environ.get("XDG_CONFIG_HOME", ""), "snakemake", profile,
                                                        "config.yaml")]  # fmt: skip
        text = json.dumps(args) + "".join(p.read_text() if p.is_file() else f"-{p}" for p in read)
        key = Path(os.environ["HWSWEEP_DOCS_CACHE"], hashlib.sha256(text.encode()).hexdigest() + ".json")
        if key.is_file():
            answer = json.loads(key.read_text())
            sys.stdout.write(answer["stdout"])
            sys.stderr.write(answer["stderr"])
            return answer["rc"]
    run = subprocess.run([shutil.which("hwsweep"), *args], capture_output=True, text=True)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    if key is not None:
        key.write_text(json.dumps({"stdout": run.stdout, "stderr": run.stderr, "rc": run.returncode}))
    return run.returncode


def main(argv: list[str]) -> int:
    """Called by the preamble's functions: append what was asked to the log (checking a stub's script exists);
    hwsweep itself runs."""
    log, kind, *args = argv
    if kind == "hwsweep":
        return hwsweep(args)
    entry = {"cwd": os.getcwd(), "kind": kind, "argv": args, "problem": None}
    if kind == "stub" and args[0].startswith("python"):
        rest = args[1:]
        if rest[:1] == ["-m"] and len(rest) > 1:
            import importlib.util

            if importlib.util.find_spec(rest[1]) is None:
                entry["problem"] = f"python -m {rest[1]}: no such module"
        elif rest and not rest[0].startswith("-") and not Path(rest[0]).is_file():
            entry["problem"] = f"python {rest[0]}: no such script here ({os.getcwd()})"
    with open(log, "a") as f:
        f.write(json.dumps(entry) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
