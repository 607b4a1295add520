"""The facts a GPU figure is read with: the device, its driver, CUDA, torch and the packages the check ran."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys

PACKAGES = ("torch", "snakemake", "tensorboard", "nvidia-ml-py", "numpy", "pandas")


def _driver() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else version
    except Exception:  # no NVML: ask nvidia-smi, where there is one
        smi = shutil.which("nvidia-smi")
        if not smi:
            return None
        proc = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30)  # fmt: skip
        if proc.returncode:
            return None
        return proc.stdout.split("\n")[0].strip() or None


def _nccl(torch) -> str | None:
    try:
        version = torch.cuda.nccl.version()
    except (RuntimeError, AttributeError):
        return None
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def facts() -> tuple[dict, dict]:
    """(device facts, this machine's first device as a hardware entry, as `hwsweep detect` makes it)."""
    import torch

    from hwsweep.cli import detect_hardware

    entry, _ = detect_hardware()
    entry["devices_per_node"] = 1  # the check measures one device
    out = {
        "accelerator": entry["accelerator"], "gpu_type": entry["gpu_type"], "torch": torch.__version__,
        "cuda": torch.version.cuda, "python": sys.version.split()[0], "platform": platform.platform(),
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "packages": {name: _version(name) for name in PACKAGES},
    }  # fmt: skip
    if entry["accelerator"] == "cuda":
        props = torch.cuda.get_device_properties(0)
        out |= {"name": props.name, "memory_gib": round(props.total_memory / 2**30, 1),
                "capability": f"{props.major}.{props.minor}", "multiprocessors": props.multi_processor_count,
                "driver": _driver(), "cudnn": torch.backends.cudnn.version(), "nccl": _nccl(torch),
                "gpus_visible": torch.cuda.device_count()}  # fmt: skip
    else:
        out |= {"name": platform.processor() or platform.machine(), "driver": None}
    return out, entry


def line(device: dict) -> str:
    """The device in one line, as the table's heading gives it."""
    if device.get("accelerator") == "cuda":
        where = (f"{device['name']} ({device['gpu_type']} in the catalog, {device['memory_gib']} GiB, compute "
                 f"capability {device['capability']}), driver {device['driver']}, CUDA {device['cuda']}")  # fmt: skip
    else:
        where = f"no GPU: CPU {device.get('name') or '?'} ({device.get('cpus')} CPUs)"
    return f"{where}, torch {device.get('torch')}, Python {device.get('python')}"


def gpu_state(index: int = 0) -> str | None:
    """The GPU's state now, in a few words (SM clock of its maximum, temperature, power, throttle reasons), from
    NVML; None without it. Beside a speed figure: a GPU running below its clocks explains a slow one."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        clock = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        top = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)
        temp = pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
        power = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000
    except Exception:  # no NVML, no GPU, an older driver: not said
        return None
    try:
        reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        reasons = reasons or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons  # its older name
        said = f", clock event reasons {reasons(handle):#x}"
    except Exception:
        said = ""
    return f"SM clock {clock} of {top} MHz, {temp} C, {power:.0f} W{said}"
