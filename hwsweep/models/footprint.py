"""Memory footprint of the built-in families, from their shapes (torch-free, for the planner).

The activation terms were fitted to, and are tested against, the bytes autograd actually saves
for the real model on CPU, in fp32 and under autocast (tests/plan/test_plan.py): a measurement, not a
rule of thumb. Under the -mixed precisions autocast keeps the fp32 weights, gradients and optimizer
state, but the matmul inputs it saves for backward (and what GELU and attention save) are 16-bit
copies; layer norms, the residual stream and the loss stay fp32.
The puzzle families (hrm, deep_transformer) are fitted in fp32 (tests/models/test_hrm.py); their plan
under a -mixed precision counts fp32 activations, an upper bound."""

from __future__ import annotations

from dataclasses import dataclass

FP32 = 4
HALF = 2  # bf16 and fp16
# fp32 floats of optimizer state per parameter, by recipe.optimizer.name (hwsweep/run/optimizers.py): the plan's
# one count of it. Adam's two moments (exp_avg, exp_avg_sq); plain SGD (no momentum) keeps none.
OPTIMIZER_STATE = {"adamw": 2, "adam_atan2": 2, "sgd": 0}
CUDA_CONTEXT_BYTES = 600 * 2**20  # context, allocator and NCCL buffers on a GPU


def block_parameter_count(model) -> int:
    w, r = model.width, model.mlp_ratio
    return (4 + 2 * r) * w * w + (9 + r) * w


def parameter_count(model, task) -> int:
    w, v, n = model.width, task.vocab_size, task.length
    return v * w + n * w + model.depth * block_parameter_count(model) + 2 * w + w * v + v


def activation_bytes_per_sample(model, task, precision: str = "fp32", checkpointing: str = "none") -> int:
    """Bytes autograd keeps per sample until backward (checkpointing: recipe.activation_checkpointing)."""
    w, r, v, n = model.width, model.mlp_ratio, task.vocab_size, task.length
    compute = FP32 if precision == "fp32" else HALF
    # Head: (fp32) its input, the final norm's input and the loss's log-probabilities, or under autocast its
    # 16-bit input, the fp32 input of the final norm and the loss's fp32 log-probabilities.
    head = FP32 * (3 * n * v + 2 * n * w) if precision == "fp32" else HALF * n * w + FP32 * (n * w + n * v)
    # A block: the 16-bit (fp32) inputs of qkv, proj and both MLP matmuls, GELU's input, q, k, v and the
    # attention output ((6 + 2r) n w); the fp32 inputs of the two layer norms (2 n w).
    block = compute * (6 + 2 * r) * n * w + FP32 * 2 * n * w
    return _checkpointed(model.depth, block, FP32 * n * w, compute * (6 + r) * n * w, checkpointing) + head


def _checkpointed(blocks: int, block: int, block_input: int, products: int, checkpointing: str) -> int:
    """Activation bytes of `blocks` block applications that each keep `block` bytes (a sample's), under
    activation checkpointing (hwsweep.run.recompute): full keeps each block's input (`block_input`, fp32) and
    recomputes one block at a time in the backward (its `block` bytes again, for that block only, less the input
    it already holds); selective keeps the input and the outputs of the matrix products and attention
    (`products`), and recomputes the rest of one block at a time. Checked against the bytes torch's MemTracker
    sees on CPU (tests/run/test_fsdp.py)."""
    if checkpointing == "none" or not blocks:
        return blocks * block
    if checkpointing == "full":
        return blocks * block_input + block - block_input
    return blocks * (block_input + products) + (block - products)


def device_bytes(model, task, micro_batch: int, accumulation: int, strict: bool, accelerator: str,
                 precision: str = "fp32", shards: int = 0, reshard_after_forward: bool = True,
                 checkpointing: str = "none", optimizer: str = "adamw") -> int:  # fmt: skip
    """Estimated peak bytes on one device of the reference transformer (shards: see _peak_bytes; optimizer:
    recipe.optimizer.name)."""
    w, v = model.width, task.vocab_size
    units = (v * w, 2 * w, w * v + v)  # FSDP's own units beside the blocks: embedding, final norm, head
    return _peak_bytes(parameter_count(model, task), activation_bytes_per_sample(model, task, precision, checkpointing),
                       micro_batch, accumulation, strict, accelerator, precision,
                       Sharding(shards, block_parameter_count(model), model.depth, reshard_after_forward, units),
                       OPTIMIZER_STATE[optimizer])  # fmt: skip


@dataclass(frozen=True)
class Sharding:
    """FSDP's layout of the weights: over `shards` devices (0: DDP, a whole replica per device; under HSDP the
    devices of a node), in `blocks` blocks of `block` parameters each and the other `units` (embeddings, head),
    the rest (e.g. learned positions) in the root."""

    shards: int
    block: int
    blocks: int
    reshard: bool = True  # recipe.parallel.reshard_after_forward
    units: tuple = ()  # parameters of each other unit (hwsweep.run.reduce.shard_units: embeddings, head)


