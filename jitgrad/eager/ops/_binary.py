"""Operand handling shared by pointwise ops: dtype promotion, casting, broadcast errors.

An operand is a Tensor or a Python number (weak: it changes the result dtype only when
it is of a higher category, research/eager_autograd.md §2.0). Anything else (lists,
numpy arrays) becomes a Tensor first.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jitgrad.eager import dtypes
from jitgrad.eager.ops.creation import tensor
from jitgrad.eager.ops.registry import OpDef, apply_op
from jitgrad.eager.symbolic_int import SymbolicInt
from jitgrad.eager.tensor import Tensor

_WEAK_SCALAR_DTYPES = {"b": lambda: dtypes.bool_, "i": lambda: dtypes.int64,
                       "f": dtypes.get_default_dtype}


# Names PyTorch uses for dtypes in its messages: ScalarType names ("Long", in
# "... not implemented for 'Long'") and C type names ("long int", in masked_fill's).
SCALAR_TYPE_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short",
                     "int32": "Int", "int64": "Long", "float16": "Half", "float32": "Float",
                     "float64": "Double"}
C_TYPE_NAMES = {"bool": "bool", "uint8": "unsigned char", "int8": "signed char",
                "int16": "short int", "int32": "int", "int64": "long int",
                "float16": "c10::Half", "float32": "float", "float64": "double"}


def not_implemented_for(kernel: str, dtype: np.dtype | dtypes.dtype) -> NotImplementedError:
    """PyTorch's error for an op without a kernel for a dtype (numpy's or jitgrad's, named
    alike), plus a hint."""
    return NotImplementedError(
        f"\"{kernel}\" not implemented for '{SCALAR_TYPE_NAMES[dtype.name]}'; "
        "convert the input first, e.g. t.float()")


def require_tensor(name: str, value: Any, what: str = "input", position: int = 1) -> None:
    """PyTorch's TypeError for an operand that must be a Tensor (`fmod(2.0, t)`,
    `atan2(t, 2.0)`): its signature has no Number overload there."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{name}(): argument '{what}' (position {position}) must be Tensor, "
                        f"not {type(value).__name__}; wrap it first, e.g. tensor(x)")


def result_dtype(*operands: Any) -> dtypes.dtype:
    """PyTorch's result type of Tensors and Python numbers (see jitgrad.eager.dtypes)."""
    dim = zero = scalar = None
    for x in operands:
        if isinstance(x, Tensor):
            d = dtypes.from_numpy_dtype(x._data.dtype)
            if x._weak_scalar:  # a compiler's stand-in for a Python number: weak, like one
                d = _WEAK_SCALAR_DTYPES[x._data.dtype.kind]()
                scalar = d if scalar is None else dtypes.promote_types(scalar, d)
            elif x._data.ndim:
                dim = d if dim is None else dtypes.promote_types(dim, d)
            else:
                zero = d if zero is None else dtypes.promote_types(zero, d)
        elif x is not None:
            d = dtypes.python_scalar_dtype(x)
            scalar = d if scalar is None else dtypes.promote_types(scalar, d)
    return dtypes.result_type_of(dim, zero, scalar)


def number_dtype(*operands: Any) -> dtypes.dtype | None:
    """What operands that are all Python numbers (a compiler's stand-ins for them, weak
    0-d tensors, included) compute in, as Python does: bool, int64 or float64 (never the
    default float dtype); None when a tensor takes part. Only Python operators on numbers
    reach a binary op without a tensor."""
    found = None
    for x in operands:
        if isinstance(x, Tensor) and not x._weak_scalar:
            return None
        kind = x._data.dtype.kind if isinstance(x, Tensor) else \
            ("b" if isinstance(x, bool) else "i" if isinstance(x, int) else "f")
        d = _NUMBER_DTYPES[kind]
        found = d if found is None else dtypes.promote_types(found, d)
    return found


_NUMBER_DTYPES = {"b": dtypes.bool_, "i": dtypes.int64, "f": dtypes.float64}


def cast_operands(operands: tuple, np_dtype: np.dtype) -> tuple:
    """The forward's arrays: tensor data cast to `np_dtype`, Python numbers as they are.

    A numpy scalar that passed as a Python number (np.float64 subclasses float) becomes
    one, so numpy treats it as weak too (`float32 * np.float64(2)` stays float32).
    """
    return tuple((x._data if x._data.dtype == np_dtype else x._data.astype(np_dtype))
                 if isinstance(x, Tensor) else (x.item() if isinstance(x, np.generic) else x)
                 for x in operands)


def wrapped_integers(operands: tuple, np_dtype: np.dtype) -> tuple:
    """Python ints outside an integer `np_dtype`'s range wrapped into it (two's complement),
    as PyTorch converts the scalar operand of an integer tensor's arithmetic and comparisons
    (int8 * 300 computes with 44; int8 < 300 compares with 44). numpy would raise.

    A size symbol of a trace (`SymbolicInt`, `x * x.shape[0]` under dynamic sizes) has no
    one value: with a dtype narrower than the sizes' int64 it becomes the wrapping
    expression itself, which is the size where it fits, so every size the graph is run
    at wraps as eager's call would."""
    if np_dtype.kind not in "iu":
        return operands
    info = np.iinfo(np_dtype)
    narrow = np_dtype.itemsize < 8

    def wraps(x: Any) -> bool:
        return type(x) is int and not info.min <= x <= info.max or \
            narrow and isinstance(x, SymbolicInt)

    if not any(wraps(x) for x in operands):
        return operands
    modulus = 1 << (8 * np_dtype.itemsize)
    return tuple((x - info.min) % modulus + info.min if wraps(x) else x for x in operands)


