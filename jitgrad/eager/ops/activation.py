"""Activation functions as pure functional ops, each with its nn form.

`relu` is defined in pointwise.py and re-exported here so that every activation can be
imported from this module. Each activation PyTorch has in nn states its `NNForm` here (the
declared ops with `nn=`, the composites in the `nn_form` table at the end), from which
jitgrad.nn makes nn.functional's forms (`inplace` flag, `elu_`) and the Module classes
(Note [Declaring an op once] in declare.py). selu, celu, softsign, tanhshrink, hardshrink
and softshrink are public in jitgrad.nn only (as before), so they are not in `__all__`.

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

from jitgrad.eager.ops import pointwise
from jitgrad.eager.ops.comparison import where
from jitgrad.eager.ops.declare import REQUIRED, NNForm, exported, nn_form, pointwise_op
from jitgrad.eager.ops.pointwise import (
    exp,
    first_on_ties,
    log1p,
    not_implemented_for,
    relu,
    tanh,
)
from jitgrad.eager.ops.registry import ANY_KIND
from jitgrad.eager.tensor import Tensor

X = ("x",)
SQRT_HALF = math.sqrt(0.5)
INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_KAPPA = 0.044715
SELU_ALPHA = 1.6732632423543772848170429916717  # Klambauer et al. 2017
SELU_SCALE = 1.0507009873554804934193349852946


def _require_float(x: Tensor, kernel: str) -> Tensor:
    if x._data.dtype.kind != "f":
        raise not_implemented_for(kernel, x._data.dtype)
    return x


# ----- forwards ---------------------------------------------------------------------


def sigmoid_forward(x: np.ndarray) -> np.ndarray:
    """The numpy sigmoid of the declared op (also run by fused ops, recurrent.py)."""
    out = special.expit(x)  # 1 / (1 + exp(-x)) without overflow
    return out if out.dtype == x.dtype else out.astype(x.dtype)


def _erf(x: np.ndarray) -> np.ndarray:
    out = special.erf(x)
    return out if out.dtype == x.dtype else out.astype(x.dtype)


def _gelu_forward(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(SQRT_2_OVER_PI * (x + GELU_KAPPA * (x * x * x))))
    return x * 0.5 * (1 + _erf(x * SQRT_HALF))


def _gelu_scalar(s: Any, x: Any, approximate: str) -> Any:
    if approximate == "tanh":
        return 0.5 * x * (1 + s.tanh(SQRT_2_OVER_PI * (x + GELU_KAPPA * (x * x * x))))
    return x * 0.5 * (1 + s.erf(x * SQRT_HALF))


def _logsigmoid_forward(x: np.ndarray) -> np.ndarray:
    return np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))


def _hardtanh_forward(x: np.ndarray, min_val: Any, max_val: Any) -> np.ndarray:
    low = first_on_ties(np.maximum(x, min_val), x, min_val)  # relu6(-0.0) is -0.0 (PyTorch)
    return first_on_ties(np.minimum(low, max_val), low, max_val)


# ----- backwards --------------------------------------------------------------------


def _sigmoid_backward(xp: Any, ctx: Any, g: Any, out: Any) -> tuple:
    return (g * (1 - out) * out,)


def _silu_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    s = xp.sigmoid(x)
    return (g * s * (1 + x * (1 - s)),)


def _elu_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    alpha = ctx.params["alpha"]
    return (xp.where(x <= 0, g * alpha * xp.exp(x), g),)  # elu'(0) = alpha


def _hardtanh_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    outside = (x <= ctx.params["min_val"]) | (x >= ctx.params["max_val"])
    return (xp.where(outside, 0.0, g),)  # exclusive bounds; NaN passes g (PyTorch)


def _hardsigmoid_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (xp.where((x > -3) & (x < 3), g / 6, 0.0),)  # exclusive, selected (PyTorch)


def _hardswish_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    # PyTorch's measured edges: 0 at x <= -3, g at x >= 3 (1, not 1.5, at x == 3)
    return (xp.where(x <= -3, 0.0, xp.where(x < 3, g * (x / 3 + 0.5), g)),)


def _threshold_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (xp.where(x <= ctx.params["threshold"], 0.0, g),)  # threshold_backward: NaN gets g


def _gelu_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    # PyTorch's GeluBackward: the derivative first, then one product with g, so an
    # infinite g gives ±inf, not inf - inf (as the product rule of x * Phi(x) would);
    # float16 computes in float32 as PyTorch's half kernels do (x^2 overflows float16 at
    # |x| > 256, and the tanh form's 0 * inf would be NaN)
    dtype = ctx.input_metadata[0][1]
    if dtype == np.float16:
        (grad,) = _gelu_derivative_times(xp, ctx, xp.cast(g, np.float32), xp.cast(x, np.float32))
        return (xp.cast(grad, np.float16),)
    return _gelu_derivative_times(xp, ctx, g, x)


def _gelu_derivative_times(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    if ctx.params["approximate"] == "tanh":
        inner = SQRT_2_OVER_PI * (x + GELU_KAPPA * (x * x * x))
        t = xp.tanh(inner)
        left = 0.5 * x
        right = 1 + t
        right_derivative = left * (1 - t * t) * (SQRT_2_OVER_PI * (1 + 3 * GELU_KAPPA * (x * x)))
        return (g * (0.5 * right + right_derivative),)
    cdf = 0.5 * (1 + xp.erf(x * SQRT_HALF))
    pdf = INV_SQRT_2PI * xp.exp(x * x * -0.5)
    return (g * (cdf + x * pdf),)


def _logsigmoid_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    # PyTorch's log_sigmoid_backward: (1 - z/(1+z)) below 0, z/(1+z) from 0 on, z = e^-|x|;
    # the derivative first, then g (no inf - inf for an infinite g)
    z = xp.exp(-xp.abs(x))
    share = z / (1 + z)
    return (xp.where(x < 0, 1 - share, share) * g,)


def _mish_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    t = xp.tanh(xp.log1p(xp.exp(x)))  # one factor, as PyTorch's mish_backward (no inf - inf)
    return (g * (t + x * xp.sigmoid(x) * (1 - t * t)),)


# ----- checks -----------------------------------------------------------------------


def _hardtanh_bounds(input: Tensor, min_val: Any, max_val: Any) -> dict[str, Any]:
    if input._data.dtype.kind == "b":
        raise RuntimeError("Bool inputs not supported for hardtanh; convert first, e.g. t.int()")
    if min_val > max_val:
        raise ValueError(f"min_val cannot be greater than max_val (got min_val={min_val}, "
                         f"max_val={max_val})")
    if input._data.dtype.kind != "f":
        min_val, max_val = int(min_val), int(max_val)
    return {"min_val": min_val, "max_val": max_val}


def _gelu_approximate(input: Tensor, approximate: str) -> None:
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh. Got "
                           f"{approximate!r}")


def _refuse_bool_threshold(input: Tensor, threshold: Any, value: Any) -> None:
    if input._data.dtype.kind == "b":
        raise not_implemented_for("threshold_cpu", input._data.dtype)


# ----- ops with their own backward (Note [Declaring an op once] in declare.py) ----------
# Written as composites of other ops these would leave PyTorch's results at edges
# (measured): silu's and mish's gradients below x = -88 in float32 (exp overflows, 0 * inf),
# elu's below x = -20 (expm1' computed as out + 1 loses e^x), hardsigmoid's at NaN and
# just below 3 (x + 3 rounds to 6), hardswish's just below 3.

sigmoid = pointwise_op(
    "sigmoid", sigmoid_forward, _sigmoid_backward, saves=("out",), source="s' = s (1 - s)",
    scalar=lambda s, x: s.sigmoid(x), to_float=True, inplace=True,
    doc="1 / (1 + exp(-x)), without overflow; integers give the default float dtype.\n\n"
        "Saves its output (modifying it in place before backward raises, as PyTorch).",
    nn=NNForm("Sigmoid"))
silu = pointwise_op(
    "silu", lambda x: x / (1 + np.exp(-x)), _silu_backward, saves=X,
    source="Elfwing et al. 2017: s (1 + x (1 - s))", scalar=lambda s, x: x / (1 + s.exp(-x)),
    require_float="silu_cpu", method=False,
    doc="x * sigmoid(x) (swish); silu'(0) = 0.5. Raises NotImplementedError for integers.",
    nn=NNForm("SiLU", inplace=True))
def _leaky_relu_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (xp.where(x > 0, g, g * ctx.params["negative_slope"]),)  # slope at 0


# a primitive, not where(x > 0, x, slope * x): PyTorch's gradient is leaky_relu_backward of
# (grad, x), so under create_graph it is connected to x (Note [Selecting backwards])
leaky_relu = pointwise_op(
    "leaky_relu", lambda x, negative_slope: np.where(x > 0, x, x * negative_slope),
    _leaky_relu_backward, saves=X, source="1 above 0, negative_slope at and below 0",
    params={"negative_slope": 0.01},
    scalar=lambda s, x, negative_slope: s.where(x > 0, x, x * negative_slope),
    require_float="leaky_relu_cpu", method=False,
    doc="x for x > 0, negative_slope * x otherwise; the gradient at 0 is negative_slope.\n\n"
        "Raises NotImplementedError for integer tensors.",
    nn=NNForm("LeakyReLU", inplace=True, inplace_function=True))
elu = pointwise_op(
    "elu", lambda x, alpha: np.where(x > 0, x, alpha * np.expm1(x)), _elu_backward, saves=X,
    source="Clevert et al. 2015: alpha e^x below 0", params={"alpha": 1.0},
    scalar=lambda s, x, alpha: s.where(x > 0, x, alpha * s.expm1(x)),
    require_float="elu_cpu", method=False,
    doc="x for x > 0, alpha (exp(x) - 1) otherwise; elu'(0) = alpha.\n\n"
        "Raises NotImplementedError for integers.",
    nn=NNForm("ELU", inplace=True, inplace_function=True))
hardtanh = pointwise_op(
    "hardtanh", _hardtanh_forward, _hardtanh_backward, saves=X,
    source="1 strictly inside (min_val, max_val), 0 at and beyond the bounds",
    params={"min_val": -1.0, "max_val": 1.0}, check=_hardtanh_bounds, method=False,
    scalar=lambda s, x, min_val, max_val: s.minimum(s.maximum(x, min_val), max_val),
    scalar_kinds=ANY_KIND,
    doc="clamp(x, min_val, max_val), but with gradient 0 at the bounds (exclusive).\n\n"
        "Integer tensors stay integer (bounds truncated). Raises ValueError if min_val > "
        "max_val.",
    nn=NNForm("Hardtanh", inplace=True, inplace_function=True))
hardsigmoid = pointwise_op(
    "hardsigmoid", lambda x: np.minimum(np.maximum(x + 3, 0), 6) / 6, _hardsigmoid_backward,
    saves=X, source="Howard et al. 2019 (MobileNetV3): relu6(x + 3) / 6",
    scalar=lambda s, x: s.minimum(s.maximum(x + 3, 0), 6) / 6,
    require_float="hardsigmoid_cpu", method=False, export=False,
    doc="relu6(x + 3) / 6; gradient 1/6 strictly inside (-3, 3), else 0.\n\n"
        "Raises NotImplementedError for integers.",
    nn=NNForm("Hardsigmoid", inplace=True, extra_repr="none"))
hardswish = pointwise_op(
    "hardswish", lambda x: x * np.minimum(np.maximum(x + 3, 0), 6) / 6, _hardswish_backward,
    saves=X, source="Howard et al. 2019: x relu6(x + 3) / 6; PyTorch's edges",
    scalar=lambda s, x: x * s.minimum(s.maximum(x + 3, 0), 6) / 6,
    require_float="hardswish_cpu", method=False, export=False,
    doc="x relu6(x + 3) / 6; gradient x/3 + 1/2 inside (-3, 3), 0 below, 1 from 3 on.\n\n"
        "Raises NotImplementedError for integers.",
    nn=NNForm("Hardswish", inplace=True, extra_repr="none"))
threshold = pointwise_op(
    "threshold", lambda x, threshold, value: np.where(
        x <= threshold, np.asarray(value).astype(x.dtype), x), _threshold_backward, saves=X,
    source="0 where x <= threshold, else g", params={"threshold": REQUIRED, "value": REQUIRED},
    check=_refuse_bool_threshold, method=False, scalar_kinds=ANY_KIND,
    scalar=lambda s, x, threshold, value: s.where(x <= threshold, value, x),
    doc="`value` (cast to x's dtype) where x <= threshold, else x (NaN stays NaN); gradient "
        "0 where x <= threshold, else g.\n\nRaises NotImplementedError for bool tensors.",
    nn=NNForm("Threshold", inplace=True, inplace_function=True))
gelu = pointwise_op(
    "gelu", _gelu_forward, _gelu_backward, saves=X, params={"approximate": "none"},
    source="Hendrycks & Gimpel 2016: Phi(x) + x phi(x) (tanh form: its derivative)",
    scalar=_gelu_scalar, require_float="GeluKernelImpl", check=_gelu_approximate,
    method=False, export=False,
    doc="x Phi(x) with Phi the normal CDF (erf form), or its tanh approximation.\n\n"
        "approximate: \"none\" (default, exact) or \"tanh\". gelu'(0) = 0.5. Raises "
        "RuntimeError for another approximate, NotImplementedError for integers.",
    nn=NNForm("GELU"))
logsigmoid = pointwise_op(
    "logsigmoid", _logsigmoid_forward, _logsigmoid_backward, saves=X,
    source="log sigmoid(x)' = 1 - sigmoid(x)",
    scalar=lambda s, x: s.minimum(x, 0) - s.log1p(s.exp(-s.abs(x))),
    require_float="log_sigmoid_cpu", method=False, export=False, node_name="LogSigmoid",
    doc="log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), finite for any finite x.\n\n"
        "Gradient 1/2 at 0, as PyTorch's. Raises NotImplementedError for integers.",
    nn=NNForm("LogSigmoid"))
mish = pointwise_op(
    "mish", lambda x: x * np.tanh(np.log1p(np.exp(x))), _mish_backward, saves=X,
    source="Misra 2019: x tanh(softplus(x))", scalar=lambda s, x: x * s.tanh(s.log1p(s.exp(x))),
    require_float="mish_cpu", method=False, export=False,
    doc="x tanh(softplus(x)). Raises NotImplementedError for integers.",
    nn=NNForm("Mish", inplace=True))


# ----- composites: gradients and kernels come from the ops they are made of --------------
# At edge values (±0, ±inf, NaN, subnormals, the thresholds) their values and gradients
# are PyTorch's, up to rounding elsewhere (tests/nn/test_activation_edges.py).


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold.

    Gradient sigmoid(beta x), exactly 1 in the linear region: there exp reads 0 (the
    inner `where`), so no inf reaches the gradient of the branch not taken.
    Raises NotImplementedError for integers.
    """
    _require_float(input, "softplus_cpu")
    scaled = input * beta
    linear = scaled > threshold
    return where(linear, input, log1p(exp(where(linear, 0.0, scaled))) / beta)


