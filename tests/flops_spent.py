"""Helper for tests/test_compute_spent.py, run plainly or under torchrun: the built-in trainer
(hwsweep.run.train) with torch's own FlopCounterMode around every micro-batch's forward and backward, the
FLOPs training actually spent, written per rank as JSON to argv[2]. The HRM's Q head starts from random
weights here, so ACT halts samples after differing numbers of segments from the first step on.

    python tests/flops_spent.py spec.json counted/ --threads 1
"""

import json
import os
import sys
from pathlib import Path

import torch
from torch.utils import flop_counter
from torch.utils.flop_counter import FlopCounterMode

from hwsweep.models import hrm
from hwsweep.run import runtime, train

aten = torch.ops.aten
# CPU attention runs a fused kernel torch's counter has no entry for: its own formulas for the fused op.
CPU_ATTENTION = {
    aten._scaled_dot_product_flash_attention_for_cpu: lambda q, k, v, *a, out_shape=None, **kw: (
        flop_counter.sdpa_flop_count(q, k, v)),
    aten._scaled_dot_product_flash_attention_for_cpu_backward: lambda g, q, k, v, *a, out_shape=None, **kw: (
        flop_counter.sdpa_backward_flop_count(g, q, k, v)),
}  # fmt: skip


def counter() -> FlopCounterMode:
    return FlopCounterMode(display=False, custom_mapping=CPU_ATTENTION)


def main() -> None:
    spec, out = sys.argv[1], Path(sys.argv[2])
    counted = {"flops": 0, "micro_batches": 0}
    accumulate, build = runtime.Run.accumulate, hrm.build

    def counted_accumulate(self, loader):
        for batch in accumulate(self, loader):
            with counter() as mode:  # active while the loop body runs forward and backward on this batch
                yield batch
            counted["flops"] += mode.get_total_flops()
            counted["micro_batches"] += 1

    def halting_build(recipe):
        model = build(recipe)
        if model.q_head is not None:  # halt/continue apart by sample: some halt at once, some run on
            generator = torch.Generator().manual_seed(7)
            with torch.no_grad():
                model.q_head.weight.copy_(torch.randn(model.q_head.weight.shape, generator=generator))
                model.q_head.bias.zero_()
        return model

    runtime.Run.accumulate, hrm.build = counted_accumulate, halting_build
    rank = int(os.environ.get("RANK", 0))
    train.main([spec] + sys.argv[3:])
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{rank}.json").write_text(json.dumps(counted))


if __name__ == "__main__":
    main()
