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
`explain_failure` re-evaluates the guards one by one for a readable recompile reason.
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
from typing import Any, NamedTuple

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
        """One line per guard: the check as readable source, then `# file:line: text`."""
        rows = [(_text(guard), guard.location) for guard in self]
        width = min(max((len(check) for check, _ in rows), default=0), 56)
        return "\n".join(check if loc is None else f"{check:<{width}}  # {format_location(loc)}"
                         for check, loc in rows)

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
        code = fn.__code__
        generator = _GuardCodegen(code)
        source = generator.render(list(self), fn.__qualname__)
        namespace: dict[str, Any] = {"__builtins__": builtins}
        exec(compile(source, f"<jitgrad guard for {fn.__qualname__}>", "exec"), namespace)
        generated = namespace[generator.fn_name]
        env = {"__builtins__": builtins, **generator.consts,
               generator.names["G"]: fn.__globals__, generator.names["B"]: fn.__builtins__,
               generator.names["C"]: fn.__closure__}
        guard = types.FunctionType(generated.__code__, env, generator.fn_name, fn.__defaults__)
        guard.__kwdefaults__ = fn.__kwdefaults__
        guard.__qualname__ = f"guard of {fn.__qualname__}"
        guard.__jg_guard_source__ = source  # type: ignore[attr-defined]
        return guard


    def build_reader_fn(self, fn: Callable[..., Any],
                        sources: list[Source]) -> Callable[..., tuple]:
        """A function with `fn`'s signature returning the values of `sources` for a call
        (after its guard passed): how a symbolic entry reads its graph inputs' sizes."""
        code = fn.__code__
        generator = _GuardCodegen(code)
        items = "".join(f"{generator.expr(source)}, " for source in sources)
        name = generator.fn_name.replace("guard_", "read_", 1)
        source = f"def {name}({_signature(code)}):\n    return ({items})\n"
        namespace: dict[str, Any] = {"__builtins__": builtins}
        exec(compile(source, f"<jitgrad reader for {fn.__qualname__}>", "exec"), namespace)
        env = {"__builtins__": builtins, **generator.consts,
               generator.names["G"]: fn.__globals__, generator.names["B"]: fn.__builtins__,
               generator.names["C"]: fn.__closure__}
        reader = types.FunctionType(namespace[name].__code__, env, name, fn.__defaults__)
        reader.__kwdefaults__ = fn.__kwdefaults__
        return reader


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
    if isinstance(value, dtypes.dtype) or _is_constant(value):
        return repr(value)
    qualname = getattr(value, "__qualname__", None)
    if callable(value) and isinstance(qualname, str):
        module = getattr(value, "__module__", None)
        return qualname if module in (None, "builtins") else f"{module}.{qualname}"
    return f"<{type(value).__name__} object>"


def _text(guard: Guard) -> str:
    """The check of `guard` as readable source, e.g. `type(self) is Net`."""
    name, expected, kind = guard.source.name(), guard.expected, guard.kind
    if kind is GuardKind.GRAD_MODE:
        return name if expected else f"not {name}"
    if kind is GuardKind.TYPE_MATCH:
        return f"type({name}) is {_readable(expected)}"
    if kind is GuardKind.ID_MATCH:
        return f"{name} is {_readable(expected)}"
    if kind is GuardKind.EQUALS_MATCH:
        op = "is" if expected is None or type(expected) is bool else "=="
        return f"{name} {op} {_describe(expected)}"
    if kind is GuardKind.CODE_MATCH:
        return f"{name}.__code__ is {_readable(expected)}"
    if kind is GuardKind.LENGTH_MATCH:
        return f"type({name}) is {_readable(expected.type)} and len({name}) == {expected.length}"
    if kind is GuardKind.DICT_KEYS_MATCH:
        return (f"type({name}) is {_readable(expected.type)} and "
                f"list({name}) == {_key_list(expected.keys)}")
    if kind is GuardKind.NOT_PRESENT:
        return _absent_text(guard.source)
    if kind is GuardKind.DUPLICATE_INPUT:
        return f"{name} is {expected.name()}"
    if kind is GuardKind.SIZE_RELATION:
        return expected.render(lambda source: source.name())
    return _tensor_text(name, expected)


def _absent_text(source: Source) -> str:
    if isinstance(source, GlobalSource):
        return f"{source.global_name!r} not in G"
    if isinstance(source, AttrSource):
        return f"{source.attr!r} not in {source.base.name()}.__dict__"
    key = source.key.name() if isinstance(source.key, Source) else repr(source.key)
    return f"{key} not in {source.base.name()}"


