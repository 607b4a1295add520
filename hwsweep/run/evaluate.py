"""Evaluate a finished run: the model family's evaluator (built-in), or the user's evaluation command.

    python -m hwsweep.run.evaluate results/.../spec.json

The built-in evaluator runs in fp32 on the kind of device that trained (a GPU run is evaluated on
its GPU, batched; a CPU run on the CPU): pass@k over many views of a GPU-sized model takes hours on
a CPU. Runs of one device type share the arithmetic; across types the evaluator's kernels differ
in the last bits, far below any margin (docs/hrm.md).

A sharded (FSDP) run's final checkpoint stays sharded (final/): it is evaluated sharded, by one process per device
of a node under torchrun (hwsweep.run.sharded_eval), so no process holds the whole model; this process starts them
(`--threads` the node's, shared among them) and they write the record. The record holds the evaluation's peak
memory per process (the largest over its processes), how many there were, and each one's peak and baseline
(rank_memory), held against the training's plan per device as the training's are (a "memory: ..." check)."""

from __future__ import annotations

import argparse
import os
import sys
import time

from hwsweep.run import startup

COLLECTION_HELD = startup.hold_collection(__name__)  # until main starts: torch's imports come next

import torch  # noqa: E402

from hwsweep.contracts import io, memory_check  # noqa: E402
from hwsweep.contracts.records import EvalRecord, RunRecord  # noqa: E402
from hwsweep.contracts.spec import EVAL_RECORD, FINAL_CHECKPOINT, TRAIN_RECORD, RunSpec  # noqa: E402
from hwsweep.models import families, flops  # noqa: E402
from hwsweep.models.footprint import CUDA_CONTEXT_BYTES  # noqa: E402
from hwsweep.run import rank_memory, runner, sharded_eval, shutdown, tracking  # noqa: E402


def fork_imports(argv: list[str]) -> list[str]:
    """What torchrun's agent imports for the sharded evaluation's forked ranks beyond this module: nothing (no
    optimizer step, so no TorchDynamo; hwsweep.run.torchrun)."""
    return []


def _final(spec: RunSpec) -> tuple[dict, RunRecord, int]:
    """(final.pt as written, the train record, the step it must be at) or an exit naming a stale checkpoint."""
    state = torch.load(spec.path(FINAL_CHECKPOINT), map_location="cpu", weights_only=False)
    trained = RunRecord.from_dict(io.read_json(spec.path(TRAIN_RECORD)))
    last = trained.stopped_at_step or spec.plan.steps  # a run stopped at its targets ends there
    if state["step"] != last:
        sys.exit(f"hwsweep.run.evaluate: checkpoint is at step {state['step']}, not {last}; rerun training")
    return state, trained, last


def builtin(spec: RunSpec, spec_path: str, threads: int, sharded: bool = False) -> int:
    t0 = time.perf_counter()
    cuda = spec.hardware.accelerator == "cuda" and torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    baseline = rank_memory.held_bytes(device)  # before final.pt and the model: what the plan does not count
    state, trained, last = _final(spec)
    if "shards" in state and not sharded:  # a sharded run's checkpoint: evaluated by its ranks, which write the record
        return sharded_eval.launch(spec, spec_path, threads)
    if sharded:
        metrics, memory = sharded_eval.evaluate(spec, state, threads, trained.curves)
        if int(os.environ.get("RANK", 0)) != 0:
            return 0
    else:
        fam = families.torch_side(spec.recipe.model.name)
        model = fam.build(spec.recipe)
        model.load_state_dict(state["model"])
        model.to(device).eval()
        _, held_out = fam.tables(spec.recipe)
        with torch.no_grad():
            metrics = fam.evaluate(model, spec.recipe, held_out, curves=trained.curves)
        ranks = rank_memory.alone(device, baseline)
        memory = {"peak_memory_gb": ranks[0]["peak_gb"], "peak_memory_source": rank_memory.source(device),
                  "processes": 1, "rank_memory": ranks}  # fmt: skip
    metrics |= costs(spec, trained, last, metrics)
    # the training's plan per device bounds the evaluation's (no gradients, no optimizer state)
    over = memory_check.over_plan(spec.plan.est_memory_gb, device.type, CUDA_CONTEXT_BYTES, memory["rank_memory"])
    record = EvalRecord(suite=spec.suite, variant=spec.variant, hardware=spec.hardware_name, seed=spec.seed,
                        evaluator="builtin", metrics=metrics, eval_seconds=time.perf_counter() - t0,
                        device=device.type, planned_memory_gb=spec.plan.est_memory_gb, checks=[over] if over else [],
                        **memory)  # fmt: skip
    print(f"hwsweep.run.evaluate: evaluated on {device.type} by {memory['processes']} process(es), peak "
          f"{memory['peak_memory_gb']:.3f} GB each at most", file=sys.stderr)  # fmt: skip
    io.write_json(spec.path(EVAL_RECORD), record.to_dict())
    _publish(spec)
    print(f"{spec.run_dir}: " + ", ".join(f"{k} {v:.4f}" if v is not None else f"{k} none" for k, v in metrics.items()))
    return 0


def costs(spec: RunSpec, trained: RunRecord, steps: int, metrics: dict) -> dict:
    """The family's declared cost metrics (computational_cost, flops_per_sample) from the FLOPs the training
    record says were spent over the `steps` it ran (HRM: at the segments ACT ran, every rank's)."""
    declared = families.family(spec.recipe.model.name).metrics
    wanted = [k for k in ("computational_cost", "flops_per_sample") if k in declared]
    if not wanted:
        return {}
    accuracy, per_step = metrics.get("exact_accuracy"), trained.flops_per_step
    if accuracy is None or not per_step:
        return dict.fromkeys(wanted)
    samples = steps * spec.plan.global_batch
    cost = flops.computational_cost(per_step * steps, accuracy, samples)
    return {k: cost[k] for k in wanted}


def main(argv=None) -> int:
    startup.resume_collection(COLLECTION_HELD)
    parser = argparse.ArgumentParser(prog="hwsweep.run.evaluate", description=__doc__.splitlines()[0])
    parser.add_argument("spec", help="path to spec.json")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sharded", action="store_true", help=argparse.SUPPRESS)  # one rank of sharded_eval's
    args = parser.parse_args(argv)
    io.one_line_refusals()
    spec = RunSpec.load(args.spec)
    if args.sharded:  # a rank of a sharded evaluation: its launcher has checked the folder
        return builtin(spec, args.spec, args.threads, sharded=True)
    torch.set_num_threads(args.threads)
    problem = io.writable_problem(spec.run_dir)
    if problem is not None:
        sys.exit(f"hwsweep: {problem}")
    io.remove_temporaries(spec.run_dir, (io.temporaries(EVAL_RECORD),))  # a killed evaluation's; nothing writes it now
    if spec.evaluation.kind != "command":
        return builtin(spec, args.spec, args.threads)  # it publishes its record (a sharded one: its rank 0)
    code = runner.evaluate(spec, args.spec, args.threads)
    if code == 0:
        _publish(spec)
    return code


def _publish(spec: RunSpec) -> None:
    """The evaluation's metrics to the trackers (tracking.json)."""
    trained = RunRecord.from_dict(io.read_json(spec.path(TRAIN_RECORD)))
    evaluated = EvalRecord.from_dict(io.read_json(spec.path(EVAL_RECORD)))
    tracking.publish_evaluation(spec, spec.run_dir, trained.stopped_at_step or spec.plan.steps, evaluated.metrics,
                                spec.path(EVAL_RECORD))  # fmt: skip


if __name__ == "__main__":
    shutdown.exit_after(main)
