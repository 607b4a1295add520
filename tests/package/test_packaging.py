"""What ships and what CI gates on: the built wheel and sdist carry the workflow, and an installed package runs it
from an empty folder; environment.yml installs this checkout, the workflow lints clean and is snakefmt-formatted."""

import copy
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import BIN, REPO, SMALL
from fake_slurm import fake_sinfo

from hwsweep.contracts import workflow_files

SOURCE_IGNORE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".snakemake",
                                       "results", "logs", "benchmarks", ".pytest_cache", ".hypothesis")  # fmt: skip
# The workflow's files, as the checkout has them: each must be in the wheel under hwsweep/_workflow/ and in the sdist.
WORKFLOW = sorted(str(p.relative_to(REPO)) for pattern in ("Snakefile", "workflow/rules/*.smk", "workflow/scripts/*.py",
                  "workflow/report/*.rst", "profiles/*/config.yaml", "config/*.yaml") for p in REPO.glob(pattern))  # fmt: skip
MODULES = sorted(str(p.relative_to(REPO)) for p in (REPO / "hwsweep").rglob("*.py"))


def _run(cmd, cwd, env=None, timeout=300):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def build_environment(tmp_path) -> dict:
    """The environment to build in, offline: the test venv's own setuptools where it is recent enough (pyproject's
    requires), else one fetched from the package registry into a folder of its own (CI reaches registries)."""
    try:
        recent = int(importlib.metadata.version("setuptools").split(".")[0]) >= 68
    except importlib.metadata.PackageNotFoundError:
        recent = False
    if recent:
        return dict(os.environ)
    target = tmp_path / "setuptools"
    got = _run([sys.executable, "-m", "pip", "install", "-q", "--target", str(target), "setuptools>=68"], cwd=tmp_path)
    assert got.returncode == 0, got.stderr[-2000:]
    return os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH")]))}


def build(tmp_path) -> tuple[Path, Path, Path]:
    """The sdist and the wheel of a copy of this checkout (so the build leaves nothing in it), and the wheel built
    from that sdist, as a release would (python -m build builds the wheel from the sdist)."""
    source, out = tmp_path / "source", tmp_path / "dist"
    shutil.copytree(REPO, source, ignore=SOURCE_IGNORE)
    env = build_environment(tmp_path)
    sdist = _run([sys.executable, "-c", "import sys; from setuptools import build_meta; build_meta.build_sdist(sys.argv[1])",
                  str(out)], cwd=source, env=env)  # fmt: skip
    assert sdist.returncode == 0, sdist.stderr[-2000:]
    (sdist_path,) = out.glob("hwsweep-*.tar.gz")
    wheels = {}
    for name, what in (("tree", source), ("sdist", sdist_path)):
        built = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                      "-w", str(tmp_path / name), str(what)], cwd=tmp_path, env=env)  # fmt: skip
        assert built.returncode == 0, built.stderr[-2000:]
        (wheels[name],) = (tmp_path / name).glob("hwsweep-*.whl")
    return sdist_path, wheels["tree"], wheels["sdist"]


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


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The built archives, and a fresh venv with the wheel installed (--no-deps: the dependencies are this test
    environment's, the versions requirements.txt pins inside pyproject's ranges; `pip check` below holds the
    wheel's own metadata to them). Its environment has no trace of this checkout: no PYTHONPATH, the
    venv's bin first on PATH."""
    top = tmp_path_factory.mktemp("package")
    sdist, wheel, wheel_from_sdist = build(top)
    python = clean_venv(top / "venv")
    # --force-reinstall: the dependencies' folder also holds this checkout's editable install, of the same version
    installed = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                      "--force-reinstall", str(wheel)], cwd=top)  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-2000:]
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=top).stdout.strip())
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SNAKEMAKE_PROFILE")}
    env |= {"PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}", "XDG_CONFIG_HOME": str(top / "xdg")}
    return {"top": top, "sdist": sdist, "wheel": wheel, "wheel_from_sdist": wheel_from_sdist, "python": python,
            "bin": python.parent, "site": site, "env": env}  # fmt: skip


def _wheel_files(wheel: Path) -> set[str]:
    return set(zipfile.ZipFile(wheel).namelist())


