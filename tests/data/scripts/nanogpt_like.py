"""A stand-in for a nanoGPT-style train.py (written for these tests, not hwsweep-aware): DDP only when
torchrun set RANK, a *global* gradient-accumulation count that the script divides by the world size
itself, tokens per iteration printed at the start, and one optimizer step more than --max_iters."""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--gradient_accumulation_steps", type=int, default=8)
parser.add_argument("--max_iters", type=int, default=5)
parser.add_argument("--block_size", type=int, default=8)
parser.add_argument("--seed", type=int, default=1337)
parser.add_argument("--devices", type=int, default=1)  # accepted, never used
parser.add_argument("--out_dir", default="out")
args = parser.parse_args()

ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert args.gradient_accumulation_steps % world == 0
    args.gradient_accumulation_steps //= world
else:
    rank, world = 0, 1
tokens = args.gradient_accumulation_steps * world * args.batch_size * args.block_size
if rank == 0:
    print(f"tokens per iteration will be: {tokens:,}", flush=True)
torch.manual_seed(args.seed + rank)
model = nn.Sequential(nn.Embedding(16, 8), nn.Flatten(), nn.Linear(8 * args.block_size, 16))
if ddp:
    model = DistributedDataParallel(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
for it in range(args.max_iters + 1):
    for micro in range(args.gradient_accumulation_steps):
        x = torch.randint(0, 16, (args.batch_size, args.block_size))
        loss = nn.functional.cross_entropy(model(x), x[:, 0]) / args.gradient_accumulation_steps
        loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if rank == 0:
        print(f"iter {it}: loss {loss.item() * args.gradient_accumulation_steps:.4f}", flush=True)
if ddp:
    dist.destroy_process_group()
