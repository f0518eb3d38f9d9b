"""What a guard is: `Guard(kind, source, expected, location)` and the records its
expected values are normalized to (`TensorMatch`, `LengthMatch`, `KeysMatch`, `SizeRelation`),
and how values read in messages (`readable`)."""

from __future__ import annotations

import enum
import os
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from jitgrad.eager import dtypes
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.capture import symbolic
from jitgrad.trace.capture.sources import (
    AttrSource,
    GlobalSource,
    GradModeSource,
    ItemSource,
    Source,
)


class GuardKind(enum.Enum):
    """What a guard checks about its source's value `v`."""

    GRAD_MODE = "GRAD_MODE"              # jitgrad.is_grad_enabled() == expected
    TYPE_MATCH = "TYPE_MATCH"            # type(v) is expected
    LENGTH_MATCH = "LENGTH_MATCH"        # type(v) is expected.type and len(v) == expected.length
    DICT_KEYS_MATCH = "DICT_KEYS_MATCH"  # type(v) is expected.type and list(v) == expected.keys
    EQUALS_MATCH = "EQUALS_MATCH"        # v == expected with the same types, recursively
    CODE_MATCH = "CODE_MATCH"            # v.__code__ is expected
    ID_MATCH = "ID_MATCH"                # v is expected
    NOT_PRESENT = "NOT_PRESENT"          # the global/key/instance attribute does not exist
    TENSOR_MATCH = "TENSOR_MATCH"        # exact Tensor type, shape, dtype, requires_grad, ...
    DUPLICATE_INPUT = "DUPLICATE_INPUT"  # v is the value of another source (one object traced)
    SIZE_RELATION = "SIZE_RELATION"      # sizes of tensors satisfy a relation (symbolic sizes)


_CONSTANT_TYPES = (type(None), bool, int, float, complex, str, bytes)


class GuardLocation(NamedTuple):
    """The user's line that made a guard. Any object with these three attributes will do."""

    filename: str
    lineno: int
    text: str


class DenseOrder(NamedTuple):
    """TensorMatch.strides of a tensor with dynamic dims: dense (no gaps, no overlap) in
    this dim order, fastest first, for whatever sizes it has; C order is (ndim - 1, ..., 0),
    `x.t()` of a C-contiguous matrix (0, 1)."""

    order: tuple[int, ...]

    def is_c(self) -> bool:
        return self.order == tuple(range(len(self.order) - 1, -1, -1))


class TensorMatch(NamedTuple):
    """Expected tensor metadata. `strides` (in elements) and `storage_offset` are checked
    when set. A dynamic dim (Note [Symbolic sizes]) has None in `shape`; such a tensor's
    strides are a `DenseOrder`, the order its dims are dense in for whatever sizes it has."""

    type: type
    shape: tuple[int | None, ...]
    dtype: dtypes.dtype
    requires_grad: bool
    strides: tuple[int, ...] | DenseOrder | None = None
    storage_offset: int | None = None

    @classmethod
    def of(cls, tensor: Tensor, *, strides: bool = False, storage_offset: bool = False,
           dynamic: frozenset[int] = frozenset()) -> TensorMatch:
        """The metadata of a real tensor; `dynamic` dims (of a tensor dense in some dim
        order, `dense_order`) unchecked."""
        shape = tuple(None if d in dynamic else n for d, n in enumerate(tensor._data.shape))
        layout: tuple[int, ...] | DenseOrder | None = None
        if strides:
            order = dense_order(tensor._data) if dynamic else None
            assert not dynamic or order is not None, "dims are dynamic only in dense tensors"
            layout = DenseOrder(order) if order is not None else tensor.stride()
        return cls(type(tensor), shape, tensor.dtype, bool(tensor._requires_grad), layout,
                   tensor.storage_offset() if storage_offset else None)


