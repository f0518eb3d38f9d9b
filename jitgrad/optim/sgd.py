"""`SGD` with momentum, dampening, Nesterov and weight decay (torch.optim.SGD)."""

from __future__ import annotations

from typing import Any

from jitgrad.optim.functional import sgd
from jitgrad.optim.optimizer import Optimizer, ParamsT


class SGD(Optimizer):
    """Stochastic gradient descent, in PyTorch's op order (research/eager_autograd.md §3.2).

    Per parameter p with gradient g (negated first if `maximize`):
        g = g + weight_decay * p                           if weight_decay
        buf = g (first step), else momentum * buf + (1 - dampening) * g   if momentum
        g = g + momentum * buf if nesterov else buf        if momentum
        p = p - lr * g
    State: "momentum_buffer" per parameter when momentum != 0 (none otherwise).
    Each `x + a * y` is rounded once, like torch's fused `add(alpha=)` (see `fma`).
    Raises ValueError for negative lr/momentum/weight_decay, or Nesterov without momentum
    or with dampening.
    """

    def __init__(self, params: ParamsT, lr: float = 1e-3, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0, nesterov: bool = False, *,
                 maximize: bool = False) -> None:
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def _update_group(self, group: dict[str, Any]) -> None:
        momentum = group["momentum"]
        params, grads, buffers = [], [], []
        for param in group["params"]:
            grad = param.grad
            if grad is None:
                continue
            params.append(param)
            grads.append(grad)
            buffers.append(self.state[param].get("momentum_buffer") if momentum != 0 else None)
        new_buffers = sgd(params, grads, buffers, lr=group["lr"], momentum=momentum,
                          dampening=group["dampening"], weight_decay=group["weight_decay"],
                          nesterov=group["nesterov"], maximize=group["maximize"])
        if momentum == 0:
            return
        for param, buffer, new_buffer in zip(params, buffers, new_buffers, strict=True):
            if buffer is None:  # the first step with momentum: the buffer is new
                self.state[param]["momentum_buffer"] = new_buffer


__all__ = ["SGD"]
