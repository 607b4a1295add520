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

Sharded runs (FSDP) register their model and optimizers as one `Sharded` state: each checkpoint is then a
folder step<N>/ that every rank writes its shards into with torch.distributed.checkpoint (DCP), beside
meta.pt (fingerprint, step, RNG, the other states); it is written under a hidden name and renamed when
complete, and the newest k are kept, as for files. DCP reshards on load, so a checkpoint written at one
world size loads at another: `find` then also accepts the run's layout-free fingerprint (the spec without
its hardware and device layout) and `resharded_from` says from which world size it came.
`link_final_sharded(final, shards)` makes the last sharded checkpoint the run's final one, still sharded: a folder
of hard links to its shards (FINAL_SHARDS, `final/`) and final.pt a small file naming it; no rank ever gathers the
whole model. Evaluation loads it sharded (hwsweep.run.sharded_eval); `hwsweep export` writes it whole as one file
where a user asks for that (hwsweep.run.export).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import torch
import torch.distributed as dist

from hwsweep.contracts import io
from hwsweep.run import repro

PATTERN = "step*.pt"
SHARDED_PATTERN = "step[0-9]*[0-9]"  # a folder per checkpoint: DCP's shards and meta.pt
META = "meta.pt"
KEEP = 2
# What may change between two attempts of one run when it moves to another device count: the hardware
# entry and the plan's layout of the global batch over devices (the batch, schedule and recipe may not).
LAYOUT = ("nodes", "devices_per_node", "world_size", "micro_batch", "accumulation", "est_memory_gb", "memory_gb",
          "memory_source", "warnings")  # fmt: skip


def _hash(data: dict) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def fingerprint(spec) -> str:
    """The resolved spec's hash: same recipe, plan, seed and run directory, same fingerprint."""
    return _hash(spec.to_dict())


def layout_fingerprint(spec) -> str:
    """The spec's hash without its hardware and device layout: the same run at another world size."""
    data = spec.to_dict()
    data.pop("hardware", None)
    data["plan"] = {k: v for k, v in data["plan"].items() if k not in LAYOUT}
    return _hash(data)


def tensor_bytes(state) -> int:
    """The bytes of the tensors in a (nested) state dict, as a checkpoint stores them: this rank's shard of a
    sharded tensor. What a checkpoint needs on disk, give or take its pickled scalars."""
    if isinstance(state, torch.Tensor):
        local = state.to_local() if hasattr(state, "to_local") else state
        return local.numel() * local.element_size()
    if isinstance(state, dict):
        return sum(tensor_bytes(v) for v in state.values())
    if isinstance(state, (list, tuple)):
        return sum(tensor_bytes(v) for v in state)
    return 0


def step_file(folder: Path, step: int) -> Path:
    return Path(folder) / f"step{step:09d}.pt"


def step_folder(folder: Path, step: int) -> Path:
    return Path(folder) / f"step{step:09d}"


class Sharded:
    """A sharded (FSDP) model and its optimizers, as torch.distributed.checkpoint saves them: every rank
    holds and writes its own shards, and loading reshards to the world size at hand."""

    def __init__(self, model, optimizers: dict):
        self.model, self.optimizers = model, optimizers

    def state_dict(self) -> dict:
        from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

        return {"model": get_model_state_dict(self.model)} | {
            name: get_optimizer_state_dict(self.model, opt) for name, opt in self.optimizers.items()}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

        set_model_state_dict(self.model, state["model"])
        for name, opt in self.optimizers.items():
            set_optimizer_state_dict(self.model, opt, state[name])


