"""Evaluation of a sharded (FSDP, HSDP) run, sharded as it trained: no process ever holds the whole model.

`launch` starts torchrun on this node with one rank per device of a node (the training's ranks on one node; a
multi-node run's evaluation runs on its first node's devices: DCP reshards the final checkpoint to any world size),
each running `python -m hwsweep.run.evaluate SPEC --sharded`. Each rank (`evaluate`):

- builds the family's model on the meta device and shards it as training did (hwsweep.run.reduce's units, FSDP2
  over the ranks, fp32, each block's weights given back after its forward), gives its shards memory and values;
- reads only its shards of the model from the final checkpoint's folder (final/, DCP; the optimizer's state stays
  on disk);
- runs the family's evaluator on the whole held-out set under no_grad: every forward gathers each block from every
  rank in turn, so every rank runs every batch and computes the same metrics (checked: ranks that disagree fail the
  evaluation);
- reports its peak memory (resident set on CPU, the allocator's peak on a GPU): the maximum over the ranks goes in
  eval.json beside the plan's per-device figure and the number of processes.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from hwsweep.contracts.spec import RunSpec


def command(spec: RunSpec, spec_path: str, threads: int) -> list[str]:
    """torchrun on this node, one rank per device of a node, each `hwsweep.run.evaluate SPEC --sharded`."""
    from hwsweep.run import launch, tether

    ranks = spec.plan.devices_per_node
    cmd = [sys.executable, "-m", "hwsweep.run.torchrun"]
    cmd += launch.AGENT_SIGNALS if launch.agent_takes_signal_list() else []
    cmd += ["--standalone", "--nnodes", "1", "--rdzv-conf", f"join_timeout={launch.RENDEZVOUS_TIMEOUT}",
            "--nproc_per_node", str(ranks)]  # fmt: skip
    worker = ["-m", "hwsweep.run.evaluate", spec_path, "--threads", str(threads), "--sharded"]
    if spec.plan.accelerator == "cpu":  # forked from the agent, which imports torch once for them all
        return cmd + ["--start-method", "fork", *worker]
    return cmd + tether.tethered([sys.executable, "-u", *worker])


def launch(spec: RunSpec, spec_path: str, threads: int) -> int:
    """Run the sharded evaluation's ranks and wait for them; their exit code."""
    from hwsweep.run import allocator
    from hwsweep.run import launch as launcher

    cmd = command(spec, spec_path, threads)
    print(f"hwsweep.run.evaluate: sharded over {spec.plan.devices_per_node} processes", file=sys.stderr, flush=True)
    logs = tempfile.mkdtemp(prefix="hwsweep-torchrun-")  # torchrun's --log-dir, which it never removes
    try:
        env = allocator.environment(dict(os.environ), spec.plan.accelerator)  # as the training's ranks had
        env |= {"OMP_NUM_THREADS": "1", "PET_LOG_DIR": logs}  # each rank sets its own threads
        return launcher.supervise(cmd, env, spec.plan.devices_per_node)
    finally:
        import shutil

        shutil.rmtree(logs, ignore_errors=True)


def nested(key: str, value) -> dict:
    """{"a": {"b": value}} for key "a.b": how DCP's flattened key of a state is asked for."""
    for part in reversed(key.split(".")):
        value = {part: value}
    return value


def inner(key: str, state: dict):
    """What `nested(key, ...)` put in `state`."""
    for part in key.split("."):
        state = state[part]
    return state


def evaluate(spec: RunSpec, final: dict, threads: int, curves) -> tuple[dict, dict]:
    """One rank's part (under torchrun): (metrics, memory) where memory is {peak_memory_gb, peak_memory_source,
    processes, rank_memory}, the peak the largest over the ranks, rank_memory each one's peak and baseline. Collective: every rank calls it."""
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict

    from hwsweep.models import families
    from hwsweep.run import device as devices
    from hwsweep.run import rank_memory, weights
    from hwsweep.run.reduce import ShardedReduction

    local_rank, local_world = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    torch.set_num_threads(max(1, threads // local_world))
    device = devices.select(spec.plan.accelerator, local_rank)
    dist.init_process_group(backend=device.backend)
    baseline = rank_memory.held_bytes(device.torch_device)  # before the model: what the plan does not count
    fam = families.torch_side(spec.recipe.model.name)
    with weights.meta_device():
        model = fam.build(spec.recipe)
    reduction = ShardedReduction(model, 1, "fp32", True, device.torch_device)  # one mesh over this node's ranks
    model.to_empty(device=device.torch_device)
    weights.initialise(model, spec.seed)  # every tensor a value, the buffers no checkpoint holds included
    state = nested(final["model_key"], get_model_state_dict(model))
    dcp.load(state, checkpoint_id=str(Path(spec.run_dir, final["shards"])))  # this rank's shards of the model only
    set_model_state_dict(model, inner(final["model_key"], state))
    _, held_out = fam.tables(spec.recipe)
    model.eval()
    with torch.no_grad(), reduction.gathered():
        metrics = fam.evaluate(model, spec.recipe, held_out, curves=curves)
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, metrics)
    if any(m != every[0] for m in every):
        raise RuntimeError(f"the ranks of the sharded evaluation disagree: {every}")
    ranks = rank_memory.per_rank(device.torch_device, baseline)
    memory = {"peak_memory_gb": max(r["peak_gb"] for r in ranks), "processes": dist.get_world_size(),
              "peak_memory_source": rank_memory.source(device.torch_device), "rank_memory": ranks}  # fmt: skip
    return metrics, memory
