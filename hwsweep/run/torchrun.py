"""torchrun's agent, torch's own (torch.distributed.run, unchanged), started with the cyclic garbage collector held
through its imports.

    python -m hwsweep.run.torchrun --standalone --nproc_per_node 2 -m hwsweep.run.train spec.json

The agent is an interpreter that imports torch and then lives as long as its workers. Importing torch makes
millions of objects that stay to the end; the collector walks them again and again as they come, and once more
as the agent exits: 0.5-0.6 CPU-s of a 2.2-2.9 CPU-s agent (docs/benchmarks.md, "The thirteenth round"). Held here
as the trainer holds it (hwsweep.run.startup), and what the imports made frozen, so later passes leave it out.
"""

import sys

from hwsweep.run import startup

held = startup.hold_collection(__name__)
from torch.distributed.run import main  # noqa: E402

startup.resume_collection(held)

if __name__ == "__main__":
    sys.exit(main())
