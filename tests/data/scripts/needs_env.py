"""A script that needs an environment variable (an older script on a newer torch: TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD)."""

import os
import sys

import torch

if os.environ.get("NEEDS_ENV_FLAG") != "1":
    sys.exit("NEEDS_ENV_FLAG is not 1")
model = torch.nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1, 4):
    loss = model(torch.randn(4, 3)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"step {step}: loss {loss.item():.4f}", flush=True)
