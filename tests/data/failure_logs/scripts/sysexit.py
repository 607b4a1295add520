from common import *

if rank == 0:
    sys.exit("train.py: --data ./missing does not exist")
dist.barrier()
