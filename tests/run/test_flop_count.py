"""run.count_flops on a model built on the meta device counts there: the same FLOPs as a real forward + backward,
and no memory, so the count never raises a run's peak above its training step's (activation checkpointing's saving
kept: the count used to run one real micro-batch with checkpointing suspended, the run's peak then the same with and
without it)."""

import json
import subprocess
import sys

from conftest import one_thread

from hwsweep.contracts import io
from hwsweep.plan.config import resolve

SCRIPT = r"""
import json, os, sys
import torch
from torch.utils.data import TensorDataset
from hwsweep.contracts import host
from hwsweep.models import families, flops
from hwsweep.run import recompute, runtime, weights

def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

run = runtime.init(sys.argv[1])
side = families.torch_side(run.recipe.model.name)
loader = run.loader(TensorDataset(*side.tables(run.recipe)[0]))
batch = loader.peek()
with weights.meta_device():
    model = side.build(run.recipe)
run.count_flops(model, batch)  # torch's code on first use (the flop counter, meta kernels): not the count's memory
host.reset_peak_rss(); before = resident()
counted = run.count_flops(model, batch)
meta = host.peak_rss_bytes() - before
run.wrap(model)
host.reset_peak_rss(); before = resident()
with recompute.suspended():
    real = flops.train_step_flops(model, batch)
grown = host.peak_rss_bytes() - before
print(json.dumps({"counted": counted, "real": real, "meta_bytes": meta, "real_bytes": grown,
                  "per_step": run.plan.world_size * run.plan.accumulation}))
"""


def test_a_meta_built_model_is_counted_on_meta_alike_and_without_memory(tmp_path, small_config):
    cfg = small_config  # activations dominate: 32 sequences of 256 tokens, a narrow model
    cfg["recipe"] |= {"micro_batch": 32, "global_batch": 64, "activation_checkpointing": "full",
                      "model": {"width": 64, "depth": 4, "heads": 2}}  # fmt: skip
    cfg["recipe"]["task"] |= {"length": 256, "train_size": 64, "eval_size": 8}
    spec = resolve(cfg).spec("tiny", "default", "cpu1", 0)
    io.write_json(tmp_path / "spec.json", spec.to_dict() | {"run_dir": str(tmp_path / "run")})
    (tmp_path / "count.py").write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(tmp_path / "count.py"), str(tmp_path / "spec.json")], env=one_thread(),
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["counted"] == out["real"] * out["per_step"] > 0
    assert out["real_bytes"] > 50e6, out  # a real count holds the micro-batch's activations, unsaved by checkpointing
    assert out["meta_bytes"] < out["real_bytes"] / 10, out
