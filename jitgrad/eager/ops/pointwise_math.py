"""More of PyTorch's pointwise math: hyperbolic and inverse trigonometric functions,
exp2/erfc/erfinv, the gamma family, sinc, logit, degree conversions, sign bits, and the
binary copysign, hypot, logaddexp(2), xlogy, fmax/fmin, heaviside, float_power, ldexp,
nextafter.

Dtypes as PyTorch: the unary math promotes integer and bool inputs to the default float
dtype; fmax/fmin/heaviside keep integer dtypes. Gradients are PyTorch's formulas
(tools/autograd/derivatives.yaml), including where it selects rather than multiplies
(sinc at 0, logit outside [eps, 1 - eps], fmax/fmin ties going to `input`) and where it
defines none (heaviside, nextafter, frexp: outputs that do not require grad or raise).
Values at edges are scipy's, which agree with PyTorch's (digamma(0) = -inf, digamma(-0.0)
= inf, lgamma of a non-positive integer = inf, erfinv(1) = inf, xlogy(0, nan) = nan).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from jitgrad.eager import dtypes
from jitgrad.eager.ops import pointwise
from jitgrad.eager.ops._binary import as_tensor_operand, binary, result_dtype, unary
from jitgrad.eager.ops.declare import binary_op, exported, pointwise_op
from jitgrad.eager.ops.inplace import apply_inplace
from jitgrad.eager.ops.pointwise import log_of_scalar, not_implemented_for, require_tensor, sign
from jitgrad.eager.ops.registry import ANY_KIND, register
from jitgrad.eager.ops.sorting import return_type
from jitgrad.eager.tensor import Tensor

X = ("x",)
AB = ("a", "b")
LN2 = math.log(2.0)


def _same_dtype(ufunc: Any) -> Any:
    """A scipy/numpy function returning the input's dtype (scipy may widen float16/32)."""
    def forward(x: np.ndarray, *args: Any) -> np.ndarray:
        out = np.asarray(ufunc(*args, x))
        return out if out.dtype == x.dtype else out.astype(x.dtype)
    return forward


# ----- unary backward formulas (see the module docstring for their source) --------------

def _sinh_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g * xp.cosh(x),)


def _cosh_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g * xp.sinh(x),)


def _asinh_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g / xp.sqrt(x * x + 1),)


def _acosh_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g / xp.sqrt(x * x - 1),)


def _atanh_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g / (1 - x * x),)


def _asin_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g / xp.sqrt(1 - x * x),)


def _acos_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (-g / xp.sqrt(1 - x * x),)


def _atan_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g / (x * x + 1),)


def _exp2_backward(xp: Any, ctx: Any, g: Any, out: Any) -> tuple:
    return (g * (out * LN2),)


def _erfc_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g * (-2 / math.sqrt(math.pi)) * xp.exp(-(x * x)),)


def _erfinv_backward(xp: Any, ctx: Any, g: Any, out: Any) -> tuple:
    return (g * (math.sqrt(math.pi) / 2) * xp.exp(out * out),)


def _lgamma_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g * xp.digamma(x),)


def _digamma_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g * xp.polygamma(1, x),)


def _polygamma_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g * xp.polygamma(ctx.params["n"] + 1, x),)


def _i0_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g * xp.i1(x),)


def _i1_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    # i1'(x) = i0(x) - i1(x) / x, with the limit 1/2 at 0 (selected: no 0/0)
    at_zero = x == 0
    safe = xp.where(at_zero, 1.0, x)
    return (xp.where(at_zero, g * 0.5, g * (xp.i0(x) - xp.i1(x) / safe)),)


def _sinc_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    pi_x = x * math.pi
    grad = g * (pi_x * xp.cos(pi_x) - xp.sin(pi_x)) / (pi_x * x)
    return (xp.where(x == 0, 0.0, grad),)  # sinc'(0) = 0, selected as PyTorch


def _logit_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    eps = ctx.params["eps"]
    grad = g / (x * (1 - x))
    if eps is None:  # PyTorch's logit_backward: NaN outside [0, 1]
        return (xp.where((x < 0) | (x > 1), math.nan, grad),)
    return (xp.where((x >= eps) & (x <= 1 - eps), grad, 0.0),)  # clamped region (NaN too): 0


