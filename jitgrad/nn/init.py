"""Weight initialisation, as torch.nn.init: every function fills a tensor in place and returns it.

Values are drawn from the jitgrad generator (`jitgrad.manual_seed` seeds it, or pass
`generator=`) in float64 and rounded to the tensor's dtype. Writing goes straight into
the tensor's array and bumps its version, which is what PyTorch's `no_grad` in-place
fill amounts to: allowed on leaves that require grad, and not recorded by autograd.
Formulas and defaults: Glorot & Bengio 2010 (xavier), He et al. 2015 (kaiming), Saxe et
al. 2013 (orthogonal), torch/nn/init.py (gains, fans, truncated normal by inverse CDF).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from scipy import special

from jitgrad.eager.ops.random import Generator, generator_of
from jitgrad.eager.tensor import Tensor

_LINEAR_FNS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
               "conv_transpose3d")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (leaky_relu takes its negative slope as param).

    Raises ValueError for an unknown nonlinearity or a non-numeric slope.
    """
    if nonlinearity in _LINEAR_FNS or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fill(tensor: Tensor, values: Any) -> Tensor:
    """Write `values` into `tensor` in place (cast to its dtype) and record the write."""
    tensor._data[...] = values
    tensor._bump_version()
    return tensor


def _shape(tensor: Tensor) -> tuple[int, ...]:
    return tensor._data.shape


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0,
             generator: Generator | None = None) -> Tensor:
    """Fill with U(a, b)."""
    return _fill(tensor, generator_of(generator).uniform(a, b, _shape(tensor)))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,
            generator: Generator | None = None) -> Tensor:
    """Fill with N(mean, std^2)."""
    return _fill(tensor, generator_of(generator).normal(mean, std, _shape(tensor)))


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator: Generator | None = None) -> Tensor:
    """Fill with N(mean, std^2) truncated to [a, b] (a and b are absolute bounds, not in stds).

    Method (as PyTorch): draw u uniformly between the normal CDF at a and at b, map it back
    through the inverse CDF, clamp to [a, b] against rounding. Warns when mean is more than
    2 std outside [a, b].
    """
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                      "distribution of values may be incorrect.", stacklevel=2)

    def norm_cdf(x: float) -> float:
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    low, high = norm_cdf((a - mean) / std), norm_cdf((b - mean) / std)
    u = generator_of(generator).uniform(2 * low - 1, 2 * high - 1, _shape(tensor))
    values = special.erfinv(u) * (std * math.sqrt(2.0)) + mean
    return _fill(tensor, np.clip(values, a, b))


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with `val`."""
    return _fill(tensor, val)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return _fill(tensor, 1)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros."""
    return _fill(tensor, 0)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity matrix. Raises ValueError for other ranks."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = _shape(tensor)
    return _fill(tensor, np.eye(rows, cols))


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight shaped (out, in, *kernel). Raises ValueError below 2-D."""
    shape = _shape(tensor)
    if len(shape) < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         f"dimensions (got shape {list(shape)})")
    receptive_field = math.prod(shape[2:])
    return shape[1] * receptive_field, shape[0] * receptive_field


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor: Tensor, gain: float = 1.0,
                    generator: Generator | None = None) -> Tensor:
    """Fill with U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio 2010)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0,
                   generator: Generator | None = None) -> Tensor:
    """Fill with N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float | None:
    """gain / sqrt(fan), or None for a tensor with no elements (PyTorch warns and skips it)."""
    if 0 in _shape(tensor):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu",
                     generator: Generator | None = None) -> Tensor:
    """Fill with U(-b, b), b = sqrt(3) * gain(nonlinearity, a) / sqrt(fan) (He et al. 2015).

    With the defaults Linear uses (a=sqrt(5), fan_in) this is U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    """
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu",
                    generator: Generator | None = None) -> Tensor:
    """Fill with N(0, std^2), std = gain(nonlinearity, a) / sqrt(fan) (He et al. 2015)."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Fill with a (semi-)orthogonal matrix times `gain`; dims after the first are flattened.

    QR of a Gaussian matrix with the signs of R's diagonal folded into Q, so the result is
    uniform over orthogonal matrices (Saxe et al. 2013; Mezzadri 2007).
    Raises ValueError below 2-D.
    """
    shape = _shape(tensor)
    if len(shape) < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = shape[0]
    cols = tensor.numel() // rows
    flattened = generator_of(generator).normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flattened = flattened.T
    q, r = np.linalg.qr(flattened)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, gain * q.reshape(shape))


def _deprecated(init: Any) -> Any:
    """`nn.init.<name>` without the underscore: the same function with a FutureWarning."""
    new_name = init.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args: Any, **kwargs: Any) -> Any:
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new_name}`.",
                      FutureWarning, stacklevel=2)
        return init(*args, **kwargs)

    deprecated_init.__name__ = deprecated_init.__qualname__ = old_name
    deprecated_init.__doc__ = f"Deprecated `{new_name}` (FutureWarning, as PyTorch)."
    return deprecated_init


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_", "uniform", "normal", "constant", "eye",
           "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal", "orthogonal"]
