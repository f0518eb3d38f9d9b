"""Activation functions as pure functional ops (nn.functional re-exports them).

`relu` is defined in pointwise.py (nn.functional imports it from there) and re-exported
here so that every activation can be imported from this module.

Forward formulas are PyTorch's CPU kernels (so values agree to the last bits where
numpy allows) and are written not to overflow; backward formulas and their edge
conventions are PyTorch's, as measured in research/eager_autograd.md §2.2:
relu'(0) = 0, leaky_relu'(0) = slope, gelu'(0) = silu'(0) = 0.5, elu'(0) = alpha,
softplus has gradient exactly 1 in its linear region, hardtanh/relu6 have gradient 0
at their bounds (clamp, by contrast, is inclusive).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from jitgrad.eager.ops._binary import unary
from jitgrad.eager.ops.pointwise import first_on_ties, not_implemented_for, relu
from jitgrad.eager.ops.registry import register
from jitgrad.eager.tensor import Tensor

X = ("x",)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_KAPPA = 0.044715


def _require_float(x: Tensor, kernel: str) -> Tensor:
    if x._data.dtype.kind != "f":
        raise not_implemented_for(kernel, x._data.dtype)
    return x


# ----- forwards ---------------------------------------------------------------------


def _sigmoid_forward(x: np.ndarray) -> np.ndarray:
    out = special.expit(x)  # 1 / (1 + exp(-x)) without overflow
    return out if out.dtype == x.dtype else out.astype(x.dtype)


def _gelu_forward(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(SQRT_2_OVER_PI * (x + GELU_KAPPA * (x * x * x))))
    erf = special.erf(x * math.sqrt(0.5))
    return (x * 0.5 * (1 + erf)).astype(x.dtype, copy=False)


def _softplus_forward(x: np.ndarray, beta: float, threshold: float) -> np.ndarray:
    scaled = x * beta
    # exp overflows to inf only where the linear branch is taken
    return np.where(scaled > threshold, x, np.log1p(np.exp(scaled)) / beta)


def _logsigmoid_forward(x: np.ndarray) -> np.ndarray:
    # min(x, 0) - log1p(exp(-|x|)): never exponentiates a positive number
    return np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))


def _hardtanh_forward(x: np.ndarray, min_val: Any, max_val: Any) -> np.ndarray:
    low = first_on_ties(np.maximum(x, min_val), x, min_val)  # relu6(-0.0) is -0.0 (PyTorch)
    return first_on_ties(np.minimum(low, max_val), low, max_val)


# ----- backwards --------------------------------------------------------------------


def _sigmoid_backward(xp: Any, ctx: Any, g: Any, out: Any) -> tuple:
    return (g * (1 - out) * out,)


def _leaky_relu_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (xp.where(x > 0, g, g * ctx.params["negative_slope"]),)  # slope at 0


def _gelu_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    if ctx.params["approximate"] == "tanh":
        inner = SQRT_2_OVER_PI * (x + GELU_KAPPA * (x * x * x))
        tanh_inner = xp.tanh(inner)
        right = 1 + tanh_inner
        d_inner = SQRT_2_OVER_PI * (1 + 3 * GELU_KAPPA * (x * x))
        return (g * (0.5 * right + 0.5 * x * ((1 - tanh_inner * tanh_inner) * d_inner)),)
    cdf = 0.5 * (1 + xp.erf(x * math.sqrt(0.5)))
    pdf = (1 / math.sqrt(2 * math.pi)) * xp.exp(-0.5 * (x * x))
    return (g * (cdf + x * pdf),)


def _silu_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    s = xp.sigmoid(x)
    return (g * s * (1 + x * (1 - s)),)


def _softplus_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    beta, threshold = ctx.params["beta"], ctx.params["threshold"]
    z = xp.exp(x * beta)  # inf only where the linear branch (gradient exactly g) is taken
    return (xp.where(x * beta > threshold, g, g * z / (z + 1)),)


def _elu_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    alpha = ctx.params["alpha"]
    return (xp.where(x <= 0, g * alpha * xp.exp(x), g),)  # elu'(0) = alpha


def _logsigmoid_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    z = xp.exp(-xp.abs(x))
    s = z / (1 + z)  # sigmoid(-|x|), no overflow
    return (xp.where(x < 0, g * (1 - s), g * s),)


def _hardtanh_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    outside = (x <= ctx.params["min_val"]) | (x >= ctx.params["max_val"])
    return (xp.where(outside, 0.0, g),)  # exclusive bounds; NaN passes g (PyTorch)


def _hardsigmoid_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (xp.where((x > -3) & (x < 3), g / 6, 0.0),)  # exclusive, selected (PyTorch)


def _hardswish_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    # PyTorch's measured edges: 0 at x <= -3, g at x >= 3 (1, not 1.5, at x == 3)
    return (xp.where(x <= -3, 0.0, xp.where(x < 3, g * (x / 3 + 0.5), g)),)


def _threshold_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (xp.where(x > ctx.params["threshold"], g, 0.0),)  # selected: threshold_backward


def _mish_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    t = xp.tanh(xp.log1p(xp.exp(x)))  # one factor, as PyTorch's mish_backward (no inf - inf)
    return (g * (t + x * xp.sigmoid(x) * (1 - t * t)),)


SIGMOID = register("sigmoid", _sigmoid_forward, _sigmoid_backward, saves=("out",),
                   source="s' = s (1 - s)")
LEAKY_RELU = register("leaky_relu", lambda x, negative_slope: np.where(
    x > 0, x, x * negative_slope), _leaky_relu_backward, inputs=X, saves=X,
    source="1 for x > 0, slope otherwise")
GELU = register("gelu", _gelu_forward, _gelu_backward, inputs=X, saves=X,
                source="Hendrycks & Gimpel 2016: Phi(x) + x phi(x); tanh form differentiated")
SILU = register("silu", lambda x: x / (1 + np.exp(-x)), _silu_backward, saves=X,
                source="Elfwing et al. 2017: s (1 + x (1 - s))")
SOFTPLUS = register("softplus", _softplus_forward, _softplus_backward, inputs=X, saves=X,
                    source="sigmoid(beta x); exactly 1 above the threshold")
ELU = register("elu", lambda x, alpha: np.where(x > 0, x, alpha * np.expm1(x)),
               _elu_backward, inputs=X, saves=X, source="Clevert et al. 2015: alpha e^x below 0")
LOGSIGMOID = register("logsigmoid", _logsigmoid_forward, _logsigmoid_backward, saves=X,
                      node_name="LogSigmoid", source="d log s(x) = 1 - s(x) = s(-x)")
HARDTANH = register("hardtanh", _hardtanh_forward, _hardtanh_backward, inputs=X, saves=X,
                    source="1 strictly inside (min_val, max_val), 0 at and beyond the bounds")
HARDSIGMOID = register("hardsigmoid", lambda x: np.minimum(np.maximum(x + 3, 0), 6) / 6,
                       _hardsigmoid_backward, inputs=X, saves=X,
                       source="Howard et al. 2019 (MobileNetV3): relu6(x + 3) / 6")
HARDSWISH = register("hardswish", lambda x: x * np.minimum(np.maximum(x + 3, 0), 6) / 6,
                     _hardswish_backward, inputs=X, saves=X,
                     source="Howard et al. 2019: x relu6(x + 3) / 6; PyTorch's edges")
THRESHOLD = register("threshold", lambda x, threshold, value: np.where(
    x > threshold, x, np.asarray(value).astype(x.dtype)), _threshold_backward, inputs=X,
    saves=X, source="g where x > threshold, else 0")
MISH = register("mish", lambda x: x * np.tanh(np.log1p(np.exp(x))), _mish_backward, inputs=X,
                saves=X, source="Misra 2019: x tanh(softplus(x))")


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x)), without overflow; integers give the default float dtype.

    Saves its output (modifying it in place before backward raises, as PyTorch).
    """
    return unary(SIGMOID, input, to_float=True)


