"""`GuardSet`: the de-duplicated, ordered guards of one cache entry, the functions built
from them, and the recompile reasons read from them (`explain_failure`, `changed_numbers`,
`changed_sizes`)."""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from jitgrad.trace.capture.sources import (
    FrameValues,
    SizeSource,
    Source,
    chain,
    describe,
)
from jitgrad.trace.guards.checks import VALUE, Check, TextOnly, checks_of, mismatch_equals
from jitgrad.trace.guards.codegen import GuardCodegen, define_function, signature_of
from jitgrad.trace.guards.kinds import (
    Guard,
    GuardKind,
    format_location,
)

# Order of checks on one source: the type first, so later checks read safely.
_RANK = {GuardKind.TYPE_MATCH: 0, GuardKind.LENGTH_MATCH: 1, GuardKind.DICT_KEYS_MATCH: 1,
         GuardKind.EQUALS_MATCH: 2, GuardKind.CODE_MATCH: 2, GuardKind.ID_MATCH: 2,
         GuardKind.NOT_PRESENT: 2, GuardKind.TENSOR_MATCH: 3, GuardKind.DUPLICATE_INPUT: 4,
         GuardKind.SIZE_RELATION: 5}


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
                                            check.text.replace(VALUE, check.source.name()))
                              for check in checks_of(guard, TextOnly())), guard.location)
                for guard in self]
        width = min(max((len(text) for text, _ in rows), default=0), 56)
        return "\n".join(text if loc is None else f"{text:<{width}}  # {format_location(loc)}"
                         for text, loc in rows)

    def build_guard_fn(self, fn: types.FunctionType) -> Callable[..., bool]:
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
        generator = GuardCodegen(fn.__code__)
        source = generator.render(list(self), fn.__qualname__)
        guard = define_function(fn, generator, source, generator.fn_name, "guard")
        guard.__qualname__ = f"guard of {fn.__qualname__}"
        guard.__jg_guard_source__ = source  # type: ignore[attr-defined]
        return guard

    def build_explainer_fn(self, fn: types.FunctionType) -> tuple[Callable[..., Any],
                                                                   list[tuple[Guard, Check]]]:
        """A function with `fn`'s signature that runs the guard's checks one by one and
        returns `(index, True, value read)` for the first that fails, `(index, False,
        exception)` for one that raises, None when all hold; and the (guard, check) of each
        index. Note [One definition per guard kind]."""
        if isinstance(fn, types.MethodType):
            explainer, checks = self.build_explainer_fn(fn.__func__)
            return types.MethodType(explainer, fn.__self__), checks
        generator = GuardCodegen(fn.__code__)
        name = generator.fn_name.replace("guard_", "explain_", 1)
        source, checks = generator.render_explainer(list(self), fn.__qualname__, name)
        return define_function(fn, generator, source, name, "guard explainer"), checks

    def build_reader_fn(self, fn: types.FunctionType,
                        sources: list[Source]) -> Callable[..., tuple]:
        """A function with `fn`'s signature returning the values of `sources` for a call
        (after its guard passed): how a symbolic entry reads its graph inputs' sizes."""
        generator = GuardCodegen(fn.__code__)
        items = "".join(f"{generator.expr(source)}, " for source in sources)
        name = generator.fn_name.replace("guard_", "read_", 1)
        source = f"def {name}({signature_of(fn.__code__)}):\n    return ({items})\n"
        return define_function(fn, generator, source, name, "reader")


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
        return mismatch_equals(a.expected, b.expected) is None
    return a.expected == b.expected


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


def explain_failure(guard_set: GuardSet, fn: types.FunctionType, args: tuple,
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
        VALUE, describe(check.source))
    return FailedGuard(guard, check.op.reason(check, subject, got))


def changed_numbers(guard_set: GuardSet, fn: types.FunctionType, args: tuple,
                    kwargs: dict[str, Any]) -> list[Source]:
    """Sources of Python numbers (int, float) whose value differs from the traced one in
    this call (the same type, another value): every one, not only the first failing guard,
    so one recompile makes them all graph inputs (Note [Unspecialized numbers])."""
    return [guard.source for guard, value in _current_values(
                guard_set, GuardKind.EQUALS_MATCH, fn, args, kwargs)
            if type(guard.expected) in (int, float) and type(value) is type(guard.expected)
            and mismatch_equals(guard.expected, value)]


def changed_sizes(guard_set: GuardSet, fn: types.FunctionType, args: tuple,
                  kwargs: dict[str, Any]) -> list[SizeSource]:
    """The dims of guarded tensors whose size differs from the traced one in this call (a
    tensor of the same type, rank and dtype): every one, so one recompile makes them all
    dynamic (automatic dynamic, Note [Symbolic sizes])."""
    changed = []
    for guard, value in _current_values(guard_set, GuardKind.TENSOR_MATCH, fn, args, kwargs):
        expected = guard.expected
        if type(value) is not expected.type or value._data.dtype != expected.dtype.np or \
                value._data.ndim != len(expected.shape):
            continue
        changed += [SizeSource(guard.source, d) for d, (want, got) in
                    enumerate(zip(expected.shape, value._data.shape, strict=True))
                    if want is not None and want != got]
    return changed


def _current_values(guard_set: GuardSet, kind: GuardKind, fn: types.FunctionType,
                    args: tuple, kwargs: dict[str, Any]) -> Iterator[tuple[Guard, Any]]:
    """Each guard of `kind` with the value its source reads in this call; none when the
    call does not bind to `fn`, and a guard whose source cannot be read (a base that
    changed type) is skipped: it changed, but not as a number or a size."""
    try:
        frame = FrameValues.bind(fn, args, kwargs)
    except TypeError:
        return
    for guard in guard_set:
        if guard.kind is not kind:
            continue
        try:
            value = guard.source.get(frame)
        except Exception:  # noqa: BLE001 - see the docstring
            continue
        yield guard, value
