"""Pointwise ops: arithmetic with broadcasting, division variants, pow, unary math.

Every op's derivative is the textbook one unless a source is given; edge conventions
(abs'(0)=0, pow's masked exponent gradient, zero gradients of rounding ops) are
PyTorch's, as measured in research/eager_autograd.md §2.2-2.3. Comparison-driven
selection (where, masked_fill, clamp, maximum/minimum) lives in `comparison.py`,
activations in `activation.py`, the rest of PyTorch's pointwise math (hyperbolic, inverse
trigonometric, gamma family, copysign, hypot, logaddexp, ...) in `pointwise_math.py`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from jitgrad.eager import dtypes
from jitgrad.eager.ops._binary import (  # noqa: F401  (dtype names re-exported)
    C_TYPE_NAMES,
    SCALAR_TYPE_NAMES,
    as_tensor_operand,
    binary,
    broadcast_error,
    cast_operands,
    fused_scale,
    not_implemented_for,
    require_tensor,
    result_dtype,
    scaled_number_overflows,
    unary,
)
from jitgrad.eager.ops.checks import check_values
from jitgrad.eager.ops.declare import exported, pointwise_op
from jitgrad.eager.ops.registry import ANY_KIND, apply_op, register
from jitgrad.eager.tensor import Tensor


def _zero_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    # piecewise-constant ops: zero gradients (not None), outputs still require grad
    zero = xp.zeros_like(g)
    return (zero,) * len(ctx.next_edges)


# ----- arithmetic -------------------------------------------------------------------


def _add_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return g, g


def _sub_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return g, (-g if ctx.needs_input_grad[1] else None)


def _mul_backward(xp: Any, ctx: Any, g: Any, a: Any, b: Any) -> tuple:
    need_a, need_b = ctx.needs_input_grad
    return (g * b if need_a else None), (g * a if need_b else None)


def _div_backward(xp: Any, ctx: Any, g: Any, a: Any, b: Any) -> tuple:
    need_a, need_b = ctx.needs_input_grad
    # PyTorch's div_tensor_other_backward, -g * ((a / b) / b): b * b would overflow (or
    # underflow) where the quotient does not
    return (g / b if need_a else None), (-g * ((a / b) / b) if need_b else None)


AB = ("a", "b")
ADD = register("add", np.add, _add_backward, inputs=AB, source="d(a+b) = da + db",
               scalar=lambda s, a, b: a + b, scalar_kinds=ANY_KIND)
SUB = register("sub", np.subtract, _sub_backward, inputs=AB, source="d(a-b) = da - db",
               scalar=lambda s, a, b: a - b, scalar_kinds=ANY_KIND)
MUL = register("mul", np.multiply, _mul_backward, inputs=AB, saves=AB,
               saved_for={"a": "b", "b": "a"}, source="product rule",
               scalar=lambda s, a, b: a * b, scalar_kinds=ANY_KIND)
DIV = register("div", np.true_divide, _div_backward, inputs=AB, saves=AB, saved_for={"a": "b"},
               source="quotient rule", scalar=lambda s, a, b: a / b)


def add(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """input + alpha * other, broadcasting. Raises RuntimeError on incompatible shapes."""
    if alpha != 1 and scaled_number_overflows(input, other, alpha):  # (add is hot)
        return binary(ADD, input.to(dtypes.float64), fused_scale(input, other, alpha)
                      ).to(input.dtype)
    return binary(ADD, input, _scaled(input, other, alpha))


def sub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """input - alpha * other, broadcasting.

    Raises RuntimeError when either operand is bool (a tensor or Python bool), as PyTorch:
    `1 - mask` is `~mask` or `logical_not(mask)`, `mask - mask` is `mask ^ mask`.
    """
    if _is_bool(input) or _is_bool(other):
        if _is_bool(input) and _is_bool(other):
            raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                               "supported. Use the `^` or `logical_xor()` operator instead.")
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. "
                           "If you are trying to invert a mask, use the `~` or `logical_not()` "
                           "operator instead.")
    if alpha != 1 and scaled_number_overflows(input, other, alpha):  # (add is hot)
        return binary(SUB, input.to(dtypes.float64), fused_scale(input, other, alpha)
                      ).to(input.dtype)
    return binary(SUB, input, _scaled(input, other, alpha))


def _scaled(input: Any, other: Any, alpha: Any) -> Any:
    """alpha * other for `input + alpha * other`; a Python number stays one (alpha does
    not change the result dtype: int tensor + 0.3 * 2 is float32, as in PyTorch).

    Raises RuntimeError for a float alpha with an integral result, or a bool alpha with a
    non-bool one (PyTorch's alpha_check).
    """
    if isinstance(alpha, (bool, float)) or alpha != 1:
        common = result_dtype(as_tensor_operand(input), as_tensor_operand(other))
        if isinstance(alpha, float) and not common.is_floating_point:
            raise RuntimeError("For integral input tensors, argument alpha must not be a "
                               "floating point number.")
        if isinstance(alpha, bool) and common is not dtypes.bool_:
            raise RuntimeError("Boolean alpha only supported for Boolean results.")
        if common is dtypes.bool_:  # alpha is cast to the result dtype: b + 2 * b is b | b
            alpha = bool(alpha)
            if not isinstance(other, Tensor):
                return bool(other) and alpha
            return other if alpha else mul(other, False)
    if alpha == 1:
        return other
    if isinstance(other, (int, float)):
        return other * alpha
    common = result_dtype(as_tensor_operand(input), other)
    if other.dtype != common:  # alpha * other is computed in the result dtype (PyTorch):
        other = other.to(common)  # float64 + 2 * float32(3e38) is 6e38, not inf
    return mul(other, alpha)


def _is_bool(x: Any) -> bool:
    return x.__class__ is bool or (isinstance(x, Tensor) and x._data.dtype.kind == "b")


def rsub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """other - alpha * input."""
    return sub(other, input, alpha=alpha)


def mul(input: Any, other: Any) -> Tensor:
    """Elementwise product with broadcasting."""
    return binary(MUL, input, other)


# ----- division with rounding, remainders -------------------------------------------


def _is_integral(*operands: Any) -> bool:
    """Whether PyTorch's result dtype of the operands is bool or integer."""
    return not result_dtype(*operands).is_floating_point


def refuse_bool(kernel: str, *operands: Any) -> None:
    """PyTorch's NotImplementedError when the op's result dtype would be bool (no bool kernel).

    `True // 2` promotes to int64 and is fine; `b // b`, `floor(b)`, `b ** b` are not.
    """
    if result_dtype(*operands) is dtypes.bool_:
        raise not_implemented_for(kernel, np.dtype(np.bool_))


_INTEGER_DIVISION_BY_ZERO = ("ZeroDivisionError: integer division by zero; check the divisor "
                             "or convert to float (float division by zero gives inf/nan)")


def _checked_integer_divisor(other: Any) -> Any:
    """`other` after refusing a zero: integer division by zero is an error in PyTorch (numpy
    returns 0 with a warning). In a compiled graph, checked when it runs."""
    if isinstance(other, Tensor):
        return check_values(other, reject="zero", error="RuntimeError",
                            message=_INTEGER_DIVISION_BY_ZERO)
    if other == 0:
        raise RuntimeError(_INTEGER_DIVISION_BY_ZERO)
    return other


def _div_rounding_forward(a: Any, b: Any, rounding_mode: str) -> np.ndarray:
    if rounding_mode == "floor":
        return np.floor_divide(a, b)
    if np.result_type(a, b).kind == "f":
        return np.trunc(np.true_divide(a, b))
    quotient = np.floor_divide(a, b)
    # floor and trunc differ by one where the quotient is negative and inexact
    return quotient + ((quotient < 0) & (quotient * b != a))


def _floor_divide_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    raise RuntimeError("derivative for aten::floor_divide is not implemented; use "
                       "div(a, b, rounding_mode='floor') (zero gradient) or true division")


def _remainder_backward(xp: Any, ctx: Any, g: Any, a: Any, b: Any) -> tuple:
    need_a, need_b = ctx.needs_input_grad
    return (g if need_a else None), (-g * xp.floor_divide(a, b) if need_b else None)


def _fmod_backward(xp: Any, ctx: Any, g: Any, a: Any, b: Any) -> tuple:
    need_a, need_b = ctx.needs_input_grad
    return (g if need_a else None), (-g * xp.trunc(a / b) if need_b else None)


DIV_ROUNDING = register("div_rounding", _div_rounding_forward, _zero_backward, inputs=AB,
                        source="floor/trunc are piecewise constant: zero gradient",
                        elementwise=True)
FLOOR_DIVIDE = register("floor_divide", np.floor_divide, _floor_divide_backward, inputs=AB,
                        source="PyTorch defines no derivative (raises in backward)",
                        elementwise=True)
REMAINDER = register("remainder", np.remainder, _remainder_backward, inputs=AB, saves=AB,
                     source="a - floor(a/b) b: d/da = 1, d/db = -floor(a/b)", elementwise=True)
FMOD = register("fmod", np.fmod, _fmod_backward, inputs=AB, saves=AB,
                source="a - trunc(a/b) b: d/da = 1, d/db = -trunc(a/b)", elementwise=True)


def div(input: Any, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    """input / other, broadcasting; integers give the default float dtype.

    rounding_mode: None (true division), "trunc" (round toward zero) or "floor"; both
    rounding modes keep integer dtypes and have zero gradients.
    Raises RuntimeError for another rounding_mode, or integer division by zero.
    """
    if rounding_mode is None:
        return binary(DIV, input, other, to_float=True)
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError("div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                           f"but found '{rounding_mode}'")
    return binary(DIV_ROUNDING, *_division_operands(f"div_{rounding_mode}_cpu", input, other),
                  rounding_mode=rounding_mode)


def floor_divide(input: Any, other: Any) -> Tensor:
    """floor(input / other) (the `//` operator), Python's rounding for negative values.

    Forward only: calling backward through it raises RuntimeError, as in PyTorch; use
    `div(..., rounding_mode="floor")` for a zero gradient. Integer division by zero raises.
    """
    return binary(FLOOR_DIVIDE, *_division_operands("div_floor_cpu", input, other))


def remainder(input: Any, other: Any) -> Tensor:
    """input - floor(input / other) * other: the result has the sign of `other` (Python's `%`).

    Raises RuntimeError for integer division by zero.
    """
    return binary(REMAINDER, *_division_operands("remainder_cpu", input, other))


def fmod(input: Any, other: Any) -> Tensor:
    """C's fmod: input - trunc(input / other) * other, with the sign of `input`.

    Raises TypeError when input is not a Tensor (PyTorch has no fmod(Number, Tensor)).
    """
    require_tensor("fmod", input)
    return binary(FMOD, *_division_operands("fmod_cpu", input, other))


def _division_operands(kernel: str, input: Any, other: Any) -> tuple[Any, Any]:
    """The operands of a rounding division (floor, trunc, remainder, fmod): refused for
    bool as PyTorch's `kernel` refuses them, and an integer divisor checked for zeros."""
    a, b = as_tensor_operand(input), as_tensor_operand(other)
    refuse_bool(kernel, a, b)
    if _is_integral(a, b):
        b = _checked_integer_divisor(b)
    return a, b


true_divide = divide = div
multiply = mul
subtract = sub

# ----- pow --------------------------------------------------------------------------


def _pow_scalar_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    exponent = ctx.params["exponent"]
    if exponent == 0:
        return (xp.zeros_like(g),)  # exactly 0, even where x**-1 would be inf
    power = 1 / xp.sqrt(x) if exponent == 0.5 else x ** (exponent - 1)  # x ** -0.5: rsqrt
    return (g * (exponent * power),)


def _pow_scalar_forward(x: Any, exponent: Any) -> Any:
    if exponent == -0.5 and x.dtype.kind == "f":
        return 1 / np.sqrt(x)  # PyTorch's pow kernel takes rsqrt: -inf at -0.0, as 1/sqrt
    # in the promoted dtype x already has: numpy's bool ** True would give int8
    out = x ** exponent
    return out if out.dtype == x.dtype else out.astype(x.dtype)


def _pow_tensor_forward(a: Any, b: Any) -> np.ndarray:
    try:
        return np.power(a, b)
    except ValueError:  # numpy refuses negative integer exponents; PyTorch truncates
        return _integer_pow_negative(np.asarray(a), np.asarray(b))


def _integer_pow_negative(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer a**b where some b < 0: 1 for a == 1, +-1 for a == -1, else 0 (as PyTorch)."""
    positive = np.power(a, np.maximum(b, 0))
    minus_one = np.where(b % 2 == 0, 1, -1)
    negative = np.where(a == 1, 1, np.where(a == -1, minus_one, 0))
    return np.where(b < 0, negative, positive).astype(positive.dtype)


def log_of_scalar(a: float) -> float:
    return math.log(a) if a > 0 else (-math.inf if a == 0 else math.nan)


def _pow_tensor_backward(xp: Any, ctx: Any, g: Any, a: Any, b: Any, out: Any) -> tuple:
    need_a, need_b = ctx.needs_input_grad
    grad_a = grad_b = None
    if need_a:  # b a^(b-1), exactly 0 where b == 0
        grad_a = xp.where(b == 0, 0.0, g * (b * a ** (b - 1)))
    if need_b:  # a^b ln a, masked to 0 where a == 0 and b >= 0 (0**0 = 1 and 0**2 = 0)
        if isinstance(a, (int, float)):
            log_a = log_of_scalar(a)
            grad_b = g * (xp.where(b >= 0, 0.0, out * log_a) if a == 0 else out * log_a)
        else:
            grad_b = g * xp.where((a == 0) & (b >= 0), 0.0, out * xp.log(a))
    return grad_a, grad_b


POW_SCALAR = register("pow", _pow_scalar_forward, _pow_scalar_backward, inputs=("x",),
                      saves=("x",), node_name="Pow",
                      source="d/dx x^c = c x^(c-1); 0 when c == 0 (PyTorch's pow_backward)",
                      scalar=lambda s, x, exponent: None if isinstance(exponent, bool)
                      else s.pow(x, exponent))
POW_TENSOR = register("pow_tensor", _pow_tensor_forward, _pow_tensor_backward, inputs=AB,
                      saves=("a", "b", "out"), node_name="PowTensor",
                      source="d a^b = b a^(b-1) da + a^b ln(a) db, masked as PyTorch's "
                             "pow_backward_self / pow_backward_exponent", elementwise=True)

ERR_NEGATIVE_INT_POWER = "Integers to negative integer powers are not allowed."


def pow(input: Any, exponent: Any) -> Tensor:  # noqa: A001 - PyTorch's name
    """input ** exponent with broadcasting; either side may be a Python number.

    Dtype: PyTorch's promotion (int tensor ** 2 stays int64, int ** 0.5 -> float32).
    Gradients: exactly 0 for a zero exponent; the exponent's gradient is 0 where
    input == 0 and exponent >= 0.
    Raises RuntimeError for an integer tensor to a negative integer Python power.
    """
    if isinstance(exponent, (int, float)) and isinstance(input, Tensor):
        rd = result_dtype(input, exponent)
        if not rd.is_floating_point and exponent < 0:
            raise RuntimeError(f"{ERR_NEGATIVE_INT_POWER} Got a {input.dtype} tensor to the "
                               f"power {exponent}; convert first, e.g. t.float() ** {exponent}")
        data = input._data
        if data.dtype != rd.np:
            data = data.astype(rd.np)
        return apply_op(POW_SCALAR, (input,), (data,), {"exponent": exponent})
    refuse_bool("pow", input, exponent)
    if isinstance(exponent, Tensor) and exponent._weak_scalar and \
            not result_dtype(input, exponent).is_floating_point:  # a compiler's Python int
        exponent = check_values(exponent, reject="negative", error="RuntimeError", message=(
            f"{ERR_NEGATIVE_INT_POWER} Got a {result_dtype(input, exponent)} tensor to the power "
            "{bad}; convert first, e.g. t.float() ** {bad}"))
    return binary(POW_TENSOR, input, exponent)


def square(input: Tensor) -> Tensor:
    """input * input as pow(input, 2) (PyTorch's definition: bool and int give int64)."""
    return pow(input, 2)


# ----- unary math -------------------------------------------------------------------


def _same_dtype(ufunc: Any) -> Any:
    """A scipy ufunc that returns the input's dtype (scipy computes float16 in float32+)."""
    def forward(x: np.ndarray) -> np.ndarray:
        out = ufunc(x)
        return out if out.dtype == x.dtype else out.astype(x.dtype)
    return forward


def _rounding(ufunc: Any) -> Any:
    """floor/ceil/trunc: integer and bool tensors are returned unchanged (as a copy)."""
    def forward(x: np.ndarray) -> np.ndarray:
        return ufunc(x) if x.dtype.kind == "f" else x.copy()
    return forward


def _sign_forward(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "b":
        return x.copy()
    out = np.sign(x, out=np.empty_like(x))  # out= keeps 0-d results arrays
    if x.dtype.kind == "f":
        out[np.isnan(out)] = 0  # sign(nan) = 0 in PyTorch (numpy gives nan)
    return out


def _round_forward(x: np.ndarray, decimals: int) -> np.ndarray:
    if x.dtype.kind != "f":
        return x.copy()
    return np.round(x, decimals)  # half to even, scaled by 10**decimals like PyTorch


def _neg_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (-g,)


def _abs_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g * xp.sign(x),)  # abs'(0) = 0


def _exp_backward(xp: Any, ctx: Any, g: Any, out: Any) -> tuple:
    return (g * out,)


def _expm1_backward(xp: Any, ctx: Any, g: Any, out: Any) -> tuple:
    return (g * (out + 1),)


def _log_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g / x,)


def _log2_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g / (x * math.log(2.0)),)


def _log10_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g / (x * math.log(10.0)),)


def _log1p_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g / (x + 1),)


def _sqrt_backward(xp: Any, ctx: Any, g: Any, out: Any) -> tuple:
    return (g / (2 * out),)  # sqrt'(0) = inf


def _rsqrt_backward(xp: Any, ctx: Any, g: Any, out: Any) -> tuple:
    return (-0.5 * g * (out * out * out),)


def _reciprocal_backward(xp: Any, ctx: Any, g: Any, out: Any) -> tuple:
    return (-g * (out * out),)


def _sin_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g * xp.cos(x),)


