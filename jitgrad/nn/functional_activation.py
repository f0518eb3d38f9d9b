"""Activations of `jitgrad.nn.functional` with PyTorch's `inplace` flag and `*_` forms.

Fused activations (relu, elu, hardtanh, hardsigmoid, hardswish, threshold, mish, ...) are
ops of `jitgrad.eager.ops.activation`, whose backward formulas select where PyTorch's do;
selu, celu, softsign, tanhshrink, hardshrink, softshrink, softmin and glu are composites
of ops written as PyTorch's own Python (softsign, tanhshrink) or with `where` selecting the
branch (the shrinks), so their gradients, inf/NaN upstream included, are PyTorch's.
"""

from __future__ import annotations

from typing import Any

from jitgrad.eager.ops import activation, comparison, nn_ops, pointwise, shape, slicing
from jitgrad.eager.ops.inplace import apply_inplace
from jitgrad.eager.tensor import Tensor, normalize_dim

SELU_ALPHA = 1.6732632423543772848170429916717  # Klambauer et al. 2017
SELU_SCALE = 1.0507009873554804934193349852946


def _activation(op: Any, input: Tensor, inplace: bool, *args: Any) -> Tensor:
    """op(input, *args), or written into `input` (with its history rebased) when inplace."""
    if inplace:
        return apply_inplace(input, lambda t: op(t, *args))
    return op(input, *args)


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0) elementwise; inplace=True overwrites `input` (as input.relu_())."""
    return _activation(activation.relu, input, inplace)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6) elementwise; inplace=True overwrites `input`."""
    return _activation(activation.relu6, input, inplace)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x if x >= 0 else negative_slope * x; inplace=True overwrites `input`."""
    return _activation(activation.leaky_relu, input, inplace, negative_slope)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x if x > 0 else alpha * (exp(x) - 1); inplace=True overwrites `input`."""
    return _activation(activation.elu, input, inplace, alpha)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """x clamped to [min_val, max_val]; inplace=True overwrites `input`."""
    return _activation(activation.hardtanh, input, inplace, min_val, max_val)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x); inplace=True overwrites `input`."""
    return _activation(activation.silu, input, inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6; inplace=True overwrites `input`."""
    return _activation(activation.hardsigmoid, input, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x relu6(x + 3) / 6; inplace=True overwrites `input`."""
    return _activation(activation.hardswish, input, inplace)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """x where x > threshold, else value; inplace=True overwrites `input`."""
    return _activation(activation.threshold, input, inplace, threshold, value)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x tanh(softplus(x)); inplace=True overwrites `input`."""
    return _activation(activation.mish, input, inplace)


def _composite(fn: Any, input: Tensor, inplace: bool, *args: Any) -> Tensor:
    """`_activation` for a composite: in place, it reads a copy of the old value, since its
    inner ops save what they read and the write would make that stale (see Note [Saving the
    old self] in jitgrad.eager.ops.inplace, which covers only the op that writes)."""
    if inplace:
        return apply_inplace(input, lambda t: fn(shape.clone(t), *args))
    return fn(input, *args)


def _selu(input: Tensor) -> Tensor:
    return activation.elu(input, SELU_ALPHA) * SELU_SCALE


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with Klambauer et al.'s constants; NotImplementedError for ints."""
    return _composite(_selu, input, inplace)


def _celu(input: Tensor, alpha: float) -> Tensor:
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: celu's alpha must not be 0")
    return activation.elu(input / alpha) * alpha


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1)). Raises RuntimeError for alpha == 0."""
    return _composite(_celu, input, inplace, alpha)


def softsign(input: Tensor) -> Tensor:
    """x / (1 + |x|), as PyTorch's own composite."""
    return input / (pointwise.abs(input) + 1)


def tanhshrink(input: Tensor) -> Tensor:
    """x - tanh(x), as PyTorch's own composite."""
    return input - pointwise.tanh(input)


def _require_float(input: Tensor, kernel: str) -> None:
    if input._data.dtype.kind != "f":
        raise pointwise.not_implemented_for(kernel, input._data.dtype)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x where |x| > lambd, else 0 (gradient selected likewise)."""
    _require_float(input, "hardshrink_cpu")
    return comparison.where(pointwise.abs(input) > lambd, input, 0.0)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd above lambd, x + lambd below -lambd, else 0.

    Raises RuntimeError for a negative lambd, NotImplementedError for integers.
    """
    _require_float(input, "softshrink_check")
    if lambd < 0:
        raise RuntimeError(f"lambda must be in range [0, inf) for input dtype {input.dtype}, "
                           f"but found {lambd}")
    inner = comparison.where(input < -lambd, input + lambd, 0.0)
    return comparison.where(input > lambd, input - lambd, inner)


def softmin(input: Tensor, dim: Any = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """softmax(-x) along `dim`."""
    return nn_ops.softmax(-input, dim, dtype)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """a * sigmoid(b) for the halves a, b of `input` along `dim`.

    Raises RuntimeError when that dim has an odd size (as PyTorch).
    """
    d = normalize_dim(dim, input.ndim)
    size = input.shape[d]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {size}")
    a, b = slicing.split(input, size // 2, d)
    return a * activation.sigmoid(b)


def relu_(input: Tensor) -> Tensor:
    """In-place relu."""
    return relu(input, inplace=True)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place elu."""
    return elu(input, alpha, inplace=True)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """In-place hardtanh."""
    return hardtanh(input, min_val, max_val, inplace=True)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """In-place leaky_relu."""
    return leaky_relu(input, negative_slope, inplace=True)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place threshold."""
    return _activation(activation.threshold, input, True, threshold, value)


def selu_(input: Tensor) -> Tensor:
    """In-place selu."""
    return selu(input, inplace=True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place celu."""
    return celu(input, alpha, inplace=True)


__all__ = ["relu", "relu6", "leaky_relu", "elu", "hardtanh", "silu", "hardsigmoid", "hardswish",
           "threshold", "mish", "selu", "celu", "softsign", "tanhshrink", "hardshrink",
           "softshrink", "softmin", "glu", "relu_", "elu_", "hardtanh_", "leaky_relu_",
           "threshold_", "selu_", "celu_"]
