"""Evaluate a finished run: the reference models' evaluator, or the user's evaluation command.

    python -m hwsweep.evaluate results/.../spec.json

The built-in evaluator always runs on the CPU in fp32, so every hardware is measured by the
same arithmetic: differences in eval.json come from training, not from the evaluator."""

from __future__ import annotations

import argparse
import sys
import time

import torch

from hwsweep import data, io, models, runner
from hwsweep.records import EvalRecord
from hwsweep.spec import EVAL_RECORD, FINAL_CHECKPOINT, RunSpec

EVAL_BATCH = 500


@torch.no_grad()
def accuracy(model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> dict:
    model.eval()
    correct_tokens = correct_sequences = 0
    for x, y in zip(inputs.split(EVAL_BATCH), targets.split(EVAL_BATCH)):
        hit = model(x).argmax(-1) == y
        correct_tokens += int(hit.sum())
        correct_sequences += int(hit.all(dim=1).sum())
    return {"token_accuracy": correct_tokens / targets.numel(), "exact_accuracy": correct_sequences / len(targets)}


def builtin(spec: RunSpec) -> int:
    t0 = time.perf_counter()
    task = data.build_task(spec.recipe.task)
    model = models.build(spec.recipe.model, task.vocab_size, task.length)
    state = torch.load(spec.path(FINAL_CHECKPOINT), map_location="cpu", weights_only=False)
    if state["step"] != spec.plan.steps:
        sys.exit(f"hwsweep.evaluate: checkpoint is at step {state['step']}, not {spec.plan.steps}; rerun training")
    model.load_state_dict(state["model"])
    metrics = accuracy(model, *data.eval_table(task, spec.recipe.task.eval_size))
    record = EvalRecord(suite=spec.suite, variant=spec.variant, hardware=spec.hardware_name, seed=spec.seed,
                        evaluator="builtin", metrics=metrics, eval_seconds=time.perf_counter() - t0)  # fmt: skip
    io.write_json(spec.path(EVAL_RECORD), record.to_dict())
    print(f"{spec.run_dir}: " + ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="hwsweep.evaluate", description=__doc__.splitlines()[0])
    parser.add_argument("spec", help="path to spec.json")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    spec = RunSpec.load(args.spec)
    if spec.evaluation.kind == "command":
        return runner.evaluate(spec, args.spec, args.threads)
    torch.set_num_threads(args.threads)
    return builtin(spec)


if __name__ == "__main__":
    sys.exit(main())