def _cos_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (-g * xp.sin(x),)


def _tan_backward(xp: Any, ctx: Any, g: Any, out: Any) -> tuple:
    return (g * (1 + out * out),)


def _tanh_backward(xp: Any, ctx: Any, g: Any, out: Any) -> tuple:
    return (g * (1 - out * out),)


def _erf_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g * (2 / math.sqrt(math.pi)) * xp.exp(-(x * x)),)


def _relu_backward(xp: Any, ctx: Any, g: Any, out: Any) -> tuple:
    # selected, not g * mask: an inf/NaN g stays off x <= 0; zero exactly where out <= 0, so
    # at a NaN g passes, as PyTorch's threshold_backward (relu'(0) = 0)
    return (xp.where(out <= 0, 0.0, g),)


def _frac_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (g,)


def _nan_to_num_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g * (xp.abs(x) < math.inf),)  # gradient only where x is finite


X = ("x",)
OUT = ("out",)


def _refuse_bool_negation(input: Any) -> None:
    if isinstance(input, Tensor) and input._data.dtype.kind == "b":
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you "
                           "are trying to invert a mask, use the `~` or `logical_not()` operator "
                           "instead.")


def _refuse_bool_relu(input: Any) -> None:
    if isinstance(input, Tensor) and input._data.dtype.kind == "b":
        raise RuntimeError("Boolean inputs not supported for relu; convert first, e.g. "
                           "t.int().relu()")


