"""What each guard kind tests, written once as `Check`s, and how each comparison reads as
code, as text and as a failure reason (Note [One definition per guard kind])."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, cast

from jitgrad.trace.capture.sources import (
    AttrSource,
    GlobalSource,
    ItemSource,
    Source,
    describe,
    render_item_key,
    render_key,
)
from jitgrad.trace.guards.kinds import (
    DenseOrder,
    Guard,
    GuardKind,
    TensorMatch,
    dense_strides,
    describe_value,
    is_constant,
    readable,
)

# ----- checks: each guard kind written once -----------------------------------------------
# Note [One definition per guard kind]
# `checks_of(guard, names)` is the one place that says what a guard kind tests: a list of
# `Check`s, each `subject <op> expected` about the value of one source (`VALUE` in the
# subject's templates). Everything else renders those checks, so no meaning is written twice:
#   - the generated guard function joins their code (GuardSet.build_guard_fn);
#   - the printed guard set joins their text (GuardSet.__str__);
#   - a recompile reason comes from a generated explainer (GuardSet.build_explainer_fn) that
#     runs the same code check by check and, at the first one that fails, returns the
#     subject's value; the op words it (`x.shape[0]: expected 4, got 5`).
# A check cannot say one thing and test another: the reason is what the guard computed.
# A subject has two spellings because the guard reads internals (`x._data.shape`) where a
# user reads the API (`x.shape`); they sit side by side in one Check.

# In a template, VALUE stands for the source's value and OTHER for a DUPLICATE_INPUT guard's
# other source; repr() never emits either character.
VALUE, OTHER = "\0", "\1"


class Check(NamedTuple):
    """One test of a guard: `subject op expected` (Note [One definition per guard kind]).

    source:   the value `VALUE` stands for; None for a check that reads its own sources.
    code:     the subject as the guard computes it (an expression over `VALUE`).
    text:     the subject as a user writes it (`VALUE` is the source's name).
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
    shown: Callable[[Any], str] = readable
    got: str | None = None


class Names(Protocol):
    """What building a check's code needs from the guard's code generator."""

    def builtin(self, name: str) -> str: ...
    def const(self, value: object, label: str = "") -> str: ...
    def temp(self, letter: str = "t") -> str: ...
    def expr(self, source: Source) -> str: ...
    def globals_dict(self) -> str: ...


def checks_of(guard: Guard, names: Names) -> list[Check]:
    """What `guard` tests, check by check, in order."""
    kind, expected, source = guard.kind, guard.expected, guard.source
    if kind is GuardKind.GRAD_MODE:
        return [Check(source, VALUE, VALUE, _Truth, expected)]
    if kind is GuardKind.TYPE_MATCH:
        return [_type_check(source, expected, names)]
    if kind is GuardKind.ID_MATCH:
        return [Check(source, VALUE, VALUE, _Is, expected)]
    if kind is GuardKind.EQUALS_MATCH:
        return [Check(source, VALUE, VALUE, _Equals, expected)]
    if kind is GuardKind.CODE_MATCH:
        return [Check(source, f"{VALUE}.__code__", f"{VALUE}.__code__", _Is, expected)]
    if kind is GuardKind.LENGTH_MATCH:
        return [_type_check(source, expected.type, names),
                Check(source, f"{names.builtin('len')}({VALUE})", f"len({VALUE})", _Eq,
                      expected.length)]
    if kind is GuardKind.DICT_KEYS_MATCH:
        return [_type_check(source, expected.type, names),
                Check(source, f"{names.builtin('tuple')}({VALUE})", f"list({VALUE})", _Eq,
                      expected.keys, _key_list)]
    if kind is GuardKind.NOT_PRESENT:
        return [_absent_check(source, names)]
    if kind is GuardKind.DUPLICATE_INPUT:
        return [Check(source, VALUE, VALUE, _Same, expected, lambda other: other.name())]
    if kind is GuardKind.SIZE_RELATION:
        sizes = list(dict.fromkeys(expected.sources()))
        return [Check(None, expected.render(names.expr), expected.render(lambda size: size.name()),
                      _Holds, expected,
                      got="(" + "".join(f"{names.expr(s)}, " for s in sizes) + ")")]
    return [_type_check(source, expected.type, names), *_tensor_checks(source, expected, names)]


def _type_check(source: Source, cls: type, names: Names) -> Check:
    return Check(source, f"{names.builtin('type')}({VALUE})", f"type({VALUE})", _Is, cls)


def _absent_check(source: Source, names: Names) -> Check:
    if isinstance(source, GlobalSource):
        test = f"{source.global_name!r} not in {names.globals_dict()}"
        return Check(None, test, f"{source.global_name!r} not in G", _Absent, source,
                     got=names.expr(source))
    assert source.base is not None, "NOT_PRESENT sources are validated by Guard"
    if isinstance(source, AttrSource):
        test = f"{source.attr!r} not in {VALUE}.__dict__"
        return Check(source.base, test, test, _Absent, source,
                     got=f"{VALUE}.__dict__[{source.attr!r}]")
    assert isinstance(source, ItemSource), "NOT_PRESENT sources are validated by Guard"
    key = render_item_key(source.key, names)
    text = source.key.name() if isinstance(source.key, Source) else repr(source.key)
    return Check(source.base, f"{key} not in {VALUE}", f"{text} not in {VALUE}", _Absent, source,
                 got=f"{VALUE}[{key}]")


def _tensor_checks(source: Source, expected: TensorMatch, names: Names) -> list[Check]:
    """Shape, dtype, requires_grad, strides and storage offset of a tensor (its type is
    checked first); the array is read once, into a temporary."""
    data = names.temp("d")
    array = f"({data} := {VALUE}._data)"
    if None in expected.shape:  # dynamic dims: the rank and the static sizes
        checks = [Check(source, f"{names.builtin('len')}({array}.shape)", f"{VALUE}.dim()", _Eq,
                        len(expected.shape))]
        checks += [Check(source, f"{data}.shape[{d}]", f"{VALUE}.shape[{d}]", _Eq, n)
                   for d, n in enumerate(expected.shape) if n is not None]
    else:
        checks = [Check(source, f"{array}.shape", f"{VALUE}.shape", _Dims, expected.shape)]
    checks += [Check(source, f"{data}.dtype", f"{VALUE}.dtype", _Eq, expected.dtype.np),
               Check(source, f"{VALUE}._requires_grad", f"{VALUE}.requires_grad", _Truth,
                     expected.requires_grad)]
    itemsize = expected.dtype.itemsize
    if isinstance(expected.strides, DenseOrder):
        order = expected.strides.order
        shown = f"{VALUE}.is_contiguous()" if expected.strides.is_c() else \
            f"{VALUE}.stride() dense in dim order {order}"
        checks.append(Check(source, f"{data}.strides == {names.const(dense_strides)}({data}.shape, "
                            f"{itemsize}, {order!r})", shown, _Truth, True))
    elif expected.strides is not None:
        checks.append(Check(source, f"{data}.strides", f"{VALUE}.stride()", _Eq,
                            tuple(s * itemsize for s in expected.strides),
                            lambda strides: repr(tuple(s // itemsize for s in strides))))
    if expected.storage_offset is not None:
        checks.append(Check(source, f"{VALUE}.storage_offset()", f"{VALUE}.storage_offset()", _Eq,
                            expected.storage_offset))
    return checks


class _Eq:
    """How a check compares its subject with `expected`: `form`, filled with the subject and
    the expected value as code (`value_code`) or as text (`check.shown`), and the reason a
    failed check gives (`subject` filled in, `got` the value it read). This one: `==`."""

    form = "{subject} == {expected}"

    @classmethod
    def code(cls, check: Check, subject: str, names: Names) -> str:
        return cls.form.format(subject=subject, expected=cls.value_code(check, names))

    @classmethod
    def text(cls, check: Check, subject: str) -> str:
        return cls.form.format(subject=subject, expected=check.shown(check.expected))

    @staticmethod
    def value_code(check: Check, names: Names) -> str:
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
    def value_code(check: Check, names: Names) -> str:
        e = check.expected
        return repr(e) if e is None or type(e) is bool else names.const(e)

    @staticmethod
    def reason(check: Check, subject: str, got: Any) -> str:
        expected = check.expected
        if isinstance(expected, type) and isinstance(got, type):
            return f"{subject}: expected {_type_pair(expected, got)}"
        if isinstance(expected, types.CodeType) and isinstance(got, types.CodeType):
            return f"{subject}: expected {readable(expected)}, got {readable(got)}"
        other = "another " if type(got) is type(expected) else ""
        return (f"{subject}: expected the object seen while tracing ({readable(expected)}), "
                f"got {other}{readable(got)}")


class _Same(_Is):
    """DUPLICATE_INPUT: the object another source reads (`OTHER`)."""

    @staticmethod
    def value_code(check: Check, names: Names) -> str:
        return OTHER

    @staticmethod
    def reason(check: Check, subject: str, got: Any) -> str:
        return (f"{subject}: expected the same object as {check.expected.name()} (they were "
                "one object while tracing), got a different one")


class _Truth(_Eq):
    """`subject` when True is expected, `not subject` when False."""

    @classmethod
    def code(cls, check: Check, subject: str, names: Names) -> str:
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
    def code(cls, check: Check, subject: str, names: Names) -> str:
        return _exact(subject, check.expected, names)

    @classmethod
    def text(cls, check: Check, subject: str) -> str:
        e = check.expected
        return f"{subject} {'is' if e is None or type(e) is bool else '=='} {describe_value(e)}"

    @staticmethod
    def reason(check: Check, subject: str, got: Any) -> str:
        return f"{subject}: {mismatch_equals(check.expected, got)}"


class _Absent(_Eq):
    """NOT_PRESENT: the subject is the test; `got` reads the value that is there."""

    form = "{subject}"

    @staticmethod
    def reason(check: Check, subject: str, got: Any) -> str:
        return f"{describe(check.expected)}: expected no such name, got {readable(got)}"


class _Holds(_Absent):
    """SIZE_RELATION: the subject is the relation; `got` reads the sizes it relates."""

    @staticmethod
    def reason(check: Check, subject: str, got: Any) -> str:
        sizes = dict.fromkeys(check.expected.sources())
        values = ", ".join(f"{s.name()} is {n}" for s, n in zip(sizes, got, strict=True))
        return f"{subject} does not hold ({values})"


def _exact(expr: str, value: object, names: Names) -> str:
    """The test that `expr` equals `value` with the same types, recursively."""
    if value is None or type(value) is bool:
        return f"{expr} is {value!r}"
    if type(value) is tuple:
        checks = [f"{names.builtin('type')}({expr}) is {names.const(tuple)}",
                  f"{names.builtin('len')}({expr}) == {len(value)}"]
        checks += [_exact(f"{expr}[{i}]", item, names) for i, item in enumerate(value)]
        return " and ".join(checks)
    if not is_constant(value):
        return f"{expr} is {names.const(value)}"
    check_type = f"{names.builtin('type')}({expr}) is {names.const(type(value))}"
    if type(value) is float and value != value:
        return f"{check_type} and {expr} != {expr}"
    return f"{check_type} and {expr} == {render_key(value) or names.const(value)}"


class TextOnly:
    """Names for checks whose code nobody reads (GuardSet.__str__ prints their text)."""

    def builtin(self, name: str) -> str:
        return name

    def const(self, value: object, label: str = "") -> str:
        return readable(value)

    def temp(self, letter: str = "t") -> str:
        return letter

    def expr(self, source: Source) -> str:
        return source.name()

    def globals_dict(self) -> str:
        return "G"


def _key_list(keys: Any) -> str:
    return "[" + ", ".join(map(describe_value, keys)) + "]"


def _type_pair(expected: type, got: type) -> str:
    a, b = expected.__name__, got.__name__
    if a == b:  # two classes of one name: say where each comes from
        a = f"{expected.__module__}.{expected.__qualname__}"
        b = f"{got.__module__}.{got.__qualname__}"
    return f"{a}, got {b}"


def mismatch_equals(expected: object, value: object) -> str | None:
    if type(value) is not type(expected):
        return (f"expected {readable(expected)} ({type(expected).__name__}), "
                f"got {readable(value)} ({type(value).__name__})")
    if type(expected) is tuple:
        items = cast(tuple, value)  # of expected's type, checked above
        if len(items) != len(expected) or any(
                mismatch_equals(e, v) is not None for e, v in zip(expected, items, strict=True)):
            return f"expected {readable(expected)}, got {readable(value)}"
        return None
    if not is_constant(expected):
        same = value is expected
        return None if same else f"expected {readable(expected)} (the same object), got another"
    both_nan = type(expected) is float and value != value and expected != expected
    same = value == expected or both_nan
    return None if same else f"expected {readable(expected)}, got {readable(value)}"
