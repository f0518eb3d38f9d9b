"""`BatchNorm1d/2d/3d`, `InstanceNorm1d/2d/3d` and `GroupNorm` (torch.nn's), over
`jitgrad.nn.functional_norm`.

Parameters and buffers carry PyTorch's names and shapes, so state_dicts load both ways:
`weight` (C,) = 1 and `bias` (C,) = 0 when affine; `running_mean` (C,) = 0,
`running_var` (C,) = 1 and `num_batches_tracked` (int64, 0-d) when track_running_stats.
A training-mode forward uses the batch's statistics and moves the running ones toward them
by `momentum` (BatchNorm with None: a cumulative average over num_batches_tracked batches;
InstanceNorm never counts batches, as PyTorch's); eval mode uses the running statistics
when there are any.
"""

from __future__ import annotations

from typing import Any

from jitgrad.eager import dtypes
from jitgrad.eager.ops.creation import empty, ones, tensor, zeros
from jitgrad.eager.tensor import Tensor
from jitgrad.nn import functional_norm as norm
from jitgrad.nn import init
from jitgrad.nn.modules.module import Module
from jitgrad.nn.parameter import Parameter


class _NormBase(Module):
    """What BatchNorm and InstanceNorm share: affine parameters and running statistics."""

    _input_ranks: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(empty(num_features, dtype=dtype))
            self.bias = Parameter(empty(num_features, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=dtypes.int64))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """running_mean = 0, running_var = 1, num_batches_tracked = 0."""
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self) -> None:
        """The running statistics reset, weight = 1, bias = 0."""
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim not in self._input_ranks:
            ranks = " or ".join(f"{r}D" for r in self._input_ranks)
            raise ValueError(f"expected {ranks} input (got {input.ndim}D input)")

    def _momentum(self) -> float:
        """This step's averaging factor; counts the batch when stats are tracked."""
        if not (self.training and self.track_running_stats):
            return 0.0 if self.momentum is None else self.momentum
        self.num_batches_tracked.add_(1)
        if self.momentum is None:  # cumulative moving average
            return 1.0 / float(self.num_batches_tracked.item())
        return self.momentum

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        momentum = self._momentum()
        use_batch_stats = self.training or not self.track_running_stats
        return norm.batch_norm(input, self.running_mean, self.running_var, self.weight,
                               self.bias, use_batch_stats, momentum, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L) input."""

    _input_ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) input."""

    _input_ranks = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalization of (N, C, D, H, W) input."""

    _input_ranks = (5,)


class _InstanceNorm(_NormBase):
    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        unbatched = input.ndim == self._input_ranks[0]
        x = input.unsqueeze(0) if unbatched else input
        momentum = 0.0 if self.momentum is None else self.momentum  # counts no batches
        use_input_stats = self.training or not self.track_running_stats
        y = norm.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                               use_input_stats, momentum, self.eps)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of (N, C, L) or unbatched (C, L) input."""

    _input_ranks = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of (N, C, H, W) or unbatched (C, H, W) input."""

    _input_ranks = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization of (N, C, D, H, W) or unbatched (C, D, H, W) input."""

    _input_ranks = (4, 5)


class GroupNorm(Module):
    """Group normalization of (N, C, *) input into num_groups groups of channels."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = (num_groups, num_channels,
                                                                     eps, affine)
        if affine:
            self.weight = Parameter(ones(num_channels, dtype=dtype))
            self.bias = Parameter(zeros(num_channels, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:
        return norm.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
           "InstanceNorm3d", "GroupNorm"]