def relu6(input: Tensor) -> Tensor:
    """min(max(x, 0), 6): hardtanh(x, 0, 6), gradient 0 at 0 and 6."""
    return hardtanh(input, 0.0, 6.0)


def selu(input: Tensor) -> Tensor:
    """scale * elu(x, alpha) with Klambauer et al.'s constants; NotImplementedError for ints."""
    return elu(input, SELU_ALPHA) * SELU_SCALE


def celu(input: Tensor, alpha: float = 1.0) -> Tensor:
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1)). Raises RuntimeError for alpha == 0."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: celu's alpha must not be 0")
    return elu(input / alpha) * alpha


def softsign(input: Tensor) -> Tensor:
    """x / (1 + |x|), as PyTorch's own composite."""
    return input / (pointwise.abs(input) + 1)


def tanhshrink(input: Tensor) -> Tensor:
    """x - tanh(x), as PyTorch's own composite."""
    return input - tanh(input)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """0 where -lambd <= x <= lambd, else x (NaN stays NaN; gradient selected likewise)."""
    _require_float(input, "hardshrink_cpu")
    return where((input >= -lambd) & (input <= lambd), 0.0, input)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd above lambd, x + lambd below -lambd, else 0.

    Raises RuntimeError for a negative lambd, NotImplementedError for integers.
    """
    _require_float(input, "softshrink_check")
    if lambd < 0:
        raise RuntimeError(f"lambda must be in range [0, inf) for input dtype {input.dtype}, "
                           f"but found {lambd}")
    inside = (input >= -lambd) & (input <= lambd)  # NaN is outside: it stays NaN
    return where(inside, 0.0, where(input > lambd, input - lambd, input + lambd))


# ----- nn exposure of the composites (the declared ops state theirs with `nn=`) ------------
# selu and celu, written in place, read a copy of the old value: their inner ops save what
# they read (Note [Saving the old self] in inplace.py covers only the op that writes).

for _function, _form in (
        (relu, NNForm("ReLU", inplace=True, inplace_function=True)),
        (relu6, NNForm("ReLU6", inplace=True)),
        (softplus, NNForm("Softplus")),
        (tanh, NNForm("Tanh")),
        (selu, NNForm("SELU", inplace=True, inplace_function=True, reads_copy=True)),
        (celu, NNForm("CELU", inplace=True, inplace_function=True, reads_copy=True)),
        (softsign, NNForm("Softsign")),
        (tanhshrink, NNForm("Tanhshrink")),
        (hardshrink, NNForm("Hardshrink", extra_repr="value")),
        (softshrink, NNForm("Softshrink", extra_repr="value"))):
    nn_form(_function, _form)


__all__ = ["relu", "gelu", "softplus", "logsigmoid", "relu6",
           *exported(__name__)]

METHODS: dict[str, Any] = {}  # Tensor.relu comes with relu from pointwise.py, sigmoid declared
