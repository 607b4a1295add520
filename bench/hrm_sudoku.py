"""How fast does a suite of an HRM config learn on this CPU? A plain torch loop, no hwsweep trainer.

    .venv/bin/python bench/hrm_sudoku.py config/hrm_cpu.yaml baseline [--set model.width=96 ...]

Resolves the config (so the numbers belong to the settings a sweep would run), trains every
variant of the suite for one seed with the recipe's optimizer and schedule (the trainer's) through
the family contract (tables, build, evaluate), evaluates every --eval-every steps on the
first eval_subset held-out samples like the trainer does, and prints the final evaluation and
the wall-clock time (one process, --threads threads).
"""

import argparse
import time

import torch
import yaml

from hwsweep.models import families, flops
from hwsweep.models.blocks import SignSGD, sparse_embeddings
from hwsweep.plan.config import resolve
from hwsweep.run import optimizers
from hwsweep.run.train import lr_factor


def train(recipe, seed: int, eval_every: int, eval_subset: int) -> dict:
    fam = families.torch_side(recipe.model.name)
    torch.manual_seed(seed)
    (train_t, held) = fam.tables(recipe)
    model = fam.build(recipe)
    o = recipe.optimizer
    opt = optimizers.build(model.parameters(), o, o.lr, "cpu")  # the recipe's optimizer, as the trainer builds it
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, recipe.schedule))
    embeddings = sparse_embeddings(model)  # the puzzle embedding's own SignSGD, as the trainer does
    emb_opt = SignSGD(embeddings, o.puzzle_emb_lr, o.puzzle_emb_weight_decay) if embeddings else None
    emb_sched = torch.optim.lr_scheduler.LambdaLR(emb_opt, lambda s: lr_factor(s, recipe.schedule)) if emb_opt else None
    g = torch.Generator().manual_seed(seed)
    curves = {}
    first = tuple(t[: recipe.global_batch] for t in train_t)
    # FLOPs spent: HRM's per segment kind times the segments ACT ran, as the trainer counts; else one counted step
    units = model.work_flops(first) if hasattr(model, "work_flops") else None
    step_flops = None if units else flops.train_step_flops(model, first)
    spent = 0.0
    t0 = time.perf_counter()
    for step in range(1, recipe.schedule.steps + 1):
        idx = torch.randint(0, len(train_t[0]), (recipe.global_batch,), generator=g)
        model.train()
        loss = model(*(t[idx] for t in train_t))
        loss.backward()
        if o.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), o.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        if emb_opt:
            emb_opt.step()
            emb_sched.step()
        if units:  # the segments ACT ran: the cost is counted at them
            work = model.take_work()
            spent += sum(work[kind] * units[kind] for kind in units)
            no_grad = work["extra_segments"] + work["state_segments"]
            for name, value in (("segments_per_sample", work["segments"] / work["samples"]),
                                ("extra_segments_per_sample", no_grad / work["samples"])):
                curve = curves.setdefault(name, {"steps": [], "values": []})
                curve["steps"].append(step)
                curve["values"].append(value)
        if step % eval_every == 0 or step == recipe.schedule.steps:
            model.eval()
            with torch.no_grad():
                m = fam.evaluate(model, recipe, tuple(t[:eval_subset] for t in held))
            for name, value in m.items():
                curve = curves.setdefault(f"eval_{name}", {"steps": [], "values": []})
                curve["steps"].append(step)
                curve["values"].append(value)
            segments = (curves.get("segments_per_sample") or {"values": [None]})["values"][-1]
            print(f"  step {step:4d}  loss {loss.item():.3f}  exact {m['exact_accuracy']:.3f}  segments {segments}  "
                  f"{time.perf_counter() - t0:6.1f}s", flush=True)  # fmt: skip
    train_seconds = time.perf_counter() - t0
    model.eval()
    with torch.no_grad():
        final = fam.evaluate(model, recipe, held, curves)
    samples = recipe.schedule.steps * recipe.global_batch
    spent = spent if units else step_flops * recipe.schedule.steps
    cost = flops.computational_cost(spent, final["exact_accuracy"], samples)
    return {"train_seconds": round(train_seconds, 1), **final, **cost}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("suite")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a recipe key (YAML)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=0, help="default: the recipe's eval_every, else steps/10")
    ap.add_argument("--eval-subset", type=int, default=128)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    raw = yaml.safe_load(open(args.config))
    for item in args.set:
        key, value = item.split("=", 1)
        node = raw["suites"][args.suite].setdefault("overrides", {})
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = yaml.safe_load(value)
    matrix = resolve(raw)
    for cell in (c for c in matrix.cells if c.suite == args.suite):
        r = cell.recipe
        every = args.eval_every or getattr(r, "eval_every", 0) or max(r.schedule.steps // 10, 1)
        print(f"{args.suite}/{cell.variant}: {r.model}\n  {r.task}", flush=True)
        result = train(r, args.seed, every, args.eval_subset)
        shown = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in result.items()}
        print(f"{args.suite}/{cell.variant}: {shown}", flush=True)


if __name__ == "__main__":
    main()
