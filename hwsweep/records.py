"""Flatten RunRecords (train.json + eval.json) into table rows. Statistics read these rows only."""

from __future__ import annotations

import pandas as pd

from hwsweep import io

KEYS = ["suite", "variant", "hardware", "seed"]
METRICS = ["token_accuracy", "exact_accuracy", "final_loss"]
PLAN_COLUMNS = [
    "accelerator", "nodes", "devices_per_node", "world_size", "global_batch", "micro_batch",
    "accumulation", "steps", "warmup_steps", "epochs", "precision", "tf32", "reproducibility",
    "threads_per_process", "lr", "comparable",
]  # fmt: skip
TIMING_COLUMNS = ["train_seconds", "startup_seconds", "eval_seconds", "wall_seconds", "samples_per_second"]


class RecordError(ValueError):
    pass


def run_row(train: dict, evaluation: dict) -> dict:
    if train.get("status") != "complete":
        raise RecordError(f"train record of {[train.get(k) for k in KEYS]} is not complete")
    prov = train["provenance"]
    row = {k: train[k] for k in KEYS}
    row["gpu_type"] = train["spec"]["hardware"]["gpu_type"]
    row |= {k: train["plan"][k] for k in PLAN_COLUMNS}
    row |= {k: evaluation[k] for k in METRICS if k in evaluation}
    row["final_loss"] = train["final_loss"]
    row |= {k: train[k] for k in TIMING_COLUMNS if k in train}
    row["eval_seconds"] = evaluation["eval_seconds"]
    row["restarts"] = train["restarts"]
    order = train["data_order"]
    row["data_order"] = f"{order['sampler']}/table{order['train_size']}/workers{order['num_workers']}"
    row |= {k: prov[k] for k in ("torch", "cuda", "nccl", "git_commit", "host")}
    row["devices"] = ";".join(sorted(set(prov["devices"])))
    return row


def curve_rows(train: dict) -> list[dict]:
    base = {k: train[k] for k in KEYS}
    return [base | {"step": i + 1, "loss": loss} for i, loss in enumerate(train["losses"])]


def load(train_paths, eval_paths) -> tuple[pd.DataFrame, pd.DataFrame]:
    """runs (one row per run) and curves (one row per run and step)."""
    runs, curves = [], []
    for tp, ep in zip(train_paths, eval_paths, strict=True):
        train, evaluation = io.read_json(tp), io.read_json(ep)
        runs.append(run_row(train, evaluation))
        curves.extend(curve_rows(train))
    return pd.DataFrame(runs), pd.DataFrame(curves)
