"""Helper for tests/run/test_fsdp.py, run under torchrun: the built-in family of the spec trained the trainer's way
(built on the meta device, run.wrap, the recipe's optimizer), each rank writing to argv[2].rank<R>.json how far
its peak resident set rose above its resident set before the model was built: once the weights were placed
and initialised ("placed"), over the training steps ("trained", before the final checkpoint), and through run.finish() ("finished": the
final checkpoint, which stays sharded, and the record); and, in absolute terms, that resident set ("before": the interpreter, torch, the
process group and the data) and the peak resident set at the end of training ("peak"); and the class of the
optimizer the recipe named ("optimizer"). An optional argv[3], RANK:MB, makes that rank hold MB more during the
last step than its plan counts (a run forced over its plan). Run as a module (`-m runtime_memory`, tests/ on PYTHONPATH): its workers
are forked from the agent, which imported it, as the built-in trainer's are.
"""

import json
import sys

import torch
import torch.distributed as dist
from torch.utils.data import TensorDataset

from hwsweep.contracts import host
from hwsweep.models import families
from hwsweep.run import runtime


def main() -> None:
    run = runtime.init(sys.argv[1])
    side = families.torch_side(run.recipe.model.name)
    loader = run.loader(TensorDataset(*side.tables(run.recipe)[0]))
    before = host.resident_bytes()
    with torch.device("meta"):
        model = side.build(run.recipe)
    net = run.wrap(model)
    grown = {"placed": host.peak_rss_bytes() - before}
    optimizer = run.optimizer(model.parameters())
    grown["optimizer"] = type(optimizer).__name__
    run.resume(model=model, optimizer=optimizer)
    over_rank, over_mb = map(int, sys.argv[3].split(":")) if len(sys.argv) > 3 else (None, 0)
    for step in run.steps():
        for batch in run.accumulate(loader):
            run.backward(net(*batch))
        if step == run.plan.steps - 1 and run.rank == over_rank:  # ones: every page touched, resident
            held = torch.ones(over_mb * 2**20 // 4)
            del held
        run.optimizer_step(optimizer)
        if step == run.plan.steps - 1:  # before the last checkpoint is written
            grown |= {"trained": host.peak_rss_bytes() - before, "before": before, "peak": host.peak_rss_bytes()}
    run.finish()
    grown["finished"] = host.peak_rss_bytes() - before
    with open(f"{sys.argv[2]}.rank{run.rank}.json", "w") as f:
        json.dump(grown, f)
    if dist.is_initialized():  # run.finish() leaves the group (hwsweep.run.shutdown)
        dist.destroy_process_group()


if __name__ == "__main__":  # run as `-m`: forked from torchrun's agent, which imports this module first
    main()
