"""Helper for tests/run/test_runtime.py, run under torchrun: every micro-batch this rank's runtime
loader yields (sample ids and a random draw made inside the dataset), written as JSON."""

import json
import sys

import torch

from hwsweep.run import runtime


class Augmented(torch.utils.data.Dataset):
    """A map-style dataset that is not a tensor table and draws random numbers per sample."""

    def __len__(self):
        return 200

    def __getitem__(self, i):
        return torch.tensor(i), torch.rand(())


def fork_imports(argv: list[str]) -> list[str]:
    """What torchrun's agent imports for the workers besides this module (hwsweep.run.torchrun): nothing, as for
    the built-in trainer's runs that neither shard nor compile (runtime.init leaves TorchDynamo out)."""
    return []


def main() -> None:
    run = runtime.init(sys.argv[1])
    loader = run.loader(Augmented())
    model = run.wrap(torch.nn.Linear(1, 1))
    run.resume()
    seen = {}
    for step in run.steps():
        for j, (ids, noise) in enumerate(run.accumulate(loader)):
            run.backward(model(noise.unsqueeze(1)).mean())
            seen[f"{step}/{run.rank * run.plan.accumulation + j}"] = [ids.tolist(), noise.tolist()]
    with open(f"{sys.argv[2]}.rank{run.rank}.json", "w") as f:
        json.dump(seen, f)
    run.finish()


if __name__ == "__main__":  # run as `-m`: forked from torchrun's agent, which imports this module first
    main()
