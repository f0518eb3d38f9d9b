"""Guards: the conditions under which a compiled entry may be reused.

A `Guard(kind, source, expected, location)` states one assumption the trace made about a
value read from the frame (research/dynamo.md §1D, §5.5): its type, identity, value,
tensor metadata, container length or keys, the code of a called function, the absence of
a name that would shadow a builtin, or the grad mode. `location` is the user's line that
made the assumption, so a recompile can say which line to look at.

A `GuardSet` de-duplicates guards by `(kind, source)` and orders them so each check only
runs after the checks that make it safe: global state first, then per source (bases
before the sources read from them) TYPE -> LENGTH/KEYS -> EQUALS/CODE/ID/NOT_PRESENT ->
TENSOR -> DUPLICATE_INPUT. `GuardSet.build_guard_fn(fn)` compiles all checks into ONE
generated Python function with `fn`'s own signature (so CPython binds arguments and
defaults exactly as for `fn`), whose body is a single short-circuit `return`; see
Note [Generated guard function].
Every kind is defined once, as the checks it makes (Note [One definition per guard kind]):
the guard function, the printed guard set and `explain_failure`'s recompile reason are
renderings of those checks.
"""

from __future__ import annotations

import builtins
import enum
import inspect
import os
import re
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from jitgrad.eager import dtypes
from jitgrad.eager.grad_mode import STATE
from jitgrad.eager.tensor import Tensor
from jitgrad.trace import symbolic
from jitgrad.trace.sources import (
    AttrSource,
    FrameValues,
    GlobalSource,
    GradModeSource,
    ItemSource,
    LocalSource,
    SizeSource,
    Source,
    chain,
    describe,
    render_item_key,
    render_key,
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


# Order of checks on one source: the type first, so later checks read safely.
_RANK = {GuardKind.TYPE_MATCH: 0, GuardKind.LENGTH_MATCH: 1, GuardKind.DICT_KEYS_MATCH: 1,
         GuardKind.EQUALS_MATCH: 2, GuardKind.CODE_MATCH: 2, GuardKind.ID_MATCH: 2,
         GuardKind.NOT_PRESENT: 2, GuardKind.TENSOR_MATCH: 3, GuardKind.DUPLICATE_INPUT: 4,
         GuardKind.SIZE_RELATION: 5}
_CONSTANT_TYPES = (type(None), bool, int, float, complex, str, bytes)


class GuardLocation(NamedTuple):
    """The user's line that made a guard. Any object with these three attributes will do."""

    filename: str
    lineno: int
    text: str


C_CONTIGUOUS = "C"  # TensorMatch.strides of a tensor with dynamic dims: C order, any sizes


class TensorMatch(NamedTuple):
    """Expected tensor metadata. `strides` (in elements) and `storage_offset` are checked
    when set. A dynamic dim (Note [Symbolic sizes]) has None in `shape`; such a tensor's
    strides are `C_CONTIGUOUS`, C order for whatever sizes it has."""

    type: type
    shape: tuple[int, ...]
    dtype: dtypes.dtype
    requires_grad: bool
    strides: tuple[int, ...] | None = None
    storage_offset: int | None = None

    @classmethod
    def of(cls, tensor: Tensor, *, strides: bool = False, storage_offset: bool = False,
           dynamic: frozenset[int] = frozenset()) -> TensorMatch:
        """The metadata of a real tensor; `dynamic` dims (of a C-contiguous tensor) unchecked."""
        shape = tuple(None if d in dynamic else n for d, n in enumerate(tensor._data.shape))
        layout = (C_CONTIGUOUS if dynamic else tensor.stride()) if strides else None
        return cls(type(tensor), shape, tensor.dtype, bool(tensor._requires_grad), layout,
                   tensor.storage_offset() if storage_offset else None)


class SizeRelation(NamedTuple):
    """`lhs op rhs` between size expressions (jitgrad.trace.symbolic) whose symbols are
    `SizeSource`s: `("size", source)` leaves."""

    lhs: Any
    op: str
    rhs: Any

    def render(self, size: Callable[[Source], str]) -> str:
        return f"{_render_size(self.lhs, size)} {self.op} {_render_size(self.rhs, size)}"

    def holds(self, size: Callable[[Source], int]) -> bool:
        return symbolic.COMPARISONS[self.op](_size_value(self.lhs, size),
                                             _size_value(self.rhs, size))

    def sources(self) -> list[Source]:
        return _size_sources(self.lhs) + _size_sources(self.rhs)


def _render_size(expr: Any, size: Callable[[Source], str]) -> str:
    if type(expr) is int:
        return repr(expr)
    if expr[0] == "size":
        return size(expr[1])
    return f"({_render_size(expr[1], size)} {expr[0]} {_render_size(expr[2], size)})"


def _size_value(expr: Any, size: Callable[[Source], int]) -> int:
    if type(expr) is int:
        return expr
    if expr[0] == "size":
        return size(expr[1])
    return symbolic.evaluate((expr[0], _size_value(expr[1], size), _size_value(expr[2], size)),
                             ())


def _size_sources(expr: Any) -> list[Source]:
    if type(expr) is int:
        return []
    if expr[0] == "size":
        return [expr[1]]
    return _size_sources(expr[1]) + _size_sources(expr[2])


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """The byte strides of a C-contiguous array of `shape` (as numpy gives a fresh one)."""
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


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
        return f"Guard({self.kind.name}, {self.source.name()}, {_readable(self.expected)})"


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
    if kind is GuardKind.EQUALS_MATCH and not (_is_constant(expected) or type(expected) is tuple):
        raise TypeError(f"EQUALS_MATCH guard on {source.name()} needs None, bool, int, float, "
                        f"complex, str, bytes or a tuple, got {type(expected).__name__}; use "
                        "ID_MATCH or TYPE_MATCH")
    return expected


def _is_constant(value: object) -> bool:
    """A value EQUALS_MATCH compares by value (tuple items of other types: by identity)."""
    return type(value) in _CONSTANT_TYPES


def format_location(location: Any) -> str:
    """`model.py:12: \\`y = x.reshape(4, -1)\\`` for a location with filename, lineno, text."""
    where = f"{os.path.basename(location.filename)}:{location.lineno}"
    text = " ".join(str(location.text or "").split())
    return f"{where}: `{text}`" if text else where


class GuardSet:
    """Guards of one cache entry, de-duplicated by `(kind, source)`, in a stable order."""

    def __init__(self) -> None:
        self._guards: dict[tuple, Guard] = {}
        self._slots: dict[Source, int] = {}  # source -> position; a base before its readers
        self._ordered: list[Guard] | None = None

    def add(self, guard: Guard) -> Guard:
        """Add `guard` unless one of the same kind on the same source exists; return the kept one.

        A TENSOR_MATCH that also checks strides or the storage offset refines an existing one.
        Two guards on one source that expect different values cannot both hold: that is a
        tracer bug, reported with AssertionError.
        """
        key: tuple = (guard.kind, guard.source)
        if guard.kind is GuardKind.SIZE_RELATION:  # several relations read one size
            key = (guard.kind, guard.source, guard.expected)
        old = self._guards.get(key)
        if old is not None:
            if guard.kind is GuardKind.TENSOR_MATCH and old.expected[:4] == guard.expected[:4]:
                if guard.expected[4:] == old.expected[4:] or guard.expected[4:] == (None, None):
                    return old
                new, kept = guard.expected, old.expected
                guard = Guard(guard.kind, guard.source, kept._replace(
                    strides=kept.strides if new.strides is None else new.strides,
                    storage_offset=kept.storage_offset if new.storage_offset is None
                    else new.storage_offset), old.location)
            else:
                assert _same_expected(old, guard), (
                    f"conflicting guards on {guard.source.name()}: {old!r} and {guard!r}")
                return old
        for source in chain(guard.source) + (
                chain(guard.expected) if guard.kind is GuardKind.DUPLICATE_INPUT else []):
            self._slots.setdefault(source, len(self._slots))
        self._guards[key] = guard
        self._ordered = None
        return guard

    def __iter__(self) -> Iterator[Guard]:
        if self._ordered is None:
            self._ordered = sorted(self._guards.values(), key=self._order_key)
        return iter(self._ordered)

    def __len__(self) -> int:
        return len(self._guards)

    def _order_key(self, guard: Guard) -> tuple[int, int, int]:
        if guard.kind is GuardKind.GRAD_MODE:
            return (0, 0, 0)
        slot = self._slots[guard.source]
        if guard.kind is GuardKind.DUPLICATE_INPUT:  # after the checks of both sources
            slot = max(slot, self._slots[guard.expected])
        if guard.kind is GuardKind.SIZE_RELATION:  # after the checks of every tensor it reads
            slot = max(self._slots.get(s.base, slot) for s in guard.expected.sources())
        return (1, slot, _RANK[guard.kind])

    def __str__(self) -> str:
        """One line per guard: its checks as readable source, then `# file:line: text`."""
        rows = [(" and ".join(check.op.text(check, check.text if check.source is None else
                                            check.text.replace(_V, check.source.name()))
                              for check in _checks(guard, _TextOnly())), guard.location)
                for guard in self]
        width = min(max((len(text) for text, _ in rows), default=0), 56)
        return "\n".join(text if loc is None else f"{text:<{width}}  # {format_location(loc)}"
                         for text, loc in rows)

    def build_guard_fn(self, fn: Callable[..., Any]) -> Callable[..., bool]:
        """The guard for calls of `fn`: `guard(*args, **kwargs)` is True when every guard holds.

        `fn` is a function or a bound method (the guard is then bound to the same
        `__self__`). The guard reads `fn`'s `__globals__`, `__builtins__`, `__closure__`
        and defaults, so build one per function object. A call that does not bind raises
        TypeError as `fn` would; any exception while checking means False.
        Raises ValueError when a guard reads a local that is not a parameter of `fn` or a
        free variable `fn` does not have.
        """
        if isinstance(fn, types.MethodType):
            return types.MethodType(self.build_guard_fn(fn.__func__), fn.__self__)
        generator = _GuardCodegen(fn.__code__)
        source = generator.render(list(self), fn.__qualname__)
        guard = _function(fn, generator, source, generator.fn_name, "guard")
        guard.__qualname__ = f"guard of {fn.__qualname__}"
        guard.__jg_guard_source__ = source  # type: ignore[attr-defined]
        return guard

    def build_explainer_fn(self, fn: Callable[..., Any]) -> tuple[Callable[..., Any],
                                                                   list[tuple[Guard, Check]]]:
        """A function with `fn`'s signature that runs the guard's checks one by one and
        returns `(index, True, value read)` for the first that fails, `(index, False,
        exception)` for one that raises, None when all hold; and the (guard, check) of each
        index. Note [One definition per guard kind]."""
        if isinstance(fn, types.MethodType):
            explainer, checks = self.build_explainer_fn(fn.__func__)
            return types.MethodType(explainer, fn.__self__), checks
        generator = _GuardCodegen(fn.__code__)
        name = generator.fn_name.replace("guard_", "explain_", 1)
        source, checks = generator.render_explainer(list(self), fn.__qualname__, name)
        return _function(fn, generator, source, name, "guard explainer"), checks

    def build_reader_fn(self, fn: Callable[..., Any],
                        sources: list[Source]) -> Callable[..., tuple]:
        """A function with `fn`'s signature returning the values of `sources` for a call
        (after its guard passed): how a symbolic entry reads its graph inputs' sizes."""
        generator = _GuardCodegen(fn.__code__)
        items = "".join(f"{generator.expr(source)}, " for source in sources)
        name = generator.fn_name.replace("guard_", "read_", 1)
        source = f"def {name}({_signature(fn.__code__)}):\n    return ({items})\n"
        return _function(fn, generator, source, name, "reader")


def guard_source(guard_fn: Callable[..., bool]) -> str:
    """The generated Python source of a guard built by `GuardSet.build_guard_fn`."""
    try:
        return guard_fn.__jg_guard_source__  # type: ignore[attr-defined]
    except AttributeError:
        raise ValueError(f"{guard_fn!r} was not built by GuardSet.build_guard_fn") from None


def _same_expected(a: Guard, b: Guard) -> bool:
    if a.kind in (GuardKind.ID_MATCH, GuardKind.CODE_MATCH, GuardKind.TYPE_MATCH):
        return a.expected is b.expected
    if a.kind is GuardKind.EQUALS_MATCH:
        return _mismatch_equals(a.expected, b.expected) is None
    return a.expected == b.expected


# ----- readable text (GuardSet.__str__, messages) ----------------------------------------

def _readable(value: object) -> str:
    """A deterministic short description (no ids or addresses), cut at 80 characters."""
    text = _describe(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _describe(value: object) -> str:
    if type(value) is tuple:
        items = [_describe(item) for item in value]
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
        return f"{value.type.__name__} with keys [{', '.join(map(_describe, value.keys))}]"
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
    if isinstance(value, dtypes.dtype) or _is_constant(value):
        return repr(value)
    qualname = getattr(value, "__qualname__", None)
    if callable(value) and isinstance(qualname, str):
        module = getattr(value, "__module__", None)
        return qualname if module in (None, "builtins") else f"{module}.{qualname}"
    return f"<{type(value).__name__} object>"


# ----- checks: each guard kind written once -----------------------------------------------
# Note [One definition per guard kind]
# `_checks(guard, names)` is the one place that says what a guard kind tests: a list of
# `Check`s, each `subject <op> expected` about the value of one source (`_V` in the
# subject's templates). Everything else renders those checks, so no meaning is written twice:
#   - the generated guard function joins their code (GuardSet.build_guard_fn);
#   - the printed guard set joins their text (GuardSet.__str__);
#   - a recompile reason comes from a generated explainer (GuardSet.build_explainer_fn) that
#     runs the same code check by check and, at the first one that fails, returns the
#     subject's value; the op words it (`x.shape[0]: expected 4, got 5`).
# A check cannot say one thing and test another: the reason is what the guard computed.
# A subject has two spellings because the guard reads internals (`x._data.shape`) where a
# user reads the API (`x.shape`); they sit side by side in one Check.

# In a template, _V stands for the source's value and _W for a DUPLICATE_INPUT guard's
# other source; repr() never emits either character.
_V, _W = "\0", "\1"


class Check(NamedTuple):
    """One test of a guard: `subject op expected` (Note [One definition per guard kind]).

    source:   the value `_V` stands for; None for a check that reads its own sources.
    code:     the subject as the guard computes it (an expression over `_V`).
    text:     the subject as a user writes it (`_V` is the source's name).
    op:       how the subject is compared with `expected` (one of the `_Op` classes).
    expected: what the trace saw.
    shown:    how the text and reasons print values of the subject.
    got:      the value a failing check reports, when it is not the subject (code).
    """

    source: Source | None
    code: str
    text: str
    op: type[_Eq]
    expected: Any
    shown: Callable[[Any], str] = _readable
    got: str | None = None


class _Names(Protocol):
    """What building a check's code needs from the guard's code generator."""

    def builtin(self, name: str) -> str: ...
    def const(self, value: object, label: str = "") -> str: ...
    def temp(self, letter: str = "t") -> str: ...
    def expr(self, source: Source) -> str: ...
    def globals_dict(self) -> str: ...


def _checks(guard: Guard, names: _Names) -> list[Check]:
    """What `guard` tests, check by check, in order."""
    kind, expected, source = guard.kind, guard.expected, guard.source
    if kind is GuardKind.GRAD_MODE:
        return [Check(source, _V, _V, _Truth, expected)]
    if kind is GuardKind.TYPE_MATCH:
        return [_type_check(source, expected, names)]
    if kind is GuardKind.ID_MATCH:
        return [Check(source, _V, _V, _Is, expected)]
    if kind is GuardKind.EQUALS_MATCH:
        return [Check(source, _V, _V, _Equals, expected)]
    if kind is GuardKind.CODE_MATCH:
        return [Check(source, f"{_V}.__code__", f"{_V}.__code__", _Is, expected)]
    if kind is GuardKind.LENGTH_MATCH:
        return [_type_check(source, expected.type, names),
                Check(source, f"{names.builtin('len')}({_V})", f"len({_V})", _Eq,
                      expected.length)]
    if kind is GuardKind.DICT_KEYS_MATCH:
        return [_type_check(source, expected.type, names),
                Check(source, f"{names.builtin('tuple')}({_V})", f"list({_V})", _Eq,
                      expected.keys, _key_list)]
    if kind is GuardKind.NOT_PRESENT:
        return [_absent_check(source, names)]
    if kind is GuardKind.DUPLICATE_INPUT:
        return [Check(source, _V, _V, _Same, expected, lambda other: other.name())]
    if kind is GuardKind.SIZE_RELATION:
        sizes = list(dict.fromkeys(expected.sources()))
        return [Check(None, expected.render(names.expr), expected.render(lambda size: size.name()),
                      _Holds, expected,
                      got="(" + "".join(f"{names.expr(s)}, " for s in sizes) + ")")]
    return [_type_check(source, expected.type, names), *_tensor_checks(source, expected, names)]


def _type_check(source: Source, cls: type, names: _Names) -> Check:
    return Check(source, f"{names.builtin('type')}({_V})", f"type({_V})", _Is, cls)


def _absent_check(source: Source, names: _Names) -> Check:
    if isinstance(source, GlobalSource):
        test = f"{source.global_name!r} not in {names.globals_dict()}"
        return Check(None, test, f"{source.global_name!r} not in G", _Absent, source,
                     got=names.expr(source))
    assert source.base is not None, "NOT_PRESENT sources are validated by Guard"
    if isinstance(source, AttrSource):
        test = f"{source.attr!r} not in {_V}.__dict__"
        return Check(source.base, test, test, _Absent, source,
                     got=f"{_V}.__dict__[{source.attr!r}]")
    assert isinstance(source, ItemSource), "NOT_PRESENT sources are validated by Guard"
    key = render_item_key(source.key, names)
    text = source.key.name() if isinstance(source.key, Source) else repr(source.key)
    return Check(source.base, f"{key} not in {_V}", f"{text} not in {_V}", _Absent, source,
                 got=f"{_V}[{key}]")


def _tensor_checks(source: Source, expected: TensorMatch, names: _Names) -> list[Check]:
    """Shape, dtype, requires_grad, strides and storage offset of a tensor (its type is
    checked first); the array is read once, into a temporary."""
    data = names.temp("d")
    array = f"({data} := {_V}._data)"
    if None in expected.shape:  # dynamic dims: the rank and the static sizes
        checks = [Check(source, f"{names.builtin('len')}({array}.shape)", f"{_V}.dim()", _Eq,
                        len(expected.shape))]
        checks += [Check(source, f"{data}.shape[{d}]", f"{_V}.shape[{d}]", _Eq, n)
                   for d, n in enumerate(expected.shape) if n is not None]
    else:
        checks = [Check(source, f"{array}.shape", f"{_V}.shape", _Dims, expected.shape)]
    checks += [Check(source, f"{data}.dtype", f"{_V}.dtype", _Eq, expected.dtype.np),
               Check(source, f"{_V}._requires_grad", f"{_V}.requires_grad", _Truth,
                     expected.requires_grad)]
    itemsize = expected.dtype.np.itemsize
    if expected.strides == C_CONTIGUOUS:
        checks.append(Check(source, f"{data}.strides == {names.const(c_strides)}({data}.shape, "
                            f"{itemsize})", f"{_V}.is_contiguous()", _Truth, True))
    elif expected.strides is not None:
        checks.append(Check(source, f"{data}.strides", f"{_V}.stride()", _Eq,
                            tuple(s * itemsize for s in expected.strides),
                            lambda strides: repr(tuple(s // itemsize for s in strides))))
    if expected.storage_offset is not None:
        checks.append(Check(source, f"{_V}.storage_offset()", f"{_V}.storage_offset()", _Eq,
                            expected.storage_offset))
    return checks


class _Eq:
    """How a check compares its subject with `expected`: `form`, filled with the subject and
    the expected value as code (`value_code`) or as text (`check.shown`), and the reason a
    failed check gives (`subject` filled in, `got` the value it read). This one: `==`."""

    form = "{subject} == {expected}"

    @classmethod
    def code(cls, check: Check, subject: str, names: _Names) -> str:
        return cls.form.format(subject=subject, expected=cls.value_code(check, names))

    @classmethod
    def text(cls, check: Check, subject: str) -> str:
        return cls.form.format(subject=subject, expected=check.shown(check.expected))

    @staticmethod
    def value_code(check: Check, names: _Names) -> str:
        return render_key(check.expected) or names.const(check.expected)

    @staticmethod
    def reason(check: Check, subject: str, got: Any) -> str:
        return f"{subject}: expected {check.shown(check.expected)}, got {check.shown(got)}"


class _Dims(_Eq):
    """`==` on a shape: the reason names the first dim that differs."""

    @staticmethod
    def reason(check: Check, subject: str, got: Any) -> str:
        expected = check.expected
        if len(got) != len(expected):
            return _Eq.reason(check, subject, got)
        dim = next(d for d, (a, b) in enumerate(zip(expected, got, strict=True)) if a != b)
        return f"{subject}[{dim}]: expected {expected[dim]}, got {got[dim]}"


class _Is(_Eq):
    """Identity: a type, a function, a module, a code object."""

    form = "{subject} is {expected}"

    @staticmethod
    def value_code(check: Check, names: _Names) -> str:
        e = check.expected
        return repr(e) if e is None or type(e) is bool else names.const(e)

    @staticmethod
    def reason(check: Check, subject: str, got: Any) -> str:
        expected = check.expected
        if isinstance(expected, type) and isinstance(got, type):
            return f"{subject}: expected {_type_pair(expected, got)}"
        if isinstance(expected, types.CodeType) and isinstance(got, types.CodeType):
            return f"{subject}: expected {_readable(expected)}, got {_readable(got)}"
        other = "another " if type(got) is type(expected) else ""
        return (f"{subject}: expected the object seen while tracing ({_readable(expected)}), "
                f"got {other}{_readable(got)}")


class _Same(_Is):
    """DUPLICATE_INPUT: the object another source reads (`_W`)."""

    @staticmethod
    def value_code(check: Check, names: _Names) -> str:
        return _W

    @staticmethod
    def reason(check: Check, subject: str, got: Any) -> str:
        return (f"{subject}: expected the same object as {check.expected.name()} (they were "
                "one object while tracing), got a different one")


class _Truth(_Eq):
    """`subject` when True is expected, `not subject` when False."""

    @classmethod
    def code(cls, check: Check, subject: str, names: _Names) -> str:
        return subject if check.expected else f"not {subject}"

    @classmethod
    def text(cls, check: Check, subject: str) -> str:
        return subject if check.expected else f"not {subject}"

    @staticmethod
    def reason(check: Check, subject: str, got: Any) -> str:
        return f"{subject}: expected {check.expected}, got {bool(got)}"


class _Equals(_Eq):
    """EQUALS_MATCH: the same value with the same types, recursively through tuples."""

    @classmethod
    def code(cls, check: Check, subject: str, names: _Names) -> str:
        return _exact(subject, check.expected, names)

    @classmethod
    def text(cls, check: Check, subject: str) -> str:
        e = check.expected
        return f"{subject} {'is' if e is None or type(e) is bool else '=='} {_describe(e)}"

    @staticmethod
    def reason(check: Check, subject: str, got: Any) -> str:
        return f"{subject}: {_mismatch_equals(check.expected, got)}"


class _Absent(_Eq):
    """NOT_PRESENT: the subject is the test; `got` reads the value that is there."""

    form = "{subject}"

    @staticmethod
    def reason(check: Check, subject: str, got: Any) -> str:
        return f"{describe(check.expected)}: expected no such name, got {_readable(got)}"


class _Holds(_Absent):
    """SIZE_RELATION: the subject is the relation; `got` reads the sizes it relates."""

    @staticmethod
    def reason(check: Check, subject: str, got: Any) -> str:
        sizes = dict.fromkeys(check.expected.sources())
        values = ", ".join(f"{s.name()} is {n}" for s, n in zip(sizes, got, strict=True))
        return f"{subject} does not hold ({values})"


def _exact(expr: str, value: object, names: _Names) -> str:
    """The test that `expr` equals `value` with the same types, recursively."""
    if value is None or type(value) is bool:
        return f"{expr} is {value!r}"
    if type(value) is tuple:
        checks = [f"{names.builtin('type')}({expr}) is {names.const(tuple)}",
                  f"{names.builtin('len')}({expr}) == {len(value)}"]
        checks += [_exact(f"{expr}[{i}]", item, names) for i, item in enumerate(value)]
        return " and ".join(checks)
    if not _is_constant(value):
        return f"{expr} is {names.const(value)}"
    check_type = f"{names.builtin('type')}({expr}) is {names.const(type(value))}"
    if type(value) is float and value != value:
        return f"{check_type} and {expr} != {expr}"
    return f"{check_type} and {expr} == {render_key(value) or names.const(value)}"


class _TextOnly:
    """Names for checks whose code nobody reads (GuardSet.__str__ prints their text)."""

    def builtin(self, name: str) -> str:
        return name

    def const(self, value: object, label: str = "") -> str:
        return _readable(value)

    def temp(self, letter: str = "t") -> str:
        return letter

    def expr(self, source: Source) -> str:
        return source.name()

    def globals_dict(self) -> str:
        return "G"


def _key_list(keys: Any) -> str:
    return "[" + ", ".join(map(_describe, keys)) + "]"


def _type_pair(expected: type, got: type) -> str:
    a, b = expected.__name__, got.__name__
    if a == b:  # two classes of one name: say where each comes from
        a = f"{expected.__module__}.{expected.__qualname__}"
        b = f"{got.__module__}.{got.__qualname__}"
    return f"{a}, got {b}"


# ----- explain_failure --------------------------------------------------------------------

@dataclass(frozen=True)
class FailedGuard:
    """The first guard that does not hold for a call, and why in words.

    guard:  the failing guard, or None when the arguments do not bind to the function.
    reason: `x.shape[0]: expected 4, got 5`.
    """

    guard: Guard | None
    reason: str

    @property
    def message(self) -> str:
        """The reason plus the user line that made the guard."""
        if self.guard is None or self.guard.location is None:
            return self.reason
        return f"{self.reason} (guard made at {format_location(self.guard.location)})"

    def __str__(self) -> str:
        return self.message


def explain_failure(guard_set: GuardSet, fn: Callable[..., Any], args: tuple,
                    kwargs: dict[str, Any]) -> FailedGuard | None:
    """The first guard that fails on a call `fn(*args, **kwargs)`, None when all hold.

    Runs the guard's own checks one by one (Note [One definition per guard kind]); slow
    (a generated function per guard set and function) and only for messages.
    """
    try:
        FrameValues.bind(fn, args, kwargs)
    except TypeError as err:
        return FailedGuard(None, f"the arguments do not bind to {fn.__qualname__}: {err}")
    explainer, checks = guard_set.build_explainer_fn(fn)
    found = explainer(*args, **kwargs)
    if found is None:
        return None
    index, checked, got = found
    guard, check = checks[index]
    if not checked:  # the generated guard treats any exception as failure too
        return FailedGuard(guard, f"{describe(guard.source)}: could not be checked "
                                  f"({type(got).__name__}: {got})")
    subject = check.text if check.source is None else check.text.replace(
        _V, describe(check.source))
    return FailedGuard(guard, check.op.reason(check, subject, got))


def changed_numbers(guard_set: GuardSet, fn: Callable[..., Any], args: tuple,
                    kwargs: dict[str, Any]) -> list[Source]:
    """Sources of Python numbers (int, float) whose value differs from the traced one in
    this call (the same type, another value): every one, not only the first failing guard,
    so one recompile makes them all graph inputs (Note [Unspecialized numbers])."""
    try:
        frame = FrameValues.bind(fn, args, kwargs)
    except TypeError:
        return []
    changed = []
    for guard in guard_set:
        if guard.kind is not GuardKind.EQUALS_MATCH or type(guard.expected) not in (int, float):
            continue
        try:
            value = guard.source.get(frame)
        except Exception:  # noqa: BLE001 - a base that changed type: not a changed number
            continue
        if type(value) is type(guard.expected) and _mismatch_equals(guard.expected, value):
            changed.append(guard.source)
    return changed


def changed_sizes(guard_set: GuardSet, fn: Callable[..., Any], args: tuple,
                  kwargs: dict[str, Any]) -> list[SizeSource]:
    """The dims of guarded tensors whose size differs from the traced one in this call (a
    tensor of the same type, rank and dtype): every one, so one recompile makes them all
    dynamic (automatic dynamic, Note [Symbolic sizes])."""
    try:
        frame = FrameValues.bind(fn, args, kwargs)
    except TypeError:
        return []
    changed = []
    for guard in guard_set:
        if guard.kind is not GuardKind.TENSOR_MATCH:
            continue
        try:
            value = guard.source.get(frame)
        except Exception:  # noqa: BLE001 - a base that changed type: not a changed size
            continue
        expected = guard.expected
        if type(value) is not expected.type or value._data.dtype != expected.dtype.np or \
                value._data.ndim != len(expected.shape):
            continue
        changed += [SizeSource(guard.source, d) for d, (want, got) in
                    enumerate(zip(expected.shape, value._data.shape, strict=True))
                    if want is not None and want != got]
    return changed


def _mismatch_equals(expected: object, value: object) -> str | None:
    if type(value) is not type(expected):
        return (f"expected {_readable(expected)} ({type(expected).__name__}), "
                f"got {_readable(value)} ({type(value).__name__})")
    if type(expected) is tuple:
        items = tuple(value)  # type: ignore[call-overload]
        if len(items) != len(expected) or any(
                _mismatch_equals(e, v) is not None for e, v in zip(expected, items, strict=True)):
            return f"expected {_readable(expected)}, got {_readable(value)}"
        return None
    if not _is_constant(expected):
        same = value is expected
        return None if same else f"expected {_readable(expected)} (the same object), got another"
    both_nan = type(expected) is float and value != value and expected != expected
    same = value == expected or both_nan
    return None if same else f"expected {_readable(expected)}, got {_readable(value)}"


# ----- code generation --------------------------------------------------------------------
# Note [Generated guard function]
# For `def f(self, x, n=2, *args, flag, **kw)` with guards on self, self.w, x, n the
# generated guard reads:
#
#     def __jg_guard_f(self, x, n, *args, flag, **kw):
#         try:
#             return (
#                 type(self) is __jg_Net
#                 and type(__jg_t0 := self.w) is __jg_Parameter and (__jg_d1 := __jg_t0._data)...
#                 and type(n) is int and n == 2
#             )
#         except Exception:
#             return False
#
# Defaults are not in the source: the function object is created with f's __defaults__
# and __kwdefaults__, so binding is CPython's own. A source read more than once is stored
# in a temporary (walrus) at its first use, which comes after its base's type check since
# guards are ordered base-first. Globals, builtins and cells are read through __jg_G,
# __jg_B and __jg_C (f's own dicts and cells); other constants are names in the guard's
# globals. Every name the guard introduces starts with a prefix no parameter uses.
# The explainer (GuardSet.build_explainer_fn) runs the same tests one statement each and
# returns `(index, True, value)` at the first that fails, `(index, False, exception)` at
# one that raises; what it returns is read without making new temporaries.


class _GuardCodegen:
    """Renders checks into the source of functions with a code object's signature."""

    def __init__(self, code: types.CodeType) -> None:
        self.code = code
        self.params = _parameters(code)
        prefix = "__jg_"
        while any(p.startswith(prefix) for p in self.params):
            prefix = "_" + prefix
        self.prefix = prefix
        self.names = {key: f"{prefix}{key}" for key in ("G", "B", "C")}
        self.fn_name = f"{prefix}guard_{re.sub(r'[^0-9a-zA-Z_]', '_', code.co_name)}"
        self.consts: dict[str, Any] = {}
        self._const_names: dict[int, str] = {}
        self._temps = 0
        self._uses: dict[Source | None, int] = {}
        self._rendered: dict[Source, str] = {}
        self._quiet = False  # reading a value to report: no new temporaries

    # SourceEnv and _Names -----------------------------------------------------------------
    def expr(self, source: Source) -> str:
        if isinstance(source, LocalSource):
            if source.local_name not in self.params:
                raise ValueError(
                    f"a guard reads {source.name()!r}, which is not a parameter of "
                    f"{self.code.co_name}({', '.join(self.params)}); guards run before the "
                    "body, so they can only read arguments")
            return source.local_name
        if source in self._rendered:
            return self._rendered[source]
        text = source.reconstruct(self)
        if self._quiet or self._uses.get(source, 0) <= 1:
            return text
        name = self.temp()
        self._rendered[source] = name
        return f"({name} := {text})"

    def const(self, value: object, label: str = "") -> str:
        if (isinstance(value, type) and getattr(builtins, value.__name__, None) is value
                and value.__name__ not in self.params):
            return value.__name__
        if id(value) in self._const_names:
            return self._const_names[id(value)]
        if not label:
            label = value.co_name if isinstance(value, types.CodeType) else _readable(value)
        base = self.prefix + (re.sub(r"\W+", "_", label.rsplit(".", 1)[-1]).strip("_") or "k")
        name, n = base, 1
        while name in self.consts:
            n += 1
            name = f"{base}_{n}"
        self.consts[name] = value
        self._const_names[id(value)] = name
        return name

    def builtin(self, name: str) -> str:
        """How the guard names a builtin it calls: its own name unless a parameter shadows it."""
        return name if name not in self.params else self.const(getattr(builtins, name), name)

    def globals_dict(self) -> str:
        return self.names["G"]

    def builtins_dict(self) -> str:
        return self.names["B"]

    def closure_cell(self, name: str) -> str:
        if name not in self.code.co_freevars:
            raise ValueError(f"a guard reads the free variable {name!r}, but "
                             f"{self.code.co_name} closes over {self.code.co_freevars}")
        return f"{self.names['C']}[{self.code.co_freevars.index(name)}]"

    def grad_state(self) -> str:
        return self.const(STATE, "grad_mode")

    def temp(self, letter: str = "t") -> str:
        self._temps += 1
        return f"{self.prefix}{letter}{self._temps - 1}"

    # rendering -----------------------------------------------------------------------
    def render(self, guards: list[Guard], qualname: str) -> str:
        """The guard function's source for `guards` (already in order)."""
        lines: dict[Guard, list[str]] = {}  # one line per guard: its tests
        for test, source, other, guard, _ in self._tests(guards):
            lines.setdefault(guard, []).append(self._fill(test, source, other))
        body = "\n            and ".join(
            " and ".join(tests) + ("" if guard.location is None else
                                   f"  # {format_location(guard.location)}")  # one line
            for guard, tests in lines.items()) or "True"
        return (f"def {self.fn_name}({_signature(self.code)}):\n"
                f"    # guards of {qualname}\n"
                f"    try:\n"
                f"        return (\n"
                f"            {body}\n"
                f"        )\n"
                f"    except Exception:\n"
                f"        return False\n")

    def render_explainer(self, guards: list[Guard], qualname: str,
                         name: str) -> tuple[str, list[tuple[Guard, Check]]]:
        """The explainer's source for `guards`, and the (guard, check) of each statement."""
        error = f"{self.prefix}error"
        statements, checks = [], []
        for index, (test, source, other, guard, check) in enumerate(self._tests(guards)):
            condition = self._fill(test, source, other)
            self._quiet = True
            got = self._fill(check.got or check.code, source, other)
            self._quiet = False
            statements.append(f"    try:\n"
                              f"        if not ({condition}):\n"
                              f"            return {index}, True, {got}\n"
                              f"    except Exception as {error}:\n"
                              f"        return {index}, False, {error}\n")
            checks.append((guard, check))
        return (f"def {name}({_signature(self.code)}):\n"
                f"    # the first failing guard of {qualname}\n"
                + "".join(statements) + "    return None\n"), checks

    def _tests(self, guards: list[Guard]) -> list[tuple[str, Source | None, Source | None,
                                                        Guard, Check]]:
        """`(test template, source, other source, guard, check)` per distinct test, in order,
        with the uses of every source counted (a source read twice gets a temporary)."""
        tests: dict[tuple[Source | None, str, Source | None], tuple[Guard, Check]] = {}
        for guard in guards:
            other = guard.expected if guard.kind is GuardKind.DUPLICATE_INPUT else None
            for check in _checks(guard, self):
                test = check.op.code(check, check.code, self)
                tests.setdefault((check.source, test, other), (guard, check))
        self._count_uses([s for source, _, other in tests for s in (source, other)])
        for source, test, other in tests:
            for value, placeholder in ((source, _V), (other, _W)):
                self._uses[value] = self._uses.get(value, 0) + test.count(placeholder)
        return [(test, source, other, guard, check)
                for (source, test, other), (guard, check) in tests.items()]

    def _fill(self, template: str, source: Source | None, other: Source | None) -> str:
        """`template` with each placeholder replaced by its source's expression."""
        pieces = re.split(f"({_V}|{_W})", template)
        return "".join(self.expr(source) if piece == _V and source is not None else
                       self.expr(other) if piece == _W and other is not None else piece
                       for piece in pieces)

    def _count_uses(self, sources: list[Source | None]) -> None:
        """Each distinct source read from a base counts as one use of that base."""
        seen: set[Source] = set()
        for source in sources:
            if source is None:
                continue
            for link in chain(source):
                if link not in seen:
                    seen.add(link)
                    if link.base is not None:
                        self._uses[link.base] = self._uses.get(link.base, 0) + 1


def _function(fn: Callable[..., Any], generator: _GuardCodegen, text: str, name: str,
              what: str) -> types.FunctionType:
    """The function `name` defined by `text`, reading `fn`'s globals, builtins and cells and
    binding arguments with `fn`'s defaults."""
    namespace: dict[str, Any] = {"__builtins__": builtins}
    exec(compile(text, f"<jitgrad {what} for {fn.__qualname__}>", "exec"), namespace)
    env = {"__builtins__": builtins, **generator.consts,
           generator.names["G"]: fn.__globals__, generator.names["B"]: fn.__builtins__,
           generator.names["C"]: fn.__closure__}
    made = types.FunctionType(namespace[name].__code__, env, name, fn.__defaults__)
    made.__kwdefaults__ = fn.__kwdefaults__
    return made


def _parameters(code: types.CodeType) -> list[str]:
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return list(code.co_varnames[:count])


def _signature(code: types.CodeType) -> str:
    """`a, b, /, c, *args, d, **kw` for a code object; defaults come from the function object."""
    names = code.co_varnames
    positional = list(names[:code.co_argcount])
    if code.co_posonlyargcount:
        positional.insert(code.co_posonlyargcount, "/")
    kwonly = list(names[code.co_argcount:code.co_argcount + code.co_kwonlyargcount])
    rest = code.co_argcount + code.co_kwonlyargcount
    params = positional
    if code.co_flags & inspect.CO_VARARGS:
        params.append("*" + names[rest])
        rest += 1
    elif kwonly:
        params.append("*")
    params += kwonly
    if code.co_flags & inspect.CO_VARKEYWORDS:
        params.append("**" + names[rest])
    return ", ".join(params)

