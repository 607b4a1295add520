"""TorchDynamo imported only by a process that compiles (hwsweep.run.lazy_dynamo): a run that never compiles trains
without it to the bits of a run that imported it, and the real module takes over, once, wherever it is needed."""

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import types

import pytest
import torch
from conftest import launcher, one_thread

from hwsweep.contracts import io
from hwsweep.contracts.spec import FINAL_CHECKPOINT, METRICS_FILE, TRAIN_RECORD
from hwsweep.plan.config import resolve
from hwsweep.run import lazy_dynamo, torchrun, train

# What stands in sys.modules for TorchDynamo as the process ends (the real package is a plain module), and whether
# sympy and DTensor's module were imported (a model built on meta and given memory needs neither: hwsweep.run.weights).
WATCH = """
import atexit, sys
atexit.register(lambda: print("TorchDynamo:", type(sys.modules.get("torch._dynamo")).__name__, "sympy:",
                              "sympy" in sys.modules, "DTensor:", "torch.distributed.tensor" in sys.modules, flush=True))
"""


def _train(folder, spec: dict, first: str) -> tuple[str, dict]:
    """`python -u -m hwsweep.run.train spec.json` (a one-process run as the launcher starts it), `first` run before
    it; its output and its final weights."""
    spec = spec | {"run_dir": str(folder / "run")}
    io.write_json(folder / "spec.json", spec)
    code = WATCH + first + f"\nimport runpy\nsys.argv = ['hwsweep.run.train', {str(folder / 'spec.json')!r}]\n" + \
        "runpy.run_module('hwsweep.run.train', run_name='__main__')\n"  # fmt: skip
    proc = subprocess.run([*launcher(1), "-c", code], capture_output=True, text=True, timeout=300, env=one_thread())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert json.loads((folder / "run" / TRAIN_RECORD).read_text())["status"] == "complete"
    state = torch.load(folder / "run" / FINAL_CHECKPOINT, map_location="cpu", weights_only=False)
    return proc.stdout, state | {"losses": (folder / "run" / METRICS_FILE).read_text()}


@pytest.mark.slow
def test_one_process_imports_no_torchdynamo_or_sympy_and_trains_to_the_bits_of_one_that_did(tmp_path, small_config):
    small_config["recipe"]["schedule"] = {"steps": 8, "warmup_steps": 2}  # deterministic (the default level)
    spec = resolve(small_config).spec("tiny", "default", "cpu1", 0).to_dict()
    (tmp_path / "deferred").mkdir()
    (tmp_path / "imported").mkdir()
    out, deferred = _train(tmp_path / "deferred", spec, first="")
    assert "TorchDynamo: _StandIn sympy: False DTensor: False" in out, out[-2000:]
    out, imported = _train(tmp_path / "imported", spec, first="import torch._dynamo")
    assert "TorchDynamo: module sympy: True" in out  # the watch sees the real ones (it is not vacuous)
    assert deferred["losses"] == imported["losses"]  # every step's loss, to the last digit printed
    weights, reference = deferred["model"], imported["model"]
    assert weights.keys() == reference.keys() and all(torch.equal(weights[k], reference[k]) for k in weights)


# Put first on PYTHONPATH for a run's processes (the launcher, torchrun's agent and the workers it forks): each
# import of TorchDynamo is noted, with the process's id, in the file HWSWEEP_TEST_IMPORTS names (a stand-in in
# sys.modules spares the finders; a look for where the package is, importlib.util.find_spec, is no import); with
# HWSWEEP_TEST_FIRST set, each process imports it as it starts.
NOTE_IMPORTS = """
import os, sys

class Note:
    def find_spec(self, name, path=None, target=None):
        if name == "torch._dynamo" and sys._getframe(2).f_code.co_name == "_find_and_load_unlocked":
            with open(os.environ["HWSWEEP_TEST_IMPORTS"], "a") as f:
                f.write(f"{os.getpid()}\\n")

sys.meta_path.insert(0, Note())
if os.environ.get("HWSWEEP_TEST_FIRST"):
    import torch._dynamo
"""


