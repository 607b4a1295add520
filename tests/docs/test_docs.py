"""The documentation: the site builds with warnings as errors, its references are generated from their sources
(every config key with a description and an example that validates), the README stays short and runs what CI
runs, and every shell and YAML block of README.md and docs/ is exercised (tests/docs_blocks.py says how)."""

import copy
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import BIN, REPO
from docs_blocks import SHELL, Block, blocks, expected_output, pages, preamble, script, shows
from fake_slurm import fake_sinfo

sys.path.insert(0, str(REPO))
from tools import reference  # noqa: E402

from hwsweep.plan.config import Validator, load_schema  # noqa: E402
from hwsweep.plan.config.suites import _merge  # noqa: E402
from hwsweep.plan.config.wording import _message  # noqa: E402

README_LINES = 120


def test_every_config_key_has_a_description_and_an_example():
    keys = reference.flat(reference.walk())
    assert len(keys) > 150  # the walk reaches every section, task and model family, and evaluation's command
    assert reference.problems(reference.walk()) == []


def test_a_key_without_a_description_or_an_example_is_named():
    schema = copy.deepcopy(load_schema())
    lr = schema["$defs"]["recipe"]["properties"]["optimizer"]["properties"]["lr"]
    del lr["description"], lr["examples"]
    del schema["$defs"]["hardware"]["properties"]["nodes"]["examples"]
    assert reference.problems(reference.walk(schema)) == [
        "recipe.optimizer.lr: no description in hwsweep/schemas/config.schema.yaml",
        "recipe.optimizer.lr: no examples in hwsweep/schemas/config.schema.yaml",
        "hardware.<name>.nodes: no examples in hwsweep/schemas/config.schema.yaml",
    ]


def test_every_example_validates_where_it_belongs():
    assert reference.validate_examples() == []
    # an example outside its key's range, or under a family it does not belong to, is named
    schema = copy.deepcopy(load_schema())
    schema["$defs"]["recipe"]["properties"]["schedule"]["properties"]["steps"]["examples"] = [0]
    schema["$defs"]["models"]["hrm"]["properties"]["h_cycles"]["examples"] = ["two"]
    found = reference.validate_examples(reference.walk(schema), schema)
    assert sorted(line.split(":")[0] for line in found) == ["recipe.model.h_cycles", "recipe.schedule.steps"], found


def test_the_config_reference_shows_every_key_with_its_facts():
    page = reference.config_reference()
    for key in reference.flat(reference.walk()):
        assert f"`{key.name}`" in page, key.name
    # one key in full: description, type, default, allowed values and its example as a config fragment
    stop_at = page.split("### `recipe.schedule.stop_at`")[1].split("###")[0]
    assert "steps: train every step. target: stop once" in stop_at
    assert '**Default:** `"steps"`' in stop_at and "**Allowed:** `steps`, `target`" in stop_at
    assert "```yaml\nrecipe:\n  schedule: {stop_at: target}\n```" in stop_at
    observe = page.split("### `trainer.observe`")[1].split("###")[0]
    assert "```yaml\ntrainer: {observe: flag}\n```" in observe


def test_the_cli_and_api_references_come_from_the_code():
    cli = reference.cli_reference()
    for command in ("plan", "detect", "resources", "profile", "profile install", "init", "workflow"):
        assert f"## `hwsweep {command}`" in cli, command
    assert "--show-commands" in cli and "--account" in cli
    from hwsweep import runtime

    api = reference.api_reference()
    assert "## `runtime.init(" in api and "### `Run.loader(" in api
    assert runtime.Run.loader.__doc__.strip().split("\n")[0] in api