class SizeRelation(NamedTuple):
    """`lhs op rhs` between size expressions (jitgrad.trace.capture.symbolic) whose symbols are
    `SizeSource`s: `("size", source)` leaves."""

    lhs: Any
    op: str
    rhs: Any

    def render(self, size: Callable[[Source], str]) -> str:
        return f"{symbolic.render(self.lhs, size, 'size')} {self.op} " \
            f"{symbolic.render(self.rhs, size, 'size')}"

    def holds(self, size: Callable[[Source], int]) -> bool:
        return symbolic.COMPARISONS[self.op](symbolic.evaluate(self.lhs, size, "size"),
                                             symbolic.evaluate(self.rhs, size, "size"))

    def sources(self) -> list[Source]:
        return [*symbolic.symbols_of(self.lhs, "size"), *symbolic.symbols_of(self.rhs, "size")]


def dense_strides(shape: tuple[int, ...], itemsize: int, order: tuple[int, ...]
                  ) -> tuple[int, ...]:
    """The byte strides of an array of `shape` dense in dim `order` (fastest first); C
    order, reversed dims, gives what numpy gives a fresh array."""
    strides, step = [0] * len(shape), itemsize
    for d in order:
        strides[d] = step
        step *= max(shape[d], 1)
    return tuple(strides)


def dense_order(array: Any) -> tuple[int, ...] | None:
    """The dim order (fastest first) `array` is dense in, its strides exactly that order's
    for its sizes (`dense_strides`), or None: overlapping, with gaps, or a size-1 dim whose
    stride no order gives. Ties go to C order."""
    order = tuple(sorted(range(array.ndim), key=lambda d: (array.strides[d], -d)))
    return order if dense_strides(array.shape, array.itemsize, order) == array.strides else None


class LengthMatch(NamedTuple):
    """Expected container type and length."""

    type: type
    length: int

    @classmethod
    def of(cls, value: Any) -> LengthMatch:
        return cls(type(value), len(value))


class KeysMatch(NamedTuple):
    """Expected mapping type and keys, in iteration order."""

    type: type
    keys: tuple

    @classmethod
    def of(cls, value: Any) -> KeysMatch:
        return cls(type(value), tuple(value))


_EXPECTED_TYPES = {GuardKind.TYPE_MATCH: type, GuardKind.LENGTH_MATCH: LengthMatch,
                   GuardKind.DICT_KEYS_MATCH: KeysMatch, GuardKind.CODE_MATCH: types.CodeType,
                   GuardKind.TENSOR_MATCH: TensorMatch, GuardKind.GRAD_MODE: bool,
                   GuardKind.DUPLICATE_INPUT: Source, GuardKind.SIZE_RELATION: SizeRelation}


@dataclass(frozen=True, eq=False)
class Guard:
    """One assumption of a trace: `kind` holds for the value of `source`.

    expected, by kind: TYPE_MATCH a type; ID_MATCH any object (kept alive by the guard);
      EQUALS_MATCH None/bool/int/float/complex/str/bytes or a tuple (items of other types
      are compared by identity); TENSOR_MATCH a `TensorMatch` or the real tensor;
      LENGTH_MATCH a `LengthMatch` or the container; DICT_KEYS_MATCH a `KeysMatch` or the
      mapping; CODE_MATCH a code object; NOT_PRESENT None; GRAD_MODE a bool;
      DUPLICATE_INPUT the Source of the same object (two sources that were one tensor).
    `kind` may be given by name ("TYPE_MATCH"); values are normalized to the records.
    Raises TypeError for an expected value of the wrong kind, ValueError for a source the
    kind cannot check (NOT_PRESENT reads a global, an item or an attribute; GRAD_MODE
    reads `GradModeSource()`).
    """

    kind: GuardKind
    source: Source
    expected: Any
    location: Any = None

    def __post_init__(self) -> None:
        kind = GuardKind(self.kind)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "expected", _normalize(kind, self.source, self.expected))
        if kind is GuardKind.NOT_PRESENT and not isinstance(
                self.source, (GlobalSource, ItemSource, AttrSource)):
            raise ValueError(f"NOT_PRESENT checks a global, an item or an attribute, not "
                             f"{self.source.name()}")
        if (kind is GuardKind.GRAD_MODE) != isinstance(self.source, GradModeSource):
            raise ValueError(f"GRAD_MODE guards go with GradModeSource(), not {kind.name} on "
                             f"{self.source.name()}")

    def __repr__(self) -> str:
        return f"Guard({self.kind.name}, {self.source.name()}, {readable(self.expected)})"


