"""`RMSprop` (torch.optim.RMSprop; Hinton, Coursera lecture 6e, 2012; centered: Graves 2013)."""

from __future__ import annotations

from typing import Any

import numpy as np

from jitgrad.optim.optimizer import Optimizer, ParamsT, fma, lazy_state


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
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        weight_decay, momentum = group["weight_decay"], group["momentum"]
        centered = group["centered"]
        names = (("square_avg",) + (("momentum_buffer",) if momentum > 0 else ())
                 + (("grad_avg",) if centered else ()))
        for param in group["params"]:
            if param._grad is None:
                continue
            state = lazy_state(self, param, names)
            p = param._data
            g = -param._grad._data if group["maximize"] else param._grad._data
            state["step"]._data[...] += 1
            state["step"]._bump_version()
            if weight_decay != 0:
                g = fma(weight_decay, p, g)
            square_avg = state["square_avg"]._data
            square_avg[...] = fma((1 - alpha) * g, g, square_avg * alpha)  # mul_, addcmul_
            if centered:
                grad_avg = state["grad_avg"]._data
                grad_avg[...] = fma(1 - alpha, g - grad_avg, grad_avg)  # lerp_(g, 1 - alpha)
                avg = np.sqrt(fma(-grad_avg, grad_avg, square_avg)) + eps
            else:
                avg = np.sqrt(square_avg) + eps
            if momentum > 0:
                buf = state["momentum_buffer"]._data
                buf[...] = buf * momentum + g / avg  # mul_, addcdiv_
                p[...] = fma(-lr, buf, p)  # add_(buf, alpha=-lr)
            else:
                p += (-lr * g) / avg  # addcdiv_(g, avg, value=-lr)
            for name in names:
                state[name]._bump_version()
            param._bump_version()


__all__ = ["RMSprop"]