def _angle_forward(x: np.ndarray) -> np.ndarray:
    # the argument of a real number: pi below 0, else 0; NaN stays NaN
    return np.where(x < 0, x.dtype.type(math.pi), np.where(x != x, x, x.dtype.type(0)))


def _scale_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (g * ctx.params["scale"],)


def _logit_forward(x: np.ndarray, eps: float | None) -> np.ndarray:
    if eps is not None:
        x = np.clip(x, eps, 1 - eps)
    return np.log(x / (1 - x))


def _float_math(name: str, forward: Any, backward: Any, saves: tuple[str, ...], source: str,
                doc: str, scalar: bool = False, aliases: tuple[str, ...] = ()) -> Any:
    """A unary function computing integers in the default float dtype; `scalar`: the kernel
    has a math function of the same name (Note [Declaring an op once] in declare.py)."""
    return pointwise_op(name, forward, backward, saves=saves, source=source, to_float=True,
                     scalar=(lambda s, x: getattr(s, name)(x)) if scalar else None,
                     inplace=True, aliases=aliases, doc=doc)


OUT = ("out",)
sinh = _float_math("sinh", np.sinh, _sinh_backward, X, "sinh' = cosh",
                   "Hyperbolic sine; integers give the default float dtype.", scalar=True)
cosh = _float_math("cosh", np.cosh, _cosh_backward, X, "cosh' = sinh",
                   "Hyperbolic cosine; integers give the default float dtype.", scalar=True)
asinh = _float_math("asinh", np.arcsinh, _asinh_backward, X, "asinh' = 1/sqrt(x^2 + 1)",
                    "Inverse hyperbolic sine.", scalar=True, aliases=("arcsinh",))
acosh = _float_math("acosh", np.arccosh, _acosh_backward, X, "acosh' = 1/sqrt(x^2 - 1)",
                    "Inverse hyperbolic cosine; NaN below 1, gradient inf at 1.", scalar=True,
                    aliases=("arccosh",))
atanh = _float_math("atanh", np.arctanh, _atanh_backward, X, "atanh' = 1/(1 - x^2)",
                    "Inverse hyperbolic tangent; +-inf at +-1, NaN beyond.", scalar=True,
                    aliases=("arctanh",))
asin = _float_math("asin", np.arcsin, _asin_backward, X, "asin' = 1/sqrt(1 - x^2)",
                   "Inverse sine (radians); NaN outside [-1, 1].", scalar=True,
                   aliases=("arcsin",))
acos = _float_math("acos", np.arccos, _acos_backward, X, "acos' = -1/sqrt(1 - x^2)",
                   "Inverse cosine (radians); NaN outside [-1, 1].", scalar=True,
                   aliases=("arccos",))
atan = _float_math("atan", np.arctan, _atan_backward, X, "atan' = 1/(1 + x^2)",
                   "Inverse tangent (radians).", scalar=True, aliases=("arctan",))
arcsinh, arccosh, arctanh, arcsin, arccos, arctan = asinh, acosh, atanh, asin, acos, atan
exp2 = _float_math("exp2", np.exp2, _exp2_backward, OUT, "d/dx 2^x = 2^x ln 2",
                   "2 ** x; integers give the default float dtype.")
erfc = _float_math("erfc", _same_dtype(special.erfc), _erfc_backward, X,
                   "erfc' = -2/sqrt(pi) exp(-x^2)",
                   "Complementary error function 1 - erf(x), accurate for large x.", scalar=True)
erfinv = _float_math("erfinv", _same_dtype(special.erfinv), _erfinv_backward, OUT,
                     "erfinv' = sqrt(pi)/2 exp(erfinv(x)^2)",
                     "Inverse error function on [-1, 1] (+-inf at +-1, NaN beyond).")
lgamma = _float_math("lgamma", _same_dtype(special.gammaln), _lgamma_backward, X,
                     "d/dx ln|Gamma(x)| = digamma(x)",
                     "ln|Gamma(x)|; inf at non-positive integers. Gradient: digamma(x).")
