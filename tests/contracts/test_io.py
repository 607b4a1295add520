"""Atomic writes: a failure half-way leaves the old file (or none), never a partial one; a write the file system
refuses (full, read-only, not permitted) is one line naming the folder and the fix."""

import json
import subprocess
import sys

import pytest
import torch
from conftest import WITHOUT_OVERRIDE, fill

from hwsweep.contracts import io
from hwsweep.contracts.spec import CHECKPOINT_TEMPORARIES
from hwsweep.run.checkpoint import CheckpointManager


def test_failed_write_leaves_previous_content_and_no_temp_files(tmp_path):
    target = tmp_path / "out" / "train.json"
    io.write_json(target, {"a": 1})
    with pytest.raises(RuntimeError):
        with io.atomic_path(target) as tmp:
            tmp.write_text('{"a": 2, "trunc')
            raise RuntimeError("killed")
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in target.parent.iterdir()] == ["train.json"]


def test_truncated_record_is_not_read_as_a_result(tmp_path):
    path = tmp_path / "train.json"
    path.write_text('{"status": "complete", "losses": [1.0, ')
    with pytest.raises(json.JSONDecodeError):
        io.read_json(path)


# -- file system faults: one line naming the folder and the fix (issue 36) -------------------------------------------


def _one_line(err, folder, words):
    text = str(err)
    assert text.startswith(f"{folder}: {words}") and "\n" not in text and "run snakemake again" in text, text


def test_a_write_to_a_full_disk_is_one_line_and_leaves_the_old_file_and_no_temporary(tmp_path, small_disk):
    disk = small_disk(tmp_path / "disk", 1)
    target = disk / "run" / "train.json"
    io.write_json(target, {"a": 1})
    fill(disk)
    with pytest.raises(io.StorageError) as err:
        io.write_json(target, {"a": "x" * 100_000})
    _one_line(err.value, target.parent, "no space left on device (0 bytes free)")
    assert json.loads(target.read_text()) == {"a": 1} and sorted(p.name for p in target.parent.iterdir()) == ["train.json"]
    with pytest.raises(io.StorageError, match="no space left on device"):
        io.append_line(disk / "run" / "metrics.jsonl", json.dumps({"step": 1, "loss": 1.0}) * 2000)


def test_torch_on_a_full_disk_is_named_not_left_to_torchs_unexpected_pos(tmp_path, small_disk):
    disk = small_disk(tmp_path / "disk", 1)
    fill(disk, leave=64 * 1024)  # room for a bit of the file: torch's writer then fails in its own words
    with pytest.raises(io.StorageError) as err:
        with io.atomic_path(disk / "step.pt") as tmp:
            torch.save({"w": torch.zeros(200_000)}, tmp)  # 800 KB
    _one_line(err.value, disk, "no space left on device")
    assert isinstance(err.value.__cause__, RuntimeError)  # torch's "unexpected pos", kept as the cause
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]


def test_a_checkpoint_that_would_not_fit_is_refused_before_it_is_written(tmp_path, small_disk):
    disk = small_disk(tmp_path / "disk", 4)
    model = torch.nn.Linear(300, 300)
    manager = CheckpointManager(disk / "checkpoints", "fp", {"model": model})
    manager.save(1)  # 360 KB: fits
    fill(disk, leave=200 * 1024)
    with pytest.raises(io.StorageError) as err:
        manager.save(2)
    _one_line(err.value, disk / "checkpoints", "no space left on device")
    assert "needed" in str(err.value)
    assert sorted(p.name for p in (disk / "checkpoints").iterdir()) == ["step000000001.pt"]  # nothing half-written
    assert manager.find()[1]["step"] == 1


def test_a_read_only_folder_is_one_line(tmp_path, read_only):
    folder = tmp_path / "results"
    io.write_json(folder / "a.json", {"a": 1})
    read_only(folder)
    assert "read-only file system" in str(io.writable_problem(folder / "tiny"))
    with pytest.raises(io.StorageError) as err:
        io.write_json(folder / "tiny" / "b.json", {"b": 2})
    _one_line(err.value, folder / "tiny", "read-only file system; remount it read-write")
    with pytest.raises(io.StorageError, match="read-only file system"):
        io.append_line(folder / "a.json", "x")
    assert json.loads((folder / "a.json").read_text()) == {"a": 1}


def test_permission_denied_is_one_line_from_an_entry_point(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    folder.chmod(0o555)
    program = ("import sys; from hwsweep.contracts import io; io.one_line_refusals(); "
               f"print(io.writable_problem({str(folder)!r})); io.write_json({str(folder / 'a.json')!r}, {{}})")  # fmt: skip
    proc = subprocess.run([*WITHOUT_OVERRIDE, sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    if "setpriv" in proc.stderr and proc.returncode != 1:
        pytest.skip(f"cannot drop capabilities here: {proc.stderr}")
    assert "permission denied for user" in proc.stdout
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"hwsweep: {folder}: permission denied for user root; make it writable")
    assert not list(folder.iterdir())


def test_temporaries_a_killed_write_left_are_removed_and_nothing_else(tmp_path):
    ckpt = tmp_path / "checkpoints"
    ckpt.mkdir()
    stale = [ckpt / ".step000000025.pt.abc123.tmp", tmp_path / ".train.json.x1y2.tmp"]
    for path in stale:
        path.write_bytes(b"")
    (ckpt / ".step000000050.tmp").mkdir()  # a sharded checkpoint's folder, cut short
    kept = [ckpt / "step000000020.pt", tmp_path / "train.json", tmp_path / ".script-state.tmp", ckpt / ".last.ckpt.tmp"]
    for path in kept:
        path.write_text("x")
    assert [p.name for p in io.remove_temporaries(ckpt, (CHECKPOINT_TEMPORARIES,))] == [
        ".step000000025.pt.abc123.tmp", ".step000000050.tmp"]  # fmt: skip
    owned = (io.temporaries("train.json"), io.temporaries("final.pt"))
    assert [p.name for p in io.remove_temporaries(tmp_path, owned)] == [".train.json.x1y2.tmp"]
    assert all(p.exists() for p in kept) and not any(p.exists() for p in stale)
