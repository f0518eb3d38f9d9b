"""`Adam` and `AdamW` (torch.optim.Adam / AdamW; Kingma & Ba 2015, Loshchilov & Hutter 2019)."""

from __future__ import annotations

from typing import Any

import numpy as np

from jitgrad.optim.optimizer import Optimizer, ParamsT, fma, lazy_state


class Adam(Optimizer):
    """Adam, in the op order of PyTorch's single-tensor CPU path (research/eager_autograd.md §3.2).

    Per parameter p with gradient g (negated first if `maximize`), at step t:
        p = p * (1 - lr * weight_decay)          if decoupled_weight_decay (AdamW)
        g = g + weight_decay * p                 otherwise, if weight_decay (L2)
        m = m + (1 - beta1) * (g - m)            (torch's lerp form, one rounding)
        v = beta2 * v + ((1 - beta2) * g) * g    (the product-add rounded once)
        vmax = max(vmax, v); use vmax for v      if amsgrad
        p = p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
    Bias corrections are Python floats; arrays stay in the parameter's dtype.
    State per parameter: "step" (float32 0-d tensor), "exp_avg", "exp_avg_sq", and
    "max_exp_avg_sq" with amsgrad.
    Raises ValueError for a negative lr/eps/weight_decay or a beta outside [0, 1).
    """

    def __init__(self, params: ParamsT, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, maximize: bool = False,
                 decoupled_weight_decay: bool = False) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _update_group(self, group: dict[str, Any]) -> None:
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        amsgrad, decoupled = group["amsgrad"], group["decoupled_weight_decay"]
        names = ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if amsgrad else ())
        for param in group["params"]:
            if param._grad is None:
                continue
            state = lazy_state(self, param, names)
            p = param._data
            g = -param._grad._data if group["maximize"] else param._grad._data
            step_t = state["step"]
            step_t._data[...] += 1
            step_t._bump_version()
            if weight_decay != 0:
                if decoupled:
                    p *= 1 - lr * weight_decay
                else:
                    g = fma(weight_decay, p, g)
            exp_avg, exp_avg_sq = state["exp_avg"]._data, state["exp_avg_sq"]._data
            exp_avg[...] = fma(1 - beta1, g - exp_avg, exp_avg)  # exp_avg.lerp_(g, 1 - beta1)
            exp_avg_sq[...] = fma((1 - beta2) * g, g, exp_avg_sq * beta2)  # mul_, addcmul_
            step = float(step_t._data)
            step_size = lr / (1 - beta1**step)
            bias_correction2_sqrt = (1 - beta2**step) ** 0.5
            if amsgrad:
                max_exp_avg_sq = state["max_exp_avg_sq"]._data
                np.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
                denom = np.sqrt(max_exp_avg_sq) / bias_correction2_sqrt + eps
            else:
                denom = np.sqrt(exp_avg_sq) / bias_correction2_sqrt + eps
            p += (-step_size * exp_avg) / denom  # addcdiv_(exp_avg, denom, value=-step_size)
            for name in names:
                state[name]._bump_version()
            param._bump_version()


class AdamW(Adam):
    """Adam with decoupled weight decay (default 0.01): p shrinks by lr * weight_decay first."""

    def __init__(self, params: ParamsT, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True)


__all__ = ["Adam", "AdamW"]