def _launched(folder, spec: dict, first: bool) -> tuple[list[str], dict]:
    """The run as its train job starts it (python -m hwsweep.run.launch spec.json): the processes that imported
    TorchDynamo, and the final weights and logged losses."""
    folder.mkdir()
    (folder / "site").mkdir()
    (folder / "site/sitecustomize.py").write_text(NOTE_IMPORTS)
    io.write_json(folder / "spec.json", spec | {"run_dir": str(folder / "run")})
    path = os.pathsep.join(filter(None, [str(folder / "site"), os.environ.get("PYTHONPATH")]))
    env = one_thread() | {"PYTHONPATH": path, "HWSWEEP_TEST_IMPORTS": str(folder / "imports"),
                          "HWSWEEP_TEST_FIRST": "1" if first else ""}  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "hwsweep.run.launch", str(folder / "spec.json")], capture_output=True,
                          text=True, timeout=300, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    imports = (folder / "imports").read_text().split() if (folder / "imports").exists() else []
    state = torch.load(folder / "run" / FINAL_CHECKPOINT, map_location="cpu", weights_only=False)
    return imports, state | {"losses": (folder / "run" / METRICS_FILE).read_text()}


@pytest.mark.slow
def test_no_process_of_a_ddp_run_imports_torchdynamo_and_it_trains_to_the_bits_of_one_whose_processes_did(
    tmp_path, small_config
):
    """Two processes under DDP, forked from torchrun's agent, checkpointing: neither they nor the agent nor the
    launcher import TorchDynamo (DDP's constructor asks the stand-in for its mode); under FSDP the agent imports
    it once, for both workers, before it forks them."""
    small_config["recipe"] |= {"schedule": {"steps": 8, "warmup_steps": 2}, "checkpoint_every": 4}
    spec = resolve(small_config).spec("tiny", "default", "cpu2", 0).to_dict()
    imports, deferred = _launched(tmp_path / "deferred", spec, first=False)
    assert imports == []
    imports, imported = _launched(tmp_path / "imported", spec, first=True)
    assert len(imports) == 2  # the launcher's and the agent's: the note sees an import (it is not vacuous)
    assert deferred["losses"] == imported["losses"]  # every step's loss, to the last digit printed
    weights, reference = deferred["model"], imported["model"]
    assert weights.keys() == reference.keys() and all(torch.equal(weights[k], reference[k]) for k in weights)
    small_config["recipe"]["parallel"] = {"strategy": "fsdp"}
    imports, _ = _launched(tmp_path / "sharded", resolve(small_config).spec("tiny", "default", "cpu2", 0).to_dict(),
                           first=False)  # fmt: skip
    assert len(imports) == 1  # the agent's, before the fork (the workers have it from there)


# In a process of its own: the stand-in changes sys.modules for good.
TAKES_OVER = """
import inspect, sys, torch
from hwsweep.run import lazy_dynamo
assert lazy_dynamo.defer() and not lazy_dynamo.imported()
model = torch.nn.Linear(3, 3)
optimizer = torch.optim.AdamW(model.parameters())
model(torch.ones(2, 3)).sum().backward()
optimizer.step()  # imports torch._dynamo for its graph_break()
optimizer.zero_grad()
optimizer.state_dict()
with torch.device("meta"):  # the meta device's reference implementations are marked "never trace"
    torch.nn.Linear(3, 3)
inspect.getmodule(inspect.currentframe())  # reads every module's __file__
with lazy_dynamo.eager():
    pass
lazy_dynamo.use_deterministic_algorithms(True)
print("before", lazy_dynamo.imported(), "torch._inductor.config" in sys.modules,
      torch.are_deterministic_algorithms_enabled())
from torch._dynamo.eval_frame import OptimizedModule  # a submodule, through the stand-in
import torch._dynamo, torch._inductor.config
print("after", lazy_dynamo.imported(), torch._dynamo is sys.modules["torch._dynamo"],
      torch._dynamo.eval_frame.OptimizedModule is OptimizedModule, torch._inductor.config.deterministic)
untraced = torch.optim.Optimizer.add_param_group.__wrapped__
optimizer.add_param_group({"params": [torch.nn.Parameter(torch.ones(1))]})
print("untraced by", untraced.__dynamo_disable.__module__)
print("compiled", torch.compile(lambda x: x * 2, backend="eager")(torch.ones(2)).tolist(), lazy_dynamo.defer())
"""