digamma = _float_math("digamma", _same_dtype(special.digamma), _digamma_backward, X,
                      "digamma' = polygamma(1, x)",
                      "d/dx ln Gamma(x); -inf at 0, +inf at -0.0, NaN at negative integers "
                      "(as PyTorch).")
POLYGAMMA = register("polygamma", lambda x, n: _same_dtype(special.polygamma)(x, n),
                     _polygamma_backward, inputs=X, saves=X,
                     source="polygamma(n)' = polygamma(n + 1)", elementwise=True)
i0 = _float_math("i0", _same_dtype(special.i0), _i0_backward, X, "I0' = I1 (modified Bessel)",
                 "Modified Bessel function of the first kind, order 0.")
i1 = pointwise_op("i1", _same_dtype(special.i1), _i1_backward, saves=X,
               source="I1' = I0 - I1/x, 1/2 at 0", to_float=True, method=False, export=False,
               doc="Modified Bessel function of the first kind, order 1 (`torch.special.i1`).")
sinc = _float_math("sinc", np.sinc, _sinc_backward, X,
                   "d/dx sin(pi x)/(pi x) = (pi x cos(pi x) - sin(pi x))/(pi x^2), 0 at 0",
                   "Normalized sinc sin(pi x) / (pi x), 1 at 0; gradient 0 at 0.")
logit = pointwise_op(
    "logit", _logit_forward, _logit_backward, saves=X,
    source="logit' = 1/(x (1 - x)); 0 where eps clamps x", to_float=True, inplace=True,
    params={"eps": None}, check=lambda x, eps: {"eps": None if eps is None else float(eps)},
    doc="log(x / (1 - x)); with eps, x is first clamped to [eps, 1 - eps] (gradient 0 there).")
SCALE = register("scale", lambda x, scale: x * x.dtype.type(scale), _scale_backward,
                 inputs=X, source="linear: d(c x) = c dx",
                 scalar=lambda s, x, scale: x * scale)
signbit = pointwise_op(
    "signbit", np.signbit, source="no derivative",
    doc="Whether the sign bit is set (True for -0.0 and negative values); bool, no gradient.")
angle = pointwise_op(
    "angle", _angle_forward, lambda xp, ctx, g: (xp.zeros_like(g),), to_float=True,
    source="piecewise constant for real inputs: zero gradient",
    doc="The argument of each (real) element: pi where negative, else 0; a float result.")


def _float_unary(op: Any, input: Any, **params: Any) -> Tensor:
    return unary(op, input, to_float=True, **params)


def polygamma(n: int, input: Tensor) -> Tensor:
    """The n-th derivative of digamma (polygamma(0, x) = digamma(x)).

    Raises RuntimeError for a negative n.
    """
    if n < 0:
        raise RuntimeError(f"polygamma(n, x) does not support negative n (got n={n})")
    return _float_unary(POLYGAMMA, input, n=int(n))


def deg2rad(input: Tensor) -> Tensor:
    """Degrees to radians (x * pi / 180); integers give the default float dtype."""
    return _float_unary(SCALE, input, scale=math.pi / 180)


def rad2deg(input: Tensor) -> Tensor:
    """Radians to degrees (x * 180 / pi); integers give the default float dtype."""
    return _float_unary(SCALE, input, scale=180 / math.pi)


def sgn(input: Tensor) -> Tensor:
    """sign(input) for real tensors (bool stays bool); zero gradient."""
    return sign(input)


def mvlgamma(input: Tensor, p: int) -> Tensor:
    """Multivariate log-gamma of dimension p: p(p-1)/4 ln(pi) + sum_i lgamma(x - i/2).

    Raises RuntimeError for p < 1.
    """
    if p < 1:
        raise RuntimeError(f"p has to be greater than or equal to 1 (got p={p})")
    total = lgamma(input)
    for i in range(1, p):
        total = total + lgamma(input - i / 2)
    return total + p * (p - 1) / 4 * math.log(math.pi)


def positive(input: Tensor) -> Tensor:
    """`+input`: the input itself. Raises RuntimeError for bool tensors (as PyTorch)."""
    if input._data.dtype.kind == "b":
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


