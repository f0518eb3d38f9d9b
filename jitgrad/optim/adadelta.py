"""`Adadelta` (torch.optim.Adadelta): per-parameter step sizes from running RMS values."""

from __future__ import annotations

from typing import Any

import numpy as np

from jitgrad.optim.optimizer import Optimizer, ParamsT, lazy_state


class Adadelta(Optimizer):
    """Adadelta (Zeiler 2012, "ADADELTA: An Adaptive Learning Rate Method"), in PyTorch's
    single-tensor op order.

    Per parameter p with gradient g (negated first if `maximize`):
        g = g + weight_decay * p                                  if weight_decay
        square_avg = rho * square_avg + (1 - rho) * g * g
        delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g
        acc_delta = rho * acc_delta + (1 - rho) * delta * delta
        p = p - lr * delta
    State per parameter: "step" (0-d float32), "square_avg", "acc_delta".
    Values agree with torch 2.13 to about an ulp per step in float32 (torch's vectorized
    sqrt is not always correctly rounded, so bit equality is not reachable with numpy).
    Raises ValueError for lr, eps or weight_decay < 0, or rho outside [0, 1].
    """

    def __init__(self, params: ParamsT, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, *, maximize: bool = False) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _update_group(self, group: dict[str, Any]) -> None:
        lr, rho, eps, weight_decay = group["lr"], group["rho"], group["eps"], group["weight_decay"]
        for param in group["params"]:
            if param._grad is None:
                continue
            state = lazy_state(self, param, ("square_avg", "acc_delta"))
            p = param._data
            g = -param._grad._data if group["maximize"] else param._grad._data
            state["step"]._data[...] += 1
            if weight_decay != 0:
                g = g + weight_decay * p
            square_avg, acc_delta = state["square_avg"]._data, state["acc_delta"]._data
            square_avg *= rho
            square_avg += (1 - rho) * g * g
            delta = np.sqrt(acc_delta + eps) / np.sqrt(square_avg + eps) * g
            acc_delta *= rho
            acc_delta += (1 - rho) * delta * delta
            p -= lr * delta
            for name in ("step", "square_avg", "acc_delta"):
                state[name]._bump_version()
            param._bump_version()


__all__ = ["Adadelta"]
