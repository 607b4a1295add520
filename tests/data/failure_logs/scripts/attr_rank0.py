from common import *

if rank == 0:
    torch._C._cuda_setDevice(0)
dist.barrier()
dist.destroy_process_group()
