"""Helper for tests/models/test_hrm.py, run plainly or under torchrun: the built-in trainer
(hwsweep.run.train) with torch's own FlopCounterMode around every micro-batch's forward and backward, the
FLOPs training actually spent, written per rank as JSON to argv[2]. The HRM's Q head starts from small
random weights and a bias towards halting here, so ACT halts samples after differing numbers of segments.

    python -m flops_spent spec.json counted/ --threads 1     # tests/ on PYTHONPATH

Run as a module, its workers under torchrun are forked from the agent, which imported it (and, as for the
trainer, TorchDynamo only where the run needs it: `fork_imports`).
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


fork_imports = train.fork_imports  # its arguments start with the spec, as the trainer's do


def counter() -> FlopCounterMode:
    return FlopCounterMode(display=False, custom_mapping=CPU_ATTENTION)


def main() -> None:
    spec, out = sys.argv[1], Path(sys.argv[2])
    counted = {"flops": 0, "micro_batches": 0}
    accumulate = runtime.Run.accumulate

    def counted_accumulate(self, loader):
        for batch in accumulate(self, loader):
            with counter() as mode:  # active while the loop body runs forward and backward on this batch
                yield batch
            counted["flops"] += mode.get_total_flops()
            counted["micro_batches"] += 1

    def random_q_head(self):  # halt/continue apart by sample: some halt at once, some run on
        generator = torch.Generator().manual_seed(7)
        with torch.no_grad():
            self.weight.copy_(0.1 * torch.randn(self.weight.shape, generator=generator))
            self.bias.copy_(torch.tensor([0.8, 0.0]))  # halting a little ahead, by sample

    # The trainer builds on the meta device and initialises after (hwsweep.run.weights): the Q head's own
    # initialiser is where its weights come from.
    runtime.Run.accumulate, hrm.QHead.reset_parameters = counted_accumulate, random_q_head
    rank = int(os.environ.get("RANK", 0))
    train.main([spec] + sys.argv[3:])
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{rank}.json").write_text(json.dumps(counted))


if __name__ == "__main__":
    main()
