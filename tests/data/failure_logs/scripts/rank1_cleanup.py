import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
print(f"rank {rank}: started", flush=True)
try:
    if rank == 1:
        time.sleep(1)
        raise ValueError("shape mismatch: batch of 7 samples, expected 8 (rank 1's shard)")
    x = torch.ones(2)
    dist.all_reduce(x)
finally:
    dist.destroy_process_group()  # the usual cleanup: the other rank's collective fails at once
    time.sleep(0.05)  # e.g. closing a logger: the real error is printed after the other rank's
