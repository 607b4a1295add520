"""A Hydra-style script without Hydra: key=value overrides, dotted into a nested config (optim.lr=0.01), the
last one of a key winning. It saves what it parsed in its working folder and trains a little."""

import json
import sys

import torch

config = {"optim": {"lr": 0.1}, "model": {"hidden": 8}, "steps": 3, "batch": 4, "seed": 0}
for item in sys.argv[1:]:
    key, _, value = item.partition("=")
    *parents, leaf = key.split(".")
    node = config
    for part in parents:
        node = node[part]
    if leaf not in node:
        sys.exit(f"Could not override '{key}'. Key '{leaf}' is not in struct")
    node[leaf] = type(node[leaf])(value)
with open("argv.json", "w") as f:
    json.dump({"argv": sys.argv[1:], "config": config}, f)
torch.manual_seed(config["seed"])
model = torch.nn.Linear(3, config["model"]["hidden"])
optimizer = torch.optim.SGD(model.parameters(), lr=config["optim"]["lr"])
for step in range(1, config["steps"] + 1):
    loss = model(torch.randn(config["batch"], 3)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"step {step}: loss {loss.item():.4f}", flush=True)
