"""Train a small MLP on a synthetic classification task with PyTorch DDP.

An ordinary data-parallel training script: run it with plain `python` for one
process, or with `torchrun` for several. It reads RANK / LOCAL_RANK /
WORLD_SIZE from the environment the way torchrun sets them.

    torchrun --standalone --nproc_per_node 2 train.py --max_steps 200 --out_dir runs/a
"""

import argparse
import contextlib
import itertools
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

IN_DIM = 16
N_CLASSES = 4
VAL_SIZE = 1024
DATA_SEED = 1234  # the task is fixed; --seed only changes init and data order


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch_size", type=int, default=16, help="per-process micro-batch")
    p.add_argument("--grad_accum", type=int, default=2, help="micro-batches per optimizer step")
    p.add_argument("--max_steps", type=int, default=200, help="optimizer steps")
    p.add_argument("--warmup_steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--device", choices=["cpu", "cuda"],
                   default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out_dir", type=str, default="out")
    p.add_argument("--resume", action="store_true", help="continue from out_dir/ckpt.pt if present")
    p.add_argument("--eval_every", type=int, default=50)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--data_size", type=int, default=4096)
    return p.parse_args()


def make_data(n_train):
    """Inputs are Gaussian; labels come from a fixed random teacher MLP."""
    g = torch.Generator().manual_seed(DATA_SEED)
    w1 = torch.randn(IN_DIM, 32, generator=g) / math.sqrt(IN_DIM)
    w2 = torch.randn(32, N_CLASSES, generator=g) / math.sqrt(32)

    def sample(n):
        x = torch.randn(n, IN_DIM, generator=g)
        y = (torch.tanh(x @ w1) @ w2).argmax(dim=1)
        return TensorDataset(x, y)

    return sample(n_train), sample(VAL_SIZE)


def make_model(hidden):
    return nn.Sequential(
        nn.Linear(IN_DIM, hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, N_CLASSES),
    )


def lr_lambda(warmup_steps, max_steps):
    """Linear warmup, then cosine decay down to 10% of the peak lr."""
    def f(step):
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return f


@torch.no_grad()
def evaluate(model, val_set, device, autocast):
    model.eval()
    x, y = (t.to(device) for t in val_set.tensors)
    with autocast():
        logits = model(x)
    loss = F.cross_entropy(logits.float(), y).item()
    acc = (logits.argmax(dim=1) == y).float().mean().item()
    model.train()
    return loss, acc


def main():
    args = parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process.
    distributed = "WORLD_SIZE" in os.environ
    rank = int(os.environ.get("RANK", 0))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    master = rank == 0

    if args.device == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if distributed:
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")

    def log(msg):
        if master:
            print(msg, flush=True)

    log(f"global batch size: {args.batch_size * args.grad_accum * world_size}")

    train_set, val_set = make_data(args.data_size)
    sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank,
                                 shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, drop_last=True)

    torch.manual_seed(args.seed)
    model = make_model(args.hidden).to(device)
    ddp_model = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None) \
        if distributed else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lr_lambda(args.warmup_steps, args.max_steps))

    use_bf16 = args.dtype == "bfloat16"

    def autocast():
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use_bf16)

    os.makedirs(args.out_dir, exist_ok=True)
    ckpt_path = os.path.join(args.out_dir, "ckpt.pt")
    step = 0
    if args.resume and os.path.exists(ckpt_path):
        ckpt = torch.load(ckpt_path, map_location=device)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        step = ckpt["step"]
        log(f"resumed from {ckpt_path} at step {step}")

    def save_checkpoint():
        if not master:
            return
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                 "scheduler": scheduler.state_dict(), "step": step}
        tmp = ckpt_path + ".tmp"
        torch.save(state, tmp)
        os.replace(tmp, ckpt_path)  # atomic: a kill mid-save never leaves a torn ckpt.pt

    # One endless stream of micro-batches, epoch by epoch. On resume, skip the
    # micro-batches already consumed so the data order matches an unbroken run.
    def micro_batches(start):
        epoch, skip = divmod(start, len(loader))
        for epoch in itertools.count(epoch):
            sampler.set_epoch(epoch)
            yield from itertools.islice(loader, skip, None)
            skip = 0

    batches = micro_batches(step * args.grad_accum)
    val_loss = val_acc = None
    ddp_model.train()
    while step < args.max_steps:
        loss_sum = torch.zeros((), device=device)
        for micro in range(args.grad_accum):
            x, y = (t.to(device) for t in next(batches))
            last = micro == args.grad_accum - 1
            # Skip the gradient all-reduce on all but the last micro-step.
            sync = ddp_model.no_sync() if distributed and not last else contextlib.nullcontext()
            with sync:
                with autocast():
                    loss = F.cross_entropy(ddp_model(x).float(), y) / args.grad_accum
                loss.backward()
            loss_sum += loss.detach()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1

        if step % 10 == 0:
            if distributed:  # report the loss averaged over all ranks
                dist.all_reduce(loss_sum, op=dist.ReduceOp.AVG)
            log(f"step {step}: loss {loss_sum.item():.4f}")

        if step % args.eval_every == 0 or step == args.max_steps:
            if master:
                val_loss, val_acc = evaluate(model, val_set, device, autocast)
                log(f"step {step}: val_loss {val_loss:.4f} val_acc {val_acc:.4f}")
            save_checkpoint()

    if master:
        if val_loss is None:  # resumed at or past max_steps: nothing trained this run
            val_loss, val_acc = evaluate(model, val_set, device, autocast)
        log(f"final val_loss {val_loss:.4f} val_acc {val_acc:.4f}")
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
