"""Memory footprint of the built-in families, from their shapes (torch-free, for the planner).

The activation terms were fitted to, and are tested against, the bytes autograd actually saves
for the real model on CPU, in fp32 and under autocast (tests/test_plan.py): a measurement, not a
rule of thumb. Under the -mixed precisions autocast keeps the fp32 weights, gradients and AdamW
state, but the matmul inputs it saves for backward (and what GELU and attention save) are 16-bit
copies; layer norms, the residual stream and the loss stay fp32.
The puzzle families (hrm, deep_transformer) are fitted in fp32 (tests/test_hrm.py); their plan
under a -mixed precision counts fp32 activations, an upper bound."""

from __future__ import annotations

from dataclasses import dataclass

FP32 = 4
HALF = 2  # bf16 and fp16
ADAMW_STATE = 2  # exp_avg and exp_avg_sq, one float each per parameter
CUDA_CONTEXT_BYTES = 600 * 2**20  # context, allocator and NCCL buffers on a GPU


def block_parameter_count(model) -> int:
    w, r = model.width, model.mlp_ratio
    return (4 + 2 * r) * w * w + (9 + r) * w


def parameter_count(model, task) -> int:
    w, v, n = model.width, task.vocab_size, task.length
    return v * w + n * w + model.depth * block_parameter_count(model) + 2 * w + w * v + v


def activation_bytes_per_sample(model, task, precision: str = "fp32") -> int:
    w, r, v, n = model.width, model.mlp_ratio, task.vocab_size, task.length
    if precision == "fp32":
        return FP32 * (model.depth * (8 + 2 * r) * n * w + 3 * n * v + 2 * n * w)
    # Per block: 16-bit inputs of qkv, proj and both MLP matmuls, GELU's input, q, k, v and the attention
    # output ((6 + 2r) n w); fp32 inputs of the two layer norms. Head: its 16-bit input, the fp32 input of
    # the final norm and the loss's fp32 log-probabilities.
    half = model.depth * (6 + 2 * r) * n * w + n * w
    full = model.depth * 2 * n * w + n * w + n * v
    return HALF * half + FP32 * full


def device_bytes(model, task, micro_batch: int, accumulation: int, strict: bool, accelerator: str,
                 precision: str = "fp32", shards: int = 0, reshard_after_forward: bool = True) -> int:  # fmt: skip
    """Estimated peak bytes on one device of the reference transformer (shards: see _peak_bytes)."""
    return _peak_bytes(parameter_count(model, task), activation_bytes_per_sample(model, task, precision), micro_batch,
                       accumulation, strict, accelerator, precision,
                       Sharding(shards, block_parameter_count(model), model.depth, reshard_after_forward))  # fmt: skip


@dataclass(frozen=True)
class Sharding:
    """FSDP's layout of the weights: over `shards` devices (0: DDP, a whole replica per device), in `blocks`
    blocks of `block` parameters each, the rest (embeddings, head) in the root."""

    shards: int
    block: int
    blocks: int
    reshard: bool = True  # recipe.parallel.reshard_after_forward


DDP = Sharding(0, 0, 0)


def _peak_bytes(parameters: int, activations_per_sample: int, micro_batch: int, accumulation: int, strict: bool,
                accelerator: str, precision: str, sharding: Sharding = DDP) -> int:  # fmt: skip
    """DDP: weights, gradients, AdamW state (fp32 at every precision), autocast's 16-bit copies of the weights,
    activations of one micro-batch, and in strict mode every micro-batch's gradient kept until the ordered sum.

    FSDP over N devices: the fp32 weights, gradients and AdamW state divided by N; the root's weights gathered
    for the whole step; of the blocks, the one running and the next (FSDP2 prefetches it), or all of them when
    reshard_after_forward is off, gathered in the compute type (16-bit under a -mixed precision, so autocast casts
    nothing); one block's gathered gradient and its reduce-scatter copy; the (unsharded) activations."""
    p = parameters * FP32
    context = CUDA_CONTEXT_BYTES if accelerator == "cuda" else 0
    activations = micro_batch * activations_per_sample
    if not sharding.shards:
        kept_gradients = p * accumulation if strict else 0
        casts = 0 if precision == "fp32" else parameters * HALF
        return p * (2 + ADAMW_STATE) + kept_gradients + casts + activations + context
    compute = FP32 if precision == "fp32" else HALF
    root = parameters - sharding.blocks * sharding.block
    gathered_blocks = min(2, sharding.blocks) if sharding.reshard else sharding.blocks
    gathered = (root + gathered_blocks * sharding.block) * compute
    block_gradients = 2 * sharding.block * FP32
    return -(-p * (2 + ADAMW_STATE) // sharding.shards) + gathered + block_gradients + activations + context


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


def puzzle_activation_bytes_per_sample(model, task) -> int:
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
    per_block = positions * (15 * w + 5 * hidden)  # fitted upper bound, checked in tests/test_hrm.py
    return FP32 * (blocks * per_block + heads_out * 4 * task.length * v)


def puzzle_device_bytes(model, task, micro_batch: int, accumulation: int, strict: bool, accelerator: str,
                        precision: str = "fp32", shards: int = 0, reshard_after_forward: bool = True) -> int:  # fmt: skip
    blocks = model.h_layers + model.l_layers if model.name == "hrm" else model.depth
    return _peak_bytes(puzzle_parameter_count(model, task), puzzle_activation_bytes_per_sample(model, task),
                       micro_batch, accumulation, strict, accelerator, precision,
                       Sharding(shards, _puzzle_block_params(model), blocks, reshard_after_forward))  # fmt: skip
