"""Helper for tests/run/test_fsdp.py, run under torchrun: the initial weights run.wrap gives two models, gathered
whole and written by rank 0 (torch.save of {name: state dict}) to argv[2]. Run as a module (`-m
runtime_initial_weights`, tests/ on PYTHONPATH): its workers are forked from the agent, which imported it.

- "family": the built-in family of the spec, built on the meta device as the trainer builds it;
- "own": a user's model with a tensor of its own and no reset_parameters, filled by an `init` function;
  built on the meta device, or with argv[3] == "built" built for real and re-initialised by run.wrap.
"""

import sys

import torch
from torch import nn

from hwsweep.models import families
from hwsweep.run import runtime


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.empty(13, 7))  # no reset_parameters: the script's init fills it
        self.layers = nn.ModuleList(nn.Linear(7, 7) for _ in range(3))


def init(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.trunc_normal_(module.weight, std=0.02)
        nn.init.zeros_(module.bias)
    elif isinstance(module, Net):
        nn.init.uniform_(module.scale, -1, 1)


def gathered(run, model) -> dict:
    if run.sharded:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def main() -> None:
    run = runtime.init(sys.argv[1])
    with torch.device("meta"):
        family = families.torch_side(run.recipe.model.name).build(run.recipe)
    run.wrap(family)
    built = len(sys.argv) > 3 and sys.argv[3] == "built"
    with torch.device("cpu" if built else "meta"):
        own = Net()
    run.wrap(own, init=init)
    found = {"family": gathered(run, family), "own": gathered(run, own)}
    if run.master:
        torch.save(found, sys.argv[2])
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":  # run as `-m`: forked from torchrun's agent, which imports this module first
    main()
