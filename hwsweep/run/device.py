"""The one device switch: `accelerator: cpu | cuda` decides the torch device, the process
group backend (gloo | NCCL) and how precision is applied. Nothing else in the trainer
branches on the device."""

from __future__ import annotations

import contextlib
import platform
from dataclasses import dataclass

import torch

from hwsweep.contracts.hardware import BACKEND

AUTOCAST_DTYPE = {"fp32": None, "bf16-mixed": torch.bfloat16, "fp16-mixed": torch.float16}


@dataclass(frozen=True)
class Device:
    accelerator: str
    torch_device: torch.device
    backend: str
    name: str

    def synchronize(self) -> None:
        if self.accelerator == "cuda":
            torch.cuda.synchronize(self.torch_device)


def select(accelerator: str, local_rank: int) -> Device:
    if accelerator == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(
                "hardware.accelerator is 'cuda' but no CUDA device is visible to this process; "
                "run on a GPU node or use a hardware entry with accelerator: cpu"
            )
        torch.cuda.set_device(local_rank)
        dev = torch.device("cuda", local_rank)
        return Device("cuda", dev, BACKEND["cuda"], torch.cuda.get_device_name(dev))
    return Device("cpu", torch.device("cpu"), BACKEND["cpu"], platform.processor() or platform.machine() or "cpu")


def nvml_index(device: torch.device) -> int:
    """The machine's (NVML's) index of a CUDA device: CUDA counts only the GPUs CUDA_VISIBLE_DEVICES leaves
    (SLURM's GPU binding), by index or UUID; torch's own mapping, the CUDA index where it cannot tell."""
    try:
        return torch.cuda._get_nvml_device_index(device)
    except Exception:  # a private helper of torch's: its absence or failure costs the mapping, not the run
        return device.index


def lock_precision(tf32: bool) -> None:
    """Set TF32 both ways, explicitly, so a GPU's default never decides it."""
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def autocast(device: Device, precision: str):
    dtype = AUTOCAST_DTYPE[precision]
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.accelerator, dtype=dtype)


def grad_scaler(device: Device, precision: str) -> torch.amp.GradScaler:
    # Only fp16 needs loss scaling; a disabled scaler is a no-op pass-through.
    return torch.amp.GradScaler(device.accelerator, enabled=precision == "fp16-mixed")


ADAMW_KERNEL = {"fused": {"fused": True}, "foreach": {"foreach": True}, "for_loop": {"foreach": False, "fused": False}}


def adamw(parameters, opt, lr: float, accelerator: str) -> torch.optim.AdamW:
    """AdamW with the recipe's settings (`opt`: recipe.optimizer) in its kernel resolved for `accelerator`."""
    return torch.optim.AdamW(parameters, lr=lr, betas=(opt.beta1, opt.beta2), weight_decay=opt.weight_decay,
                             **ADAMW_KERNEL[opt.resolved_kernel(accelerator)])  # fmt: skip