def test_the_docs_site_builds_with_warnings_as_errors(tmp_path):
    site = tmp_path / "site"
    built = subprocess.run([str(BIN / "mkdocs"), "build", "--strict", "--site-dir", str(site)], cwd=REPO,
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert built.returncode == 0, built.stderr[-4000:]
    for page in ("index.html", "getting_started/index.html", "reference/configuration/index.html",
                 "reference/cli/index.html", "reference/api/index.html", "troubleshooting/index.html"):
        assert (site / page).is_file(), page
    config = (site / "reference/configuration/index.html").read_text()
    assert "recipe.schedule.stop_at" in config and "trainer.observe" in config
    assert "fonts.googleapis" not in (site / "index.html").read_text()  # nothing fetched when a page opens
    assert "Not run by the tests:" in (site / "benchmarks/index.html").read_text()  # the marker, visible


def test_a_broken_link_fails_the_build(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    (docs / "getting_started.md").write_text((docs / "getting_started.md").read_text() + "\n[gone](nowhere.md)\n")
    conf = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    conf |= {"docs_dir": str(docs), "site_dir": str(tmp_path / "site"), "hooks": [str(REPO / "tools/mkdocs_hooks.py")]}
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(conf))
    built = subprocess.run([str(BIN / "mkdocs"), "build", "--strict"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300)  # fmt: skip
    assert built.returncode != 0 and "nowhere.md" in built.stderr


def test_the_readme_is_short_and_its_test_command_is_what_ci_runs():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= README_LINES
    shell = [b for b in blocks(REPO / "README.md") if b.lang == "bash"]
    ci = [line for line in (REPO / ".ci/run").read_text().splitlines() if line and not line.startswith(("#", "set "))]
    assert shell[1].text == ci[-1]  # bench/test_suite.py also reads the README's second block as the test command
    for target in re.findall(r"\]\(([^)#]+)", text):
        assert (REPO / target).exists(), target


# ---- the YAML blocks ----

class _Unique(yaml.SafeLoader):
    """YAML that refuses a key given twice in one mapping (PyYAML keeps the last silently)."""


def _mapping(loader, node, deep=False):
    keys = [loader.construct_object(k, deep=True) for k, _ in node.value]
    twice = sorted({k for k in keys if keys.count(k) > 1}, key=str)
    if twice:
        raise yaml.MarkedYAMLError(problem=f"key {twice[0]!r} given twice", problem_mark=node.start_mark)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_Unique.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def yaml_problem(block: Block) -> str | None:
    """Why a YAML block is not a valid config or config fragment (None: it is)."""
    try:
        value = yaml.load(block.text, Loader=_Unique)
    except yaml.YAMLError as e:
        return f"not YAML: {e}".replace("\n", " ")
    under = block.markers.get("yaml-under")
    for part in reversed(under.split(".") if under else []):
        value = {part: value}
    if not isinstance(value, dict):
        return "not a mapping; say where it belongs with <!-- yaml-under: KEY -->"
    schema = load_schema()
    whole = set(schema["required"]) <= set(value)
    config = value if whole else _merge(yaml.safe_load((REPO / "config/config.yaml").read_text()), value)
    errors = sorted(Validator(schema).iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:  # in hwsweep's words: the error deepest inside the block (of a key's forms, the one it is nearest)
        err = errors[0]
        while err.context:
            err = max(err.context, key=lambda e: len(e.absolute_path))
        return f"{'config' if whole else 'merged into config/config.yaml'}: {_message(err)}"
    return None


def test_every_yaml_block_is_a_valid_config_or_fragment():
    found = [b for page in pages() for b in blocks(page) if b.lang == "yaml"]
    assert len(found) >= 10
    problems = [f"{b.where}: {p}" for b in found if (p := yaml_problem(b)) and "invalid" not in b.markers]
    problems += [f"{b.where}: marked invalid, but it validates" for b in found if "invalid" in b.markers and not yaml_problem(b)]
    assert problems == []


def test_a_wrong_yaml_block_is_named():
    good = Block("docs/x.md", 3, "yaml", "plan_check: {global_batch: 'size: (\\d+)'}", {"yaml-under": "trainer"})
    assert yaml_problem(good) is None
    assert "plan_check" in yaml_problem(Block("docs/x.md", 3, "yaml", good.text))  # not a top-level key
    assert "given twice" in yaml_problem(Block("docs/x.md", 3, "yaml", "tracking: [mlflow]\ntracking: [wandb]"))
    assert "timing: 'sometimes' is invalid" in yaml_problem(Block("docs/x.md", 3, "yaml", "timing: sometimes"))


# ---- the shell blocks ----

STUB_HINT = "cannot run in the tests: put <!-- not-run: REASON --> on the line before the block"


def _page_folder(top: Path, page: Path) -> Path:
    folder = top / page.stem / "repo"
    folder.mkdir(parents=True)
    for part in ("Snakefile", "workflow", "config", "profiles", "examples", "bench"):
        (shutil.copytree if (REPO / part).is_dir() else shutil.copy)(REPO / part, folder / part)
    shutil.copy(REPO / "config/config.yaml", folder / "my.yaml")  # "your config", where a page names one
    return folder


def _for_a_dry_run(options: list[str]) -> list[str]:
    """Options but those a dry run does not depend on (cores, forcing the targets), so that commands differing
    only there share one dry run."""
    out, skip = [], False
    for o in options:
        if skip:
            skip = False
        elif o in ("--cores", "-c", "--jobs", "-j"):
            skip = True
        elif o not in ("-f", "--force", "--forceall", "-F", "-n", "--dry-run", "--dryrun"):
            out.append(o)
    return out


def _snakemake_groups(entries: list[dict]) -> dict:
    """Recorded snakemake calls grouped by what a dry run depends on: options but targets, the config's text."""
    from snakemake.cli import get_argument_parser

    parser = get_argument_parser()
    groups: dict = {}
    for e in entries:
        try:
            args = parser.parse_args(e["argv"])
        except SystemExit:
            e["problem"] = f"snakemake {' '.join(e['argv'])}: snakemake's parser refuses it"
            continue
        targets = list(args.targets or [])
        options = e["argv"][: len(e["argv"]) - len(targets)] if targets else list(e["argv"])
        options = _for_a_dry_run(options)
        if args.report or "parse-only" in e["block"].markers:
            continue  # parsed: a report needs finished runs
        config = [Path(e["cwd"], c) for c in (args.configfile or [])]
        text = "".join(p.read_text() if p.is_file() else f"missing {p}" for p in config)
        default = Path(e["cwd"], "config/config.yaml")
        if args.replace_workflow_config and default.is_file() and text == default.read_text():
            # the default config under another name (a page's my.yaml): the same dry run as without it
            options = [o for o in options if o not in ("--replace-workflow-config", *map(str, args.configfile))]
            options = [o for o in options if o != "--configfile"]
            text = ""
        key = (json.dumps(options), hashlib.sha256(text.encode()).hexdigest())
        group = groups.setdefault(key, {"options": options, "cwd": e["cwd"], "env": e["env"], "targets": [], "entries": []})
        group["targets"] += [t for t in targets if t not in group["targets"]]
        group["entries"].append(e)
    return groups


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


@pytest.fixture(scope="module")
def ran_pages(tmp_path_factory):
    """Every page's shell blocks run as tests/docs_blocks.py says; per block, what went wrong."""
    top = tmp_path_factory.mktemp("docs")
    tool = REPO / "tests/docs_blocks.py"
    with pytest.MonkeyPatch.context() as mp:
        base = fake_sinfo(mp, top) | {"PATH": f"{top / 'fake-bin'}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}"}
    base |= {"HOME": str(top / "home"), "HWSWEEP_MEMORY_CACHE": str(top / "memory.json"),
             "HWSWEEP_DOCS_CACHE": str(top / "answers")}  # fmt: skip
    (top / "answers").mkdir()
    installed = top / "xdg-installed"
    env = base | {"XDG_CONFIG_HOME": str(installed)}
    subprocess.run([str(BIN / "hwsweep"), "profile", "install", "slurm", "--account", "lab"], env=env, cwd=top,
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    results: dict[str, list[str]] = {}
    recorded: list[dict] = []
    spent: dict[str, float] = {}  # CPU seconds of each block's processes, and of each dry run
    for page in pages():
        shell = [b for b in blocks(page) if b.lang in SHELL]
        if not shell:
            continue
        folder = _page_folder(top / "pages", page)
        xdg = top / "xdg" / page.stem
        own_profile = "hwsweep profile install" in page.read_text()  # else the one installed above
        if not own_profile:
            shutil.copytree(installed, xdg)
        env = base | {"XDG_CONFIG_HOME": str(xdg)}
        for b in blocks(page):
            if "stands-in" in b.markers:
                path, source = (s.strip() for s in b.markers["stands-in"].split("="))
                shutil.copytree(REPO / source, folder / path)
            if b.lang == "yaml" and "file" in b.markers:
                (folder / b.markers["file"]).write_text(b.text + "\n")
            if b.lang not in SHELL:
                continue
            log = top / "logs" / f"{page.stem}-{b.line}.jsonl"
            log.parent.mkdir(exist_ok=True)
            log.touch()
            body = top / "logs" / f"{page.stem}-{b.line}.sh"
            body.write_text(preamble(tool, log, "parse-only" in b.markers) + script(b))
            before = _children_cpu()
            run = subprocess.run(["bash", str(body)], cwd=folder, env=env, capture_output=True, text=True, timeout=600)
            spent[b.where] = _children_cpu() - before
            problems = results.setdefault(b.where, [])
            output = run.stdout + run.stderr
            if b.lang == "console":
                for command, lines in expected_output(b):
                    problems += [f"`{command}` did not print: {line}" for line in lines if not shows(output, line)]
            elif run.returncode != 0:
                problems.append(f"exit {run.returncode}: {output[-2000:]}")
            entries = [json.loads(line) | {"block": b, "env": env} for line in log.read_text().splitlines()]
            stubbed = [e for e in entries if e["kind"] == "stub"]
            problems += [f"{e['problem']}" for e in stubbed if e["problem"]]
            if stubbed and not {"not-run", "parse-only"} & set(b.markers):
                problems.append(f"`{' '.join(stubbed[0]['argv'])}` {STUB_HINT}")
            as_written = [e for e in entries if e["kind"] == "snakemake" and {"-n", "--dry-run", "--dryrun"} & set(e["argv"])]
            if "not-run" in b.markers and len(as_written) == len(entries):
                problems.append("marked not-run, but every command in it ran as written: remove the marker")
            recorded += [e for e in entries if e["kind"] == "snakemake"]
    for group in _snakemake_groups(recorded).values():
        before = _children_cpu()
        dry = subprocess.run([str(BIN / "snakemake"), *group["options"], "-n", *group["targets"]], cwd=group["cwd"],
                             env=group["env"], capture_output=True, text=True, timeout=600)  # fmt: skip
        spent[f"dry run: {' '.join(group['options'])} -n {' '.join(group['targets'])}"] = _children_cpu() - before
        if dry.returncode != 0:
            said = dry.stdout + dry.stderr
            named = [t for t in group["targets"] if re.search(rf"\b{re.escape(t)}\b", said.split("Building DAG")[-1])]
            for e in group["entries"]:  # the commands whose target the error names, else every command of the group
                if not named or set(named) & set(e["argv"]):
                    e["problem"] = f"dry run `snakemake {' '.join(group['options'])} -n {' '.join(group['targets'])}` " \
                                   f"failed: {said.split('Building DAG of jobs...')[-1][-600:].strip()}"  # fmt: skip
    for e in recorded:
        if e["problem"] and e["problem"] not in results[e["block"].where]:
            results[e["block"].where].append(e["problem"])
    print("CPU seconds:", json.dumps(dict(sorted(spent.items(), key=lambda kv: -kv[1])), indent=1))
    return results


@pytest.mark.slow
def test_every_shell_block_runs(ran_pages):
    assert len(ran_pages) >= 20
    wrong = [f"{where}: {problem}" for where, problems in ran_pages.items() for problem in problems]
    assert not wrong, "\n".join(wrong)
