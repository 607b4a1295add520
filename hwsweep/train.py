"""The training loop, one file, top to bottom. Launched by torchrun:

    torchrun --standalone --nproc_per_node 2 -m hwsweep.train results/.../spec.json --threads 2

It reads the RunSpec and nothing else, and writes (global rank 0 only) resumable
checkpoints, the final checkpoint and train.json (the RunRecord).
"""

import time

_T0 = time.perf_counter()  # startup is measured from here: imports, process group, data

import argparse
import hashlib
import json
import math
import os
import signal
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn import functional as F
from tqdm import tqdm

from hwsweep import data, host, io, models, repro
from hwsweep import device as devices
from hwsweep.metrics import summarise
from hwsweep.records import RunRecord
from hwsweep.reduce import global_mean, make_reduction
from hwsweep.spec import CHECKPOINT_DIR, FINAL_CHECKPOINT, TRAIN_RECORD, RunSpec

EXIT_PREEMPTED = 75  # EX_TEMPFAIL: stopped by a signal after writing a checkpoint; rerun to resume
KEEP_CHECKPOINTS = 2
STEADY_STATE_SKIP = 0.1  # leave the first 10% of steps out of throughput (allocator, caches)


def lr_factor(step: int, schedule) -> float:
    """Learning-rate multiplier at optimizer step `step`: linear warmup, then decay."""
    if step < schedule.warmup_steps:
        return (step + 1) / schedule.warmup_steps
    if schedule.decay == "constant":
        return 1.0
    progress = (step - schedule.warmup_steps) / max(1, schedule.steps - schedule.warmup_steps)
    shape = 0.5 * (1 + math.cos(math.pi * progress)) if schedule.decay == "cosine" else 1 - progress
    return schedule.min_lr_ratio + (1 - schedule.min_lr_ratio) * shape


def fingerprint(spec: RunSpec) -> str:
    # A checkpoint is only resumed by the run that wrote it: same recipe, plan, seed.
    return hashlib.sha256(json.dumps(spec.to_dict(), sort_keys=True).encode()).hexdigest()


