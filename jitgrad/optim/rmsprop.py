"""`RMSprop` (torch.optim.RMSprop; Hinton, Coursera lecture 6e, 2012; centered: Graves 2013)."""

from __future__ import annotations

from typing import Any

from jitgrad.optim.functional import rmsprop
from jitgrad.optim.optimizer import Optimizer, ParamsT, lazy_state


class RMSprop(Optimizer):
    """RMSprop, in the op order of PyTorch's single-tensor CPU path (torch/optim/rmsprop.py).

    Per parameter p with gradient g (negated first if `maximize`), at each step:
        g = g + weight_decay * p                          if weight_decay
        v = alpha * v + ((1 - alpha) * g) * g             (the product-add rounded once)
        m = m + (1 - alpha) * (g - m)                     if centered (torch's lerp)
        avg = sqrt(v - m * m) if centered else sqrt(v), then avg = avg + eps
        buf = momentum * buf + g / avg; p = p - lr * buf  if momentum > 0
        p = p + (-lr * g) / avg                           otherwise
    State per parameter: "step" (float32 0-d tensor), "square_avg", "momentum_buffer" when
    momentum > 0, "grad_avg" when centered.
    Raises ValueError for a negative lr, eps, momentum, weight_decay or alpha.
    """

    def __init__(self, params: ParamsT, lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0, momentum: float = 0,
                 centered: bool = False, *, maximize: bool = False) -> None:
        for name, value in (("learning rate", lr), ("epsilon value", eps),
                            ("momentum value", momentum), ("weight_decay value", weight_decay),
                            ("alpha value", alpha)):
            if not 0.0 <= value:
                raise ValueError(f"Invalid {name}: {value}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _update_group(self, group: dict[str, Any]) -> None:
        momentum, centered = group["momentum"], group["centered"]
        names = (("square_avg",) + (("momentum_buffer",) if momentum > 0 else ())
                 + (("grad_avg",) if centered else ()))
        params, grads, square_avgs, grad_avgs, buffers, steps = [], [], [], [], [], []
        for param in group["params"]:
            grad = param.grad
            if grad is None:
                continue
            state = lazy_state(self, param, names)
            params.append(param)
            grads.append(grad)
            square_avgs.append(state["square_avg"])
            if centered:
                grad_avgs.append(state["grad_avg"])
            if momentum > 0:
                buffers.append(state["momentum_buffer"])
            steps.append(state["step"])
        rmsprop(params, grads, square_avgs, grad_avgs, buffers, steps, lr=group["lr"],
                alpha=group["alpha"], eps=group["eps"], weight_decay=group["weight_decay"],
                momentum=momentum, centered=centered, maximize=group["maximize"])


__all__ = ["RMSprop"]
