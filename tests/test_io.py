"""Atomic writes: a failure half-way leaves the old file (or none), never a partial one."""

import json

import pytest

from hwsweep.contracts import io


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
