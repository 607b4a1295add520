"""A hardware entry checked against the device catalog: its gpu_type a device of its accelerator."""

from __future__ import annotations

from hwsweep.contracts import catalog
from hwsweep.plan.config.wording import ConfigError


def _check_device_type(entry: dict, where: str) -> None:
    """gpu_type must be a device of the entry's accelerator: a GPU type on a cpu entry (or the cpu type on a
    cuda one) would price the runs and compute their MFU as that device."""
    kind = catalog.lookup(entry["gpu_type"])
    if kind is None:
        return  # a site's own name, with memory_gb: nothing to compare
    if entry["accelerator"] == "cpu" and kind.architecture != "cpu":
        raise ConfigError(f"{where}.gpu_type: {kind.name} is a GPU, but accelerator is cpu; "
                          "remove gpu_type (cpu) or set accelerator: cuda")  # fmt: skip
    if entry["accelerator"] == "cuda" and kind.architecture == "cpu":
        raise ConfigError(f"{where}.gpu_type: {kind.name} on a cuda entry; give the GPU's type, e.g. "
                          f"{next(n for n, t in catalog.catalog().items() if t.architecture != 'cpu')}")  # fmt: skip