def _tensor_text(name: str, expected: TensorMatch) -> str:
    if None in expected.shape:  # dynamic dims: the rank and the static sizes
        shape = [f"{name}.dim() == {len(expected.shape)}"] + [
            f"{name}.shape[{d}] == {n}" for d, n in enumerate(expected.shape) if n is not None]
    else:
        shape = [f"{name}.shape == {expected.shape!r}"]
    checks = [f"type({name}) is {_readable(expected.type)}", *shape,
              f"{name}.dtype == {expected.dtype!r}",
              f"{name}.requires_grad" if expected.requires_grad else f"not {name}.requires_grad"]
    if expected.strides == C_CONTIGUOUS:
        checks.append(f"{name}.is_contiguous()")
    elif expected.strides is not None:
        checks.append(f"{name}.stride() == {expected.strides!r}")
    if expected.storage_offset is not None:
        checks.append(f"{name}.storage_offset() == {expected.storage_offset}")
    return " and ".join(checks)


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
    """Evaluate the guards one by one on a call `fn(*args, **kwargs)`; the first failing one.

    Slow (it binds with `inspect`) and only for messages: the generated guard function
    answers the same question in well under a microsecond. None when every guard holds.
    """
    try:
        frame = FrameValues.bind(fn, args, kwargs)
    except TypeError as err:
        return FailedGuard(None, f"the arguments do not bind to {fn.__qualname__}: {err}")
    for guard in guard_set:
        try:
            reason = _mismatch(guard, frame)
        except Exception as err:  # the generated guard treats any exception as failure too
            reason = f"{describe(guard.source)}: could not be checked ({type(err).__name__}: {err})"
        if reason is not None:
            return FailedGuard(guard, reason)
    return None


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


def _mismatch(guard: Guard, frame: FrameValues) -> str | None:
    """Why `guard` fails in `frame`, as `what: expected X, got Y`; None when it holds."""
    if guard.kind is GuardKind.NOT_PRESENT:
        return _mismatch_absent(guard.source, frame)
    name, expected = describe(guard.source), guard.expected
    value = guard.source.get(frame)
    kind = guard.kind
    if kind in (GuardKind.TYPE_MATCH, GuardKind.LENGTH_MATCH, GuardKind.DICT_KEYS_MATCH,
                GuardKind.TENSOR_MATCH):
        wanted = expected if kind is GuardKind.TYPE_MATCH else expected.type
        if type(value) is not wanted:
            return f"type({name}): expected {_type_pair(wanted, type(value))}"
    if kind is GuardKind.GRAD_MODE and bool(value) != expected:
        return f"{name}: expected {expected}, got {bool(value)}"
    if kind is GuardKind.ID_MATCH and value is not expected:
        other = "another " if type(value) is type(expected) else ""
        return (f"{name}: expected the object seen while tracing ({_readable(expected)}), "
                f"got {other}{_readable(value)}")
    if kind is GuardKind.EQUALS_MATCH:
        diff = _mismatch_equals(expected, value)
        return None if diff is None else f"{name}: {diff}"
    if kind is GuardKind.CODE_MATCH and value.__code__ is not expected:
        return f"{name}.__code__: expected {_readable(expected)}, got {_readable(value.__code__)}"
    if kind is GuardKind.LENGTH_MATCH and len(value) != expected.length:
        return f"len({name}): expected {expected.length}, got {len(value)}"
    if kind is GuardKind.DICT_KEYS_MATCH and tuple(value) != expected.keys:
        return f"list({name}): expected {_key_list(expected.keys)}, got {_key_list(value)}"
    if kind is GuardKind.TENSOR_MATCH:
        return _mismatch_tensor(name, expected, value)
    if kind is GuardKind.SIZE_RELATION and not expected.holds(lambda s: s.get(frame)):
        got = ", ".join(f"{s.name()} is {s.get(frame)}" for s in dict.fromkeys(
            expected.sources()))
        return f"{expected.render(lambda s: s.name())} does not hold ({got})"
    if kind is GuardKind.DUPLICATE_INPUT and value is not expected.get(frame):
        return (f"{name}: expected the same object as {expected.name()} (they were one object "
                "while tracing), got a different one")
    return None


def _key_list(keys: Any) -> str:
    return "[" + ", ".join(map(_describe, keys)) + "]"