def newest_checkpoint(folder: Path, expected: str):
    for path in sorted(folder.glob("step*.pt"), reverse=True):
        try:
            state = torch.load(path, map_location="cpu", weights_only=False)
        except Exception:  # noqa: BLE001 - a damaged file is skipped, an older one may do
            continue
        if state.get("fingerprint") == expected:
            return path, state
    return None, None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="hwsweep.train", description=__doc__.splitlines()[0])
    parser.add_argument("spec", help="path to spec.json")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for all processes on this node")
    args = parser.parse_args(argv)

    spec = RunSpec.load(args.spec)
    recipe, plan = spec.recipe, spec.plan

    # -- rank-dependent values, computed once -------------------------------------------
    rank = int(os.environ.get("RANK", 0))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    master = rank == 0
    if world_size != plan.world_size:
        sys.exit(
            f"hwsweep.train: the plan needs {plan.world_size} processes but {world_size} were started; "
            f"launch with --nnodes {plan.nodes} --nproc_per_node {plan.devices_per_node}"
        )
    strict = recipe.reproducibility == "strict"
    # Thread count changes reduction order inside kernels, so strict mode pins it.
    threads = 1 if strict else max(1, args.threads // local_world_size)
    torch.set_num_threads(threads)

    repro.prepare_environment(recipe.reproducibility)
    device = devices.select(plan.accelerator, local_rank)
    dist.init_process_group(backend=device.backend)
    devices.lock_precision(plan.tf32)
    repro.apply_level(recipe.reproducibility)
    repro.seed_everything(spec.seed)  # same seed on every rank: identical initial weights

    # -- data, model, optimizer ---------------------------------------------------------
    task = data.build_task(recipe.task)
    inputs, targets = data.train_table(task, recipe.task.train_size)
    order = data.GlobalOrder(recipe.task.train_size, plan.global_batch, spec.seed)
    model = models.build(recipe.model, task.vocab_size, task.length).to(device.torch_device)
    opt = recipe.optimizer
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=plan.lr, betas=(opt.beta1, opt.beta2), weight_decay=opt.weight_decay
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, recipe.schedule))
    scaler = devices.grad_scaler(device, plan.precision)

    # -- resume from the newest complete checkpoint of this very run -------------------
    ckpt_dir = spec.path(CHECKPOINT_DIR)
    expected = fingerprint(spec)
    ckpt_path, state = newest_checkpoint(ckpt_dir, expected)
    history = {"losses": [], "lrs": [], "step_seconds": [], "segments": []}
    start_step = 0
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        repro.set_rng_state(state["rng"][rank])
        history = state["history"]
        start_step = state["step"]
    startup_seconds = time.perf_counter() - _T0
    history["segments"].append({"start_step": start_step, "startup_seconds": startup_seconds})

    reduction = make_reduction(recipe.reproducibility, model, plan.accumulation, device)

    if master:
        resumed = f"resumed from {ckpt_path} (step {start_step})" if state else "fresh start"
        print(
            "\n".join(
                [
                    "=" * 64,
                    f"hwsweep {spec.suite}/{spec.variant} on {spec.hardware_name}, seed {spec.seed}",
                    f"world size {world_size} = {plan.nodes} node(s) x {plan.devices_per_node} {device.name}",
                    f"global batch {plan.global_batch} = micro-batch {plan.micro_batch} x "
                    f"{world_size} device(s) x {plan.accumulation} accumulation",
                    f"backend {device.backend}, precision {plan.precision}, tf32 {plan.tf32}, "
                    f"reproducibility {recipe.reproducibility}, {threads} thread(s)/process",
                    f"steps {plan.steps} (warmup {plan.warmup_steps}) = {plan.epochs} epochs; {resumed}",
                    "=" * 64,
                ]
            ),
            flush=True,
        )

    # SIGTERM / SIGUSR2 (SIGUSR1 is NCCL's): finish the step, checkpoint, exit EXIT_PREEMPTED.
    # The handler only raises a local flag; every decision uses the all-reduced value of that
    # step, so a signal landing between two collectives cannot send the ranks different ways.
    signalled = []

    def request_stop(signum, frame):
        signalled.append(signum)

    for sig in (signal.SIGTERM, signal.SIGUSR2):
        signal.signal(sig, request_stop)

    def save_checkpoint(step: int) -> Path:
        rng = [None] * world_size
        dist.all_gather_object(rng, repro.rng_state())
        path = ckpt_dir / f"step{step:09d}.pt"
        if master:
            state = {
                "fingerprint": expected,
                "step": step,
                "model": reduction.module.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "scaler": scaler.state_dict(),
                "rng": rng,
                "history": history,
            }
            with io.atomic_path(path) as tmp:
                torch.save(state, tmp)
            for old in sorted(ckpt_dir.glob("step*.pt"))[:-KEEP_CHECKPOINTS]:
                old.unlink()
        dist.barrier()
        return path

    # -- the loop -----------------------------------------------------------------------
    bar = tqdm(
        total=plan.steps,
        initial=start_step,
        disable=not master,
        mininterval=1 if sys.stderr.isatty() else 10,
        desc="train",
    )
    last_finite = None
    final_path = ckpt_path  # resumed from the final checkpoint itself: nothing left to train
    for step in range(start_step, plan.steps):
        t0 = time.perf_counter()
        micros = data.micro_batches(order.batch(step), rank, world_size, plan.micro_batch)
        losses = []
        for i, idx in enumerate(micros):
            x = inputs[idx].to(device.torch_device, non_blocking=True)
            y = targets[idx].to(device.torch_device, non_blocking=True)
            with reduction.micro_step(last=i == len(micros) - 1):
                with devices.autocast(device, plan.precision):
                    logits = reduction.model(x)
                loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
                reduction.backward(loss, scaler)
            losses.append(loss.detach())
        reduction.finish()
        if opt.grad_clip > 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), opt.grad_clip)
        lr = scheduler.get_last_lr()[0]
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()

        step_loss = global_mean(losses)  # also keeps the ranks in step for the timing below
        stop = torch.tensor([float(bool(signalled))], device=device.torch_device)
        dist.all_reduce(stop, op=dist.ReduceOp.MAX)  # every rank stops at the same step
        stop = bool(stop.item())
        device.synchronize()
        history["step_seconds"].append(time.perf_counter() - t0)
        if not math.isfinite(step_loss):
            raise FloatingPointError(
                f"loss is {step_loss} at step {step} (last finite loss: {last_finite}); "
                "lower recipe.optimizer.lr or use precision fp32"
            )
        last_finite = step_loss
        history["losses"].append(step_loss)
        history["lrs"].append(lr)
        bar.update(1)
        if master and (step + 1) % recipe.log_every == 0:
            bar.set_postfix(loss=f"{step_loss:.4f}", lr=f"{lr:.2e}", refresh=False)
        done = step + 1
        if done % recipe.checkpoint_every == 0 or done == plan.steps or stop:
            final_path = save_checkpoint(done)
        if stop and done < plan.steps:
            if master:
                print(f"hwsweep.train: stop requested; checkpoint at step {done}, exiting {EXIT_PREEMPTED}", flush=True)
            dist.destroy_process_group()
            return EXIT_PREEMPTED
    bar.close()

    # -- the record ---------------------------------------------------------------------
    names = [None] * world_size
    dist.all_gather_object(names, f"{host.node_name()}:{device.name}")
    if master:
        final = spec.path(FINAL_CHECKPOINT)
        with io.atomic_path(final) as tmp:
            tmp.unlink()
            try:
                os.link(final_path, tmp)  # the final checkpoint is the last one: no second copy
            except OSError:
                tmp.write_bytes(final_path.read_bytes())
        step_seconds = history["step_seconds"]
        steady = step_seconds[int(len(step_seconds) * STEADY_STATE_SKIP) :]
        train_seconds = sum(step_seconds)
        steps = list(range(1, len(history["losses"]) + 1))
        observations = [{"metric": m.name, "step": s, "value": v} for m in spec.metrics_of("train") if m.json_key == "loss"
                        for s, v in zip(steps, history["losses"])]  # fmt: skip
        finals, _ = summarise(observations, spec.metrics_of("train"))
        record = RunRecord(
            status="complete", suite=spec.suite, variant=spec.variant, hardware=spec.hardware_name, seed=spec.seed,
            trainer="builtin", spec=spec.to_dict(), plan=spec.plan.__dict__ | {"threads_per_process": threads},
            metrics=finals, curves={"loss": {"steps": steps, "values": history["losses"]}},
            train_seconds=train_seconds, startup_seconds=sum(s["startup_seconds"] for s in history["segments"]),
            wall_seconds=time.perf_counter() - _T0, samples_per_second=plan.global_batch * len(steady) / sum(steady),
            data_order={"sampler": "global-order", "dataset_size": recipe.task.train_size, "num_workers": 0},
            segments=history["segments"], restarts=len(history["segments"]) - 1,
            resumed_from_step=history["segments"][-1]["start_step"] or None, provenance=repro.provenance(names),
            checkpoint=FINAL_CHECKPOINT, step_seconds=step_seconds,
        ).to_dict()  # fmt: skip
        io.write_json(spec.path(TRAIN_RECORD), record)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