neg = pointwise_op("neg", np.negative, _neg_backward, source="d(-x) = -dx",
                scalar=lambda s, x: -x, scalar_kinds=ANY_KIND, check=_refuse_bool_negation,
                aliases=("negative",), inplace=True,
                doc="-input. Raises RuntimeError for bool tensors (as PyTorch, use logical_not).")
negative = neg
abs = pointwise_op(  # noqa: A001 - PyTorch's name
    "abs", np.abs, _abs_backward, saves=X, source="|x|' = sign(x), 0 at 0 (PyTorch)",
    scalar=lambda s, x: s.abs(x), scalar_kinds=ANY_KIND, refuse_bool="abs_cpu",
    aliases=("absolute",), inplace=True,
    doc="|input|, keeping the dtype; abs'(0) = 0. Raises NotImplementedError for bool.")
absolute = abs
sign = pointwise_op("sign", _sign_forward, _zero_backward, source="piecewise constant",
                 inplace=True,
                 doc="-1, 0 or 1 with the input's dtype; sign(nan) = 0 (PyTorch). Zero gradient.")
floor = pointwise_op(
    "floor", _rounding(np.floor), _zero_backward, source="piecewise constant",
    scalar=lambda s, x: s.floor(x) if s.is_float else x, scalar_kinds=ANY_KIND,
    refuse_bool="floor_vml_cpu", inplace=True,
    doc="Round down; integer tensors are returned as a copy. Zero gradient.\n\n"
        "Raises NotImplementedError for bool (as the other rounding ops, like PyTorch).")