DDP = Sharding(0, 0, 0)


def _peak_bytes(parameters: int, activations_per_sample: int, micro_batch: int, accumulation: int, strict: bool,
                accelerator: str, precision: str, sharding: Sharding = DDP,
                state: int = OPTIMIZER_STATE["adamw"]) -> int:  # fmt: skip
    """DDP: weights, gradients, the optimizer's `state` floats per parameter (all fp32 at every precision),
    autocast's 16-bit copies of the weights, activations of one micro-batch, and in strict mode every
    micro-batch's gradient kept until the ordered sum.

    FSDP over N devices: the fp32 weights, gradients and optimizer state divided by N; the root's own weights
    gathered for the whole step; of the units (blocks, embeddings, head), the two largest (the one running and
    the next, which FSDP2 prefetches), or all of them when reshard_after_forward is off, gathered in the compute
    type (16-bit under a -mixed precision, so autocast casts nothing); the largest unit's gathered gradient and
    its reduce-scatter copy; the (unsharded) activations."""
    p = parameters * FP32
    context = CUDA_CONTEXT_BYTES if accelerator == "cuda" else 0
    activations = micro_batch * activations_per_sample
    if not sharding.shards:
        kept_gradients = p * accumulation if strict else 0
        casts = 0 if precision == "fp32" else parameters * HALF
        return p * (2 + state) + kept_gradients + casts + activations + context
    compute = FP32 if precision == "fp32" else HALF
    units = sorted([sharding.block] * sharding.blocks + list(sharding.units), reverse=True)
    root = parameters - sum(units)
    gathered = (root + (sum(units[:2]) if sharding.reshard else sum(units))) * compute
    unit_gradients = 2 * max(units, default=0) * FP32
    return -(-p * (2 + state) // sharding.shards) + gathered + unit_gradients + activations + context


# -- the puzzle families (hrm, deep_transformer): HRM's blocks (SwiGLU, no biases) ------------------
def _puzzle_block_params(model) -> int:
    w = model.width
    hidden = round(model.mlp_ratio * w * 2 / 3)
    return 4 * w * w + 3 * hidden * w


def puzzle_parameter_count(model, task) -> int:
    w, v = model.width, task.vocab_size
    blocks = model.h_layers + model.l_layers if model.name == "hrm" else model.depth
    positions = -(-model.puzzle_emb_ndim // w) + task.length
    learned = positions * w if model.positions == "learned" else 0
    q_head = 2 * w + 2 if model.name == "hrm" and model.act_mode == "act" else 0
    puzzle = task.num_puzzle_ids * model.puzzle_emb_ndim
    return blocks * _puzzle_block_params(model) + 2 * v * w + puzzle + learned + q_head


def puzzle_activation_bytes_per_sample(model, task, checkpointing: str = "none") -> int:
    """Bytes autograd keeps per sample until backward. HRM keeps, for each supervised segment
    (up to halt_max_steps; their losses are summed before one backward), only the two
    differentiable steps: h_layers + l_layers block applications; the deep transformer its depth."""
    w, v = model.width, task.vocab_size
    hidden = round(model.mlp_ratio * w * 2 / 3)
    positions = -(-model.puzzle_emb_ndim // w) + task.length
    if model.name == "hrm":
        kept = 1 if model.act_mode == "none" else model.halt_max_steps  # none: only the last segment has a graph
        blocks, heads_out = kept * (model.h_layers + model.l_layers), kept
    else:
        blocks, heads_out = model.depth, 1
    per_block = FP32 * positions * (15 * w + 5 * hidden)  # fitted upper bound, checked in tests/models/test_hrm.py
    # selective keeps the outputs of qkv, attention, proj, gate_up and down: (6 w + 2 hidden) per position
    products = FP32 * positions * (6 * w + 2 * hidden)
    return (_checkpointed(blocks, per_block, FP32 * positions * w, products, checkpointing)
            + FP32 * heads_out * 4 * task.length * v)  # fmt: skip


def puzzle_device_bytes(model, task, micro_batch: int, accumulation: int, strict: bool, accelerator: str,
                        precision: str = "fp32", shards: int = 0, reshard_after_forward: bool = True,
                        checkpointing: str = "none", optimizer: str = "adamw") -> int:  # fmt: skip
    blocks = model.h_layers + model.l_layers if model.name == "hrm" else model.depth
    w, v = model.width, task.vocab_size
    positions = -(-model.puzzle_emb_ndim // w) + task.length
    learned = positions * w if model.positions == "learned" else 0
    units = (v * w + learned, v * w) + ((2 * w + 2,) if model.name == "hrm" and model.act_mode == "act" else ())
    return _peak_bytes(puzzle_parameter_count(model, task), puzzle_activation_bytes_per_sample(model, task, checkpointing),
                       micro_batch, accumulation, strict, accelerator, precision,
                       Sharding(shards, _puzzle_block_params(model), blocks, reshard_after_forward, units),
                       OPTIMIZER_STATE[optimizer])  # fmt: skip
