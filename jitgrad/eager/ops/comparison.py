"""Comparisons, logical and bitwise ops, and the selections they drive.

Comparisons compute in the promoted dtype (`int_tensor == 1.5` compares in float32)
and take a Tensor first (`eq(2.0, t)` is a TypeError, as PyTorch; `2.0 == t` is fine)
and return bool tensors that never require grad (research/eager_autograd.md §2.4).
Selections (where, masked_fill, clamp, maximum, minimum) are differentiable; their
gradients follow PyTorch exactly (§2.3): maximum/minimum split ties 0.5/0.5, clamp is
inclusive at its bounds, and NaN from the branch `where` did not take still reaches
the gradient (0 * inf upstream), as in PyTorch.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from jitgrad.eager import dtypes
from jitgrad.eager.dtypes import scalar_as
from jitgrad.eager.ops._binary import as_tensor, as_tensor_operand, binary, result_dtype, unary
from jitgrad.eager.ops.pointwise import (
    C_TYPE_NAMES,
    SCALAR_TYPE_NAMES,
    apply_broadcasting,
    apply_promoted,
    first_on_ties,
    not_implemented_for,
    require_tensor,
)
from jitgrad.eager.ops.registry import ANY_KIND, apply_op, register
from jitgrad.eager.tensor import Tensor

AB = ("a", "b")
X = ("x",)

# ----- comparisons ------------------------------------------------------------------

EQ = register("eq", np.equal, inputs=AB, scalar=lambda s, a, b: a == b, scalar_kinds=ANY_KIND)
NE = register("ne", np.not_equal, inputs=AB, scalar=lambda s, a, b: a != b, scalar_kinds=ANY_KIND)
LT = register("lt", np.less, inputs=AB, scalar=lambda s, a, b: a < b, scalar_kinds=ANY_KIND)
LE = register("le", np.less_equal, inputs=AB, scalar=lambda s, a, b: a <= b, scalar_kinds=ANY_KIND)
GT = register("gt", np.greater, inputs=AB, scalar=lambda s, a, b: a > b, scalar_kinds=ANY_KIND)
GE = register("ge", np.greater_equal, inputs=AB, scalar=lambda s, a, b: a >= b,
              scalar_kinds=ANY_KIND)


def eq(input: Any, other: Any) -> Tensor:
    """input == other elementwise (bool), in the promoted dtype, broadcasting."""
    require_tensor("eq", input)
    return binary(EQ, input, other)


def ne(input: Any, other: Any) -> Tensor:
    """input != other elementwise (bool); NaN != NaN is True."""
    require_tensor("ne", input)
    return binary(NE, input, other)


def lt(input: Any, other: Any) -> Tensor:
    """input < other elementwise (bool)."""
    require_tensor("lt", input)
    return binary(LT, input, other)


def le(input: Any, other: Any) -> Tensor:
    """input <= other elementwise (bool)."""
    require_tensor("le", input)
    return binary(LE, input, other)


def gt(input: Any, other: Any) -> Tensor:
    """input > other elementwise (bool)."""
    require_tensor("gt", input)
    return binary(GT, input, other)


def ge(input: Any, other: Any) -> Tensor:
    """input >= other elementwise (bool)."""
    require_tensor("ge", input)
    return binary(GE, input, other)


greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne


def _operator(fn: Any) -> Any:
    """`tensor <op> other` for the comparison operators.

    Returns NotImplemented for operands that are not numbers, arrays or Tensors, so
    `t == None` and `t == "a"` are False (as PyTorch) instead of raising.
    """
    def method(self: Tensor, other: Any) -> Any:
        if not isinstance(other, (Tensor, bool, int, float, np.ndarray, np.generic)):
            return NotImplemented
        return fn(self, other)
    return method


# ----- logical and bitwise ----------------------------------------------------------

LOGICAL_AND = register("logical_and", np.logical_and, inputs=AB, scalar_kinds=ANY_KIND,
                       scalar=lambda s, a, b: (a != 0) & (b != 0))
LOGICAL_OR = register("logical_or", np.logical_or, inputs=AB, scalar_kinds=ANY_KIND,
                      scalar=lambda s, a, b: (a != 0) | (b != 0))
LOGICAL_XOR = register("logical_xor", np.logical_xor, inputs=AB, scalar_kinds=ANY_KIND,
                       scalar=lambda s, a, b: (a != 0) != (b != 0))
LOGICAL_NOT = register("logical_not", np.logical_not, inputs=X, scalar_kinds=ANY_KIND,
                       scalar=lambda s, x: x == 0)
BITWISE_AND = register("bitwise_and", np.bitwise_and, inputs=AB, elementwise=True)
BITWISE_OR = register("bitwise_or", np.bitwise_or, inputs=AB, elementwise=True)
BITWISE_XOR = register("bitwise_xor", np.bitwise_xor, inputs=AB, elementwise=True)
BITWISE_NOT = register("bitwise_not", np.invert, inputs=X, elementwise=True)
# numpy's shifts already give PyTorch's results for shifts outside [0, bits): 0, or -1 for
# a negative value shifted right
LEFT_SHIFT = register("bitwise_left_shift", np.left_shift, inputs=AB, elementwise=True)
RIGHT_SHIFT = register("bitwise_right_shift", np.right_shift, inputs=AB, elementwise=True)
GCD = register("gcd", np.gcd, inputs=AB, elementwise=True)
LCM = register("lcm", np.lcm, inputs=AB, elementwise=True)


def logical_and(input: Any, other: Any) -> Tensor:
    """Elementwise AND of truth values (nonzero is True), any dtypes; returns bool."""
    require_tensor("logical_and", input)
    require_tensor("logical_and", other, "other", 2)
    return binary(LOGICAL_AND, input, other)


def logical_or(input: Any, other: Any) -> Tensor:
    """Elementwise OR of truth values (nonzero is True); returns bool."""
    require_tensor("logical_or", input)
    require_tensor("logical_or", other, "other", 2)
    return binary(LOGICAL_OR, input, other)


def logical_xor(input: Any, other: Any) -> Tensor:
    """Elementwise XOR of truth values (nonzero is True); returns bool."""
    require_tensor("logical_xor", input)
    require_tensor("logical_xor", other, "other", 2)
    return binary(LOGICAL_XOR, input, other)


def logical_not(input: Tensor) -> Tensor:
    """Elementwise NOT of truth values (nonzero is True); returns bool."""
    return unary(LOGICAL_NOT, input)


def _bitwise(op: Any, input: Any, other: Any) -> Tensor:
    a, b = as_tensor_operand(input), as_tensor_operand(other)
    rd = result_dtype(a, b)
    if rd.is_floating_point:
        raise not_implemented_for(f"{op.name}_cpu", rd)
    return binary(op, a, b)


def bitwise_and(input: Any, other: Any) -> Tensor:
    """Bitwise AND (`&`) of bool/integer tensors (promoted: bool & int -> int).

    Raises NotImplementedError for floating inputs.
    """
    return _bitwise(BITWISE_AND, input, other)


def bitwise_or(input: Any, other: Any) -> Tensor:
    """Bitwise OR (`|`) of bool/integer tensors. Raises NotImplementedError for floats."""
    return _bitwise(BITWISE_OR, input, other)


def bitwise_xor(input: Any, other: Any) -> Tensor:
    """Bitwise XOR (`^`) of bool/integer tensors. Raises NotImplementedError for floats."""
    return _bitwise(BITWISE_XOR, input, other)


def bitwise_not(input: Tensor) -> Tensor:
    """Bitwise NOT: logical NOT for bool, two's complement for integers.

    Raises NotImplementedError for floating inputs.
    """
    if input._data.dtype.kind == "f":
        raise not_implemented_for("bitwise_not_cpu", input._data.dtype)
    return unary(BITWISE_NOT, input)


def _integer_op(op: Any, kernel: str, input: Any, other: Any) -> Tensor:
    a, b = as_tensor_operand(input), as_tensor_operand(other)
    rd = result_dtype(a, b)
    if rd.is_floating_point:
        raise not_implemented_for(kernel, rd)
    return binary(op, a, b)


def bitwise_left_shift(input: Any, other: Any) -> Tensor:
    """input << other for integer tensors (either side may be a number); a shift outside
    [0, bits) gives 0. Raises NotImplementedError for floats."""
    return _integer_op(LEFT_SHIFT, "lshift_cpu", input, other)


def bitwise_right_shift(input: Any, other: Any) -> Tensor:
    """input >> other (arithmetic: the sign is kept); a shift outside [0, bits) gives 0, or
    -1 for negative values. Raises NotImplementedError for floats."""
    return _integer_op(RIGHT_SHIFT, "rshift_cpu", input, other)


def gcd(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise greatest common divisor (non-negative) of integer tensors.

    Raises TypeError for a number operand, NotImplementedError for floats.
    """
    require_tensor("gcd", input)
    require_tensor("gcd", other, "other", 2)
    return _integer_op(GCD, "gcd_cpu", input, other)


