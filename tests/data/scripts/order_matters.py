"""A script whose flags conflict when reordered: --preset sets --hidden where it appears, so a --hidden after it
wins and one before it is overwritten (LightningCLI's --config, argparse's last value). It saves its argv in its
working folder and trains a little, so the observer sees it."""

import argparse
import json
import sys

import torch


class Preset(argparse.Action):
    def __call__(self, parser, namespace, value, option_string=None):
        namespace.preset, namespace.hidden = value, {"small": 8, "large": 128}[value]


parser = argparse.ArgumentParser()
parser.add_argument("--preset", action=Preset)
parser.add_argument("--hidden", type=int, default=16)
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--batch", type=int, default=4)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()
with open("argv.json", "w") as f:
    json.dump({"argv": sys.argv[1:], "hidden": args.hidden}, f)
torch.manual_seed(args.seed)
model = torch.nn.Linear(3, args.hidden)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1, args.steps + 1):
    loss = model(torch.randn(args.batch, 3)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"step {step}: loss {loss.item():.4f} hidden {args.hidden}", flush=True)