@pytest.mark.slow
def test_the_wheel_and_the_sdist_carry_the_workflow_and_every_module(installed):
    assert len(WORKFLOW) > 30 and "Snakefile" in WORKFLOW and "profiles/slurm/config.yaml" in WORKFLOW
    wheel = _wheel_files(installed["wheel"])
    missing = [f for f in WORKFLOW if f"hwsweep/_workflow/{f}" not in wheel] + [m for m in MODULES if m not in wheel]
    assert not missing, f"not in the wheel: {missing}"
    extra = sorted(f for f in wheel if f.startswith("hwsweep/_workflow/") and f.removeprefix("hwsweep/_workflow/")
                   not in WORKFLOW)  # fmt: skip
    assert not extra, f"swept into the wheel from the checkout's root: {extra}"
    assert _wheel_files(installed["wheel_from_sdist"]) == wheel  # the sdist is complete: a release builds from it
    root = installed["sdist"].name.removesuffix(".tar.gz")
    with tarfile.open(installed["sdist"]) as sdist:
        members = {m.name.removeprefix(f"{root}/") for m in sdist.getmembers()}
    assert not [f for f in WORKFLOW + MODULES if f not in members]


@pytest.mark.slow
def test_the_installed_package_is_the_only_hwsweep_and_its_dependencies_hold(installed):
    elsewhere = installed["top"] / "elsewhere"  # no repository files next to it
    elsewhere.mkdir()
    where = _run([str(installed["python"]), "-c", "import hwsweep, hwsweep.plan.config as c; print(hwsweep.__file__); "
                  "print(c.SCHEMA_PATH.is_file())"], cwd=elsewhere, env=installed["env"])  # fmt: skip
    assert where.stdout.split() == [str(installed["site"] / "hwsweep/__init__.py"), "True"], where
    # Every dependency the wheel's metadata names is met by what the venv sees: the run below is a fair one.
    check = _run([sys.executable, "-m", "pip", "--python", str(installed["python"]), "check"], cwd=elsewhere)
    assert check.returncode == 0, check.stdout + check.stderr
    printed = _run([str(installed["bin"] / "hwsweep"), "workflow"], cwd=elsewhere, env=installed["env"])
    assert printed.stdout == f"{installed['site'] / 'hwsweep/_workflow/Snakefile'}\n", printed
    plan = _run([str(installed["bin"] / "hwsweep"), "plan", "--configfile", str(REPO / "config/config.yaml")],
                cwd=elsewhere, env=installed["env"])  # fmt: skip
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert "global_batch" in plan.stdout and len(plan.stdout.splitlines()) > 2


def test_init_writes_a_folder_to_run_from_and_never_replaces_a_file(tmp_path, capsys):
    from hwsweep import cli

    folder = tmp_path / "new"
    assert cli.main(["init", str(folder)]) == 0
    out = capsys.readouterr().out
    assert f"run: cd {folder} && snakemake --profile profiles/local all" in out
    assert "include: hwsweep_snakefile()" in (folder / "Snakefile").read_text()
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == sorted(
        ["Snakefile", *workflow_files.starter_files()])  # fmt: skip
    (folder / "config/config.yaml").write_text("mine\n")
    assert cli.main(["init", str(folder)]) == 0
    assert "wrote" not in capsys.readouterr().out and (folder / "config/config.yaml").read_text() == "mine\n"
    (tmp_path / "file").write_text("")
    assert cli.main(["init", str(tmp_path / "file")]) == 1
    err = capsys.readouterr().err
    assert err == f"hwsweep init: {tmp_path / 'file'} is not a folder; give a folder to set up (default: the current one)\n"


def tiny_config() -> dict:
    """The smallest sweep that still trains, evaluates and aggregates: one suite, one seed, cpu1, 6 steps."""
    cfg = copy.deepcopy(SMALL)
    cfg["seeds"] = [0]
    cfg["hardware"] = {"cpu1": cfg["hardware"]["cpu1"]}
    cfg["recipe"]["schedule"] = {"steps": 6, "warmup_steps": 1}
    cfg["recipe"]["task"] |= {"train_size": 400, "eval_size": 64}
    return cfg


