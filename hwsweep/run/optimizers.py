"""The built-in trainer's optimizers (recipe.optimizer.name): AdamW (hwsweep.run.device.adamw, in its kernel),
AdamATan2, the original HRM's optimizer, written here in plain PyTorch with the update of the `adam-atan2` package
the original installs (a CUDA kernel, csrc/adam_atan2.cu; the rule is Everett et al. 2024, "Scaling Exponents
Across Parameterizations and Optimizers"), and plain SGD, which keeps no state (what each keeps per parameter is counted by the plan
in hwsweep.models.footprint.OPTIMIZER_STATE)."""

from __future__ import annotations

import math

import torch

from hwsweep.run import device as devices

NAMES = ("adamw", "adam_atan2", "sgd")


class AdamATan2(torch.optim.Optimizer):
    """Adam whose step is atan2(m, sqrt(v_hat)) instead of m_hat / (sqrt(v_hat) + eps), with decoupled weight decay,
    as the `adam-atan2` package computes it. Per parameter, at step t (from 1), in the parameter's dtype (fp32 here):

        p <- p (1 - lr wd)
        m <- beta1 m + (1 - beta1) g           v <- beta2 v + (1 - beta2) g^2
        p <- p - (lr / (1 - beta1^t)) atan2(m, sqrt(v / (1 - beta2^t)))

    The first moment's bias correction scales the step, outside the arctangent (the package's kernel; its
    repository once moved it inside and reverted that): the first step is lr x 10 atan(0.1) = 0.997 lr per weight
    with beta1 0.9, where the correction inside the arctangent would give lr x pi/4. No epsilon: the step does not
    change when every gradient is multiplied by the same positive factor (atan2(c y, c x) = atan2(y, x)); where a
    gradient has been exactly 0 since the start the step is atan2(0, 0) = 0. The paper's scale constants (a, b in
    a atan2(m, b sqrt(v))) are 1: the package has none."""

    def __init__(self, params, lr: float, betas: tuple[float, float] = (0.9, 0.95), weight_decay: float = 0.1):
        if not lr >= 0 or not 0 <= betas[0] < 1 or not 0 <= betas[1] < 1 or not weight_decay >= 0:
            raise ValueError(f"AdamATan2: lr {lr}, betas {betas}, weight_decay {weight_decay}: lr and weight_decay "
                             "at least 0, betas in [0, 1)")  # fmt: skip
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, decay = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.zeros((), dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                t = float(state["step"])
                m, v = state["exp_avg"], state["exp_avg_sq"]
                p.mul_(1 - lr * decay)
                m.lerp_(p.grad, 1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                p.add_(torch.atan2(m, v.sqrt() / math.sqrt(1 - beta2**t)), alpha=-lr / (1 - beta1**t))
        return loss


def build(parameters, opt, lr: float, accelerator: str) -> torch.optim.Optimizer:
    """The optimizer `opt.name` names (opt: recipe.optimizer) at `lr`, with its betas and weight decay."""
    if opt.name == "adam_atan2":
        return AdamATan2(parameters, lr=lr, betas=(opt.beta1, opt.beta2), weight_decay=opt.weight_decay)
    if opt.name == "sgd":
        # No momentum, so no state: a sharded rank holds its weights and gradients only. Without momentum torch's
        # weight decay, p <- p - lr (g + wd p), is the decoupled p (1 - lr wd) - lr g. One implementation (the
        # for-loop) on every device.
        return torch.optim.SGD(parameters, lr=lr, momentum=0.0, weight_decay=opt.weight_decay, foreach=False)
    return devices.adamw(parameters, opt, lr, accelerator)
