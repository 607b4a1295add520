"""The hardware catalog: device types, their memory and native number formats (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

CATALOG_PATH = Path(__file__).with_name("catalog.yaml")
CURRENCY = "USD"  # of every price_per_hour, the catalog's and a hardware entry's


@dataclass(frozen=True)
class DeviceType:
    name: str
    memory_gb: float
    bf16: bool
    fp16: bool
    tf32: bool
    fp8: bool
    architecture: str
    price_per_hour: float | None = None  # list price per device-hour in CURRENCY (catalog.yaml says whose)
    peak_tflops: dict | None = None  # dense peak per device by arithmetic (fp32, tf32, bf16, fp16); see catalog.yaml
    mfu: float | None = None  # the MFU an estimate assumes before anything was measured on this type

    def supports(self, precision: str) -> bool:
        return precision == "fp32" or getattr(self, precision.split("-")[0])


@lru_cache(maxsize=1)
def catalog() -> dict[str, DeviceType]:
    import yaml  # here: the launcher of every run imports this module, and most runs never read the catalog

    raw = yaml.safe_load(CATALOG_PATH.read_text())
    return {name: DeviceType(name=name, **entry) for name, entry in raw.items()}


def lookup(gpu_type: str) -> DeviceType | None:
    return catalog().get(gpu_type)


def match(device_name: str, memory_gb: float | None = None) -> DeviceType | None:
    """The catalog type a detected device is, by model name and (when given) memory."""
    name = device_name.upper()
    candidates = [t for t in catalog().values() if t.name.split("-")[0] in name]
    if memory_gb is not None and candidates:
        return min(candidates, key=lambda t: abs(t.memory_gb - memory_gb))
    return candidates[0] if candidates else None


def price_per_hour(gpu_type: str, override: float | None = None) -> float | None:
    """Price of one device for one hour in CURRENCY: the hardware entry's own price_per_hour,
    else the catalog's list price for its device type, else None (not known: no cost shown)."""
    if override is not None:
        return float(override)
    kind = lookup(gpu_type)
    return None if kind is None else kind.price_per_hour


def arithmetic(precision: str, tf32: bool) -> str:
    """The arithmetic a run's matmuls do: bf16 / fp16 under the -mixed precisions, tf32 for fp32 with
    tf32 on where the device has it, else fp32. The key of peak_tflops."""
    if precision != "fp32":
        return precision.split("-")[0]
    return "tf32" if tf32 else "fp32"


def peak_flops(gpu_type: str, precision: str, tf32: bool) -> float | None:
    """Dense peak FLOP/s of one device of this type for this arithmetic; None where not known."""
    kind = lookup(gpu_type)
    if kind is None or not kind.peak_tflops:
        return None
    key = arithmetic(precision, tf32 and kind.tf32)
    return kind.peak_tflops[key] * 1e12 if key in kind.peak_tflops else None


def device_peak(hardware, plan, threads: int | None = None) -> float | None:
    """Peak FLOP/s of one device of the run: the catalog's per type and arithmetic; a CPU process
    runs on `threads` cores (the trainer's threads per process; strict runs one)."""
    peak = peak_flops(hardware.gpu_type, plan.precision, plan.tf32)
    if peak is None or hardware.accelerator != "cpu":
        return peak
    if threads is None:
        threads = 1 if plan.reproducibility == "strict" else max(1, hardware.cpus_per_task // hardware.devices_per_node)
    return peak * threads
