"""`Adam` and `AdamW` (torch.optim.Adam / AdamW; Kingma & Ba 2015, Loshchilov & Hutter 2019)."""

from __future__ import annotations

from typing import Any

from jitgrad.optim.functional import adam
from jitgrad.optim.optimizer import Optimizer, ParamsT, lazy_state


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
        amsgrad = group["amsgrad"]
        names = ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if amsgrad else ())
        params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps = [], [], [], [], [], []
        for param in group["params"]:
            grad = param.grad
            if grad is None:
                continue
            state = lazy_state(self, param, names)
            params.append(param)
            grads.append(grad)
            exp_avgs.append(state["exp_avg"])
            exp_avg_sqs.append(state["exp_avg_sq"])
            if amsgrad:
                max_exp_avg_sqs.append(state["max_exp_avg_sq"])
            steps.append(state["step"])
        adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, beta1=beta1,
             beta2=beta2, lr=group["lr"], eps=group["eps"], weight_decay=group["weight_decay"],
             decoupled=group["decoupled_weight_decay"], amsgrad=amsgrad,
             maximize=group["maximize"])


class AdamW(Adam):
    """Adam with decoupled weight decay (default 0.01): p shrinks by lr * weight_decay first."""

    def __init__(self, params: ParamsT, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True)


__all__ = ["Adam", "AdamW"]
