"""The typed training recipe. Field names match config keys one to one; the defaults
live in the config schema, so every field here is required once the config is resolved."""

from __future__ import annotations

from dataclasses import dataclass

from hwsweep.typed import Typed


@dataclass(frozen=True)
class Task:
    name: str
    length: int
    vocab_size: int
    train_size: int
    eval_size: int


@dataclass(frozen=True)
class Model:
    name: str
    width: int
    depth: int
    heads: int
    mlp_ratio: int


@dataclass(frozen=True)
class Optimizer:
    name: str
    lr: float
    weight_decay: float
    beta1: float
    beta2: float
    grad_clip: float


@dataclass(frozen=True)
class Schedule:
    steps: int
    warmup_steps: int
    decay: str
    min_lr_ratio: float


@dataclass(frozen=True)
class Recipe(Typed):
    task: Task | None  # the built-in trainer's task and model; None for a user's command
    model: Model | None
    optimizer: Optimizer
    schedule: Schedule
    global_batch: int
    micro_batch: int | str
    max_micro_batch: int | None
    batch_policy: str
    lr_scaling: str
    precision: str
    tf32: bool
    reproducibility: str
    checkpoint_every: int
    log_every: int
    num_workers: int
    eval_every: int  # built-in trainer: periodic evaluation curves eval_<name>; 0 = off
    eval_subset: int
    args: dict  # a user script's own settings, passed as flags