# ----- binary --------------------------------------------------------------------------

def _copysign_backward(xp: Any, ctx: Any, g: Any, a: Any, out: Any) -> tuple:
    need_a, need_b = ctx.needs_input_grad
    grad_a = None
    if need_a:  # out / a, 0 where a == 0 (PyTorch's copysign_tensor_self_backward)
        grad_a = g * xp.where(a == 0, 0.0, out / xp.where(a == 0, 1.0, a))
    return grad_a, (xp.zeros_like(g) if need_b else None)


def _hypot_backward(xp: Any, ctx: Any, g: Any, a: Any, b: Any, out: Any) -> tuple:
    need_a, need_b = ctx.needs_input_grad
    return (g * a / out if need_a else None), (g * b / out if need_b else None)


def _logaddexp_backward(xp: Any, ctx: Any, g: Any, a: Any, b: Any) -> tuple:
    need_a, need_b = ctx.needs_input_grad
    return ((g / (1 + xp.exp(b - a)) if need_a else None),
            (g / (1 + xp.exp(a - b)) if need_b else None))


def _logaddexp2_backward(xp: Any, ctx: Any, g: Any, a: Any, b: Any) -> tuple:
    need_a, need_b = ctx.needs_input_grad
    return ((g / (1 + xp.exp((b - a) * LN2)) if need_a else None),
            (g / (1 + xp.exp((a - b) * LN2)) if need_b else None))


def _xlogy_backward(xp: Any, ctx: Any, g: Any, a: Any, b: Any) -> tuple:
    need_a, need_b = ctx.needs_input_grad
    grad_a = grad_b = None
    if need_a:  # xlogy(g, b), 0 where a == 0 and b <= 0 (PyTorch)
        log_b = log_of_scalar(b) if isinstance(b, (int, float)) else xp.log(b)
        grad_a = xp.where(g == 0, 0.0, g * log_b)
        grad_a = xp.where((a == 0) & (b <= 0), 0.0, grad_a)
    if need_b:
        grad_b = g * a / b
    return grad_a, grad_b


def _fmax_backward(xp: Any, ctx: Any, g: Any, a: Any, b: Any) -> tuple:
    need_a, need_b = ctx.needs_input_grad
    to_a = (a >= b) | (b != b)  # ties and a NaN `other` give input all of g (PyTorch)
    return ((xp.where(to_a, g, 0.0) if need_a else None),
            (xp.where(to_a, 0.0, g) if need_b else None))


def _fmin_backward(xp: Any, ctx: Any, g: Any, a: Any, b: Any) -> tuple:
    need_a, need_b = ctx.needs_input_grad
    to_a = (a <= b) | (b != b)
    return ((xp.where(to_a, g, 0.0) if need_a else None),
            (xp.where(to_a, 0.0, g) if need_b else None))


def _igamma_backward(xp: Any, ctx: Any, g: Any, a: Any, x: Any) -> tuple:
    """d/dx P(a, x) = x^(a-1) e^(-x) / Gamma(a) (Q = 1 - P: negated); PyTorch defines no
    derivative for a."""
    need_a, need_x = ctx.needs_input_grad
    if need_a:
        raise NotImplementedError(f"the derivative for '{ctx.op.name}: input' is not "
                                  "implemented; detach the first argument")
    density = xp.exp((a - 1) * xp.log(x) - x - xp.lgamma(a))
    return None, g * density * ctx.params["sign"]


def _heaviside_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    raise RuntimeError("derivative for aten::heaviside is not implemented (heaviside is "
                       "piecewise constant; detach its inputs)")


def _nextafter_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    need_a, need_b = ctx.needs_input_grad
    return (g if need_a else None), (xp.zeros_like(g) if need_b else None)


def _xlogy_forward(a: Any, b: Any) -> np.ndarray:
    # scipy widens a Python-number operand to float64; keep the promoted tensor dtype
    out = np.asarray(special.xlogy(a, b))
    dtype = a.dtype if hasattr(a, "dtype") else b.dtype
    return out if out.dtype == dtype else out.astype(dtype)


