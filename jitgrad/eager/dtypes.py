"""Tensor dtypes and PyTorch's type-promotion rules.

jitgrad dtypes are small objects (`jitgrad.float32`, `jitgrad.long`, ...) that wrap a
numpy dtype. Result dtypes are computed here, never by numpy, because the two libraries
disagree (research/eager_autograd.md §2.0): `int64 / int` is float32 in PyTorch and
float64 in numpy, `exp(int64)` is float32, a 0-d float64 tensor does not widen a float32
tensor, Python scalars are "weak".

PyTorch's rule (c10 `ResultTypeState`): operands fall into three groups — tensors with
dimensions, 0-d tensors, Python numbers. Each group is promoted on its own; a group of
lower priority only changes the result when it belongs to a higher *category*
(bool < integer < floating). Python floats stand for the default dtype (float32), Python
ints for int64.

A Python number written into a tensor (fill_, full, masked_fill) becomes an element of the
tensor's dtype by `scalar_as`, with c10::checked_convert's overflow check.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np


class dtype:  # noqa: N801 - PyTorch spells it `torch.dtype`
    """A tensor element type; compares equal to itself only.

    `np` is the numpy dtype used for storage. `is_floating_point` and `is_signed`
    follow PyTorch's properties of the same names. `supported` is False for dtypes
    that exist so that programs naming them import (bfloat16, complex64, complex128)
    but that jitgrad cannot compute with.
    """

    __slots__ = ("name", "np", "is_floating_point", "is_complex", "is_signed", "itemsize",
                 "category", "supported")

    def __init__(self, name: str, np_dtype: np.dtype | None, category: int,
                 supported: bool = True, is_complex: bool = False) -> None:
        self.name = name
        self.np = np_dtype
        self.category = category  # 0 bool, 1 integer, 2 floating, 3 complex
        self.is_floating_point = category == 2
        self.is_complex = is_complex
        self.is_signed = name not in ("bool", "uint8")
        self.itemsize = np_dtype.itemsize if np_dtype is not None else 2
        self.supported = supported

    def __repr__(self) -> str:
        return f"jitgrad.{self.name}"

    def __reduce__(self) -> str:
        return self.name

    def to_complex(self) -> dtype:
        return complex64 if self is float32 else complex128

    def to_real(self) -> dtype:
        return self


bool_ = dtype("bool", np.dtype(np.bool_), 0)
uint8 = dtype("uint8", np.dtype(np.uint8), 1)
int8 = dtype("int8", np.dtype(np.int8), 1)
int16 = dtype("int16", np.dtype(np.int16), 1)
int32 = dtype("int32", np.dtype(np.int32), 1)
int64 = dtype("int64", np.dtype(np.int64), 1)
float16 = dtype("float16", np.dtype(np.float16), 2)
float32 = dtype("float32", np.dtype(np.float32), 2)
float64 = dtype("float64", np.dtype(np.float64), 2)
bfloat16 = dtype("bfloat16", None, 2, supported=False)
complex64 = dtype("complex64", np.dtype(np.complex64), 3, supported=False, is_complex=True)
complex128 = dtype("complex128", np.dtype(np.complex128), 3, supported=False, is_complex=True)

ALL_DTYPES = (bool_, uint8, int8, int16, int32, int64, float16, float32, float64,
              bfloat16, complex64, complex128)
# PyTorch's aliases: torch.float is float32, torch.long is int64, ...
ALIASES = {"float": float32, "double": float64, "half": float16, "long": int64,
           "int": int32, "short": int16, "bool": bool_, "cfloat": complex64,
           "cdouble": complex128}

_FROM_NUMPY = {d.np: d for d in ALL_DTYPES if d.np is not None}
_BY_NAME = {d.name: d for d in ALL_DTYPES} | ALIASES

_default_float = [float32]


def get_default_dtype() -> dtype:
    """The dtype Python floats and float factories produce (float32 unless changed)."""
    return _default_float[0]


def set_default_dtype(d: dtype) -> None:
    """Set the default floating dtype. Raises TypeError for a non-floating dtype."""
    d = to_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default_float[0] = d
    _PROMOTION_CACHE.clear()


def from_numpy_dtype(np_dtype: np.dtype) -> dtype:
    """The jitgrad dtype storing `np_dtype`. Raises TypeError for unsupported numpy dtypes."""
    try:
        return _FROM_NUMPY[np_dtype]
    except KeyError:
        raise TypeError(
            f"can't convert np.ndarray of type {np_dtype}. The only supported types are: "
            "float64, float32, float16, int64, int32, int16, int8, uint8, and bool.") from None


def to_dtype(d: object) -> dtype:
    """Normalize a user's dtype argument (jitgrad dtype, numpy dtype/type, or name)."""
    if isinstance(d, dtype):
        return d
    if isinstance(d, str) and d in _BY_NAME:
        return _BY_NAME[d]
    if d is float:
        return float64  # Python's float is a double, as in PyTorch (`dtype=float` is float64)
    if d is int:
        return int64
    if d is bool:
        return bool_
    try:
        return from_numpy_dtype(np.dtype(d))  # type: ignore[call-overload]
    except TypeError as err:
        raise TypeError(f"{d!r} is not a jitgrad dtype (e.g. jitgrad.float32)") from err


