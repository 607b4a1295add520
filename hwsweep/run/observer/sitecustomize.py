"""Watch what a user's command actually trains, from inside each of its Python processes.

hwsweep's runner puts this folder first on the command's PYTHONPATH, so every Python process the
command starts (torchrun's workers, processes a script spawns itself, data-loader workers) runs this
at startup. Nothing happens until the process imports torch; then hooks count, for the first few
optimizer steps, the samples each step's training forwards saw (the outermost module call, training
mode, gradients on, the first input tensor's `batch_dim`; once the weights moved within a step, forwards
re-evaluate its samples: a closure's, SAM's second pass), every optimizer step, and every backward
pass with the samples its forwards saw: a script that updates its weights by hand (`p.data.add_(p.grad,
alpha=-lr)`, no torch.optim) is seen through its backward passes. A process that ran a backward pass or
stepped an optimizer writes one small JSON file: its rank and world size (the process group's, else the
environment's), backend, device, threads, samples per step and per backward pass, steps and backward
passes. hwsweep.run.observe compares them with the plan.

Self-contained on purpose (standard library and torch only): the command may run another
interpreter than hwsweep's. Any failure here is swallowed: observing must never break a run.
The usual sitecustomize, if the environment has one, is run after this one.
"""

import atexit
import importlib.machinery
import importlib.util
import json
import os
import socket
import sys

OUT = os.environ.get("HWSWEEP_OBSERVE_DIR")
STEPS_COUNTED = 4  # steps whose samples are counted; later steps only count (no per-call cost after these)
# Backward passes whose samples are counted when no optimizer has stepped yet: enough for the first steps of any
# usual gradient accumulation; past them a script without a torch optimizer is only counted.
BACKWARDS_COUNTED = 64


