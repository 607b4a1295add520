"""The host allocator settings a CPU run's processes get: what the memory plan assumes of glibc's malloc.

glibc keeps freed memory in its heap, resident, unless told to hand large blocks back, and gives each thread
(gloo's among them) an arena of its own: with its defaults 4 FSDP ranks of a 385 MB model each peaked at 2.0-2.3 GB
resident (more than DDP's 1.4 GB on the same model), with these at 0.54 GB (issue 69). The plan counts live memory
(hwsweep.models.footprint), so the runtime starts a CPU run's ranks, and its evaluation's, with these settings:
large blocks (64 KiB and up) mapped and unmapped on their own, the heap trimmed above 64 KiB free, one arena. What the
tests and bench/fsdp.py measure is then what a user's run does. A variable the user's environment (or trainer.env)
already sets is left as set; a GPU run's device memory is torch's caching allocator's, which this does not touch.
"""

from __future__ import annotations

SETTINGS = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536", "MALLOC_ARENA_MAX": "1"}


def environment(env: dict, accelerator: str) -> dict:
    """`env` with the settings a CPU run's processes get, the user's own values kept; unchanged for a GPU run."""
    return env if accelerator != "cpu" else SETTINGS | env