def _type_pair(expected: type, got: type) -> str:
    a, b = expected.__name__, got.__name__
    if a == b:  # two classes of one name: say where each comes from
        a = f"{expected.__module__}.{expected.__qualname__}"
        b = f"{got.__module__}.{got.__qualname__}"
    return f"{a}, got {b}"


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


def _mismatch_tensor(name: str, expected: TensorMatch, value: Tensor) -> str | None:
    shape = tuple(value._data.shape)
    if len(shape) != len(expected.shape):
        return f"{name}.shape: expected {expected.shape!r}, got {shape!r}"
    for dim, (want, got) in enumerate(zip(expected.shape, shape, strict=True)):
        if want is not None and want != got:
            return f"{name}.shape[{dim}]: expected {want}, got {got}"
    if value._data.dtype != expected.dtype.np:
        return f"{name}.dtype: expected {expected.dtype!r}, got {value.dtype!r}"
    if bool(value._requires_grad) != expected.requires_grad:
        return f"{name}.requires_grad: expected {expected.requires_grad}, got {value.requires_grad}"
    if expected.strides == C_CONTIGUOUS:
        if value._data.strides != c_strides(shape, value._data.itemsize):
            return f"{name}.stride(): expected C order, got {value.stride()!r}"
    elif expected.strides is not None and value.stride() != expected.strides:
        return f"{name}.stride(): expected {expected.strides!r}, got {value.stride()!r}"
    if expected.storage_offset is not None and value.storage_offset() != expected.storage_offset:
        return (f"{name}.storage_offset(): expected {expected.storage_offset}, got "
                f"{value.storage_offset()}")
    return None


def _mismatch_absent(source: Source, frame: FrameValues) -> str | None:
    if isinstance(source, GlobalSource):
        present = source.global_name in frame.globals
    elif isinstance(source, AttrSource):
        present = source.attr in source.base.get(frame).__dict__
    else:
        present = source.key_value(frame) in source.base.get(frame)
    if not present:
        return None
    return f"{source.name()}: expected no such name, got {_readable(source.get(frame))}"


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

# In a check template, _V stands for the source's value and _W for a DUPLICATE_INPUT
# guard's other source; repr() never emits either character.
_V, _W = "\0", "\1"


