"""`SGD` with momentum, dampening, Nesterov and weight decay (torch.optim.SGD)."""

from __future__ import annotations

from typing import Any

from jitgrad.eager.tensor import Tensor
from jitgrad.optim.optimizer import Optimizer, ParamsT, fma


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
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        weight_decay, nesterov = group["weight_decay"], group["nesterov"]
        maximize = group["maximize"]
        for param in group["params"]:
            if param._grad is None:
                continue
            p = param._data
            g = -param._grad._data if maximize else param._grad._data
            if weight_decay != 0:
                g = fma(weight_decay, p, g)
            if momentum != 0:
                state = self.state[param]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = Tensor._make(g.copy())
                else:
                    buf._data[...] = fma(1 - dampening, g, buf._data * momentum)
                    buf._bump_version()
                g = fma(momentum, buf._data, g) if nesterov else buf._data
            p[...] = fma(-lr, g, p)
            param._bump_version()


__all__ = ["SGD"]
