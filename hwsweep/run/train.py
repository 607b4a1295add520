"""The reference trainer: one user of hwsweep.runtime, read top to bottom. Launched by torchrun:

    torchrun --standalone --nproc_per_node 2 -m hwsweep.run.train results/.../spec.json --threads 2

It reads the RunSpec and nothing else; the runtime writes (global rank 0) resumable
checkpoints, the final checkpoint, metrics.jsonl and train.json (the RunRecord).
"""

import argparse
import math

from hwsweep.run import startup, stops

if __name__ == "__main__":  # a worker started anew: a stop from here on is a preemption (a forked one: torchrun's)
    stops.catch()
    stops.check("start")
COLLECTION_HELD = startup.hold_collection(__name__)  # until runtime.init returns (torch, TorchDynamo where due)

import torch  # noqa: E402
from torch.utils.data import TensorDataset  # noqa: E402

from hwsweep.contracts.spec import RunSpec  # noqa: E402
from hwsweep.models import families  # noqa: E402
from hwsweep.models.blocks import SignSGD, sparse_embeddings  # noqa: E402
from hwsweep.run import lazy_dynamo, runtime, shutdown, weights  # noqa: E402
from hwsweep.run.runtime import EXIT_PREEMPTED  # noqa: E402, F401 - the exit code of a preempted run, re-exported


def fork_imports(argv: list[str]) -> list[str]:
    """What torchrun's agent imports once for the workers it forks, beyond this module (hwsweep.run.torchrun):
    TorchDynamo where the run needs it anyway (hwsweep.run.lazy_dynamo.needed); `argv` is this module's."""
    spec = RunSpec.load(argv[0])
    return [lazy_dynamo.DYNAMO] if lazy_dynamo.needed(spec.recipe, spec.plan.world_size) else []


def lr_factor(step: int, schedule) -> float:
    """Learning-rate multiplier at optimizer step `step`: linear warmup, then decay."""
    if step < schedule.warmup_steps:
        return (step + 1) / schedule.warmup_steps
    if schedule.decay == "constant":
        return 1.0
    progress = (step - schedule.warmup_steps) / max(1, schedule.steps - schedule.warmup_steps)
    shape = 0.5 * (1 + math.cos(math.pi * progress)) if schedule.decay == "cosine" else 1 - progress
    return schedule.min_lr_ratio + (1 - schedule.min_lr_ratio) * shape


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="hwsweep.run.train", description=__doc__.splitlines()[0])
    parser.add_argument("spec", help="path to spec.json")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for all processes on this node")
    args = parser.parse_args(argv)

    run = runtime.init(args.spec, node_threads=args.threads)
    startup.resume_collection(COLLECTION_HELD)
    recipe, plan = run.recipe, run.plan
    fam = families.torch_side(recipe.model.name)

    train, held_out = fam.tables(recipe)
    loader = run.loader(TensorDataset(*train))
    with weights.meta_device():  # shapes only: run.wrap gives each rank its memory (its shards under FSDP) and values
        model = fam.build(recipe)
    batch = loader.peek()
    run.count_flops(model, batch)  # on the meta model (no memory); a model that reads values: by run.wrap, on its weights
    # HRM: ACT halts samples early, so a step's FLOPs are those of the segments it ran (per sample, by kind),
    # counted on the meta model (shapes decide them: the same figures as on real weights)
    units = model.work_flops(tuple(t.to("meta") for t in batch)) if hasattr(model, "work_flops") else None
    net = run.wrap(model)  # each module's reset_parameters, seeded per module: the same weights at any layout
    optimizer = run.optimizer(model.parameters())  # recipe.optimizer: AdamW in its kernel, AdamATan2 or SGD
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, recipe.schedule))
    states = {"model": model, "optimizer": optimizer, "scheduler": scheduler}
    embeddings = sparse_embeddings(model)  # the puzzle embedding: its own SignSGD, as in the original HRM
    if embeddings:
        o = recipe.optimizer
        states["embedding_optimizer"] = SignSGD(embeddings, o.puzzle_emb_lr, o.puzzle_emb_weight_decay)
        states["embedding_scheduler"] = torch.optim.lr_scheduler.LambdaLR(
            states["embedding_optimizer"], lambda s: lr_factor(s, recipe.schedule))
        states["embedding_optimizer"].zero_grad()  # drop the rows the FLOP count above handed out
    run.resume(**states)
    if units:
        model.take_work()  # the FLOP counts above are not training

    for step in run.steps():
        for batch in run.accumulate(loader):
            with run.autocast():
                loss = net(*batch)
            run.backward(loss)
        run.optimizer_step(optimizer, scheduler, grad_clip=recipe.optimizer.grad_clip)
        if embeddings:
            states["embedding_optimizer"].step()
            states["embedding_scheduler"].step()
        if units:  # this rank's samples (rank 0's are logged): supervised segments, forward-only ones
            work = model.take_work()
            run.spend_flops(sum(work[kind] * units[kind] for kind in units))  # the record's flops_per_step: all ranks
            no_grad = work["extra_segments"] + work["state_segments"]
            run.log(segments_per_sample=work["segments"] / work["samples"],
                    extra_segments_per_sample=no_grad / work["samples"])
        done = step + 1
        if recipe.eval_every and run.evaluates and (done % recipe.eval_every == 0 or done == plan.steps):
            subset = tuple(t[: recipe.eval_subset] for t in held_out)
            run.log(**{f"eval_{k}": v for k, v in run.evaluate(fam.evaluate, model, recipe, subset).items()})
    run.finish()
    return 0


if __name__ == "__main__":
    shutdown.exit_after(main)  # sys.exit(main()), safe where the process group's threads outlived it
