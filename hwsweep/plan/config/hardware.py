"""The config's `hardware`: each entry with its defaults, checked against the device catalog (its gpu_type a device
of its accelerator, its memory known), against the trainer's launch, and the baseline one of them."""

from __future__ import annotations

from hwsweep.contracts import catalog
from hwsweep.contracts.command import Trainer
from hwsweep.contracts.hardware import Hardware
from hwsweep.plan.config.schema import _fill_defaults
from hwsweep.plan.config.wording import ConfigError


def _hardware(raw: dict, baseline: str, trainer: Trainer, schema: dict) -> dict[str, Hardware]:
    """Every hardware entry resolved, in the config's order; the baseline must name one."""
    hardware = {name: _entry(name, entry, trainer, schema) for name, entry in raw.items()}
    if baseline not in hardware:
        raise ConfigError(
            f"baseline: {baseline!r} is not a hardware name; use one of {', '.join(hardware)}"
        )
    return hardware


def _entry(name: str, entry: dict, trainer: Trainer, schema: dict) -> Hardware:
    entry = _fill_defaults(schema["$defs"]["hardware"], entry, schema)
    _check_device_type(entry, f"hardware.{name}")
    entry.setdefault("cpus_per_task", entry["devices_per_node"])
    hw = Hardware.from_dict(entry, f"hardware.{name}")
    if hw.gres and hw.gpu_model:
        raise ConfigError(
            f"hardware.{name}.gpu_model: give either gres or gpu_model (with the GPU count taken from the devices), not both"
        )
    if hw.device_memory_gb is None:
        raise ConfigError(
            f"hardware.{name}.gpu_type: {entry['gpu_type']!r} is not in the catalog; use one of "
            f"{', '.join(catalog.catalog())} or give memory_gb"
        )
    if trainer.launch == "plain" and hw.nodes > 1:
        raise ConfigError(
            f"hardware.{name}.nodes: trainer.launch plain runs one process per run; use launch: torchrun for several nodes"
        )
    return hw


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