def lcm(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise least common multiple (non-negative; 0 if either is 0) of integer tensors.

    Raises TypeError for a number operand, NotImplementedError for floats.
    """
    require_tensor("lcm", input)
    require_tensor("lcm", other, "other", 2)
    return _integer_op(LCM, "lcm_cpu", input, other)


def _invert(self: Tensor) -> Tensor:
    if self._data.dtype.kind == "f":
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                        "tensors; for a float mask use (t == 0) or t.logical_not()")
    return unary(BITWISE_NOT, self)


# ----- NaN / inf tests and whole-tensor comparisons ------------------------------------

ISNAN = register("isnan", np.isnan, inputs=X, elementwise=True)
ISINF = register("isinf", np.isinf, inputs=X, elementwise=True)
ISFINITE = register("isfinite", np.isfinite, inputs=X, elementwise=True)


def isnan(input: Tensor) -> Tensor:
    """Where input is NaN (bool); all False for integer tensors."""
    return unary(ISNAN, input)


def isinf(input: Tensor) -> Tensor:
    """Where input is +inf or -inf (bool)."""
    return unary(ISINF, input)


def isfinite(input: Tensor) -> Tensor:
    """Where input is neither NaN nor infinite (bool)."""
    return unary(ISFINITE, input)


def equal(input: Tensor, other: Tensor) -> bool:
    """True when both have the same shape and equal values (dtypes may differ; NaN != NaN).

    Raises TypeError unless both are Tensors (as PyTorch).
    """
    require_tensor("equal", input)
    require_tensor("equal", other, "other", 2)
    a, b = input._data, other._data
    return a.shape == b.shape and bool(np.array_equal(a, b))


def _check_same_dtype(a: Tensor, b: Tensor) -> None:
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(
            f"{SCALAR_TYPE_NAMES[a._data.dtype.name]} did not match "
            f"{SCALAR_TYPE_NAMES[b._data.dtype.name]}; convert one side first, e.g. "
            "other.to(input.dtype)")


ISCLOSE = register("isclose", np.isclose, inputs=AB, elementwise=True)


def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Tensor:
    """|input - other| <= atol + rtol * |other| elementwise (bool); infinities equal themselves.

    Raises RuntimeError when the dtypes differ (as PyTorch: "Float did not match Double"),
    TypeError unless both are Tensors.
    """
    require_tensor("isclose", input)
    require_tensor("isclose", other, "other", 2)
    _check_same_dtype(input, other)
    return binary(ISCLOSE, input, other, rtol=rtol, atol=atol, equal_nan=equal_nan)


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    """Whether `isclose` holds everywhere (a Python bool). Raises like `isclose`."""
    return bool(np.all(isclose(input, other, rtol, atol, equal_nan)._data))


# ----- selections -------------------------------------------------------------------


def _maximum_backward(xp: Any, ctx: Any, g: Any, a: Any, b: Any) -> tuple:
    need_a, need_b = ctx.needs_input_grad
    half = g / 2  # ties split the gradient (pytorch#56734); NaN gives g to both sides
    return ((xp.where(a == b, half, xp.where(a < b, 0.0, g)) if need_a else None),
            (xp.where(a == b, half, xp.where(a > b, 0.0, g)) if need_b else None))


def _minimum_backward(xp: Any, ctx: Any, g: Any, a: Any, b: Any) -> tuple:
    need_a, need_b = ctx.needs_input_grad
    half = g / 2
    return ((xp.where(a == b, half, xp.where(a > b, 0.0, g)) if need_a else None),
            (xp.where(a == b, half, xp.where(a < b, 0.0, g)) if need_b else None))


MAXIMUM = register("maximum", lambda a, b: first_on_ties(np.maximum(a, b), a, b),
                   _maximum_backward, inputs=AB, saves=AB,
                   source="g to the larger input, g/2 each on ties (PyTorch)",
                   scalar=lambda s, a, b: s.maximum(a, b), scalar_kinds=ANY_KIND)
MINIMUM = register("minimum", lambda a, b: first_on_ties(np.minimum(a, b), a, b),
                   _minimum_backward, inputs=AB, saves=AB,
                   source="g to the smaller input, g/2 each on ties (PyTorch)",
                   scalar=lambda s, a, b: s.minimum(a, b), scalar_kinds=ANY_KIND)


def _require_tensors(name: str, input: Any, other: Any) -> None:
    for position, (what, x) in enumerate((("input", input), ("other", other)), start=1):
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}(): argument '{what}' (position {position}) must be Tensor, "
                            f"not {type(x).__name__}; use clamp() for a number bound")


def maximum(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise max of two tensors (broadcasting); NaN propagates.

    Gradient: to the larger input, split 0.5/0.5 on ties. Raises TypeError for numbers.
    """
    _require_tensors("maximum", input, other)
    return binary(MAXIMUM, input, other)


def minimum(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise min of two tensors (broadcasting); NaN propagates; ties split 0.5/0.5."""
    _require_tensors("minimum", input, other)
    return binary(MINIMUM, input, other)


def _where_backward(xp: Any, ctx: Any, g: Any, condition: Any) -> tuple:
    _, need_input, need_other = ctx.needs_input_grad
    return (None, (xp.where(condition, g, 0.0) if need_input else None),
            (xp.where(condition, 0.0, g) if need_other else None))


WHERE = register("where", np.where, _where_backward, inputs=("condition", "input", "other"),
                 saves=("condition",), source="g routed to the chosen branch",
                 scalar=lambda s, condition, a, b: s.where(condition, a, b), scalar_kinds=ANY_KIND)


def where(condition: Tensor, input: Any = None, other: Any = None) -> Any:
    """input where condition else other, broadcasting all three; branches may be numbers.

    Dtype: promotion of input and other (numbers are weak: where(c, f32, 0.0) is f32).
    The gradient of the untaken branch is 0 * upstream, so NaN/inf produced by that
    branch's backward still reaches the input (as PyTorch); guard the input with an
    inner where, e.g. where(x > 0, log(where(x > 0, x, 1)), 0).
    With only `condition`, returns `nonzero(condition, as_tuple=True)`.
    Raises RuntimeError when condition is not bool (uint8 is accepted with PyTorch's
    deprecation warning).
    """
    condition = as_tensor(condition)
    if input is None and other is None:
        return tuple(Tensor._make(i) for i in np.nonzero(condition._data))
    if input is None or other is None:
        raise TypeError("where() takes a condition and both branches (input and other), or "
                        "the condition alone; got only one branch")
    mask = condition._data
    if mask.dtype == np.uint8:
        warnings.warn("where received a uint8 condition tensor. This behavior is deprecated and "
                      "will be removed in a future version of PyTorch. Use a boolean condition "
                      "instead.", UserWarning, stacklevel=2)
        mask = mask.astype(np.bool_)
        condition = Tensor._make(mask)
    if mask.dtype != np.bool_:
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{SCALAR_TYPE_NAMES[mask.dtype.name]}; compare first, e.g. where(c != 0, a, b)")
    if isinstance(input, Tensor) and isinstance(other, Tensor) \
            and input._data.dtype == other._data.dtype \
            and not (input._weak_scalar or other._weak_scalar):  # Python numbers promote
        return apply_broadcasting(WHERE, (condition, input, other),
                                  (mask, input._data, other._data), {})
    branches = (as_tensor_operand(input), as_tensor_operand(other))
    np_dtype = dtypes.numpy_dtype(result_dtype(*branches), "where")
    arrays = [mask]
    for x in branches:
        if isinstance(x, Tensor):
            arrays.append(x._data if x._data.dtype == np_dtype else x._data.astype(np_dtype))
        else:
            arrays.append(np_dtype.type(x))  # a numpy scalar: np.where keeps np_dtype
    return apply_broadcasting(WHERE, (condition, *branches), tuple(arrays), {})


def _masked_fill_backward(xp: Any, ctx: Any, g: Any, mask: Any) -> tuple:
    need_input, _, need_value = ctx.needs_input_grad
    # the value's gradient is g summed over the filled positions (engine sums to 0-d)
    return ((xp.where(mask, 0.0, g) if need_input else None), None,
            (xp.where(mask, g, 0.0) if need_value else None))


MASKED_FILL = register("masked_fill", lambda x, mask, value: np.where(mask, value, x),
                       _masked_fill_backward, inputs=("input", "mask", "value"), saves=("mask",),
                       source="g where not filled; the value gets the filled positions' sum",
                       scalar=lambda s, x, mask, value: s.where(mask, value, x),
                       scalar_kinds=ANY_KIND, elementwise=False)


def masked_fill(input: Tensor, mask: Tensor, value: Any) -> Tensor:
    """A copy of input with `value` where mask is True (mask broadcasts); input's dtype.

    value: a number or a 0-d tensor (which then receives the sum of the filled gradients).
    Raises RuntimeError for a non-bool mask or a value tensor with dimensions.
    """
    mask = as_tensor(mask)
    if mask._data.dtype != np.bool_:
        raise RuntimeError(
            f"masked_fill_ only supports boolean masks, but got mask with dtype "
            f"{C_TYPE_NAMES[mask._data.dtype.name]}; pass a comparison, e.g. t.masked_fill(m "
            "!= 0, v)")
    np_dtype = input._data.dtype
    if isinstance(value, Tensor):
        if value._data.ndim:
            raise RuntimeError(
                f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                f"{value._data.ndim} dimension(s). Use torch.where(mask, value, input) to fill "
                "from a tensor")
        fill = value._data.astype(np_dtype, copy=False)
    else:
        fill = np.asarray(scalar_as(value, np_dtype))  # 3.7 into an int tensor gives 3
    arrays = (input._data, mask._data, fill)
    return apply_broadcasting(MASKED_FILL, (input, mask, value), arrays, {})


def _clamp_forward(input: np.ndarray, min: Any, max: Any) -> np.ndarray:
    # min(max(x, lo), hi): NaN passes through, and lo > hi gives hi everywhere
    # of equal operands (-0.0 and 0.0) x, as PyTorch's
    out = input if min is None else first_on_ties(np.maximum(input, min), input, min)
    return out if max is None else first_on_ties(np.minimum(out, max), out, max)


def _clamp_backward(xp: Any, ctx: Any, g: Any, input: Any, min: Any, max: Any) -> tuple:
    need_input, need_min, need_max = ctx.needs_input_grad
    if min is None:
        inside = input <= max
    elif max is None:
        inside = input >= min
    else:
        inside = (input >= min) & (input <= max)  # inclusive: the input wins ties
    grad_min = grad_max = None
    if need_min:  # a bound above the other bound gets no gradient (PyTorch)
        below = input < min if max is None else (input < min) & (min < max)
        grad_min = xp.where(below, g, 0.0)
    if need_max:
        above = input > max if min is None else (input > max) | (max < min)
        grad_max = xp.where(above, g, 0.0)
    return (xp.where(inside, g, 0.0) if need_input else None), grad_min, grad_max


def _clamp_scalar(s: Any, x: Any, min: Any, max: Any) -> Any:  # noqa: A002
    out = x if min is None else s.maximum(x, min)
    return out if max is None else s.minimum(out, max)


CLAMP = register("clamp", _clamp_forward, _clamp_backward, saves=("input", "min", "max"),
                 source="g where min <= x <= max (inclusive), else to the active bound",
                 scalar=_clamp_scalar, scalar_kinds=ANY_KIND)


_WEAK_BOUNDS = (int, float, type(None))  # bounds that cannot change a float tensor's dtype


def clamp(input: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    """min(max(input, min), max); bounds are numbers or broadcasting tensors, one may be None.

    Dtype: promotion of input and bounds (int tensor clamped at 0.5 -> float32).
    Gradient: passes where min <= input <= max (inclusive, unlike hardtanh); tensor
    bounds get it where they are active. NaN inputs stay NaN.
    Raises RuntimeError when both bounds are None.
    """
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if type(min) in _WEAK_BOUNDS and type(max) in _WEAK_BOUNDS and isinstance(input, Tensor) \
            and input._data.dtype.kind == "f":  # fast path: the dtype cannot change
        return apply_op(CLAMP, (input, min, max), (input._data, min, max))
    return apply_promoted(CLAMP, (input, min, max), {})


clip = clamp


def clamp_min(input: Tensor, min: Any) -> Tensor:  # noqa: A002
    """clamp(input, min=min). Raises TypeError when input is not a Tensor."""
    require_tensor("clamp_min", input)
    return clamp(input, min, None)


def clamp_max(input: Tensor, max: Any) -> Tensor:  # noqa: A002
    """clamp(input, max=max). Raises TypeError when input is not a Tensor."""
    require_tensor("clamp_max", input)
    return clamp(input, None, max)


def _where_method(self: Tensor, condition: Tensor, other: Any) -> Tensor:
    return where(condition, self, other)


def _reflected(fn: Any) -> Any:
    def method(self: Tensor, other: Any) -> Tensor:
        return fn(other, self)
    return method


__all__ = ["eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal",
           "not_equal", "logical_and", "logical_or", "logical_xor", "logical_not",
           "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
           "bitwise_right_shift", "gcd", "lcm", "isnan", "isinf",
           "isfinite", "equal", "isclose", "allclose", "maximum", "minimum", "where",
           "masked_fill", "clamp", "clip", "clamp_min", "clamp_max"]

METHODS = {
    "eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt, "ge": ge, "greater": gt,
    "greater_equal": ge, "less": lt, "less_equal": le, "not_equal": ne,
    "__eq__": _operator(eq), "__ne__": _operator(ne), "__lt__": _operator(lt),
    "__le__": _operator(le), "__gt__": _operator(gt), "__ge__": _operator(ge),
    "logical_and": logical_and, "logical_or": logical_or, "logical_xor": logical_xor,
    "logical_not": logical_not, "bitwise_and": bitwise_and, "bitwise_or": bitwise_or,
    "bitwise_xor": bitwise_xor, "bitwise_not": bitwise_not,
    "__and__": bitwise_and, "__or__": bitwise_or, "__xor__": bitwise_xor,
    "__rand__": _reflected(bitwise_and), "__ror__": _reflected(bitwise_or),
    "__rxor__": _reflected(bitwise_xor), "__invert__": _invert,
    "bitwise_left_shift": bitwise_left_shift, "bitwise_right_shift": bitwise_right_shift,
    "__lshift__": bitwise_left_shift, "__rshift__": bitwise_right_shift,
    "__rlshift__": _reflected(bitwise_left_shift), "__rrshift__": _reflected(bitwise_right_shift),
    "gcd": gcd, "lcm": lcm,
    "isnan": isnan, "isinf": isinf, "isfinite": isfinite, "equal": equal,
    "isclose": isclose, "allclose": allclose, "maximum": maximum, "minimum": minimum,
    "where": _where_method, "masked_fill": masked_fill, "clamp": clamp, "clip": clamp,
    "clamp_min": clamp_min, "clamp_max": clamp_max,
}