class CheckpointManager:
    def __init__(self, folder, fingerprint: str, states: dict | None = None, keep: int = KEEP,
                 layout: str | None = None):  # fmt: skip
        self.folder = Path(folder)
        self.fingerprint = fingerprint
        self.layout = layout  # the layout-free fingerprint: a sharded checkpoint of it loads at any world size
        self.resharded_from: int | None = None  # the world size of a sharded checkpoint loaded at another one
        self.states = dict(states or {})  # name -> object with state_dict() / load_state_dict()
        self.keep = keep
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        self.world_size = dist.get_world_size() if dist.is_initialized() else 1
        self.last: Path | None = None  # the newest checkpoint saved or loaded by this run

    def register(self, **states) -> None:
        self.states |= {name: obj for name, obj in states.items() if obj is not None}

    @property
    def sharded(self) -> Sharded | None:
        return next((obj for obj in self.states.values() if isinstance(obj, Sharded)), None)

    def _plain(self) -> dict:
        return {name: obj for name, obj in self.states.items() if not isinstance(obj, Sharded)}

    def save(self, step: int) -> Path:
        """Collective: call on every rank at the same step."""
        rng = [None] * self.world_size
        if self.world_size > 1:
            dist.all_gather_object(rng, repro.rng_state())
        else:
            rng = [repro.rng_state()]
        if self.sharded is not None:
            return self._save_sharded(step, rng)
        path = step_file(self.folder, step)
        if self.rank == 0:
            state = {"fingerprint": self.fingerprint, "step": step, "rng": rng}
            state |= {name: obj.state_dict() for name, obj in self.states.items()}
            io.require_space(self.folder, tensor_bytes(state))  # a full disk named before torch's own words for it
            with io.atomic_path(path) as tmp:
                torch.save(state, tmp)
            with io.storage(self.folder):
                for old in sorted(self.folder.glob(PATTERN))[: -self.keep]:
                    old.unlink()
        if self.world_size > 1:
            dist.barrier()  # nobody reads or links the file before it exists
        self.last = path
        return path

    def _save_sharded(self, step: int, rng: list) -> Path:
        import torch.distributed.checkpoint as dcp

        path = step_folder(self.folder, step)
        tmp = path.with_name(f".{path.name}.tmp")  # a kill leaves this, never a folder that looks complete
        if self.rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
            with io.storage(self.folder):
                tmp.mkdir(parents=True)
        dist.barrier()
        sharded = {name: self.states[name].state_dict() for name, obj in self.states.items() if isinstance(obj, Sharded)}
        io.require_space(tmp, tensor_bytes(sharded))  # this rank's shards
        with io.storage(tmp):
            dcp.save(sharded, checkpoint_id=tmp)  # every rank's shards
        if self.rank == 0:
            meta = {"fingerprint": self.fingerprint, "layout": self.layout, "step": step, "rng": rng,
                    "world_size": self.world_size} | {name: obj.state_dict() for name, obj in self._plain().items()}  # fmt: skip
            with io.atomic_path(tmp / META) as part:
                torch.save(meta, part)
            with io.storage(self.folder):
                shutil.rmtree(path, ignore_errors=True)
                os.replace(tmp, path)
                for old in sorted(self.folder.glob(SHARDED_PATTERN))[: -self.keep]:
                    shutil.rmtree(old)
        dist.barrier()
        self.last = path
        return path

    def find(self, step: int = -1) -> tuple[Path | None, dict | None]:
        """(path, state) of the newest complete checkpoint of this run (step -1) or of `step`."""
        if self.sharded is not None:
            return self._find_sharded(step)
        paths = [step_file(self.folder, step)] if step >= 0 else sorted(self.folder.glob(PATTERN), reverse=True)
        for path in paths:
            try:
                state = torch.load(path, map_location="cpu", weights_only=False)
            except Exception:  # noqa: BLE001 - damaged or missing: an older one may do
                continue
            if isinstance(state, dict) and state.get("fingerprint") == self.fingerprint:
                return path, state
        return None, None

    def _find_sharded(self, step: int) -> tuple[Path | None, dict | None]:
        folders = [step_folder(self.folder, step)] if step >= 0 else sorted(self.folder.glob(SHARDED_PATTERN), reverse=True)
        for path in folders:
            try:
                meta = torch.load(path / META, map_location="cpu", weights_only=False)
            except Exception:  # noqa: BLE001 - damaged or missing: an older one may do
                continue
            if not isinstance(meta, dict):
                continue
            if meta.get("fingerprint") == self.fingerprint or (self.layout and meta.get("layout") == self.layout):
                return path, meta
        return None, None

    def load(self, step: int = -1) -> int:
        """Restore every registered object and this rank's RNG; the step resumed (0: none)."""
        path, state = self.find(step)
        if state is None:
            return 0
        for name, obj in self._plain().items():
            obj.load_state_dict(state[name])
        if self.sharded is not None:
            import torch.distributed.checkpoint as dcp

            shards = {name: obj.state_dict() for name, obj in self.states.items() if isinstance(obj, Sharded)}
            dcp.load(shards, checkpoint_id=path)  # into this rank's shards, at whatever world size wrote them
            for name, value in shards.items():
                self.states[name].load_state_dict(value)
            if state["world_size"] != self.world_size:
                self.resharded_from = state["world_size"]
        # Every rank starts from the same seed, so at another world size a rank takes a writer's streams in turn.
        repro.set_rng_state(state["rng"][self.rank % len(state["rng"])])
        self.last = path
        return state["step"]

    def link_final_sharded(self, final, shards) -> None:
        """Rank 0 (sharded runs): `shards` becomes the newest sharded checkpoint (a folder of hard links to its files,
        copies where the file system refuses links), and `final` a small file that names it with the run's
        fingerprint and step ({fingerprint, step, shards, model_key, world_size}; model_key: where the model's entries
        are in the shards, e.g. sharded.model): the shards stay where every rank wrote them,
        nothing is gathered."""
        if self.rank != 0 or self.last is None:
            return
        shards, final = Path(shards), Path(final)
        tmp = shards.with_name(f".{shards.name}.tmp")
        with io.storage(shards.parent):
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            for part in self.last.iterdir():
                try:
                    os.link(part, tmp / part.name)
                except OSError:
                    shutil.copyfile(part, tmp / part.name)
            shutil.rmtree(shards, ignore_errors=True)
            os.replace(tmp, shards)
        meta = torch.load(self.last / META, map_location="cpu", weights_only=False)
        name = next(name for name, obj in self.states.items() if isinstance(obj, Sharded))
        manifest = {"fingerprint": self.fingerprint, "step": meta["step"], "shards": shards.name,
                    "model_key": f"{name}.model", "world_size": meta["world_size"]}  # fmt: skip
        with io.atomic_path(final) as part:
            torch.save(manifest, part)

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