def _heaviside_forward(input: np.ndarray, values: np.ndarray) -> np.ndarray:
    # numpy's heaviside has float loops only; PyTorch keeps the (shared) input dtype
    return np.asarray(np.heaviside(input, values)).astype(input.dtype, copy=False)


def _same_dtypes(input: Tensor, values: Tensor) -> None:
    if input._data.dtype != values._data.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes. "
                           "Convert one first, e.g. values.to(input.dtype)")


# ----- binary ops (Note [Declaring an op once] in declare.py) -----------------------------

copysign = binary_op(
    "copysign", np.copysign, _copysign_backward, saves=("a", "out"),
    source="d copysign(a, b)/da = copysign(a, b)/a (0 at a == 0); 0 for b",
    scalar=lambda s, a, b: s.copysign(a, b), numbers="other", to_float=True,
    doc="|input| with the sign of other (-0.0 counts as negative); a float result.")
hypot = binary_op(
    "hypot", np.hypot, _hypot_backward, saves=("a", "b", "out"),
    source="d sqrt(a^2 + b^2) = (a da + b db) / hypot", scalar=lambda s, a, b: s.hypot(a, b),
    to_float=True, require_float="hypot_cpu",
    doc="sqrt(input^2 + other^2) without overflow. Raises NotImplementedError for integers.")
logaddexp = binary_op(
    "logaddexp", np.logaddexp, _logaddexp_backward, saves=AB,
    source="d log(e^a + e^b)/da = 1/(1 + e^(b - a))", to_float=True,
    require_float="logaddexp_cpu",
    doc="log(exp(input) + exp(other)) without overflow. NotImplementedError for integers.")
logaddexp2 = binary_op(
    "logaddexp2", np.logaddexp2, _logaddexp2_backward, saves=AB,
    source="d log2(2^a + 2^b)/da = 1/(1 + 2^(b - a))", to_float=True,
    require_float="logaddexp2_cpu",
    doc="log2(2^input + 2^other) without overflow. NotImplementedError for integers.")
xlogy = binary_op(
    "xlogy", _xlogy_forward, _xlogy_backward, saves=AB,
    source="d a log b = log b da + a/b db; 0 where a == 0 and b <= 0", numbers="one",
    to_float=True,
    doc="input * log(other), and 0 where input == 0 (unless other is NaN); either may be a "
        "number, not both.")
fmax = binary_op(
    "fmax", np.fmax, _fmax_backward, saves=AB,
    source="g to the larger operand (input on ties), NaN operands ignored",
    scalar=lambda s, a, b: s.where((a >= b) | (b != b), a, b), scalar_kinds=ANY_KIND,
    doc="Elementwise maximum ignoring NaN (NaN only where both are NaN); keeps integer "
        "dtypes.")
fmin = binary_op(
    "fmin", np.fmin, _fmin_backward, saves=AB,
    source="g to the smaller operand (input on ties), NaN operands ignored",
    scalar=lambda s, a, b: s.where((a <= b) | (b != b), a, b), scalar_kinds=ANY_KIND,
    doc="Elementwise minimum ignoring NaN (NaN only where both are NaN).")
heaviside = binary_op(
    "heaviside", _heaviside_forward, _heaviside_backward, inputs=("input", "values"),
    source="PyTorch defines no derivative", operands=("input", "values"), check=_same_dtypes,
    doc="0 where input < 0, 1 where input > 0, `values` where input == 0.\n\n"
        "Raises RuntimeError when the dtypes differ (as PyTorch); backward raises RuntimeError.")
nextafter = binary_op(
    "nextafter", np.nextafter, _nextafter_backward,
    source="PyTorch's: g to input (a one-ulp step), 0 to other", require_float="nextafter_cpu",
    doc="The next representable value after input toward other (in input's float dtype).")

IGAMMA = register("igamma", lambda a, x, sign: special.gammainc(a, x), _igamma_backward,
                  inputs=AB, saves=AB, source="regularized lower incomplete gamma P(a, x)",
                  elementwise=True)
