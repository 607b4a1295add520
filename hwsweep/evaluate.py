"""Evaluate a finished run on the fixed held-out set.

    python -m hwsweep.evaluate results/.../spec.json

Evaluation always runs on the CPU in fp32, so every hardware is measured by the same
arithmetic: differences in eval.json come from training, not from the evaluator."""

from __future__ import annotations

import argparse
import shutil
import sys
import time

import torch

from hwsweep import data, io, models
from hwsweep.spec import CHECKPOINT_DIR, EVAL_RECORD, FINAL_CHECKPOINT, RunSpec

EVAL_BATCH = 500


@torch.no_grad()
def accuracy(model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> dict:
    model.eval()
    correct_tokens = correct_sequences = 0
    for x, y in zip(inputs.split(EVAL_BATCH), targets.split(EVAL_BATCH)):
        hit = model(x).argmax(-1) == y
        correct_tokens += int(hit.sum())
        correct_sequences += int(hit.all(dim=1).sum())
    return {
        "token_accuracy": correct_tokens / targets.numel(),
        "exact_accuracy": correct_sequences / len(targets),
        "eval_samples": len(targets),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="hwsweep.evaluate", description=__doc__.splitlines()[0])
    parser.add_argument("spec", help="path to spec.json")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clean-checkpoints", action="store_true", help="delete resumable checkpoints once evaluated")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    spec = RunSpec.load(args.spec)
    task = data.build_task(spec.recipe.task)
    model = models.build(spec.recipe.model, task.vocab_size, task.length)
    state = torch.load(spec.path(FINAL_CHECKPOINT), map_location="cpu", weights_only=False)
    if state["step"] != spec.plan.steps:
        sys.exit(f"hwsweep.evaluate: checkpoint is at step {state['step']}, not {spec.plan.steps}; rerun training")
    model.load_state_dict(state["model"])
    record = accuracy(model, *data.eval_table(task, spec.recipe.task.eval_size))
    record |= {
        "suite": spec.suite,
        "variant": spec.variant,
        "hardware": spec.hardware_name,
        "seed": spec.seed,
        "eval_seconds": time.perf_counter() - t0,
    }
    io.write_json(spec.path(EVAL_RECORD), record)
    if args.clean_checkpoints:  # the run succeeded and is evaluated; final.pt is its own link
        shutil.rmtree(spec.path(CHECKPOINT_DIR), ignore_errors=True)
    print(f"{spec.suite}/{spec.variant}/{spec.hardware_name}/seed{spec.seed}: "
          f"token_accuracy {record['token_accuracy']:.4f}, exact_accuracy {record['exact_accuracy']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