@pytest.mark.slow
def test_an_empty_folder_runs_the_installed_workflow_after_hwsweep_init(installed, monkeypatch):
    folder, env, python = installed["top"] / "mine", installed["env"], str(installed["python"])
    folder.mkdir()
    snakemake = [python, "-m", "snakemake"]  # the venv's python: its hwsweep is the installed one
    init = _run([str(installed["bin"] / "hwsweep"), "init"], cwd=folder, env=env)
    assert init.returncode == 0 and init.stderr == "", init
    assert "run: snakemake --profile profiles/local all && snakemake --report report.html" in init.stdout
    for name, source in workflow_files.starter_files().items():  # the templates as the checkout has them
        assert (folder / name).read_text() == (REPO / name).read_text(), name
    dry = _run([*snakemake, "-n", "--profile", "profiles/local"], cwd=folder, env=env)  # no target: the default
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert re.search(r"^train\s+12$", dry.stdout, re.M), dry.stdout[-3000:]  # config/config.yaml: 2 x 3 x 2 runs

    (folder / "config/config.yaml").write_text(yaml.safe_dump(tiny_config()))
    run = _run([*snakemake, "--profile", "profiles/local", "all"], cwd=folder, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    record = yaml.safe_load((folder / "results/tiny/default/cpu1/seed0/train.json").read_text())
    assert record["status"] == "complete" and len(record["curves"]["loss"]["values"]) == 6
    status = _run([*snakemake, "--cores", "1", "-f", "status"], cwd=folder, env=env)
    assert status.returncode == 0, status.stderr[-3000:]
    assert (folder / "results/partial/status.csv").read_text().count(",done,") == 1
    report = _run([*snakemake, "--report", "report.html"], cwd=folder, env=env)
    assert report.returncode == 0, report.stderr[-3000:]
    html = (folder / "report.html").read_text()
    assert "results/tiny/tables/comparison.html" in html, html[:2000]
    # The landing page, its template and a caption: files of the installed workflow (nothing here reaches the clone)
    caption = " ".join((REPO / "workflow/report/comparison_page.rst").read_text().split()[:8])
    assert "What the runs show" in html and "How the runs were made" in html and caption in html

    again = _run([str(installed["bin"] / "hwsweep"), "init"], cwd=folder, env=env)  # nothing is replaced
    assert again.returncode == 0 and "wrote" not in again.stdout and "kept config/config.yaml (it exists)" in again.stdout
    assert yaml.safe_load((folder / "config/config.yaml").read_text()) == tiny_config()


@pytest.mark.slow
def test_the_installed_snakefile_runs_from_a_folder_of_its_own_and_the_cluster_commands_work(installed, monkeypatch):
    folder, python, bin_dir = installed["top"] / "bare", str(installed["python"]), installed["bin"]
    folder.mkdir()
    fake_sinfo(monkeypatch, folder)  # a sinfo and squeue that answer as the test cluster would, without one
    env = installed["env"] | {"PATH": f"{bin_dir}{os.pathsep}{folder / 'fake-bin'}{os.pathsep}{os.environ['PATH']}"}
    (folder / "tiny.yaml").write_text(yaml.safe_dump(tiny_config()))
    workflow = _run([str(bin_dir / "hwsweep"), "workflow"], cwd=folder, env=env).stdout.strip()
    dry = _run([python, "-m", "snakemake", "--snakefile", workflow, "--configfile", "tiny.yaml",
                "--replace-workflow-config", "--cores", "1", "-n"], cwd=folder, env=env)  # fmt: skip
    assert dry.returncode == 0 and re.search(r"^train\s+1$", dry.stdout, re.M), dry.stderr[-3000:]
    assert sorted(p.name for p in folder.iterdir()) == [".snakemake", "fake-bin", "tiny.yaml"]  # nothing written beside

    # The cluster commands (docs/slurm.md), from a folder `hwsweep init` set up
    assert _run([str(bin_dir / "hwsweep"), "init"], cwd=folder, env=env).returncode == 0
    shutil.copy(folder / "tiny.yaml", folder / "config/config.yaml")
    installed_profile = _run([str(bin_dir / "hwsweep"), "profile", "install", "slurm", "--account", "lab"],
                             cwd=folder, env=env)  # fmt: skip
    assert installed_profile.returncode == 0 and installed_profile.stderr == "", installed_profile
    written = Path(env["XDG_CONFIG_HOME"]) / "snakemake/slurm/config.yaml"
    assert installed_profile.stdout.splitlines()[-2:] == [f"installed profile slurm: {written}",
                                                          "run: snakemake --profile slurm all"]  # fmt: skip
    assert f"from {installed['site'] / 'hwsweep/_workflow/profiles/slurm/config.yaml'}" in written.read_text()
    slurm = _run([python, "-m", "snakemake", "--profile", "slurm", "-n", "all"], cwd=folder, env=env)
    assert slurm.returncode == 0 and re.search(r"^train\s+1$", slurm.stdout, re.M), slurm.stderr[-3000:]
    plan = _run([str(bin_dir / "hwsweep"), "plan", "--profile", "slurm"], cwd=folder, env=env)
    assert plan.returncode == 0 and "cpu1" in plan.stdout, plan.stderr
    resources = _run([str(bin_dir / "hwsweep"), "resources"], cwd=folder, env=env)
    assert resources.returncode == 0 and "gpu-h100" in resources.stdout, resources.stderr


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
# (see docs/slurm.md), so they declare no conda environment or container.
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