@pytest.mark.slow
def test_the_real_torchdynamo_takes_over_once_where_anything_needs_it():
    proc = subprocess.run([sys.executable, "-c", TAKES_OVER], capture_output=True, text=True, timeout=300,
                          env=one_thread())  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    # An optimizer's step, zero_grad and state_dict, the meta device, a look at every module: nothing imported;
    # torch's deterministic flag set, and inductor's left to its import.
    assert lines[0] == "before False False True", proc.stdout
    # One copy of each of its modules, inductor deterministic as asked, the marker's function now torch's own.
    assert lines[1] == "after True True True True", proc.stdout
    assert lines[2] != "untraced by hwsweep.run.lazy_dynamo" and lines[2].startswith("untraced by torch"), lines[2]
    assert lines[3] == "compiled [2.0, 2.0] False", proc.stdout


def _another_marker(fn=None, recursive=True):
    """A torch._disable_dynamo that keeps nothing and asks TorchDynamo for a disable() of another signature."""

    def inner(*args, **kwargs):
        import torch._dynamo

        return torch._dynamo.disable(fn, recursive)(*args, **kwargs)

    return inner


def test_each_shortcut_is_taken_only_on_the_torch_it_was_read_from(monkeypatch):
    assert lazy_dynamo._marker_asks_for_disable() and lazy_dynamo._sets_only_the_two_flags()  # torch 2.13's
    calls = []
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda mode, warn_only=False: calls.append(mode))
    assert not lazy_dynamo._sets_only_the_two_flags()
    lazy_dynamo.use_deterministic_algorithms(True)  # another torch's function: called as it is
    assert calls == [True]
    monkeypatch.delitem(sys.modules, lazy_dynamo.DYNAMO, raising=False)
    monkeypatch.delitem(vars(torch), "_dynamo", raising=False)  # not getattr: torch's would import it
    with monkeypatch.context() as patched:
        patched.setattr(importlib.util, "find_spec", lambda name, package=None: None)  # a torch without TorchDynamo
        assert lazy_dynamo.defer() is False and lazy_dynamo.DYNAMO not in sys.modules  # nothing to stand in for
    monkeypatch.setattr(torch._compile, "_disable_dynamo", _another_marker)
    assert not lazy_dynamo._marker_asks_for_disable()
    assert lazy_dynamo.defer() is False and lazy_dynamo.DYNAMO not in sys.modules  # nothing stands in
    monkeypatch.setattr(torch._compile, "_disable_dynamo", lambda fn=None, recursive=True: fn)  # no wrapper at all
    assert not lazy_dynamo._marker_asks_for_disable()


def test_the_stand_in_s_parts_each_give_way_to_torch_s_own():
    """Each part alone, nothing installed in this process: what torch asks of an untraced function beyond a call,
    the stand-in's disable() asked with a reason, a submodule handed over with its own spec, eager() once the real
    package is in. (The real TorchDynamo is imported here, as any test that counts on the meta device does.)"""

    def fn(x):
        return x + 1

    untraced = lazy_dynamo._Untraced(fn, True)
    with pytest.raises(AttributeError):
        lazy_dynamo._Untraced.__new__(lazy_dynamo._Untraced).fn  # a copy in the making: no recursion
    assert untraced._torchdynamo_orig_callable is fn  # torch's untraced fn answers, kept where the marker keeps it
    assert getattr(fn, "__dynamo_disable") is not untraced and fn.__dynamo_disable(1) == 2
    stand_in = lazy_dynamo._StandIn(importlib.util.find_spec(lazy_dynamo.DYNAMO))
    assert stand_in.disable(fn, reason="a hook") is not fn and stand_in.disable(fn, reason="a hook")(1) == 2
    assert stand_in.graph_break() is None and stand_in.__path__ and stand_in.__file__.endswith("__init__.py")

    module = types.ModuleType("hwsweep_loaded_already")
    module.__spec__ = importlib.machinery.ModuleSpec(module.__name__, None, origin="here")
    loader = lazy_dynamo._AlreadyLoaded(module)
    handed = importlib.util.module_from_spec(importlib.machinery.ModuleSpec(module.__name__, loader))
    loader.exec_module(handed)
    assert handed is module and module.__spec__.origin == "here" and module.__loader__ is None

    with lazy_dynamo.eager():  # the real package is in: torch's own stance
        assert torch.compiler.is_compiling() is False