IGAMMAC = register("igammac", lambda a, x, sign: special.gammaincc(a, x), _igamma_backward,
                   inputs=AB, saves=AB, source="regularized upper incomplete gamma Q(a, x)",
                   elementwise=True)


def _refuse_integers(kernel: str, *operands: Any) -> None:
    rd = result_dtype(*[as_tensor_operand(x) for x in operands])
    if not rd.is_floating_point:
        raise not_implemented_for(kernel, rd)


def igamma(input: Tensor, other: Tensor) -> Tensor:
    """The regularized lower incomplete gamma function P(input, other).

    Gradient: to `other` only (backward for `input` raises NotImplementedError, as
    PyTorch). Raises NotImplementedError for integer tensors.
    """
    return _incomplete_gamma(IGAMMA, input, other, 1.0)


def igammac(input: Tensor, other: Tensor) -> Tensor:
    """The regularized upper incomplete gamma function Q(input, other) = 1 - P."""
    return _incomplete_gamma(IGAMMAC, input, other, -1.0)


def _incomplete_gamma(op: Any, input: Tensor, other: Tensor, sign: float) -> Tensor:
    require_tensor(op.name, input)
    require_tensor(op.name, other, "other", 2)
    _refuse_integers(f"{op.name}_cpu", input, other)
    return binary(op, input, other, sign=sign)


def float_power(input: Any, exponent: Any) -> Tensor:
    """input ** exponent computed in float64 (the result is float64, as PyTorch)."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError("float_power(): at least one of 'input' and 'exponent' must be a Tensor")
    return pointwise.pow(_as_float64(input), _as_float64(exponent))


def _as_float64(x: Any) -> Any:
    if isinstance(x, Tensor):
        return x.to(dtypes.float64)
    return float(x)


def float_power_(self: Tensor, exponent: Any) -> Tensor:
    """In-place float_power: only a float64 tensor can hold the float64 result (PyTorch).

    Raises RuntimeError for any other dtype.
    """
    if self._data.dtype != np.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {self.dtype} but the "
                           "operation's result requires dtype Double; use float_power()")
    return apply_inplace(self, lambda t: float_power(t, exponent))


def ldexp(input: Tensor, other: Tensor) -> Tensor:
    """input * 2 ** other; a float result (integers give the default float dtype).

    Raises TypeError for a number operand, NotImplementedError for a float input with a
    bool exponent (measured in PyTorch; an integer or bool input takes one).
    """
    require_tensor("ldexp", input)
    require_tensor("ldexp", other, "other", 2)
    if other._data.dtype.kind == "b" and input._data.dtype.kind == "f":
        raise not_implemented_for("pow", other._data.dtype)
    scale = pointwise.pow(2.0, as_tensor_operand(other))
    mantissa = input if input.dtype.is_floating_point else input.to(dtypes.get_default_dtype())
    return mantissa * scale


FrexpResult = return_type("frexp", ("mantissa", "exponent"))


def frexp(input: Tensor) -> tuple[Tensor, Tensor]:
    """(mantissa, exponent) with input = mantissa * 2 ** exponent, |mantissa| in [0.5, 1);
    exponent is int32. Raises RuntimeError for integer inputs (as PyTorch)."""
    if input._data.dtype.kind != "f":
        raise RuntimeError("torch.frexp() only supports floating-point dtypes; convert first, "
                           "e.g. t.float()")
    mantissa, exponent = np.frexp(input._data)
    return FrexpResult(Tensor._make(np.asarray(mantissa)),
                       Tensor._make(np.asarray(exponent, np.int32)))


__all__ = ["polygamma", "deg2rad", "rad2deg", "sgn", "positive", "float_power", "ldexp", "frexp",
           "igamma", "igammac", "mvlgamma", *exported(__name__)]

_SAME_NAME = ("deg2rad", "rad2deg", "sgn", "positive", "float_power", "ldexp", "frexp",
              "igamma", "igammac", "mvlgamma")
METHODS: dict[str, Any] = {name: globals()[name] for name in _SAME_NAME}
METHODS["polygamma"] = lambda self, n: polygamma(n, self)  # Tensor.polygamma(n)
METHODS["float_power_"] = float_power_
