"""`hwsweep profile install slurm`: where snakemake finds the profile, the site values it gets, and
that an existing profile is never replaced silently."""

import subprocess
import sys
import time

import pytest
import yaml
from conftest import REPO
from fake_slurm import fake_sinfo

from hwsweep.cluster import profile


@pytest.fixture
def xdg(tmp_path, monkeypatch):
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    return home


def install(*args):
    return subprocess.run([sys.executable, "-m", "hwsweep.cli", "profile", "install", "slurm", *args],
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_snakemake_finds_the_installed_profile_by_name(xdg, tmp_path, monkeypatch):
    env = fake_sinfo(monkeypatch, tmp_path)
    proc = install("--account", "lab-1", "--partition", "gpu-h100")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr  # not even snakemake's "Using profile" note
    written = xdg / "snakemake/slurm/config.yaml"
    assert proc.stdout.splitlines()[-2:] == [f"installed profile slurm: {written}", "run: snakemake --profile slurm all"]
    plan = subprocess.run([sys.executable, "-m", "hwsweep.cli", "plan", "--profile", "slurm", "--configfile",
                           str(REPO / "config/config.yaml")], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert plan.returncode == 0 and plan.stdout.startswith("suite ") and "Using profile" not in plan.stdout + plan.stderr
    # snakemake's own lookup, in a fresh process (it caches its folders), from an unrelated folder
    found = subprocess.run([sys.executable, "-c", "from snakemake.cli import get_profile_dir; print(get_profile_dir('slurm')[1])"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)  # fmt: skip
    assert found.stdout.strip() == str(written), found.stderr
    settings = yaml.safe_load(written.read_text())
    template = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())
    # Python expressions to snakemake: each name in its own quotes
    assert settings["default-resources"] == template["default-resources"] | {"slurm_account": "'lab-1'",
                                                                            "slurm_partition": "'gpu-h100'"}  # fmt: skip
    assert {k: v for k, v in settings.items() if k != "default-resources"} == {
        k: v for k, v in template.items() if k != "default-resources"}  # fmt: skip
    text = written.read_text()
    assert "#   gpu-h100: 2 node(s), h100 x4 per node" in text and "#   cpu (default): 1 node(s), CPU only" in text


def test_an_existing_profile_is_never_replaced_silently(xdg, tmp_path, monkeypatch):
    fake_sinfo(monkeypatch, tmp_path)
    assert install().returncode == 0
    mine = xdg / "snakemake/slurm/config.yaml"
    mine.write_text("executor: slurm\n# my edits\n")
    again = install()
    assert again.returncode == 1 and again.stdout == ""
    assert again.stderr.count("\n") == 1 and "--force" in again.stderr and "--name" in again.stderr
    assert mine.read_text() == "executor: slurm\n# my edits\n"
    assert install("--name", "slurm-b").returncode == 0 and (xdg / "snakemake/slurm-b/config.yaml").exists()
    forced = install("--force")
    assert forced.returncode == 0 and f"kept the previous profile as {xdg / 'snakemake/slurm.bak'}" in forced.stdout
    assert (xdg / "snakemake/slurm.bak/config.yaml").read_text() == "executor: slurm\n# my edits\n"
    assert install("--force").returncode == 0 and (xdg / "snakemake/slurm.bak2").is_dir()


@pytest.mark.parametrize("args, message", [
    (["--partition", "nope"], "--partition 'nope': not a partition of this cluster; use one of cpu, gpu-h100, gpu-l40s, gpu-rtx"),
    (["--account", "a b"], "--account 'a b': use only letters"),
    (["--name", "../up"], "--name '../up': use only letters"),
    (["--template", "missing.yaml"], "--template missing.yaml: no such file; give the profile file to install"),
])  # fmt: skip
def test_bad_flags_get_one_line(xdg, tmp_path, monkeypatch, args, message):
    fake_sinfo(monkeypatch, tmp_path)
    proc = install(*args)
    assert proc.returncode == 1 and proc.stderr.startswith(f"hwsweep profile: {message}"), proc.stderr
    assert proc.stderr.count("\n") == 1 and not (xdg / "snakemake").exists()


def test_no_reachable_controller_installs_without_site_values_in_seconds(xdg, tmp_path, monkeypatch):
    fake_sinfo(monkeypatch, tmp_path, stdout="", sleep=30)  # a client whose controller never answers
    start = time.monotonic()
    proc = install("--partition", "gpu")
    assert time.monotonic() - start < 20  # the sinfo timeout, Python and snakemake's parser (the check), not 30 s
    assert proc.returncode == 0 and "note: site values not detected: no answer from the SLURM controller" in proc.stdout
    assert yaml.safe_load((xdg / "snakemake/slurm/config.yaml").read_text())["default-resources"]["slurm_partition"] == "'gpu'"


def test_a_cluster_without_a_default_partition_is_pointed_out(xdg, tmp_path, monkeypatch):
    fake_sinfo(monkeypatch, tmp_path, stdout="n1|gpu|idle|0/8/0/8|16000|0|gpu:a100:4|gpu:a100:0|none|\n")
    proc = install()
    assert proc.returncode == 0 and "no default partition; rerun with --force --partition NAME" in proc.stdout


@pytest.mark.parametrize("name", ["all", "True", "lab-1", "None"])
def test_site_names_that_are_python_names_reach_snakemake_as_strings(xdg, tmp_path, monkeypatch, name):
    """snakemake evaluates resources as Python: an unquoted `all` would be the builtin and crash every call."""
    fake_sinfo(monkeypatch, tmp_path)
    assert install("--account", name).returncode == 0
    # read back apart from the installer, here (snakemake's parser is loaded once per worker): ProfileError unless
    # snakemake evaluates the account to the name itself
    profile.check_loads(profile.user_profile_dir() / "slurm", {"slurm_account": name})


def test_a_profile_snakemake_reads_otherwise_is_refused(tmp_path):
    (tmp_path / "config.yaml").write_text("executor: slurm\ndefault-resources:\n  slurm_account: all\n")
    with pytest.raises(profile.ProfileError, match="snakemake reads slurm_account as 'nothing usable .*', not 'all'"):
        profile.check_loads(tmp_path, {"slurm_account": "all"})
    (tmp_path / "config.yaml").write_text("executor: slurm\n  bad: [\n")
    with pytest.raises(profile.ProfileError, match="snakemake cannot read the written profile"):
        profile.check_loads(tmp_path, {})


@pytest.mark.parametrize("age, noted", [(300, False), (60, False), (59, True), (None, False)])
def test_the_status_command_is_squeue_and_a_short_job_age_is_said(xdg, tmp_path, monkeypatch, age, noted):
    """squeue, with or without accounting: with sacct the slurm executor (2.8) never sees a cancelled job end.
    A controller that forgets ended jobs within 60 s makes the executor ask sacct all the same: said at install."""
    fake_sinfo(monkeypatch, tmp_path)
    config = "AccountingStorageType   = accounting_storage/slurmdbd" + ("" if age is None else f"\nMinJobAge               = {age}")
    for tool, text in (("scontrol", config), ("sacct", "")):
        script = tmp_path / "fake-bin" / tool
        script.write_text("#!/bin/sh\ncat <<'EOF'\n" + text + "\nEOF\n")
        script.chmod(0o755)
    proc = install()
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load((xdg / "snakemake/slurm/config.yaml").read_text())["slurm-status-command"] == "squeue"
    said = [line for line in proc.stdout.splitlines() if "MinJobAge" in line]
    assert said == ([f"note: this controller forgets an ended job after {age} s (MinJobAge), so snakemake's slurm "
                     "executor asks sacct for job states, where (plugin 2.8) it never sees the end of a job ended by "
                     "`scancel`: after cancelling a job, stop snakemake (Ctrl-C) once its other jobs end and run it "
                     "again"] if noted else [])  # fmt: skip


def test_render_puts_site_values_under_default_resources():
    template = "executor: slurm\ndefault-resources:\n  # slurm_account: \"x\"  # uncomment\n  runtime: 30\n"
    text = profile.render(template, REPO, {"slurm_account": ("account", "true"), "slurm_partition": ("partition", None)}, [])
    assert yaml.safe_load(text)["default-resources"] == {"slurm_account": "'true'", "runtime": 30}  # a string, not a bool
    assert "# slurm_account" not in text
    bare = profile.render("executor: slurm\n", REPO, {"slurm_account": ("account", "lab")}, [])
    assert yaml.safe_load(bare)["default-resources"] == {"slurm_account": "'lab'"}
