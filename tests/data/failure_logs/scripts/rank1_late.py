import datetime
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
rank = dist.get_rank()
print(f"rank {rank}: started", flush=True)
if rank == 1:
    time.sleep(6)  # rank 0 gives up waiting in the collective before rank 1 reports its own error
    raise ValueError("shape mismatch: batch of 7 samples, expected 8 (rank 1's shard)")
x = torch.ones(2)
dist.all_reduce(x)
