"""TorchDynamo imported only by a process that needs it: a run that never compiles and does not shard does not.

Importing TorchDynamo costs more CPU than `import torch` itself (1.2-1.7 CPU-s on a 2-core machine). torch imports
it on first use, and a run that never compiles reaches it in four places, none of which needs it there:

- every torch optimizer's step imports it to call torch._dynamo.graph_break(), which does nothing outside a traced
  frame;
- a function torch marks "never trace" (torch._disable_dynamo: an optimizer's add_param_group and state_dict, the
  meta device's reference implementations) imports it at its first call to make its untraced version, which,
  before anything was ever compiled, is the function itself;
- DDP's constructor asks torch._dynamo.utils.get_optimize_ddp_mode() how compiled code will treat it (its config's
  optimize_ddp, which nothing can have changed without importing TorchDynamo: the default);
- torch.use_deterministic_algorithms imports inductor's config, and TorchDynamo with it, to set the
  `deterministic` flag that only inductor's compiled code reads.

defer() puts a stand-in for torch._dynamo into sys.modules that answers the first three as TorchDynamo answers them
in such a process, and gives way to the real package as soon as anything asks it for anything else (torch.compile,
FSDP's hooks, any other attribute, an import of one of its submodules): from then on the process has TorchDynamo as
if it had imported it itself, and a function made untraced before takes torch's own path at its next call. While
it stands in, use_deterministic_algorithms sets torch's flag and the variable inductor's config reads its own from
at its import (TORCHINDUCTOR_DETERMINISTIC). Read from torch 2.13: where torch's code is not what these were read
from (its marker does not ask for disable(fn, recursive, wrapping=False), DDP's constructor does not ask for the
mode, the config's default is not a literal, use_deterministic_algorithms sets more than the two flags), nothing
stands in for that part and torch's own path runs.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import threading
import types
from pathlib import Path

import torch
import torch._compile

DYNAMO, INDUCTOR_CONFIG = "torch._dynamo", "torch._inductor.config"


def needed(recipe, world_size: int) -> bool:
    """Whether a run's processes import TorchDynamo whatever stands in for it: the run compiles, or shards over
    several processes (FSDP's hooks ask TorchDynamo to leave them untraced)."""
    return bool(recipe.compile) or (recipe.parallel.sharded and world_size > 1)


def imported() -> bool:
    """Whether this process has the real TorchDynamo (anything compiled, or able to be)."""
    return DYNAMO in sys.modules and not deferred()


def deferred() -> bool:
    """Whether the stand-in stands in for TorchDynamo."""
    return isinstance(sys.modules.get(DYNAMO), _StandIn)


class _Untraced:
    """What the stand-in's disable(fn, recursive, wrapping=False) gives torch's marker, which keeps it as fn's
    untraced version: fn itself while the real TorchDynamo was never imported (nothing is traced yet), torch's
    untraced version of fn once it was (made then, kept where the marker keeps it)."""

    def __init__(self, fn, recursive: bool):
        self.fn, self.recursive = fn, recursive

    def _real(self):
        untraced = _real_module().disable(self.fn, self.recursive, wrapping=False)
        setattr(self.fn, "__dynamo_disable", untraced)  # where the marker keeps it (spelled out: not name-mangled)
        return untraced

    def __call__(self, *args, **kwargs):
        if not imported():
            return self.fn(*args, **kwargs)
        return self._real()(*args, **kwargs)

    def __getattr__(self, name):  # anything else torch asks of an untraced function: the real one's
        if name in ("fn", "recursive"):  # not set yet (a copy in the making)
            raise AttributeError(name)
        return getattr(self._real(), name)


# What get_optimize_ddp_mode() makes of the config's optimize_ddp (a bool names a mode; a string is one of these).
DDP_MODES = {True: "ddp_optimizer", False: "no_optimization"}
KNOWN_DDP_MODES = {"ddp_optimizer", "python_reducer", "python_reducer_without_compiled_forward", "no_optimization"}


def _default_ddp_mode(package: str) -> str | None:
    """The mode get_optimize_ddp_mode() answers before anything set TorchDynamo's config: the default of
    optimize_ddp in config.py under `package` (the real package's folder), read without importing it; None where
    that default is not a literal mode, or DDP's constructor asks TorchDynamo for something else."""
    from torch.nn.parallel import DistributedDataParallel

    if "get_optimize_ddp_mode" not in DistributedDataParallel.__init__.__code__.co_names:
        return None
    try:
        source = Path(package, "config.py").read_text()
    except OSError:
        return None
    found = re.search(r"^optimize_ddp\b[^=]*=\s*(True|False|\"\w+\")\s*$", source, re.M)
    if found is None:
        return None
    value = found.group(1)
    mode = DDP_MODES.get(value == "True") if value in ("True", "False") else value.strip('"')
    return mode if mode in KNOWN_DDP_MODES else None


class _Utils:
    """torch._dynamo.utils while the stand-in stands in: get_optimize_ddp_mode() answers the config's default
    (nothing can have set it yet), or the real one's answer once TorchDynamo is imported; anything else is the real
    module's."""

    def __init__(self, package: str):
        self.package = package

    def get_optimize_ddp_mode(self) -> str:
        mode = None if imported() else _default_ddp_mode(self.package)
        return mode if mode is not None else _real_module().utils.get_optimize_ddp_mode()

    def __getattr__(self, name):
        if name == "package":  # not set yet (a copy in the making)
            raise AttributeError(name)
        return getattr(_real_module().utils, name)


class _StandIn(types.ModuleType):
    """torch._dynamo in sys.modules until anything but graph_break(), the marker's disable() and DDP's mode is asked
    of it. It has the real package's __spec__, __file__ and __path__: a look at every module's file
    (inspect.getmodule, in the middle of some other module's import) imports nothing, and an import of a submodule
    finds _Submodules."""

    def __init__(self, spec):
        super().__init__(DYNAMO, "TorchDynamo, imported when needed (hwsweep.run.lazy_dynamo)")
        self.__spec__, self.__file__, self.__path__ = spec, spec.origin, list(spec.submodule_search_locations)
        self.utils = _Utils(self.__path__[0])

    def graph_break(self, msg: str = "") -> None:
        """TorchDynamo's graph_break does nothing when called, outside a traced frame: nothing is traced yet."""

    def disable(self, fn=None, recursive=True, *, reason=None, wrapping=True):
        if fn is not None and not wrapping and reason is None:  # torch._disable_dynamo's call, and only it
            return _Untraced(fn, recursive)
        return _real_module().disable(fn, recursive, reason=reason, wrapping=wrapping)

    def __getattr__(self, name):
        return getattr(_real_module(), name)


class _AlreadyLoaded(importlib.abc.Loader):
    """A submodule the real package's import loaded already, handed to the import that asked for it (instead of
    a second copy of it), its own spec and loader kept."""

    def __init__(self, module):
        self.module, self.spec, self.loader = module, module.__spec__, module.__loader__

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        module.__spec__, module.__loader__ = self.spec, self.loader


class _Submodules(importlib.abc.MetaPathFinder):
    """An import of torch._dynamo.X while the stand-in stands in: the real package imported first (its import
    may load X itself; if it did, X is that module), then X found as ever."""

    def find_spec(self, name, path, target=None):
        if not (name.startswith(DYNAMO + ".") and deferred()):
            return None
        _real_module()
        module = sys.modules.get(name)
        if module is None or getattr(module, "__spec__", None) is None:
            return None
        return importlib.machinery.ModuleSpec(name, _AlreadyLoaded(module), is_package=hasattr(module, "__path__"))


_SUBMODULES = _Submodules()
_LOCK = threading.RLock()


def _real_module() -> types.ModuleType:
    """The real TorchDynamo, imported now if the stand-in still stands in for it."""
    with _LOCK:  # one thread takes it out; the import system's own lock makes any other wait for the import
        if deferred():
            del sys.modules[DYNAMO]
    return importlib.import_module(DYNAMO)


def _marker_asks_for_disable() -> bool:
    """Whether torch._disable_dynamo's wrapper is the one read here: it imports TorchDynamo and asks it for
    disable(fn, recursive, wrapping=False), which it keeps as fn.__dynamo_disable."""
    for code in torch._compile._disable_dynamo.__code__.co_consts:
        if isinstance(code, types.CodeType) and code.co_name == "inner":
            strings = [c for const in code.co_consts for c in (const if isinstance(const, tuple) else (const,))]
            return {"disable", "__dynamo_disable", "wrapping"} <= set(code.co_names) | set(map(str, strings))
    return False


def defer() -> bool:
    """The stand-in installed, where TorchDynamo was not imported yet and torch's marker is the one read here;
    call it after init_process_group (which asks a TorchDynamo in sys.modules to clear its caches), in a process
    that builds no FSDP module (FSDP's hooks ask it to leave them untraced: such a process imports it all the
    same, only later). Whether it was installed."""
    with _LOCK:
        if DYNAMO in sys.modules or not _marker_asks_for_disable():
            return False
        spec = importlib.util.find_spec(DYNAMO)  # where the real package is: nothing imported
        if spec is None or not spec.submodule_search_locations:  # a torch without it: nothing to stand in for
            return False
        if _SUBMODULES not in sys.meta_path:
            sys.meta_path.insert(0, _SUBMODULES)
        # torch._dynamo as torch's own lazy attribute finds it; the real package's import sets it again
        sys.modules[DYNAMO] = torch._dynamo = _StandIn(spec)
        return True


def eager():
    """torch.compiler.set_stance("force_eager") where anything can have been compiled; before that there is
    nothing to force, and nothing to import."""
    return torch.compiler.set_stance("force_eager") if imported() else contextlib.nullcontext()


def _sets_only_the_two_flags() -> bool:
    """Whether torch.use_deterministic_algorithms is the function read here: it imports inductor's config, sets
    its `deterministic` and torch's flag, and nothing else."""
    names = set(torch.use_deterministic_algorithms.__code__.co_names)
    return names == {INDUCTOR_CONFIG, "_inductor", "config", "deterministic", "_C", "_set_deterministic_algorithms"}


def use_deterministic_algorithms(mode: bool, warn_only: bool = False) -> None:
    """torch.use_deterministic_algorithms(mode); while the stand-in stands in, without importing inductor (and
    TorchDynamo) for inductor's flag (inductor's import brings the real TorchDynamo in: while the stand-in stands
    in, inductor's config is not imported yet)."""
    if not deferred() or not _sets_only_the_two_flags():
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
        return
    os.environ["TORCHINDUCTOR_DETERMINISTIC"] = "1" if mode else "0"  # what inductor's config reads at its import
    torch._C._set_deterministic_algorithms(mode, warn_only=warn_only)
