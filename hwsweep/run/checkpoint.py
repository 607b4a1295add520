"""Checkpoints of one run, in the spirit of torchtitan's CheckpointManager: the training loop
registers what it trains (anything with state_dict/load_state_dict) and calls `save(step)`
and `load()`; this module owns the files.

- A checkpoint carries the run's fingerprint (the spec's hash): it is only resumed by the
  run that wrote it, never by another recipe, plan or seed writing into the same folder.
- `save(step)` is collective: every rank's RNG state is gathered, rank 0 writes the file
  atomically (a kill never leaves a torn file that looks complete) and keeps the newest k.
- `load(step=-1)` finds the newest complete checkpoint of this very run (a damaged file is
  skipped, an older one may do), restores every registered object and this rank's RNG.
- `link_final(path)` makes the last checkpoint the run's final one without a second copy.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist

from hwsweep.contracts import io
from hwsweep.run import repro

PATTERN = "step*.pt"
KEEP = 2


def fingerprint(spec) -> str:
    """The resolved spec's hash: same recipe, plan, seed and run directory, same fingerprint. The trackers
    are left out: turning tracking on or off does not change what trains, so a run still resumes."""
    resolved = {k: v for k, v in spec.to_dict().items() if k != "tracking"}
    return hashlib.sha256(json.dumps(resolved, sort_keys=True).encode()).hexdigest()


def step_file(folder: Path, step: int) -> Path:
    return Path(folder) / f"step{step:09d}.pt"


class CheckpointManager:
    def __init__(self, folder, fingerprint: str, states: dict | None = None, keep: int = KEEP):
        self.folder = Path(folder)
        self.fingerprint = fingerprint
        self.states = dict(states or {})  # name -> object with state_dict() / load_state_dict()
        self.keep = keep
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        self.world_size = dist.get_world_size() if dist.is_initialized() else 1
        self.last: Path | None = None  # the newest checkpoint saved or loaded by this run

    def register(self, **states) -> None:
        self.states |= {name: obj for name, obj in states.items() if obj is not None}

    def save(self, step: int) -> Path:
        """Collective: call on every rank at the same step."""
        rng = [None] * self.world_size
        if self.world_size > 1:
            dist.all_gather_object(rng, repro.rng_state())
        else:
            rng = [repro.rng_state()]
        path = step_file(self.folder, step)
        if self.rank == 0:
            state = {"fingerprint": self.fingerprint, "step": step, "rng": rng}
            state |= {name: obj.state_dict() for name, obj in self.states.items()}
            with io.atomic_path(path) as tmp:
                torch.save(state, tmp)
            for old in sorted(self.folder.glob(PATTERN))[: -self.keep]:
                old.unlink()
        if self.world_size > 1:
            dist.barrier()  # nobody reads or links the file before it exists
        self.last = path
        return path

    def find(self, step: int = -1) -> tuple[Path | None, dict | None]:
        """(path, state) of the newest complete checkpoint of this run (step -1) or of `step`."""
        paths = [step_file(self.folder, step)] if step >= 0 else sorted(self.folder.glob(PATTERN), reverse=True)
        for path in paths:
            try:
                state = torch.load(path, map_location="cpu", weights_only=False)
            except Exception:  # noqa: BLE001 - damaged or missing: an older one may do
                continue
            if isinstance(state, dict) and state.get("fingerprint") == self.fingerprint:
                return path, state
        return None, None

    def load(self, step: int = -1) -> int:
        """Restore every registered object and this rank's RNG; the step resumed (0: none)."""
        path, state = self.find(step)
        if state is None:
            return 0
        for name, obj in self.states.items():
            obj.load_state_dict(state[name])
        repro.set_rng_state(state["rng"][self.rank])
        self.last = path
        return state["step"]

    def link_final(self, final) -> None:
        """Rank 0: `final` becomes the newest checkpoint (a hard link where the file system allows)."""
        if self.rank != 0 or self.last is None:
            return
        with io.atomic_path(final) as tmp:
            tmp.unlink()
            try:
                os.link(self.last, tmp)
            except OSError:
                tmp.write_bytes(self.last.read_bytes())