def test_the_finder_hands_over_a_submodule_the_real_import_loaded_and_leaves_any_other_to_the_import(monkeypatch):
    """_Submodules while the stand-in stands in (the real package's import faked: nothing imported here)."""
    stand_in = lazy_dynamo._StandIn(importlib.util.find_spec(lazy_dynamo.DYNAMO))
    monkeypatch.setitem(sys.modules, lazy_dynamo.DYNAMO, stand_in)
    monkeypatch.setattr(lazy_dynamo, "_real_module", lambda: None)
    loaded = types.ModuleType(f"{lazy_dynamo.DYNAMO}.loaded_by_its_package")
    loaded.__spec__ = importlib.machinery.ModuleSpec(loaded.__name__, None)
    monkeypatch.setitem(sys.modules, loaded.__name__, loaded)
    finder = lazy_dynamo._Submodules()
    assert finder.find_spec(f"{lazy_dynamo.DYNAMO}.not_loaded", None) is None  # found as ever, by the next finders
    assert finder.find_spec("json", None) is None  # not TorchDynamo's
    spec = finder.find_spec(loaded.__name__, None)
    assert isinstance(spec.loader, lazy_dynamo._AlreadyLoaded) and spec.loader.module is loaded


def test_the_stand_in_answers_ddp_s_mode_with_the_config_s_default_and_only_a_literal_one(tmp_path, monkeypatch):
    """What DDP's constructor asks (torch._dynamo.utils.get_optimize_ddp_mode()), read from the config's source:
    the real package's answer on this torch; nothing where the default is not a literal mode, the file cannot be
    read, or DDP's constructor asks for something else (torch's own path: the real package)."""
    import torch._dynamo.utils

    package = importlib.util.find_spec(lazy_dynamo.DYNAMO).submodule_search_locations[0]
    assert lazy_dynamo._default_ddp_mode(package) == torch._dynamo.utils.get_optimize_ddp_mode() == "ddp_optimizer"
    for default, mode in (("True", "ddp_optimizer"), ("False", "no_optimization"),
                          ('"python_reducer"', "python_reducer"), ('"bogus"', None),
                          ("os.environ.get('X', True)", None)):  # fmt: skip
        (tmp_path / "config.py").write_text(f"import os\noptimize_ddp: (\n    bool\n    | str\n) = {default}\n")
        assert lazy_dynamo._default_ddp_mode(str(tmp_path)) == mode, default
    assert lazy_dynamo._default_ddp_mode(str(tmp_path / "missing")) is None
    utils = lazy_dynamo._StandIn(importlib.util.find_spec(lazy_dynamo.DYNAMO)).utils
    assert utils.get_optimize_ddp_mode() == "ddp_optimizer"  # the real package is in: its own answer
    assert utils.is_compile_supported is torch._dynamo.utils.is_compile_supported  # anything else: the real module's
    with pytest.raises(AttributeError):
        lazy_dynamo._Utils.__new__(lazy_dynamo._Utils).package  # a copy in the making: no recursion
    init = torch.nn.parallel.DistributedDataParallel.__init__

    def another_init(self, *args, **kwargs):  # a DDP that asks TorchDynamo nothing by that name
        return init(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.parallel.DistributedDataParallel, "__init__", another_init)
    assert lazy_dynamo._default_ddp_mode(package) is None


def test_torchrun_s_agent_imports_for_its_workers_what_the_module_says(tmp_path, small_config):
    """hwsweep.run.train says: TorchDynamo where the run shards over several processes or compiles, else nothing;
    a module that says nothing, or cannot say, gets TorchDynamo (its workers' optimizer steps import it)."""
    said = {}
    for name, parallel, compile_ in (("ddp", "ddp", False), ("fsdp", "fsdp", False), ("compiled", "ddp", True)):
        small_config["recipe"] |= {"parallel": {"strategy": parallel}, "compile": compile_}
        io.write_json(tmp_path / f"{name}.json", resolve(small_config).spec("tiny", "default", "cpu2", 0).to_dict())
        said[name] = torchrun.fork_imports(train, [str(tmp_path / f"{name}.json"), "--threads", "2"])
    assert said == {"ddp": [], "fsdp": [lazy_dynamo.DYNAMO], "compiled": [lazy_dynamo.DYNAMO]}
    assert torchrun.fork_imports(types.ModuleType("says_nothing"), []) == [lazy_dynamo.DYNAMO]
    assert torchrun.fork_imports(train, [str(tmp_path / "missing.json")]) == [lazy_dynamo.DYNAMO]
