"""A stand-in for a script that prints several losses on one line (written for these tests, not
hwsweep-aware): a small MLP trained with torch.optim.SGD, each logged step "train loss ... | valid loss ...",
and at the end a line with the test loss. None of its lines holds a bare `loss`."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()
torch.manual_seed(args.seed)

g = torch.Generator().manual_seed(3)
weights = torch.randn(6, 1, generator=g)
x_valid, x_test = torch.randn(64, 6, generator=g), torch.randn(64, 6, generator=g)
model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)


def held_out(x: torch.Tensor) -> float:
    with torch.no_grad():
        return nn.functional.mse_loss(model(x), x @ weights).item()


for step in range(1, args.steps + 1):
    x = torch.randn(args.batch, 6)
    loss = nn.functional.mse_loss(model(x), x @ weights)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 5 == 0:
        print(f"step {step:4d} | train loss {loss.item():.4f} | valid loss {held_out(x_valid):.4f}", flush=True)
print(f"done: test loss {held_out(x_test):.4f}", flush=True)