ceil = pointwise_op(
    "ceil", _rounding(np.ceil), _zero_backward, source="piecewise constant",
    scalar=lambda s, x: s.ceil(x) if s.is_float else x, scalar_kinds=ANY_KIND,
    refuse_bool="ceil_vml_cpu", inplace=True,
    doc="Round up; integer tensors are returned as a copy. Zero gradient.")
trunc = pointwise_op(
    "trunc", _rounding(np.trunc), _zero_backward, source="piecewise constant",
    scalar=lambda s, x: s.trunc(x) if s.is_float else x, scalar_kinds=ANY_KIND,
    refuse_bool="trunc_vml_cpu", aliases=("fix",), inplace=True,
    doc="Round toward zero; integer tensors are returned as a copy. Zero gradient.")
fix = trunc
ROUND = register("round", _round_forward, _zero_backward, inputs=X, source="piecewise constant",
                 elementwise=True)


def round(input: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001 - PyTorch's name
    """Round half to even (2.5 -> 2), at `decimals` digits (negative rounds to tens, ...).

    Zero gradient. Raises NotImplementedError for integer tensors with decimals != 0.
    """
    if decimals != 0 and input._data.dtype.kind != "f":
        raise not_implemented_for("round_cpu", input._data.dtype)
    refuse_bool("round_vml_cpu", input)
    return unary(ROUND, input, decimals=int(decimals))


frac = pointwise_op(
    "frac", lambda x: x - np.trunc(x), _frac_backward, source="x - trunc(x): derivative 1",
    scalar=lambda s, x: x - s.trunc(x), require_float="frac_cpu", inplace=True,
    doc="input - trunc(input) (sign of the input). Raises NotImplementedError for integers.")


def _math(name: str, forward: Any, backward: Any, saves: tuple[str, ...], source: str,
          doc: str) -> Any:
    """A unary math function with a kernel math function of the same name (Note
    [Declaring an op once] in declare.py): integers compute in the default float dtype."""
    return pointwise_op(name, forward, backward, saves=saves, source=source, to_float=True,
                     scalar=lambda s, x: getattr(s, name)(x), inplace=True, doc=doc)


exp = _math("exp", np.exp, _exp_backward, OUT, "d/dx e^x = e^x",
            "e^x elementwise; integer inputs give the default float dtype.")
expm1 = _math("expm1", np.expm1, _expm1_backward, OUT, "d/dx (e^x - 1) = e^x",
              "e^x - 1, accurate near 0; integer inputs give the default float dtype.")
log = _math("log", np.log, _log_backward, X, "d/dx ln x = 1/x",
            "Natural logarithm; log(0) = -inf, negative inputs give NaN (as PyTorch).")
log2 = _math("log2", np.log2, _log2_backward, X, "d/dx log2 x = 1/(x ln 2)",
             "Base-2 logarithm; integer inputs give the default float dtype.")
log10 = _math("log10", np.log10, _log10_backward, X, "d/dx log10 x = 1/(x ln 10)",
              "Base-10 logarithm; integer inputs give the default float dtype.")
log1p = _math("log1p", np.log1p, _log1p_backward, X, "d/dx ln(1+x) = 1/(1+x)",
              "ln(1 + x), accurate near 0; integer inputs give the default float dtype.")
sqrt = _math("sqrt", np.sqrt, _sqrt_backward, OUT, "d/dx sqrt x = 1/(2 sqrt x)",
             "Square root; sqrt(-1) = nan and sqrt'(0) = inf (as PyTorch).")
rsqrt = _math("rsqrt", lambda x: 1 / np.sqrt(x), _rsqrt_backward, OUT,
              "d/dx x^(-1/2) = -x^(-3/2)/2", "1 / sqrt(x); rsqrt(0) = inf.")
reciprocal = pointwise_op(
    "reciprocal", lambda x: 1 / x, _reciprocal_backward, saves=OUT, source="d/dx 1/x = -1/x^2",
    scalar=lambda s, x: 1 / x, to_float=True, inplace=True,
    doc="1 / x; integer inputs give the default float dtype.")
sin = _math("sin", np.sin, _sin_backward, X, "sin' = cos",
            "Sine (radians); integers give the default float dtype.")
cos = _math("cos", np.cos, _cos_backward, X, "cos' = -sin",
            "Cosine (radians); integers give the default float dtype.")
tan = _math("tan", np.tan, _tan_backward, OUT, "tan' = 1 + tan^2",
            "Tangent (radians); tan'(x) = 1 + tan(x)^2 from the saved output.")
tanh = _math("tanh", np.tanh, _tanh_backward, OUT, "tanh' = 1 - tanh^2",
             "Hyperbolic tangent; saves its output (saturated inputs get gradient exactly 0).")
erf = _math("erf", _same_dtype(special.erf), _erf_backward, X, "erf'(x) = 2/sqrt(pi) exp(-x^2)",
            "The error function 2/sqrt(pi) * integral_0^x exp(-t^2) dt.")
def first_on_ties(out: Any, a: Any, b: Any) -> Any:
    """`out` (np.maximum or np.minimum of a and b) holding a wherever a == b, as PyTorch's
    maximum/minimum/clamp/relu: of -0.0 and 0.0 the first operand (numpy's choice among
    equal operands depends on its SIMD loop). Only float zeros can differ among ties."""
    if np.asarray(out).dtype.kind != "f":
        return out
    tie = np.equal(a, b)
    if not tie.any():
        return out
    if isinstance(out, np.ndarray) and out.ndim:
        np.copyto(out, a, where=tie, casting="unsafe")  # keeps out's layout
        return out
    return np.where(tie, a, out).astype(np.asarray(out).dtype)[()]


relu = pointwise_op(
    "relu", lambda x: first_on_ties(np.maximum(x, x.dtype.type(0)), x, 0), _relu_backward,
    saves=OUT, source="relu'(x) = [x > 0]", check=_refuse_bool_relu, inplace=True,
    scalar=lambda s, x: s.maximum(x, 0), scalar_kinds=ANY_KIND,  # NaN stays NaN, relu(-0.0) = -0.0
    doc="max(x, 0) elementwise (integer tensors allowed); relu'(0) = 0.\n\n"
        "Activations are in activation.py; relu lives here because nn.functional and the "
        "in-place variants import it from this module.\nRaises RuntimeError for bool tensors "
        "(as PyTorch).")
nan_to_num = pointwise_op(
    "nan_to_num", np.nan_to_num, _nan_to_num_backward, saves=X,
    source="identity where finite, constant elsewhere",
    params={"nan": 0.0, "posinf": None, "neginf": None}, inplace=True,
    doc="Replace NaN by `nan`, +-inf by `posinf`/`neginf` (default: the dtype's largest "
        "finite values). Gradient: passes where the input is finite, 0 where it was replaced.")


# ----- multi-operand math: atan2, lerp, addcmul, addcdiv ------------------------------


def apply_promoted(op: Any, operands: tuple, params: dict[str, Any]) -> Tensor:
    """Run `op` on operands promoted to PyTorch's common dtype (any number; None skipped).

    Raises RuntimeError when the shapes do not broadcast.
    """
    operands = tuple(x if x is None else as_tensor_operand(x) for x in operands)
    np_dtype = dtypes.numpy_dtype(result_dtype(*operands), op.name)
    return apply_broadcasting(op, operands, cast_operands(operands, np_dtype), params)


def apply_broadcasting(op: Any, inputs: tuple, arrays: tuple, params: dict[str, Any]) -> Tensor:
    """`apply_op` whose numpy broadcast failure becomes PyTorch's RuntimeError."""
    try:
        return apply_op(op, inputs, arrays, params)
    except ValueError as err:
        if "broadcast" not in str(err):
            raise
        raise broadcast_error(op.name, [x.shape for x in inputs if isinstance(x, Tensor)]) \
            from None


def _atan2_backward(xp: Any, ctx: Any, g: Any, a: Any, b: Any) -> tuple:
    need_a, need_b = ctx.needs_input_grad
    denominator = a * a + b * b
    reciprocal = xp.where(denominator == 0, 0.0, 1 / denominator)  # 0 grads at (0, 0)
    return (g * b * reciprocal if need_a else None), (g * -a * reciprocal if need_b else None)


def _lerp_forward(input: np.ndarray, end: np.ndarray, weight: Any) -> np.ndarray:
    # PyTorch's CPU kernel: fma(w, end - input, input) for |w| < 0.5, otherwise
    # fma(w - 1, end - input, end) (accurate near w = 1, pytorch#18871), computed in
    # float32 for float16/float32. The exact product of two float32 fits a float64, so
    # one float64 multiply-add then rounding reproduces the fma (optimizers rely on it).
    if input.dtype == np.float64:
        diff = end - input
        return np.where(np.abs(weight) < 0.5, input + weight * diff, end - diff * (1 - weight))
    start32, end32 = input.astype(np.float32, copy=False), end.astype(np.float32, copy=False)
    if not isinstance(weight, np.ndarray):  # a number: pick the branch once
        weight32 = np.float32(weight)
        if -0.5 < weight32 < 0.5:
            return (np.float64(weight32) * (end32 - start32) + start32).astype(input.dtype)
        coefficient = np.float64(weight32 - np.float32(1))
        return (coefficient * (end32 - start32) + end32).astype(input.dtype)
    weights32 = weight.astype(np.float32, copy=False)
    small = np.abs(weights32) < 0.5
    coefficients = np.where(small, weights32, weights32 - np.float32(1)).astype(np.float64)
    base = np.where(small, start32, end32)
    return (coefficients * (end32 - start32) + base).astype(input.dtype)


def _lerp_backward(xp: Any, ctx: Any, g: Any, input: Any, end: Any, weight: Any) -> tuple:
    need_input, need_end, need_weight = ctx.needs_input_grad
    return ((g * (1 - weight) if need_input else None), (g * weight if need_end else None),
            (g * (end - input) if need_weight else None))


def _addcmul_forward(input: np.ndarray, tensor1: np.ndarray, tensor2: np.ndarray,
                     value: Any) -> np.ndarray:
    if input.dtype == np.float32:  # PyTorch fuses: fma(value * t1, t2, input), see lerp
        return ((value * tensor1).astype(np.float64) * tensor2 + input).astype(np.float32)
    return input + value * tensor1 * tensor2


def _addcmul_backward(xp: Any, ctx: Any, g: Any, tensor1: Any, tensor2: Any) -> tuple:
    _, need1, need2 = ctx.needs_input_grad
    value = ctx.params["value"]
    return g, (g * tensor2 * value if need1 else None), (g * tensor1 * value if need2 else None)


def _addcdiv_backward(xp: Any, ctx: Any, g: Any, tensor1: Any, tensor2: Any) -> tuple:
    _, need1, need2 = ctx.needs_input_grad
    value = ctx.params["value"]
    return (g, (g * (value / tensor2) if need1 else None),
            (-g * value * tensor1 / (tensor2 * tensor2) if need2 else None))


ATAN2 = register("atan2", np.arctan2, _atan2_backward, inputs=AB, saves=AB,
                 source="d atan2(a, b) = (b da - a db) / (a^2 + b^2); 0 at (0, 0) as PyTorch",
                 elementwise=True)
LERP = register("lerp", _lerp_forward, _lerp_backward, saves=("input", "end", "weight"),
                source="input + w (end - input): linear in each argument", elementwise=True)
T12 = ("tensor1", "tensor2")
ADDCMUL = register("addcmul", _addcmul_forward, _addcmul_backward, inputs=("input",) + T12,
                   saves=T12, source="input + v t1 t2: product rule", elementwise=True)
ADDCDIV = register("addcdiv", lambda x, tensor1, tensor2, value: x + value * tensor1 / tensor2,
                   _addcdiv_backward, inputs=("input",) + T12, saves=T12,
                   source="input + v t1 / t2: quotient rule", elementwise=True)


def atan2(input: Any, other: Any) -> Tensor:
    """The angle of (other, input) in (-pi, pi]; integers give the default float dtype.

    Both gradients are 0 at input = other = 0 (PyTorch). Raises TypeError when input is
    not a Tensor.
    """
    require_tensor("atan2", input)
    require_tensor("atan2", other, "other", 2)
    return binary(ATAN2, input, other, to_float=True)


arctan2 = atan2


def _require_dtype(what: str, x: Any, expected: np.dtype) -> None:
    if isinstance(x, Tensor) and x._data.dtype != expected:
        raise RuntimeError(
            f"expected dtype {C_TYPE_NAMES[expected.name]} for `{what}` but got dtype "
            f"{C_TYPE_NAMES[x._data.dtype.name]}; convert it first, e.g. {what}.to(input.dtype)")


def lerp(input: Tensor, end: Tensor, weight: Any) -> Tensor:
    """input + weight * (end - input), as PyTorch computes it (fused multiply-add).

    weight: a Python number or a tensor; tensors must share input's floating dtype
    (no promotion, as PyTorch). Raises RuntimeError on a dtype mismatch,
    NotImplementedError for integer tensors.
    """
    require_tensor("lerp", input)
    dtype = input._data.dtype
    if dtype.kind != "f":
        raise not_implemented_for("lerp_kernel_scalar", dtype)
    _require_dtype("end", end, dtype)
    _require_dtype("weight", weight, dtype)
    return apply_promoted(LERP, (input, end, weight), {})


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """input + value * tensor1 * tensor2, broadcasting (fused like PyTorch's kernel)."""
    refuse_bool("addcmul_cpu_out", input, tensor1, tensor2)
    return apply_promoted(ADDCMUL, (input, tensor1, tensor2), {"value": value})


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """input + value * tensor1 / tensor2, broadcasting.

    Raises RuntimeError when tensor1 and tensor2 are both integer (as PyTorch).
    """
    if tensor1._data.dtype.kind in "biu" and tensor2._data.dtype.kind in "biu":
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future  release "
            "addcdiv will perform a true division of tensor1 and tensor2. The historic addcdiv "
            "behavior can be implemented as (input + value * torch.trunc(tensor1 / tensor2))"
            ".to(input.dtype) for integer inputs and as (input + value * tensor1 / tensor2) "
            "for float inputs. The future addcdiv behavior is just the latter implementation: "
            "(input + value * tensor1 / tensor2), for all dtypes.")
    return apply_promoted(ADDCDIV, (input, tensor1, tensor2), {"value": value})


