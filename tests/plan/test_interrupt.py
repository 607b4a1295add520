"""After an interrupt (issue 26): the one line the next `snakemake all` prints before snakemake stops at what a
killed run left in .snakemake/ (hwsweep.plan.interrupt)."""

import os
import subprocess
import time

from hwsweep.contracts import host
from hwsweep.plan.interrupt import advice


def _leave(folder, lock=False, incomplete=False):
    state = folder / ".snakemake"
    (state / "locks").mkdir(parents=True, exist_ok=True)
    (state / "incomplete").mkdir(parents=True, exist_ok=True)
    if lock:
        (state / "locks/0.output.lock").write_text("results/tiny/runs.csv\n")
    if incomplete:
        (state / "incomplete/cmVzdWx0cy90aW55L3J1bnMuY3N2").write_text('{"external_jobid": null}')


def test_nothing_left_nothing_said(tmp_path):
    _leave(tmp_path)
    assert advice(tmp_path) == []


def test_a_stale_lock_names_unlock_and_incomplete_outputs_name_rerun_incomplete(tmp_path):
    _leave(tmp_path, lock=True, incomplete=True)
    lock, incomplete = advice(tmp_path)
    assert "`snakemake --unlock` with the same options" in lock and "\n" not in lock
    assert "1 output(s) marked incomplete" in incomplete and "--rerun-incomplete" in incomplete
    assert advice(tmp_path, rerun_incomplete=True) == [lock]  # the flag (or the local profile) deals with them


def test_a_lock_of_a_snakemake_still_running_in_the_folder_is_not_called_stale(tmp_path):
    _leave(tmp_path, lock=True)
    fake = tmp_path / "bin" / "snakemake"  # a process whose argv[0] is snakemake, working in the folder
    fake.parent.mkdir()
    fake.symlink_to("/bin/sleep")
    proc = subprocess.Popen([str(fake), "30"], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 10
        while not host.other_snakemakes(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.05)  # until the child has exec'd (before that its argv is this interpreter's)
        assert advice(tmp_path) == []
    finally:
        proc.kill()
        proc.wait()
    assert len(advice(tmp_path)) == 1 and os.path.isdir(tmp_path / ".snakemake/locks")
