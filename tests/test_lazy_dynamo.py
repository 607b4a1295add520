"""TorchDynamo imported only by a process that compiles (hwsweep.run.lazy_dynamo): a run that never compiles trains
without it to the bits of a run that imported it, and the real module takes over, once, wherever it is needed."""

import json
import subprocess
import sys

import pytest
import torch
from conftest import launcher, one_thread

from hwsweep.contracts import io
from hwsweep.contracts.spec import FINAL_CHECKPOINT, METRICS_FILE, TRAIN_RECORD
from hwsweep.plan.config import resolve
from hwsweep.run import lazy_dynamo

# What stands in sys.modules for TorchDynamo as the process ends: the real package is a plain module.
WATCH = """
import atexit, sys
atexit.register(lambda: print("TorchDynamo:", type(sys.modules.get("torch._dynamo")).__name__, flush=True))
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
def test_a_one_process_run_imports_no_torchdynamo_and_trains_to_the_bits_of_one_that_did(tmp_path, small_config):
    small_config["recipe"]["schedule"] = {"steps": 8, "warmup_steps": 2}  # deterministic (the default level)
    spec = resolve(small_config).spec("tiny", "default", "cpu1", 0).to_dict()
    (tmp_path / "deferred").mkdir()
    (tmp_path / "imported").mkdir()
    out, deferred = _train(tmp_path / "deferred", spec, first="")
    assert "TorchDynamo: _StandIn" in out
    out, imported = _train(tmp_path / "imported", spec, first="import torch._dynamo")
    assert "TorchDynamo: module" in out  # the watch sees the real one (it is not vacuous)
    assert deferred["losses"] == imported["losses"]  # every step's loss, to the last digit printed
    weights, reference = deferred["model"], imported["model"]
    assert weights.keys() == reference.keys() and all(torch.equal(weights[k], reference[k]) for k in weights)


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
    monkeypatch.setattr(torch._compile, "_disable_dynamo", _another_marker)
    assert not lazy_dynamo._marker_asks_for_disable()
    monkeypatch.delitem(sys.modules, lazy_dynamo.DYNAMO, raising=False)
    monkeypatch.delitem(vars(torch), "_dynamo", raising=False)  # not getattr: torch's would import it
    assert lazy_dynamo.defer() is False and lazy_dynamo.DYNAMO not in sys.modules  # nothing stands in