def _rpow(self: Tensor, other: Any) -> Tensor:
    return pow(other, self)


def _rfloordiv(self: Tensor, other: Any) -> Tensor:
    return floor_divide(other, self)


def _rmod(self: Tensor, other: Any) -> Tensor:
    return remainder(other, self)


__all__ = ["add", "sub", "rsub", "mul", "div", "true_divide", "divide", "multiply", "subtract",
           "floor_divide", "remainder", "fmod", "pow", "square", "round", "atan2", "arctan2",
           "lerp", "addcmul", "addcdiv", *exported(__name__)]

# Tensor methods defined by this module (installed by jitgrad.eager.tensor_methods)
METHODS = {
    "add": add, "sub": sub, "mul": mul, "div": div, "true_divide": div, "divide": div,
    "multiply": mul, "subtract": sub, "floor_divide": floor_divide, "remainder": remainder,
    "fmod": fmod, "pow": pow, "square": square, "round": round, "atan2": atan2,
    "arctan2": atan2, "lerp": lerp, "addcmul": addcmul, "addcdiv": addcdiv,
    "__add__": add, "__radd__": lambda self, other: add(other, self),
    "__sub__": sub, "__rsub__": lambda self, other: sub(other, self),
    "__mul__": mul, "__rmul__": lambda self, other: mul(other, self),
    "__truediv__": div, "__rtruediv__": lambda self, other: div(other, self),
    "__floordiv__": floor_divide, "__rfloordiv__": _rfloordiv,
    "__mod__": remainder, "__rmod__": _rmod,
    "__pow__": pow, "__rpow__": _rpow,
    "__neg__": neg, "__pos__": lambda self: self, "__abs__": abs,
}
