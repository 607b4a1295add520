"""The runtime API: what a training script imports to train the way hwsweep's own trainer does.

    run = runtime.init()                            # the plan, from HWSWEEP_SPEC (or a spec.json path)
    loader = run.loader(dataset)                    # any map-style dataset: global batch k = same samples
    model = run.wrap(Net())                         # on run.device; DDP, strict reduction or FSDP; compiled
    optimizer = run.adamw(model.parameters())       # the recipe's AdamW and kernel (or any optimizer of yours)
    run.resume(model=model, optimizer=optimizer)    # newest checkpoint of this run, if any
    for step in run.steps():                        # from the resumed step; checkpoints, preemption
        for x, y in run.accumulate(loader):         # this step's micro-batches (no_sync but the last)
            with run.autocast():
                loss = F.cross_entropy(model(x), y)
            run.backward(loss)                      # scaled, reduced; the `loss` curve is its global mean
        run.optimizer_step(optimizer)
        run.log(val_acc=...)                        # any metric, at this step (metrics.jsonl, rank 0)
    run.finish()                                    # train.json (the RunRecord) and final.pt

Everything else is the plan's business: world size and rank, the micro-batch and accumulation,
precision and TF32, the reproducibility level, seeds, data-loader workers and their seeds,
checkpoint interval, SIGTERM/SIGUSR2 (checkpoint at a step all ranks agreed on, exit 75).
Host round trips are few: the loss stays on the device and is read, with the stop flag, in one
collective every `log_every` steps (and at checkpoints; a process alone makes no collective), and the
device is waited for at the end of the first step and where the steady window starts (steady_sync_step).
"""

# Where each part lives, one idea per file: run (init, and Run: the process set up by the plan, what the script
# builds), loop (run.steps and what a step calls), history (the collective between steps, the lines written, what a
# checkpoint carries), throughput (the steady window), trackers (rank 0's feed), finish (train.json, final.pt),
# progress (the banner and the progress bar), loader (the micro-batches). Run's parts are its mixins: one object to
# the script. The names below are bound in the order tools/reference.py lists them.

from hwsweep.run.runtime.run import init
from hwsweep.run.runtime.throughput import STEADY_STATE_SKIP, steady_start, steady_sync_step
from hwsweep.run.runtime.run import STOP_SIGNALS, Run
from hwsweep.run.runtime.progress import LogLines
from hwsweep.run.runtime.loader import DEVICE_TABLE_FRACTION, table_budget_bytes, table_placement, Loader
from hwsweep.run.runtime.loop import EXIT_PREEMPTED

__all__ = ["DEVICE_TABLE_FRACTION", "EXIT_PREEMPTED", "STEADY_STATE_SKIP", "STOP_SIGNALS", "Loader", "LogLines", "Run",
           "init", "steady_start", "steady_sync_step", "table_budget_bytes", "table_placement"]
