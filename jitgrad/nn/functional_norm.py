"""Batch, instance and group normalization of `jitgrad.nn.functional` (re-exported there as
`F.batch_norm`, `F.instance_norm`, `F.group_norm`).

Each is a composite of mean/var and pointwise ops, so its gradient, its fusion under
`@jitgrad.compile` and its compiled backward come from theirs. With x of shape (N, C, *):

- batch_norm (Ioffe & Szegedy 2015): per channel c, over N and the spatial dims,
  y = (x - mean_c) / sqrt(var_c + eps) * weight_c + bias_c with the biased var_c. In
  training (or without running stats) mean_c/var_c are the batch's, and running_mean /
  running_var, when given, move toward them in place: r = (1 - momentum) r + momentum s,
  with the *unbiased* batch variance, as PyTorch does. Otherwise the running stats are used.
- instance_norm (Ulyanov et al. 2016): the same per (n, c), over the spatial dims only.
- group_norm (Wu & He 2018): per (n, group), over the group's C/G channels and the spatial
  dims; weight and bias are per channel.
"""

from __future__ import annotations

from jitgrad.eager.grad_mode import no_grad
from jitgrad.eager.ops import reduction as reduce_ops
from jitgrad.eager.ops.pointwise import rsqrt
from jitgrad.eager.tensor import Tensor


def _channel_view(t: Tensor, ndim: int) -> Tensor:
    """A per-channel (C,) tensor shaped (1, C, 1, ...) to broadcast against (N, C, *)."""
    return t.reshape((1, -1) + (1,) * (ndim - 2))


def _affine(y: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    if weight is not None:
        y = y * _channel_view(weight, y.ndim)
    if bias is not None:
        y = y + _channel_view(bias, y.ndim)
    return y


def _update_running(running: Tensor, batch_stat: Tensor, momentum: float) -> None:
    with no_grad():
        running.mul_(1.0 - momentum).add_(batch_stat.detach().to(running.dtype) * momentum)


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Batch normalization of input (N, C, *) per channel (see the module docstring).

    Raises ValueError when training on one value per channel (PyTorch's message).
    """
    dims = (0, *range(2, input.ndim))
    count = input.numel() // max(input.shape[1], 1) if input.ndim > 1 else input.numel()
    if training and count <= 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input "
                         f"size {input.shape}")
    if training or running_mean is None or running_var is None:
        mean = reduce_ops.mean(input, dims, keepdim=True)
        var = reduce_ops.var(input, dims, unbiased=False, keepdim=True)
        if training and running_mean is not None and running_var is not None:
            _update_running(running_mean, mean.reshape(-1), momentum)
            _update_running(running_var, var.reshape(-1) * (count / (count - 1)), momentum)
    else:
        mean = _channel_view(running_mean, input.ndim)
        var = _channel_view(running_var, input.ndim)
    return _affine((input - mean) * rsqrt(var + eps), weight, bias)


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Instance normalization of input (N, C, *) per (n, c) over the spatial dims.

    With running stats and use_input_stats, they move toward the batch average of the
    per-instance stats (PyTorch's rule); without use_input_stats they are used instead.
    """
    dims = tuple(range(2, input.ndim))
    count = 1
    for d in dims:
        count *= input.shape[d]
    if use_input_stats and count <= 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input "
                         f"size {input.shape}")
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    mean = reduce_ops.mean(input, dims, keepdim=True)
    var = reduce_ops.var(input, dims, unbiased=False, keepdim=True)
    if running_mean is not None and running_var is not None:
        _update_running(running_mean, reduce_ops.mean(mean.reshape(input.shape[:2]), 0),
                        momentum)
        unbiased = reduce_ops.mean(var.reshape(input.shape[:2]), 0) * (count / (count - 1))
        _update_running(running_var, unbiased, momentum)
    return _affine((input - mean) * rsqrt(var + eps), weight, bias)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Group normalization of input (N, C, *): C/num_groups channels per group.

    Raises RuntimeError when C is not divisible by num_groups.
    """
    n, channels = input.shape[0], input.shape[1]
    if channels % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {input.shape} and "
                           f"num_groups={num_groups}")
    grouped = input.reshape(n, num_groups, -1)
    mean = reduce_ops.mean(grouped, -1, keepdim=True)
    var = reduce_ops.var(grouped, -1, unbiased=False, keepdim=True)
    y = ((grouped - mean) * rsqrt(var + eps)).reshape(input.shape)
    return _affine(y, weight, bias)


__all__ = ["batch_norm", "instance_norm", "group_norm"]