def leaky_relu(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """x for x > 0, negative_slope * x otherwise; the gradient at 0 is negative_slope.

    Raises NotImplementedError for integer tensors.
    """
    _require_float(input, "leaky_relu_cpu")
    return unary(LEAKY_RELU, input, negative_slope=negative_slope)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x Phi(x) with Phi the normal CDF (erf form), or its tanh approximation.

    approximate: "none" (default, exact) or "tanh". gelu'(0) = 0.5.
    Raises RuntimeError for another approximate, NotImplementedError for integers.
    """
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh. Got "
                           f"{approximate!r}")
    _require_float(input, "GeluKernelImpl")
    return unary(GELU, input, approximate=approximate)


def silu(input: Tensor) -> Tensor:
    """x * sigmoid(x) (swish); silu'(0) = 0.5. Raises NotImplementedError for integers."""
    _require_float(input, "silu_cpu")
    return unary(SILU, input)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold.

    Gradient sigmoid(beta x), exactly 1 in the linear region.
    Raises NotImplementedError for integers.
    """
    _require_float(input, "softplus_cpu")
    return unary(SOFTPLUS, input, beta=beta, threshold=threshold)


def elu(input: Tensor, alpha: float = 1.0) -> Tensor:
    """x for x > 0, alpha (exp(x) - 1) otherwise; elu'(0) = alpha.

    Raises NotImplementedError for integers.
    """
    _require_float(input, "elu_cpu")
    return unary(ELU, input, alpha=alpha)


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), finite for any finite x.

    Raises NotImplementedError for integers.
    """
    _require_float(input, "log_sigmoid_cpu")
    return unary(LOGSIGMOID, input)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """clamp(x, min_val, max_val), but with gradient 0 at the bounds (exclusive).

    Integer tensors stay integer (bounds truncated). Raises ValueError if min_val > max_val.
    """
    if input._data.dtype.kind == "b":
        raise RuntimeError("Bool inputs not supported for hardtanh; convert first, e.g. t.int()")
    if min_val > max_val:
        raise ValueError(f"min_val cannot be greater than max_val (got min_val={min_val}, "
                         f"max_val={max_val})")
    if input._data.dtype.kind != "f":
        min_val, max_val = int(min_val), int(max_val)
    return unary(HARDTANH, input, min_val=min_val, max_val=max_val)


def relu6(input: Tensor) -> Tensor:
    """min(max(x, 0), 6): hardtanh(x, 0, 6), gradient 0 at 0 and 6."""
    return hardtanh(input, 0.0, 6.0)


def hardsigmoid(input: Tensor) -> Tensor:
    """relu6(x + 3) / 6; gradient 1/6 strictly inside (-3, 3), else 0.

    Raises NotImplementedError for integers.
    """
    _require_float(input, "hardsigmoid_cpu")
    return unary(HARDSIGMOID, input)


def hardswish(input: Tensor) -> Tensor:
    """x relu6(x + 3) / 6; gradient x/3 + 1/2 inside (-3, 3), 0 below, 1 from 3 on.

    Raises NotImplementedError for integers.
    """
    _require_float(input, "hardswish_cpu")
    return unary(HARDSWISH, input)


def threshold(input: Tensor, threshold: float, value: float) -> Tensor:
    """x where x > threshold, else `value` (cast to x's dtype); gradient g where x > threshold.

    Raises NotImplementedError for bool tensors.
    """
    if input._data.dtype.kind == "b":
        raise not_implemented_for("threshold_cpu", input._data.dtype)
    return unary(THRESHOLD, input, threshold=threshold, value=value)


def mish(input: Tensor) -> Tensor:
    """x tanh(softplus(x)). Raises NotImplementedError for integers."""
    _require_float(input, "mish_cpu")
    return unary(MISH, input)


__all__ = ["relu", "sigmoid", "leaky_relu", "gelu", "silu", "softplus", "elu", "logsigmoid",
           "hardtanh", "relu6", "threshold"]

METHODS = {"sigmoid": sigmoid}  # Tensor.relu comes with relu from pointwise.py
