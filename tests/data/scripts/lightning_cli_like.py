"""A LightningCLI-style script without Lightning: dotted flags (--trainer.max_steps 5, --model.learning_rate 0.01),
the value after the flag. It saves what it parsed in its working folder and trains a little."""

import argparse
import json
import sys

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--trainer.max_steps", dest="max_steps", type=int, required=True)
parser.add_argument("--data.batch_size", dest="batch_size", type=int, required=True)
parser.add_argument("--seed_everything", type=int, default=0)
parser.add_argument("--model.learning_rate", dest="learning_rate", type=float, default=0.1)
parser.add_argument("--model.hidden", dest="hidden", type=int, default=8)
args = parser.parse_args()
with open("argv.json", "w") as f:
    json.dump({"argv": sys.argv[1:], "learning_rate": args.learning_rate, "hidden": args.hidden}, f)
torch.manual_seed(args.seed_everything)
model = torch.nn.Linear(3, args.hidden)
optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate)
for step in range(1, args.max_steps + 1):
    loss = model(torch.randn(args.batch_size, 3)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"step {step}: train_loss {loss.item():.4f}", flush=True)
