"""A script that trains and prints its final loss only: no line says a step."""

import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--batch", type=int, default=4)
args = parser.parse_args()
model = torch.nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(args.steps):
    loss = model(torch.randn(args.batch, 3)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
print(f"final loss {loss.item():.4f}")