def broadcast_error(name: str, shapes: list[tuple[int, ...]]) -> RuntimeError:
    """PyTorch's broadcast message for the first clashing dim (from the right) of `shapes`,
    naming its sizes and every shape."""
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    listed = [str(list(s)) for s in shapes]
    named = " and ".join(listed) if len(listed) == 2 else ", ".join(listed)
    for dim in range(ndim - 1, -1, -1):
        sizes = [s[dim] for s in padded if s[dim] != 1]
        if any(size != sizes[0] for size in sizes):
            other = next(size for size in sizes if size != sizes[0])
            return RuntimeError(
                f"{name}: the size of tensor a ({sizes[0]}) must match the size of tensor b "
                f"({other}) at non-singleton dimension {dim} (shapes {named})")
    return RuntimeError(f"{name}: shapes {named} are not broadcastable")


def as_tensor_operand(x: Any) -> Any:
    """Pass Tensors and Python numbers through; turn arrays and sequences into Tensors."""
    if isinstance(x, (Tensor, bool, int, float)):
        return x
    return tensor(x)


def as_tensor(x: Any) -> Tensor:
    """`x` as a Tensor, wrapping numbers, sequences and arrays (no copy for Tensors)."""
    if isinstance(x, Tensor):
        return x
    return tensor(x)


def shapes_of(*operands: Any) -> list[tuple[int, ...]]:
    """The shapes of the operands (a Python number counts as 0-d)."""
    return [x._data.shape if isinstance(x, Tensor) else () for x in operands]


def binary_operands(op: OpDef, a: Any, b: Any, to_float: bool = False,
                    compute_dtype: Any = None) -> tuple[tuple, tuple]:
    """`((a, b), arrays)`: the operands `binary` records (Python numbers wrapped into an
    integer dtype's range) and the arrays its forward computes on (promoted, cast)."""
    a = as_tensor_operand(a)
    b = as_tensor_operand(b)
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a._data.dtype == b._data.dtype \
            and (not to_float or a._data.dtype.kind == "f"):
        return (a, b), (a._data, b._data)
    numbers = number_dtype(a, b)
    rd = result_dtype(a, b) if numbers is None else numbers
    if to_float and not rd.is_floating_point:
        rd = dtypes.get_default_dtype() if numbers is None else dtypes.float64
    np_dtype = dtypes.numpy_dtype(rd, op.name)
    if numbers is None:  # the wrapped number is the operand a graph records, too
        a, b = wrapped_integers((a, b), np.dtype(compute_dtype or np_dtype))
    return (a, b), cast_operands((a, b), compute_dtype or np_dtype)


def binary(op: OpDef, a: Any, b: Any, *, to_float: bool = False, compute_dtype: Any = None,
           **params: Any) -> Tensor:
    """Apply a broadcasting binary op after PyTorch's promotion.

    to_float: integer results become the default float dtype (true division, atan2).
    compute_dtype: force the dtype the forward computes in (comparisons use the promoted one).
    """
    (a, b), arrays = binary_operands(op, a, b, to_float, compute_dtype)
    try:
        return apply_op(op, (a, b), arrays, params)
    except ValueError as err:
        if "broadcast" in str(err):
            raise broadcast_error(op.name, shapes_of(a, b)) from None
        raise


def unary(op: OpDef, x: Any, *, to_float: bool = False, **params: Any) -> Tensor:
    """Apply a unary op; `to_float` casts integer/bool inputs to the default float dtype."""
    if not isinstance(x, Tensor):
        x = tensor(x)
    data = x._data
    if to_float and data.dtype.kind != "f":
        data = data.astype(dtypes.get_default_dtype().np)
    return apply_op(op, (x,), (data,), params)


def scaled_number_overflows(input: Any, other: Any, alpha: Any) -> bool:
    """Whether `input + alpha * other` (a float16/float32 tensor, a Python number) has an
    `alpha * other` beyond the dtype's range while `other` is within it. PyTorch's loop
    then fuses the product into the sum (one rounding: `add(-inf, 3e38, alpha=2)` is
    -inf, `add(-3e38, 3e38, alpha=2)` 3e38), so jitgrad computes it in float64 and rounds
    once, with `fused_scale` (campaign seed 1068125: the product rounded to inf first gave
    NaN and inf)."""
    if alpha == 1 or type(other) not in (int, float) or type(alpha) not in (int, float) \
            or not isinstance(input, Tensor) or input._data.dtype.kind != "f" \
            or input._data.dtype.itemsize >= 8:
        return False
    largest = float(np.finfo(input._data.dtype).max)
    return abs(other) <= largest < abs(other * alpha)


def fused_scale(input: Tensor, other: float, alpha: float) -> float:
    """`alpha * other` as PyTorch's fused loop multiplies them: both rounded to the input's
    dtype first, their product exact in float64 (24-bit significands)."""
    kind = input._data.dtype.type
    return float(kind(other)) * float(kind(alpha))
