"""The typed training recipe. Field names match config keys one to one; the defaults
live in the config schema, so every field here is required once the config is resolved.
recipe.task and recipe.model are one record per task name and model family, told apart by
their `name`: a family takes exactly its own keys."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from hwsweep.contracts.typed import ORDERED, Typed


class Section:
    def problem(self) -> str | None:
        """What the schema cannot check (relations between keys), as 'key: what; fix', or None."""
        return None


# -- tasks: recipe.task, one record per task name --------------------------------------------
@dataclass(frozen=True)
class SortTask(Section):
    name: Literal["sort"]
    length: int
    vocab_size: int
    train_size: int
    eval_size: int


@dataclass(frozen=True)
class SudokuTask(Section):
    name: Literal["sudoku"]
    size: int  # 4 or 9: cells per side
    blanks: int  # cells to fill in: the difficulty (every puzzle has exactly one solution)
    distinct_puzzles: int  # puzzles made by search per table; the samples are them under symmetries
    augmentation: int  # augmented copies (views) of each puzzle; 0 = none
    eval_views: int  # symmetric views voted at evaluation besides the original (any number: a view is a sudoku)
    train_size: int
    eval_size: int

    @property
    def length(self) -> int:
        return self.size * self.size

    @property
    def vocab_size(self) -> int:
        return self.size + 1  # 0 is a blank

    @property
    def num_puzzle_ids(self) -> int:
        return 1  # one kind of puzzle: every view keeps identifier 0, as in the original

    @property
    def voted_views(self) -> int:
        """Views the evaluator predicts and votes per held-out puzzle, the original included."""
        return self.eval_views + 1

    @property
    def unseen_puzzles(self) -> int:
        return 0  # its held-out puzzles are new already (searched from another seed); no identifier to withhold

    def problem(self) -> str | None:
        if self.blanks > self.length:
            return f"blanks: {self.blanks} is more than the {self.length} cells; use at most {self.length}"
        return None


@dataclass(frozen=True)
class ArcTask(Section):
    name: Literal["arc"]
    min_size: int  # grid sides drawn from min_size..max_size, on a max_size canvas
    max_size: int
    num_puzzles: int  # distinct rule instances, one puzzle identifier each
    augmentation: int
    eval_views: int  # augmented views voted at evaluation (at most augmentation: a view's identifier must be trained)
    train_size: int
    eval_size: int
    demonstrations: int = 0  # input/output pairs of the same puzzle shown before the query, in the sample itself
    # New puzzles (rule instances, identifiers) no training sample shows: a second held-out split of eval_size samples
    unseen_puzzles: int = 0

    @property
    def length(self) -> int:
        return (2 * self.demonstrations + 1) * self.max_size * self.max_size

    @property
    def vocab_size(self) -> int:
        return 11  # padding and 10 colours

    @property
    def num_puzzle_ids(self) -> int:
        # The unseen puzzles' rows exist and stay as initialised (zero): no training sample selects them.
        return (self.num_puzzles + self.unseen_puzzles) * (self.augmentation + 1)

    @property
    def voted_views(self) -> int:
        """Views the evaluator predicts and votes per held-out puzzle, the original included."""
        return min(self.eval_views, self.augmentation) + 1

    def problem(self) -> str | None:
        if self.min_size > self.max_size:
            return f"min_size: {self.min_size} is above max_size {self.max_size}; lower it"
        return None


# -- models: recipe.model, one record per family (hwsweep/models/families.py) -------------------------
@dataclass(frozen=True)
class TransformerModel(Section):
    name: Literal["transformer"]
    width: int
    depth: int
    heads: int
    mlp_ratio: int


def _rope_problem(model) -> str | None:
    if model.positions == "rope" and (model.width // model.heads) % 2:
        return (f"positions: rope needs an even width per head, not {model.width // model.heads}; "
                "change width or heads, or use positions: learned")  # fmt: skip
    return None


@dataclass(frozen=True)
class HRMModel(Section):
    name: Literal["hrm"]
    width: int
    heads: int
    mlp_ratio: int
    h_layers: int  # blocks of the high-level module H
    l_layers: int  # blocks of the low-level module L
    h_cycles: int  # H steps per segment
    l_cycles: int  # L steps per H step
    halt_max_steps: int  # segments of deep supervision (the most ACT may run)
    halt_exploration_prob: float
    act_mode: str  # act (Q-learned halting), fixed (always halt_max_steps), none (no deep supervision)
    puzzle_emb_ndim: int  # width of the puzzle embedding; 0 = off
    positions: str  # rope or learned
    loss: str  # stablemax_cross_entropy (the original's) or softmax_cross_entropy
    embed_scale: bool = True  # the original's: input embedding x sqrt(width), tokens initialised at 1/sqrt(width)
    halt_exploration: str = "per_segment"  # ACT exploration drawn at every segment (the original's) or per_sample

    def problem(self) -> str | None:
        return _rope_problem(self)


@dataclass(frozen=True)
class DeepTransformerModel(Section):
    name: Literal["deep_transformer"]
    width: int
    heads: int
    mlp_ratio: int
    depth: int
    puzzle_emb_ndim: int
    positions: str
    loss: str
    embed_scale: bool = True  # HRM's input, as the original's

    def problem(self) -> str | None:
        return _rope_problem(self)


Task = SortTask | SudokuTask | ArcTask
Model = TransformerModel | HRMModel | DeepTransformerModel


@dataclass(frozen=True)
class Optimizer:
    name: str
    lr: float
    weight_decay: float
    beta1: float
    beta2: float
    grad_clip: float
    kernel: str  # auto | fused | foreach | for_loop
    puzzle_emb_lr: float  # the puzzle families' sparse puzzle embedding: its own SignSGD
    puzzle_emb_weight_decay: float

    def resolved_kernel(self, accelerator: str) -> str:
        """The AdamW implementation on this accelerator: auto is fused on CUDA and torch's own default, the
        for-loop, elsewhere (so CPU runs keep the numbers they had before the setting existed)."""
        if self.kernel != "auto":
            return self.kernel
        return "fused" if accelerator == "cuda" else "for_loop"


@dataclass(frozen=True)
class Schedule:
    steps: int
    warmup_steps: int
    decay: str
    min_lr_ratio: float
    stop_at: str = "steps"  # steps | target: stop once every target of the suite is reached (issue 23)


@dataclass(frozen=True)
class Parallel:
    """How the model is spread over the devices (recipe.parallel): ddp keeps a whole replica on each;
    fsdp (FSDP2, torch.distributed.fsdp.fully_shard) shards parameters, gradients and optimizer state over all
    devices; hsdp shards them over the devices of a node and replicates the shards over the nodes."""

    strategy: str  # ddp | fsdp | hsdp
    reshard_after_forward: bool  # fsdp: free each block's gathered weights after its forward (gather again for backward)

    @property
    def sharded(self) -> bool:
        return self.strategy in ("fsdp", "hsdp")

    def shards(self, nodes: int, devices_per_node: int) -> int:
        """Over how many devices one copy of the weights is split: 0 for ddp (a whole replica per device)."""
        return {"ddp": 0, "fsdp": nodes * devices_per_node, "hsdp": devices_per_node}[self.strategy]


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
    compile: bool  # torch.compile the model (run.wrap)
    parallel: Parallel
    reproducibility: str
    checkpoint_every: int
    log_every: int
    num_workers: int
    eval_every: int  # built-in trainer: periodic evaluation curves eval_<name>; 0 = off
    eval_subset: int
    args: dict = field(metadata=ORDERED)  # a user script's own settings, passed as flags in this order
    activation_checkpointing: str = "none"  # none | full | selective (hwsweep.run.recompute)
