"""A stand-in for the PyTorch DDP tutorial's multigpu_torchrun.py (written for these tests): it always
joins a process group from torchrun's environment, whatever the world size."""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=8)
parser.add_argument("--total_steps", type=int, default=4)
args = parser.parse_args()

dist.init_process_group(backend="gloo")
rank = int(os.environ["LOCAL_RANK"])
model = DistributedDataParallel(nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1, args.total_steps + 1):
    x = torch.randn(args.batch_size, 4)
    loss = (model(x) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if rank == 0:
        print(f"[GPU{rank}] step {step} | Batchsize: {args.batch_size} | loss {loss.item():.4f}", flush=True)
dist.destroy_process_group()
