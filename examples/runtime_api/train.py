"""The plain_ddp example's model and data, written against hwsweep's runtime API.

hwsweep starts it under torchrun and hands it the run's plan (HWSWEEP_SPEC); the runtime
does the rest: data order, gradient reduction, precision, checkpoints, resume, preemption,
metrics.jsonl and train.json. Only the script's own settings are flags (recipe.args).
"""

import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset

from hwsweep import runtime

IN_DIM = 16
N_CLASSES = 4
VAL_SIZE = 1024
DATA_SEED = 1234  # the task is fixed; the run's seed only changes init and data order


def make_data(n_train):
    """Inputs are Gaussian; labels come from a fixed random teacher MLP."""
    g = torch.Generator().manual_seed(DATA_SEED)
    w1 = torch.randn(IN_DIM, 32, generator=g) / math.sqrt(IN_DIM)
    w2 = torch.randn(32, N_CLASSES, generator=g) / math.sqrt(32)

    def sample(n):
        x = torch.randn(n, IN_DIM, generator=g)
        return TensorDataset(x, (torch.tanh(x @ w1) @ w2).argmax(dim=1))

    return sample(n_train), sample(VAL_SIZE)


def make_model(hidden):
    return nn.Sequential(
        nn.Linear(IN_DIM, hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, N_CLASSES),
    )  # fmt: skip


def lr_lambda(warmup_steps, max_steps):
    """Linear warmup, then cosine decay down to 10% of the peak lr."""

    def f(step):
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    return f


def evaluate(model, val_set, device):
    x, y = (t.to(device) for t in val_set.tensors)
    logits = model(x)
    return {
        "val_loss": F.cross_entropy(logits.float(), y).item(),
        "val_acc": (logits.argmax(1) == y).float().mean().item(),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--eval_every", type=int, default=50)
    p.add_argument("--data_size", type=int, default=4096)
    args = p.parse_args()

    run = runtime.init()  # plan, ranks, device, precision, reproducibility level, seed
    train_set, val_set = make_data(args.data_size)
    loader = run.loader(train_set)  # global batch k = the same samples at any world size
    model = run.wrap(make_model(args.hidden))
    optimizer = torch.optim.AdamW(model.parameters(), lr=run.plan.lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(run.plan.warmup_steps, run.plan.steps))
    run.resume(model=model, optimizer=optimizer, scheduler=scheduler)

    for step in run.steps():
        for x, y in run.accumulate(loader):
            with run.autocast():
                loss = F.cross_entropy(model(x).float(), y)
            run.backward(loss)
        run.optimizer_step(optimizer, scheduler)
        done = step + 1
        if run.master and (done % args.eval_every == 0 or done == run.plan.steps):
            run.log(**run.evaluate(evaluate, run.module, val_set, run.device))
    run.finish()


if __name__ == "__main__":
    main()
