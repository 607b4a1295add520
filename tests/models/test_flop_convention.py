"""The FLOP count against torch's FlopCounterMode as it comes: on the CPU, torch's counter has no formula for the
fused attention kernel CPUs run (aten._scaled_dot_product_flash_attention_for_cpu and its backward) and counts it
as 0; hwsweep registers torch's own attention formulas for it (hwsweep.models.flops.CPU_ATTENTION), so its count
is the plain counter's plus exactly the attention's FLOPs: ~4.8% more for config/hrm_cpu.yaml's HRM (docs/hrm.md)."""

import torch
from test_hrm import model_and_batch
from torch.utils.flop_counter import FlopCounterMode

from hwsweep.models import flops


def test_the_count_is_torchs_plain_counter_plus_the_cpu_attention_it_leaves_out():
    net, batch, _ = model_and_batch(model={"halt_max_steps": 2}, batch=4)
    net.train()
    ours = flops.train_step_flops(net, batch)
    counted = {}
    for name, mode in (("plain", FlopCounterMode(display=False)), ("ours", flops.counter())):
        with torch.random.fork_rng():
            with mode:
                net(*batch).backward()
        counted[name] = mode
    by_op = counted["ours"].get_flop_counts()["Global"]
    attention = sum(by_op.get(op, 0) for op in flops.CPU_ATTENTION)
    assert attention > 0  # HRM attends: the plain counter misses it on a CPU
    assert counted["plain"].get_total_flops() == 0 or counted["plain"].get_flop_counts()["Global"].get(
        next(iter(flops.CPU_ATTENTION)), 0) == 0  # fmt: skip
    assert ours == counted["ours"].get_total_flops() == counted["plain"].get_total_flops() + attention
