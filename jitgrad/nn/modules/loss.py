"""Loss modules (torch.nn.MSELoss, CrossEntropyLoss, ...): options stored, math in `functional`.

`reduction` is "mean" (default), "sum" or "none" everywhere. The deprecated
`size_average`/`reduce` arguments keep their positions (so positional calls written for
PyTorch line up) and are translated into `reduction` with PyTorch's warning. Class weights
and `pos_weight` are registered as buffers, so they follow `.to(dtype)` and appear in
state_dict, as in PyTorch.
"""

from __future__ import annotations

import warnings

from jitgrad.eager.tensor import Tensor
from jitgrad.nn import functional as F  # noqa: N812 - PyTorch's spelling
from jitgrad.nn.modules.module import Module


def _legacy_reduction(size_average: bool | None, reduce: bool | None) -> str:
    """The `reduction` meant by the deprecated flags (both default to True); warns as PyTorch."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    reduction = ("mean" if size_average else "sum") if reduce else "none"
    warnings.warn("size_average and reduce args will be deprecated, please use "
                  f"reduction='{reduction}' instead.", stacklevel=3)
    return reduction


class _Loss(Module):
    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__()
        if size_average is not None or reduce is not None:
            reduction = _legacy_reduction(size_average, reduce)
        self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class MSELoss(_Loss):
    """mean((input - target)^2) over all elements (or sum / none); shapes should match."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """mean(|input - target|) over all elements (or sum / none)."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.l1_loss(input, target, reduction=self.reduction)


class NLLLoss(_WeightedLoss):
    """-input[n, target[n]] (times weight[target[n]]), for log-probabilities input (N, C, ...).

    "mean" divides by the summed weights of targets not equal to ignore_index.
    """

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 ignore_index: int = -100, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """nll_loss(log_softmax(input, dim=1), target) for logits (N, C, ...) or (C,).

    target: int64 class indices (N, ...) or class probabilities shaped like input.
    label_smoothing e mixes in the uniform distribution: (1-e)*nll + e*mean_c(-log p_c).
    """

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 ignore_index: int = -100, reduce: bool | None = None,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(input, target, weight=self.weight,
                               ignore_index=self.ignore_index, reduction=self.reduction,
                               label_smoothing=self.label_smoothing)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy on logits, computed stably: -[y log s(x) + (1-y) log(1-s(x))].

    weight rescales each element; pos_weight (one per class, broadcast over the last dim)
    rescales the positive term.
    """

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean",
                 pos_weight: Tensor | None = None) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  pos_weight=self.pos_weight,
                                                  reduction=self.reduction)


class BCELoss(_WeightedLoss):
    """Binary cross-entropy on probabilities; each log is clamped at -100 (PyTorch's choice)."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target)."""

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta) (d = input - target)."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(_Loss):
    """KL(target || exp(input)) for log-probabilities input (`log_target`: target too)."""

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


__all__ = ["MSELoss", "L1Loss", "NLLLoss", "CrossEntropyLoss", "BCEWithLogitsLoss", "BCELoss",
           "SmoothL1Loss", "HuberLoss", "KLDivLoss"]