class _State:
    def __init__(self, torch, batch_dim):
        self.torch, self.batch_dim = torch, batch_dim
        self.depth, self.top, self.samples, self.per_step = 0, None, 0, []
        self.steps, self.main, self.device, self.group, self.unpatch = 0, None, None, None, None
        self.backwards, self.per_backward, self.since_backward = 0, [], 0
        self.weight, self.version = None, None  # a trained weight of the model, and its version at the step's start

    def forward(self, module, args, kwargs):
        if self.top is None:
            self.top = id(module)
        elif id(module) != self.top:
            return  # another model, or a recomputed block (activation checkpointing) outside the model's call
        tensor = _first_tensor(self.torch, (args, kwargs), 4)
        if tensor is None:
            return
        if self.device is None:
            param = next(module.parameters(), None)
            self.device = str(param.device if param is not None else tensor.device)
        if self.batch_dim is not None and tensor.dim() > self.batch_dim:
            if self._same_weights(module):  # else the step re-evaluates samples it has: not new ones
                self.samples += int(tensor.shape[self.batch_dim])
            self.since_backward += int(tensor.shape[self.batch_dim])

    def _same_weights(self, module):
        """Whether the model's weights are still those of this step's first forward. An optimizer whose step calls
        its closure again (LBFGS's line search) or a two-pass update (SAM: forward, perturb the weights, forward the
        same batch again) moves the weights before it forwards the step's samples again; accumulation does not
        (micro-batches meet the same weights). A weight's in-place version counter says which."""
        if self.weight is None:
            self.weight = next((p for p in module.parameters() if p.requires_grad), False)
        version = getattr(self.weight, "_version", None)
        if self.version is None:
            self.version = version
        return version == self.version

    def backward(self):
        """A backward pass: with no torch optimizer, what a step is made of (the script updates by hand)."""
        self.backwards += 1
        if self.group is None:
            self._group()
        if self.unpatch is not None and len(self.per_backward) < BACKWARDS_COUNTED:
            self.per_backward.append(self.since_backward)
        self.since_backward = 0
        if not self.steps and self.backwards >= BACKWARDS_COUNTED and self.unpatch is not None:
            self.unpatch()  # no optimizer so far: the forwards' per-call cost ends here too
            self.unpatch = None

    def step(self, optimizer):
        if self.main is None:
            self.main = id(optimizer)
        if id(optimizer) != self.main:
            return  # a second optimizer (a GAN's) steps on the same samples
        self.steps += 1
        self.depth = 0  # a forward that raised never came back down
        self.version = None  # the next step's first forward reads the weights anew
        self.since_backward = 0
        if self.group is None:
            self._group()
        if self.unpatch is not None:
            self.per_step.append(self.samples)
            self.samples = 0
            if self.steps >= STEPS_COUNTED:
                self.unpatch()
                self.unpatch = None
                self.write()

    def _group(self):
        """The process group this process trains in, read while it exists (a script may destroy it before exit)."""
        dist = sys.modules.get("torch.distributed")
        try:
            if dist is not None and dist.is_available() and dist.is_initialized():
                self.group = {"rank": dist.get_rank(), "world_size": dist.get_world_size(), "backend": str(dist.get_backend())}
        except Exception:
            pass

    def write(self):
        if not self.steps and not self.backwards:
            return
        if self.group is None:
            self._group()
        torch = self.torch
        env = {k: os.environ[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE") if k in os.environ}
        record = {"host": socket.gethostname(), "pid": os.getpid(), "process_group": self.group, "env": env,
                  "device": self.device, "threads": torch.get_num_threads(), "samples_per_step": self.per_step,
                  "optimizer_steps": self.steps, "batch_dim": self.batch_dim, "backward_passes": self.backwards,
                  "samples_per_backward": self.per_backward}
        path = os.path.join(OUT, f"{record['host']}-{record['pid']}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(record, f)
        os.replace(path + ".tmp", path)  # whole or absent: the runner may read while others still write


def _first_tensor(torch, value, depth):
    if isinstance(value, torch.Tensor):
        return value
    if depth == 0:
        return None
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    for item in items:
        found = _first_tensor(torch, item, depth - 1)
        if found is not None:
            return found
    return None


def _install(torch):
    """Hooks into the freshly imported torch: Module.__call__ (for the first steps only) and a global
    optimizer step hook."""
    raw = os.environ.get("HWSWEEP_BATCH_DIM", "0")
    state = _State(torch, int(raw) if raw.isdigit() else None)
    module_call = torch.nn.Module.__call__

    def call(self, *args, **kwargs):
        if state.depth == 0 and self.training and torch.is_grad_enabled():
            state.forward(self, args, kwargs)
        state.depth += 1
        try:
            return module_call(self, *args, **kwargs)
        finally:
            state.depth -= 1

    def unpatch():
        torch.nn.Module.__call__ = module_call

    backward = torch.autograd.backward  # Tensor.backward calls it too
    running = []  # a backward pass under way: one inside it (reentrant activation checkpointing) is part of it

    def counted_backward(*args, **kwargs):
        if running:
            return backward(*args, **kwargs)
        running.append(True)
        try:
            result = backward(*args, **kwargs)
        finally:
            running.pop()
        try:
            state.backward()
        except Exception:
            pass  # observing must never break a run
        return result

    from torch.optim.optimizer import register_optimizer_step_post_hook

    register_optimizer_step_post_hook(lambda optimizer, args, kwargs: state.step(optimizer))
    torch.autograd.backward = counted_backward
    atexit.register(state.write)
    torch.nn.Module.__call__ = call  # last: a failure above leaves torch as it was
    state.unpatch = unpatch


class _TorchImport:
    """A meta-path finder that lets torch import as usual, then installs the hooks into it."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            try:
                _install(module)
            except Exception:
                pass  # observing must never break a run

        spec.loader.exec_module = exec_module
        return spec


def _chain():
    """Run the sitecustomize this one shadows (a conda or site install may have its own)."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


if OUT and os.path.isdir(OUT) and "torch" not in sys.modules:
    sys.meta_path.insert(0, _TorchImport())
try:
    _chain()
except Exception:
    pass