class _GuardCodegen:
    """Renders guards into the source of one guard function for a code object's signature."""

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
        self._uses: dict[Source, int] = {}
        self._rendered: dict[Source, str] = {}

    # SourceEnv -----------------------------------------------------------------------
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
        if self._uses.get(source, 0) <= 1:
            return text
        name = self._temp()
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

    # rendering -----------------------------------------------------------------------
    def _temp(self, letter: str = "t") -> str:
        self._temps += 1
        return f"{self.prefix}{letter}{self._temps - 1}"

    def render(self, guards: list[Guard], qualname: str) -> str:
        """The guard function's source for `guards` (already in order)."""
        parts: dict[tuple[Source | None, str, Source | None], Guard] = {}
        for guard in guards:
            other = guard.expected if guard.kind is GuardKind.DUPLICATE_INPUT else None
            for source, template in self._parts(guard):
                parts.setdefault((source, template, other), guard)
        self._count_uses([s for source, _, other in parts for s in (source, other)])
        for source, template, other in parts:
            for value, placeholder in ((source, _V), (other, _W)):
                self._uses[value] = self._uses.get(value, 0) + template.count(placeholder)
        lines = []
        for (source, template, other), guard in parts.items():
            text = "".join(self._fill(piece, source, other)
                           for piece in re.split(f"({_V}|{_W})", template))
            loc = f"  # {format_location(guard.location)}" if guard.location is not None else ""
            lines.append(text + loc)  # format_location keeps the text on one line
        body = "\n            and ".join(lines) if lines else "True"
        return (f"def {self.fn_name}({_signature(self.code)}):\n"
                f"    # guards of {qualname}\n"
                f"    try:\n"
                f"        return (\n"
                f"            {body}\n"
                f"        )\n"
                f"    except Exception:\n"
                f"        return False\n")

    def _fill(self, piece: str, source: Source | None, other: Source | None) -> str:
        """A piece of a split template: a placeholder becomes its source's expression."""
        value = source if piece == _V else other if piece == _W else None
        return piece if value is None else self.expr(value)

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

    def _parts(self, guard: Guard) -> list[tuple[Source | None, str]]:
        """`(source, template)` checks of one guard; `_V` in a template is the source's value."""
        kind, expected, source = guard.kind, guard.expected, guard.source
        if kind is GuardKind.GRAD_MODE:
            return [(source, _V if expected else f"not {_V}")]
        if kind is GuardKind.TYPE_MATCH:
            return [(source, f"{self.builtin('type')}({_V}) is {self.const(expected)}")]
        if kind is GuardKind.ID_MATCH:
            target = repr(expected) if expected is None or type(expected) is bool else self.const(
                expected)
            return [(source, f"{_V} is {target}")]
        if kind is GuardKind.EQUALS_MATCH:
            return [(source, check) for check in self._exact(_V, expected)]
        if kind is GuardKind.CODE_MATCH:
            return [(source, f"{_V}.__code__ is {self.const(expected)}")]
        if kind is GuardKind.LENGTH_MATCH:
            return [(source, f"{self.builtin('type')}({_V}) is {self.const(expected.type)}"),
                    (source, f"{self.builtin('len')}({_V}) == {expected.length}")]
        if kind is GuardKind.DICT_KEYS_MATCH:
            keys = render_key(expected.keys) or self.const(expected.keys)
            return [(source, f"{self.builtin('type')}({_V}) is {self.const(expected.type)}"),
                    (source, f"{self.builtin('tuple')}({_V}) == {keys}")]
        if kind is GuardKind.NOT_PRESENT:
            return [self._absent(source)]
        if kind is GuardKind.DUPLICATE_INPUT:
            return [(source, f"{_V} is {_W}")]
        if kind is GuardKind.SIZE_RELATION:
            return [(None, expected.render(self.expr))]
        return [(source, f"{self.builtin('type')}({_V}) is {self.const(expected.type)}"),
                (source, self._tensor(expected))]

    def _exact(self, expr: str, value: object) -> list[str]:
        """Checks that `expr` equals `value` with the same types, recursively."""
        if value is None or type(value) is bool:
            return [f"{expr} is {value!r}"]
        if type(value) is tuple:
            checks = [f"{self.builtin('type')}({expr}) is {self.const(tuple)}",
                      f"{self.builtin('len')}({expr}) == {len(value)}"]
            for i, item in enumerate(value):
                checks += self._exact(f"{expr}[{i}]", item)
            return [" and ".join(checks)]
        if not _is_constant(value):
            return [f"{expr} is {self.const(value)}"]
        check_type = f"{self.builtin('type')}({expr}) is {self.const(type(value))}"
        if type(value) is float and value != value:
            return [f"{check_type} and {expr} != {expr}"]
        literal = render_key(value) or self.const(value)
        return [f"{check_type} and {expr} == {literal}"]

    def _absent(self, source: Source) -> tuple[Source | None, str]:
        if isinstance(source, GlobalSource):
            return (None, f"{source.global_name!r} not in {self.globals_dict()}")
        assert source.base is not None, "NOT_PRESENT sources are validated by Guard"
        if isinstance(source, AttrSource):
            return (source.base, f"{source.attr!r} not in {_V}.__dict__")
        assert isinstance(source, ItemSource), "NOT_PRESENT sources are validated by Guard"
        return (source.base, f"{render_item_key(source.key, self)} not in {_V}")

    def _tensor(self, expected: TensorMatch) -> str:
        data = self._temp("d")
        if None in expected.shape:
            shape = [f"{self.builtin('len')}(({data} := {_V}._data).shape) == "
                     f"{len(expected.shape)}"] + [f"{data}.shape[{d}] == {n}" for d, n in
                                                  enumerate(expected.shape) if n is not None]
        else:
            shape = [f"({data} := {_V}._data).shape == {expected.shape!r}"]
        checks = [*shape,
                  f"{data}.dtype == {self.const(expected.dtype.np, 'np_' + expected.dtype.name)}",
                  f"{_V}._requires_grad" if expected.requires_grad else f"not {_V}._requires_grad"]
        if expected.strides == C_CONTIGUOUS:
            checks.append(f"{data}.strides == {self.const(c_strides)}({data}.shape, "
                          f"{expected.dtype.np.itemsize})")
        elif expected.strides is not None:
            itemsize = expected.dtype.np.itemsize
            checks.append(f"{data}.strides == {tuple(s * itemsize for s in expected.strides)!r}")
        if expected.storage_offset is not None:
            checks.append(f"{_V}.storage_offset() == {expected.storage_offset}")
        return " and ".join(checks)


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