def _normalize(kind: GuardKind, source: Source, expected: Any) -> Any:
    """`expected` as the record `kind` checks; TypeError naming what to pass instead."""
    if kind is GuardKind.TENSOR_MATCH and isinstance(expected, Tensor):
        return TensorMatch.of(expected)
    if kind is GuardKind.LENGTH_MATCH and not isinstance(expected, LengthMatch) and hasattr(
            type(expected), "__len__"):
        return LengthMatch.of(expected)
    if kind is GuardKind.DICT_KEYS_MATCH and not isinstance(expected, KeysMatch) and hasattr(
            type(expected), "keys"):
        return KeysMatch.of(expected)
    wanted = _EXPECTED_TYPES.get(kind)
    if wanted is not None and not isinstance(expected, wanted):
        hint = {GuardKind.LENGTH_MATCH: "; pass the container itself, so its type is checked too",
                GuardKind.DICT_KEYS_MATCH: "; pass the mapping itself, so its type is checked too",
                GuardKind.TENSOR_MATCH: "; pass the real tensor"}.get(kind, "")
        raise TypeError(f"{kind.name} guard on {source.name()} expects a {wanted.__name__}, "
                        f"got {type(expected).__name__}{hint}")
    if kind is GuardKind.EQUALS_MATCH and not (is_constant(expected) or type(expected) is tuple):
        raise TypeError(f"EQUALS_MATCH guard on {source.name()} needs None, bool, int, float, "
                        f"complex, str, bytes or a tuple, got {type(expected).__name__}; use "
                        "ID_MATCH or TYPE_MATCH")
    return expected


def is_constant(value: object) -> bool:
    """A value EQUALS_MATCH compares by value (tuple items of other types: by identity)."""
    return type(value) in _CONSTANT_TYPES


def format_location(location: Any) -> str:
    """`model.py:12: \\`y = x.reshape(4, -1)\\`` for a location with filename, lineno, text."""
    where = f"{os.path.basename(location.filename)}:{location.lineno}"
    text = " ".join(str(location.text or "").split())
    return f"{where}: `{text}`" if text else where


# ----- readable text (GuardSet.__str__, messages) ----------------------------------------

def readable(value: object) -> str:
    """A deterministic short description (no ids or addresses), cut at 80 characters."""
    text = describe_value(value)
    return text if len(text) <= 80 else text[:77] + "..."


def describe_value(value: object) -> str:
    if type(value) is tuple:
        items = [describe_value(item) for item in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, TensorMatch):
        extra = "" if value.strides is None else f", strides={value.strides!r}"
        extra += "" if value.storage_offset is None else \
            f", storage_offset={value.storage_offset}"
        return (f"{value.type.__name__}(shape={value.shape!r}, dtype={value.dtype!r}, "
                f"requires_grad={value.requires_grad}{extra})")
    if isinstance(value, LengthMatch):
        return f"{value.type.__name__} of length {value.length}"
    if isinstance(value, KeysMatch):
        return f"{value.type.__name__} with keys [{', '.join(map(describe_value, value.keys))}]"
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, Source):
        return value.name()
    if isinstance(value, types.CodeType):
        return (f"<code {value.co_name} at {os.path.basename(value.co_filename)}:"
                f"{value.co_firstlineno}>")
    if isinstance(value, types.ModuleType):
        return value.__name__
    if isinstance(value, np.dtype):  # the guard reads the array's dtype
        return repr(dtypes.from_numpy_dtype(value))
    if isinstance(value, dtypes.dtype) or is_constant(value):
        return repr(value)
    qualname = getattr(value, "__qualname__", None)
    if callable(value) and isinstance(qualname, str):
        module = getattr(value, "__module__", None)
        return qualname if module in (None, "builtins") else f"{module}.{qualname}"
    return f"<{type(value).__name__} object>"
