"""What ships and what CI gates on: a built wheel works from any directory, environment.yml
installs this checkout, the workflow lints clean and is snakefmt-formatted."""

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import BIN, REPO

SOURCE_IGNORE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".snakemake",
                                       "results", "logs", "benchmarks", ".pytest_cache", ".hypothesis")  # fmt: skip


def _run(cmd, cwd, env=None, timeout=300):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def build_wheel(tmp_path) -> Path:
    source = tmp_path / "source"  # a copy, so the build leaves nothing in the checkout
    shutil.copytree(REPO, source, ignore=SOURCE_IGNORE)
    # Offline with the venv's setuptools where it has one (Python < 3.12 venvs do), else pip fetches it.
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    built = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation, "-w", str(tmp_path / "wheels"),
                  str(source)], cwd=tmp_path)  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "wheels").glob("hwsweep-*.whl")
    return wheel


def clean_venv(folder: Path) -> Path:
    """A new venv whose only hwsweep is what gets installed into it; the dependencies come from this
    test's environment through a plain path entry (which runs none of its .pth files, so not the
    editable install of this checkout)."""
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(folder)], cwd=folder.parent)
    assert made.returncode == 0, made.stderr
    python = folder / "bin/python"
    site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=folder).stdout.strip()
    deps = [p for p in sys.path if p.endswith("site-packages")]
    (Path(site) / "hwsweep-test-deps.pth").write_text("\n".join(deps) + "\n")
    return python


def test_a_wheel_installed_into_a_clean_venv_plans_from_any_directory(tmp_path):
    wheel = build_wheel(tmp_path)
    python = clean_venv(tmp_path / "venv")
    installed = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
                     cwd=tmp_path)  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-2000:]

    elsewhere = tmp_path / "elsewhere"  # no repository files next to it
    elsewhere.mkdir()
    where = _run([str(python), "-c", "import hwsweep.plan.config as c; print(c.__file__, c.SCHEMA_PATH.is_file())"],
                 cwd=elsewhere)  # fmt: skip
    assert where.stdout.startswith(str(tmp_path / "venv/lib")) and where.stdout.split()[1] == "True", where
    plan = _run([str(tmp_path / "venv/bin/hwsweep"), "plan", "--configfile", str(REPO / "config/config.yaml")],
                cwd=elsewhere)  # fmt: skip
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert "global_batch" in plan.stdout and len(plan.stdout.splitlines()) > 2


def test_environment_yml_installs_this_checkout():
    # conda writes the pip section to a requirements file beside environment.yml and runs pip
    # from that folder, so a local path there is relative to the file's folder.
    env_file = REPO / "environment.yml"
    pip = next(d["pip"] for d in yaml.safe_load(env_file.read_text())["dependencies"] if isinstance(d, dict))
    editable = [line.split(None, 1)[1] for line in pip if line.startswith("-e ")]
    assert editable, "environment.yml must install hwsweep itself"
    for path in editable:
        project = (env_file.parent / path).resolve() / "pyproject.toml"
        assert project.is_file() and 'name = "hwsweep"' in project.read_text(), f"-e {path} is not this checkout"


def test_no_rule_claims_a_conda_environment_it_would_not_run_in():
    # The jobs run `sys.executable` (the interpreter running snakemake): a conda: directive would
    # make --use-conda build an environment that train and evaluate never use.
    for smk in (REPO / "workflow/rules").glob("*.smk"):
        assert not re.search(r"^\s+conda:", smk.read_text(), re.M), f"{smk.name} declares conda:"


# The one lint the workflow keeps by design: its rules run in the environment that runs snakemake
# (see the README), so they declare no conda environment or container.
ACCEPTED_LINT = "Specify a conda environment or container for each rule."


def lint_findings(text: str) -> list[tuple[str, str]]:
    """(where, title) for each finding in snakemake --lint's text output."""
    findings, where = [], None
    for line in text.splitlines():
        if line.startswith("Lints for "):
            where = line.removeprefix("Lints for ").split(" (")[0]
        elif line.startswith("    * "):
            findings.append((where, line[6:].rstrip(":")))
    return findings


def test_snakemake_lint_finds_nothing_but_the_environment_note():
    proc = _run([str(BIN / "snakemake"), "--lint", "--configfile", "config/config.yaml"], cwd=REPO, timeout=120)
    out = proc.stdout + proc.stderr
    findings = lint_findings(out)
    assert proc.returncode == 0 or findings, out[-3000:]
    unexpected = [f for f in findings if f[1] != ACCEPTED_LINT]
    assert not unexpected, out[-3000:]
    assert all(where.startswith("rule ") for where, _ in findings), out[-3000:]


def test_lint_findings_are_parsed():
    text = "Lints for rule train (line 36, x.smk):\n    * Do not access input by index.:\n      body\n"
    assert lint_findings(text) == [("rule train", "Do not access input by index.")]
    assert lint_findings("Congratulations, your workflow is in a good condition!\n") == []


def test_snakefmt_check_passes():
    proc = _run([str(BIN / "snakefmt"), "--check", "."], cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
