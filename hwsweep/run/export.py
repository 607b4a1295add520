"""A run's final checkpoint as one file, whole: what `hwsweep export RUN_DIR` writes where a user asks for it.

A sharded (FSDP) run's final checkpoint stays sharded (final.pt names the folder final/, DCP's shards as every rank
wrote them): nothing in the workflow gathers the whole model, evaluation included (hwsweep.run.sharded_eval). An
export is the one step that does, on purpose, in this one process, as torchtitan's model-only last save does: the
model's tensors alone (not the optimizer's state) are read from the shards into whole tensors and written as a plain
checkpoint holds them, {fingerprint, step, model}, which torch.load and the one-process evaluator read. It needs the
memory of the whole weights once. A plain run's final.pt is whole already: it is copied.

    hwsweep export results/<suite>/<variant>/<hardware>/seed<seed> [--out model.pt]
"""

from __future__ import annotations

import shutil
import sys
import warnings
from pathlib import Path

import torch

from hwsweep.contracts import io
from hwsweep.contracts.spec import FINAL_CHECKPOINT

EXPORTED = "model.pt"  # in the run folder, unless --out says where


def final_state(run_dir) -> dict:
    """final.pt of the run in `run_dir` as written: whole ({fingerprint, step, model}) or naming its shards
    ({fingerprint, step, shards, world_size})."""
    return torch.load(Path(run_dir, FINAL_CHECKPOINT), map_location="cpu", weights_only=False)


def model_from_shards(folder, key: str) -> dict:
    """The model's tensors of the DCP checkpoint in `folder` (under `key`, e.g. sharded.model), whole, in this process
    (no process group): each allocated from the checkpoint's own metadata (its shape and type), then filled from
    every rank's shards."""
    from hwsweep.run.sharded_eval import nested
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    metadata = dcp.FileSystemReader(str(folder)).read_metadata()
    prefix = f"{key}."
    model = {key[len(prefix):]: torch.empty(m.size, dtype=m.properties.dtype)
             for key, m in metadata.state_dict_metadata.items()
             if key.startswith(prefix) and isinstance(m, TensorStorageMetadata)}  # fmt: skip
    if not model:
        raise ValueError(f"{folder}: no model tensors in this checkpoint")
    with warnings.catch_warnings():  # "torch.distributed is disabled ... load in a single process": as meant
        warnings.simplefilter("ignore", UserWarning)
        dcp.load(nested(key, model), checkpoint_id=str(folder), no_dist=True)  # the model's entries only
    return model


def whole(run_dir) -> dict:
    """The run's final checkpoint with its model whole: {fingerprint, step, model}."""
    state = final_state(run_dir)
    if "shards" not in state:
        return state
    return {"fingerprint": state["fingerprint"], "step": state["step"],
            "model": model_from_shards(Path(run_dir, state["shards"]), state["model_key"])}  # fmt: skip


def export(run_dir, out=None) -> Path:
    """Write the run's final model whole to `out` (default RUN_DIR/model.pt), atomically; its path."""
    run_dir = Path(run_dir)
    out = Path(out) if out else run_dir / EXPORTED
    if not Path(run_dir, FINAL_CHECKPOINT).is_file():
        raise FileNotFoundError(f"{run_dir / FINAL_CHECKPOINT}: no final checkpoint; train the run first")
    state = final_state(run_dir)
    with io.atomic_path(out) as tmp:
        if "shards" in state:
            torch.save(whole(run_dir), tmp)
        else:
            shutil.copyfile(run_dir / FINAL_CHECKPOINT, tmp)
    return out


def main(run_dir, out=None) -> int:
    """`hwsweep export`: 0 and the path written, or 1 and one line saying why not."""
    try:
        written = export(run_dir, out)
    except (OSError, ValueError, io.StorageError) as e:
        print(f"hwsweep export: {e}", file=sys.stderr)
        return 1
    print(f"hwsweep export: {written}")
    return 0