def check_supported(d: dtype, what: str) -> None:
    """Raise a clear TypeError when a dtype that only exists by name is used."""
    if not d.supported:
        raise TypeError(f"{what}: dtype {d} exists for compatibility but jitgrad cannot "
                        "compute with it; use jitgrad.float32 or jitgrad.float64")


def numpy_dtype(d: dtype, what: str) -> np.dtype:
    """The numpy dtype storing `d`. Raises TypeError as check_supported does."""
    check_supported(d, what)
    return cast(np.dtype, d.np)  # only bfloat16, which is unsupported, has none


def promote_types(a: dtype, b: dtype) -> dtype:
    """The smallest dtype both `a` and `b` convert to safely (PyTorch's promote_types)."""
    if a is b:
        return a
    if a.category == 2 and b.category == 2:
        return a if a.itemsize >= b.itemsize else b
    if a.category == 2 and b.category < 2:
        return a
    if b.category == 2 and a.category < 2:
        return b
    # bool, integer or complex here; with bfloat16 (no numpy dtype) numpy raises TypeError
    return from_numpy_dtype(np.promote_types(cast(np.dtype, a.np), cast(np.dtype, b.np)))


def python_scalar_dtype(value: object) -> dtype:
    """The dtype a Python number stands for in promotion (bool, int64 or default float)."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int64
    return get_default_dtype()


def _combine_categories(higher: dtype | None, lower: dtype | None) -> dtype | None:
    # c10's combine_categories: a lower-priority group wins only with a higher category.
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.category >= 2:
        return higher
    if higher is bool_ or lower.category == 2:
        return promote_types(higher, lower)
    return higher


_PROMOTION_CACHE: dict[tuple[dtype | None, dtype | None, dtype | None], dtype] = {}


def result_type_of(dim_dtype: dtype | None, zero_dim_dtype: dtype | None,
                   scalar_dtype: dtype | None) -> dtype:
    """Combine the promoted dtype of each operand group into the result dtype."""
    key = (dim_dtype, zero_dim_dtype, scalar_dtype)
    cached = _PROMOTION_CACHE.get(key)
    if cached is None:
        cached = _combine_categories(dim_dtype, _combine_categories(zero_dim_dtype, scalar_dtype))
        assert cached is not None, "result_type needs at least one operand"
        _PROMOTION_CACHE[key] = cached
    return cached


# the names c10::checked_convert gives dtypes in its overflow error
_CONVERT_TYPE_NAMES = {"uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int",
                       "int64": "int64_t", "float16": "c10::Half", "float32": "float",
                       "float64": "double"}


def checked_scalar(value: Any, np_dtype: np.dtype) -> None:
    """Raise PyTorch's RuntimeError when the Python number `value` overflows `np_dtype`, as
    c10::checked_convert does where a scalar becomes a tensor's element (fill_, full,
    masked_fill): a finite float beyond the float dtype's range (inf and NaN convert), an
    integer outside a signed dtype's range, or beyond ±max of an unsigned one (-1 into
    uint8 wraps to 255, as PyTorch keeps for compatibility). bool takes anything."""
    kind = np_dtype.kind
    if kind == "b" or not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    if kind == "f":
        if not math.isfinite(value):
            return
        with np.errstate(over="ignore"):
            converted = np.asarray(value, dtype=np.float64).astype(np_dtype)
        overflow = not np.isfinite(converted)
    else:
        info = np.iinfo(np_dtype)
        low = -int(info.max) if kind == "u" else int(info.min)
        overflow = not (math.isfinite(value) and low <= value <= info.max)
    if overflow:
        raise RuntimeError(f"value cannot be converted to type {_CONVERT_TYPE_NAMES[np_dtype.name]}"
                           f" without overflow: {value!r} is outside its range; use a wider "
                           "dtype")


def scalar_as(value: Any, np_dtype: np.dtype) -> Any:
    """The Python number `value` as an element of `np_dtype` (`checked_scalar` first; a
    float into an integer dtype truncates, -1 into uint8 wraps, as PyTorch converts)."""
    checked_scalar(value, np_dtype)
    return np.asarray(value).astype(np_dtype)[()]
