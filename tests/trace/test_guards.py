"""Guards: each kind passes and fails on the right values, the generated guard function
binds arguments like the user's function, explain_failure says why, and GuardSet
de-duplicates, orders and prints guards deterministically.

For every pass/fail case the generated guard and `explain_failure` are both asked, and
must agree: the fast path and the message come from the same guards.
"""

import re
from collections import OrderedDict, namedtuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jitgrad as jg
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.capture.sources import (
    AttrSource,
    BuiltinSource,
    CellContentsSource,
    ClosureSource,
    CodeSource,
    GlobalSource,
    GradModeSource,
    ItemSource,
    LocalSource,
    SizeSource,
    TypeSource,
)
from jitgrad.trace.guards import (
    FailedGuard,
    Guard,
    GuardKind,
    GuardLocation,
    GuardSet,
    KeysMatch,
    LengthMatch,
    SizeRelation,
    TensorMatch,
    dense_order,
    explain_failure,
    guard_source,
)
from jitgrad.trace.guards.kinds import is_constant

X, N, SELF = LocalSource("x"), LocalSource("n"), LocalSource("self")
AT_12 = GuardLocation("/home/user/project/model.py", 12, "    y = x.reshape(4, -1)")
SCALE = 2.0
LIMITS = {"low": 0, "high": 1}


def _helper_with_cell(k):
    def helper(v):
        return v * k
    return helper


HELPER = _helper_with_cell(3)


def one(x):
    return x


def _guard_set(*guards):
    guard_set = GuardSet()
    for guard in guards:
        guard_set.add(guard)
    return guard_set


def _check(guard_set, fn, *args, **kwargs):
    """The generated guard's answer, asserted equal to explain_failure's."""
    passed = guard_set.build_guard_fn(fn)(*args, **kwargs)
    failed = explain_failure(guard_set, fn, args, kwargs)
    assert bool(passed) == (failed is None), failed
    return bool(passed)


def _reason(guard_set, fn, *args, **kwargs):
    return str(explain_failure(guard_set, fn, args, kwargs))


# ----- each guard kind ----------------------------------------------------------------

class Net:
    pass


class Other:
    pass


def test_type_match():
    guards = _guard_set(Guard("TYPE_MATCH", X, Net))
    assert _check(guards, one, Net())
    assert not _check(guards, one, Other())
    assert not _check(guards, one, type("NetChild", (Net,), {})())  # exact type, not isinstance
    assert _reason(guards, one, Other()) == "type(x): expected Net, got Other"


def test_type_match_names_the_modules_of_two_classes_with_one_name():
    other_net = type("Net", (), {"__module__": "other.module"})
    guards = _guard_set(Guard("TYPE_MATCH", X, Net))
    assert _reason(guards, one, other_net()) == (
        f"type(x): expected {__name__}.Net, got other.module.Net")


def test_id_match_is_identity_not_equality():
    key = [1, 2]
    guards = _guard_set(Guard("ID_MATCH", X, key))
    assert _check(guards, one, key)
    assert not _check(guards, one, [1, 2])
    assert _reason(guards, one, [1, 2]) == (
        "x: expected the object seen while tracing (<list object>), got another <list object>")
    assert _check(_guard_set(Guard("ID_MATCH", X, None)), one, None)
    assert _reason(_guard_set(Guard("ID_MATCH", X, one)), one, _check) == (
        f"x: expected the object seen while tracing ({__name__}.one), "
        f"got another {__name__}._check")
    assert _reason(_guard_set(Guard("ID_MATCH", X, len)), one, None) == (
        "x: expected the object seen while tracing (len), got None")


@pytest.mark.parametrize("expected, good, bad", [
    (2, [2], [3, 2.0, True, "2", None]),
    (2.0, [2.0], [2, 3.0, float("nan")]),
    (True, [True], [1, False, None]),
    (None, [None], [0, False, ""]),
    ("mean", ["mean"], ["sum", b"mean"]),
    (float("nan"), [float("nan")], [1.0, 0]),
    ((4, 3), [(4, 3)], [(4, 3.0), [4, 3], (4,), (4, 3, 1), (True, 3)]),
    ((1, (2.0, "a")), [(1, (2.0, "a"))], [(1, (2, "a")), (1, [2.0, "a"])]),
    ((jg.float32, 2), [(jg.float32, 2)], [(jg.float64, 2), ("float32", 2)]),
], ids=repr)
def test_equals_match_compares_values_and_types(expected, good, bad):
    guards = _guard_set(Guard("EQUALS_MATCH", X, expected))
    for value in good:
        assert _check(guards, one, value), value
    for value in bad:
        assert not _check(guards, one, value), value


def test_equals_match_messages():
    guards = _guard_set(Guard("EQUALS_MATCH", N, 2))

    def f(x, n):
        return x

    assert _reason(guards, f, 0, 3) == "n: expected 2, got 3"
    assert _reason(guards, f, 0, 2.0) == "n: expected 2 (int), got 2.0 (float)"
    shape = _guard_set(Guard("EQUALS_MATCH", X, (4, 3)))
    assert _reason(shape, one, (4, 3.0)) == "x: expected (4, 3), got (4, 3.0)"


def test_tensor_match_checks_type_shape_dtype_requires_grad():
    x = jg.ones(4, 3)
    guards = _guard_set(Guard("TENSOR_MATCH", X, x, AT_12))
    assert guards.build_guard_fn(one)(x)
    assert _check(guards, one, jg.zeros(4, 3))
    assert _check(guards, one, jg.ones(4, 3).t().t())
    cases = [
        (jg.ones(5, 3), "x.shape[0]: expected 4, got 5"),
        (jg.ones(4, 3, 1), "x.shape: expected (4, 3), got (4, 3, 1)"),
        (jg.ones(4, 3, dtype=jg.float64), "x.dtype: expected jitgrad.float32, got jitgrad.float64"),
        (jg.ones(4, 3, requires_grad=True), "x.requires_grad: expected False, got True"),
        (jg.nn.Parameter(jg.ones(4, 3)), "type(x): expected Tensor, got Parameter"),
        (np.ones((4, 3), np.float32), "type(x): expected Tensor, got ndarray"),
    ]
    for value, reason in cases:
        assert not _check(guards, one, value)
        assert _reason(guards, one, value) == (
            f"{reason} (guard made at model.py:12: `y = x.reshape(4, -1)`)")


def test_tensor_match_strides_and_storage_offset_when_asked():
    transposed = jg.ones(3, 4).t()
    strided = _guard_set(Guard("TENSOR_MATCH", X, TensorMatch.of(jg.ones(4, 3), strides=True)))
    assert _check(strided, one, jg.ones(4, 3))
    assert not _check(strided, one, transposed)
    assert _reason(strided, one, transposed) == "x.stride(): expected (3, 1), got (1, 4)"
    rows = jg.ones(5, 3)
    offset = _guard_set(Guard("TENSOR_MATCH", X, TensorMatch.of(rows[1:], storage_offset=True)))
    assert _check(offset, one, jg.ones(6, 3)[1:5])  # offset 3 too
    assert not _check(offset, one, rows[:4])
    assert _reason(offset, one, rows[:4]) == "x.storage_offset(): expected 3, got 0"
    # without either, layout is not part of the guard
    assert _check(_guard_set(Guard("TENSOR_MATCH", X, jg.ones(4, 3))), one, transposed)


def test_tensor_match_of_a_0d_tensor():
    guards = _guard_set(Guard("TENSOR_MATCH", X, jg.tensor(1.5, dtype=jg.float64)))
    assert _check(guards, one, jg.tensor(-2.0, dtype=jg.float64))
    assert _reason(guards, one, jg.tensor([1.5], dtype=jg.float64)) == (
        "x.shape: expected (), got (1,)")


def test_length_match_checks_the_type_first():
    guards = _guard_set(Guard("LENGTH_MATCH", X, [1, 2, 3]))
    assert guards.build_guard_fn(one)([7, 8, 9])
    assert _check(guards, one, [None, None, None])
    assert not _check(guards, one, (1, 2, 3))
    assert not _check(guards, one, [1, 2])
    assert _reason(guards, one, (1, 2, 3)) == "type(x): expected list, got tuple"
    assert _reason(guards, one, [1, 2]) == "len(x): expected 3, got 2"


def test_dict_keys_match_is_ordered_and_typed():
    guards = _guard_set(Guard("DICT_KEYS_MATCH", X, {"a": 1, "b": 2}))
    assert _check(guards, one, {"a": 0, "b": 0})
    assert not _check(guards, one, {"b": 2, "a": 1})
    assert not _check(guards, one, {"a": 1})
    assert not _check(guards, one, OrderedDict(a=1, b=2))
    assert _reason(guards, one, {"b": 2, "a": 1}) == (
        "list(x): expected ['a', 'b'], got ['b', 'a']")
    assert _reason(guards, one, OrderedDict(a=1, b=2)) == "type(x): expected dict, got OrderedDict"


def test_code_match_accepts_any_function_with_the_same_code():
    guards = _guard_set(Guard("CODE_MATCH", X, HELPER.__code__))
    assert _check(guards, one, HELPER)
    assert _check(guards, one, _helper_with_cell(5))  # same code, other cell: CODE holds
    assert not _check(guards, one, one)
    assert not _check(guards, one, len)  # no __code__: a failure, not an error
    assert _reason(guards, one, one) == (
        f"x.__code__: expected <code helper at test_guards.py:{HELPER.__code__.co_firstlineno}>, "
        f"got <code one at test_guards.py:{one.__code__.co_firstlineno}>")


def test_cell_contents_of_a_called_function_name_the_free_variable():
    global HELPER
    source = CellContentsSource(GlobalSource("HELPER"), 0, "k")
    guards = _guard_set(Guard("CODE_MATCH", GlobalSource("HELPER"), HELPER.__code__),
                        Guard("EQUALS_MATCH", source, 3, AT_12))
    assert _check(guards, one, 0)
    saved, HELPER = HELPER, _helper_with_cell(4)
    try:
        assert not _check(guards, one, 0)
        assert _reason(guards, one, 0) == (
            "G['HELPER'].__closure__[0].cell_contents (free variable 'k'): expected 3, got 4 "
            "(guard made at model.py:12: `y = x.reshape(4, -1)`)")
    finally:
        HELPER = saved


def test_not_present_global_shadowing_a_builtin():
    guards = _guard_set(Guard("NOT_PRESENT", GlobalSource("sorted"), None),
                        Guard("ID_MATCH", BuiltinSource("sorted"), sorted))
    assert _check(guards, one, 0)
    globals()["sorted"] = reversed
    try:
        assert not _check(guards, one, 0)
        assert _reason(guards, one, 0) == (
            "G['sorted']: expected no such name, got reversed")
    finally:
        del globals()["sorted"]
    assert _check(guards, one, 0)


def test_not_present_item_and_instance_attribute():
    guards = _guard_set(Guard("NOT_PRESENT", ItemSource(X, "debug"), None))
    assert _check(guards, one, {"a": 1})
    assert not _check(guards, one, {"debug": True})
    assert _reason(guards, one, {"debug": True}) == "x['debug']: expected no such name, got True"
    net = Net()
    attr = _guard_set(Guard("TYPE_MATCH", X, Net),
                      Guard("NOT_PRESENT", AttrSource(X, "forward"), None))
    assert _check(attr, one, net)
    net.forward = print
    assert not _check(attr, one, net)


def test_grad_mode():
    on = _guard_set(Guard("GRAD_MODE", GradModeSource(), True))
    off = _guard_set(Guard("GRAD_MODE", GradModeSource(), False))
    assert _check(on, one, 0) and not _check(off, one, 0)
    with jg.no_grad():
        assert not _check(on, one, 0) and _check(off, one, 0)
        assert _reason(on, one, 0) == "jitgrad.is_grad_enabled(): expected True, got False"


def test_closure_source_reads_the_cells_of_the_guarded_function():
    def make(scale):
        def f(x):
            return x * scale
        return f

    f2, f3 = make(2), make(3)
    guards = _guard_set(Guard("EQUALS_MATCH", ClosureSource("scale"), 2))
    assert _check(guards, f2, 0)
    assert not _check(guards, f3, 0)  # same code object, other cell: one guard per function
    assert _reason(guards, f3, 0) == "scale: expected 2, got 3"


def test_globals_are_read_when_the_guard_runs():
    global SCALE
    guards = _guard_set(Guard("EQUALS_MATCH", GlobalSource("SCALE"), 2.0))
    guard = guards.build_guard_fn(one)
    assert guard(0)
    SCALE = 3.0
    try:
        assert not guard(0)
        assert _reason(guards, one, 0) == "G['SCALE']: expected 2.0, got 3.0"
    finally:
        SCALE = 2.0
    assert guard(0)


def test_duplicate_input_requires_the_same_object_in_both_sources():
    def f(x, y):
        return x + y

    a, b = jg.ones(3), jg.ones(3)
    guards = _guard_set(Guard("TENSOR_MATCH", X, a),
                        Guard("DUPLICATE_INPUT", LocalSource("y"), X, AT_12))
    assert _check(guards, f, a, a) and _check(guards, f, b, b)
    assert not _check(guards, f, a, b)
    assert _reason(guards, f, a, b) == (
        "y: expected the same object as x (they were one object while tracing), got a "
        "different one (guard made at model.py:12: `y = x.reshape(4, -1)`)")
    assert str(guards).splitlines()[1] == "y is x                                                    # model.py:12: `y = x.reshape(4, -1)`"


def test_duplicate_input_runs_after_the_checks_of_both_sources():
    w = AttrSource(SELF, "w")
    guards = _guard_set(Guard("DUPLICATE_INPUT", X, w), Guard("TYPE_MATCH", SELF, Net),
                        Guard("TENSOR_MATCH", X, jg.ones(2)))
    assert [(g.kind.name, g.source.name()) for g in guards] == [
        ("TENSOR_MATCH", "x"), ("TYPE_MATCH", "self"), ("DUPLICATE_INPUT", "x")]

    def forward(self, x):
        return x

    net, other = Net(), Other()
    net.w = other.w = jg.ones(2)
    assert _check(guards, forward, net, net.w)
    assert not _check(guards, forward, other, other.w)  # type(self) fails before self.w is read
    assert not _check(guards, forward, net, jg.ones(2))
    assert "and x is self.w\n" in guard_source(guards.build_guard_fn(forward))


# ----- signature binding ----------------------------------------------------------------

def test_guard_binds_defaults_varargs_kwargs_and_keyword_only():
    def f(x, n=2, *args, flag=True, **kwargs):
        return x

    guards = _guard_set(Guard("EQUALS_MATCH", N, 2), Guard("EQUALS_MATCH", LocalSource("flag"), True),
                        Guard("LENGTH_MATCH", LocalSource("args"), ()),
                        Guard("DICT_KEYS_MATCH", LocalSource("kwargs"), {}))
    guard = guards.build_guard_fn(f)
    assert guard(0) and guard(0, 2) and guard(x=0, n=2, flag=True)
    assert not guard(0, 3)
    assert not guard(0, 2, "extra")
    assert not guard(0, flag=False)
    assert not guard(0, other=1)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'x'"):
        guard()
    with pytest.raises(TypeError, match="multiple values for argument 'x'"):
        guard(0, x=1)
    assert _reason(guards, f, 0, 2, "extra") == "len(args): expected 0, got 1"
    assert _reason(guards, f, 0, other=1) == "list(kwargs): expected [], got ['other']"


def test_guard_binds_positional_only_and_required_keyword_only():
    def f(a, b=5, /, *, key):
        return a

    guards = _guard_set(Guard("EQUALS_MATCH", LocalSource("b"), 5),
                        Guard("EQUALS_MATCH", LocalSource("key"), "k"))
    guard = guards.build_guard_fn(f)
    assert guard(1, key="k") and guard(1, 5, key="k")
    assert not guard(1, 6, key="k")
    with pytest.raises(TypeError, match="positional-only"):
        guard(1, b=5, key="k")
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'key'"):
        guard(1)


def test_guard_follows_changed_kwdefaults_of_the_function():
    def f(x, *, n=2):
        return x

    guards = _guard_set(Guard("EQUALS_MATCH", N, 2))
    guard = guards.build_guard_fn(f)
    assert guard(0)
    f.__kwdefaults__["n"] = 3
    assert not guard(0)


def test_guard_of_a_bound_method_binds_self():
    class Model:
        def __init__(self, w):
            self.w = w

        def forward(self, x, scale=1.0):
            return x * self.w * scale

    model = Model(jg.ones(3))
    guards = _guard_set(Guard("TYPE_MATCH", SELF, Model),
                        Guard("TENSOR_MATCH", AttrSource(SELF, "w"), model.w),
                        Guard("EQUALS_MATCH", LocalSource("scale"), 1.0))
    guard = guards.build_guard_fn(model.forward)
    assert guard(jg.ones(3)) and guard(jg.ones(3), 1.0)
    assert not guard(jg.ones(3), 2.0)
    model.w = jg.ones(4)
    assert not guard(jg.ones(3))
    assert _reason(guards, model.forward, jg.ones(3)) == "self.w.shape[0]: expected 3, got 4"
    # the plain function takes self explicitly
    assert guards.build_guard_fn(Model.forward)(Model(jg.zeros(3)), 0)


def test_parameters_named_like_builtins_do_not_break_the_guard():
    def f(type, len, tuple, x):
        return x

    guards = _guard_set(Guard("TYPE_MATCH", X, list), Guard("LENGTH_MATCH", X, [1, 2]),
                        Guard("EQUALS_MATCH", LocalSource("tuple"), (1, 2)),
                        Guard("DICT_KEYS_MATCH", LocalSource("type"), {"a": 1}))
    guard = guards.build_guard_fn(f)
    assert guard({"a": 0}, "len", (1, 2), [3, 4])
    assert not guard({"a": 0}, "len", (1, 2), [3, 4, 5])
    assert not guard({"a": 0}, "len", [1, 2], [3, 4])


def test_parameters_with_the_guard_prefix_move_the_prefix():
    def f(__jg_g, __jg_t0):
        return __jg_g

    guards = _guard_set(Guard("EQUALS_MATCH", GlobalSource("SCALE"), 2.0),
                        Guard("EQUALS_MATCH", LocalSource("__jg_g"), 1),
                        Guard("TYPE_MATCH", ItemSource(LocalSource("__jg_t0"), 0), int),
                        Guard("EQUALS_MATCH", ItemSource(LocalSource("__jg_t0"), 0), 5))
    guard = guards.build_guard_fn(f)
    assert guard(1, [5]) and not guard(1, [6]) and not guard(2, [5])
    assert "___jg_G['SCALE']" in guard_source(guard)


# ----- exceptions inside a guard are failures ----------------------------------------------

def test_exceptions_while_checking_are_failures():
    class Weird:
        def __eq__(self, other):
            raise RuntimeError("no comparing")

    guards = _guard_set(Guard("TYPE_MATCH", X, Net), Guard("EQUALS_MATCH", AttrSource(X, "n"), 2))
    assert not _check(guards, one, Net())  # no attribute n
    assert _reason(guards, one, Net()) == (
        "x.n: could not be checked (AttributeError: 'Net' object has no attribute 'n')")
    keyed = _guard_set(Guard("EQUALS_MATCH", ItemSource(X, "k"), 2))
    assert not _check(keyed, one, {})
    assert not _check(keyed, one, None)
    assert not _check(keyed, one, {"k": Weird()})  # type check runs before ==

    def make_empty():
        late = 1

        def f(x):
            return late  # noqa: F821 - a cell emptied by del below
        del late
        return f

    empty = make_empty()
    cell = _guard_set(Guard("EQUALS_MATCH", ClosureSource("late"), 1))
    assert not _check(cell, empty, 0)
    assert _reason(cell, empty, 0) == (
        "late: could not be checked (ValueError: Cell is empty)")


def test_arguments_that_do_not_bind_are_reported_not_raised_by_explain():
    failed = explain_failure(_guard_set(Guard("EQUALS_MATCH", X, 1)), one, (1, 2), {})
    assert failed.guard is None
    assert failed.message == (
        "the arguments do not bind to one: too many positional arguments")


# ----- explain_failure ----------------------------------------------------------------------

def test_explain_failure_reports_the_first_failing_guard_in_order():
    def forward(self, x, n):
        return x

    guards = _guard_set(
        Guard("TENSOR_MATCH", X, jg.ones(4, 3), AT_12),
        Guard("EQUALS_MATCH", N, 2, GuardLocation("model.py", 13, "for _ in range(n):")),
        Guard("TYPE_MATCH", SELF, Net, GuardLocation("model.py", 11, "")))
    assert explain_failure(guards, forward, (Net(), jg.ones(4, 3), 2), {}) is None
    # guards run in the order their sources were first guarded: x, n, self
    failed = explain_failure(guards, forward, (Other(), jg.ones(5, 3), 3), {})
    assert isinstance(failed, FailedGuard)
    assert failed.guard.kind is GuardKind.TENSOR_MATCH
    assert failed.reason == "x.shape[0]: expected 4, got 5"
    assert str(failed) == (
        "x.shape[0]: expected 4, got 5 (guard made at model.py:12: `y = x.reshape(4, -1)`)")
    assert str(explain_failure(guards, forward, (Other(), jg.ones(4, 3), 3), {})) == (
        "n: expected 2, got 3 (guard made at model.py:13: `for _ in range(n):`)")
    failed = explain_failure(guards, forward, (Other(), jg.ones(4, 3), 2), {})
    assert failed.reason == "type(self): expected Net, got Other"
    assert failed.message == "type(self): expected Net, got Other (guard made at model.py:11)"


def test_location_is_any_object_with_filename_lineno_text():
    Loc = namedtuple("Loc", "filename lineno col end_col text")
    guards = _guard_set(Guard("EQUALS_MATCH", X, 1, Loc("/x/train.py", 7, 4, 9, "  z = x + 1  ")))
    assert str(explain_failure(guards, one, (2,), {})) == (
        "x: expected 1, got 2 (guard made at train.py:7: `z = x + 1`)")


def test_generated_guard_and_explain_agree_on_many_calls():
    def f(self, x, n, opts):
        return x

    t = jg.ones(2, 3)
    guards = _guard_set(Guard("TYPE_MATCH", SELF, Net),
                        Guard("TENSOR_MATCH", AttrSource(SELF, "w"), t),
                        Guard("TENSOR_MATCH", X, t), Guard("EQUALS_MATCH", N, 3),
                        Guard("DICT_KEYS_MATCH", LocalSource("opts"), {"p": 1}),
                        Guard("EQUALS_MATCH", ItemSource(LocalSource("opts"), "p"), 0.5),
                        Guard("GRAD_MODE", GradModeSource(), True))
    good, bad = Net(), Net()
    good.w, bad.w = jg.ones(2, 3), jg.ones(2, 3, dtype=jg.float64)
    selves, xs = [good, bad, Other()], [t, jg.ones(3, 2), [1, 2], None]
    ns, optss = [3, 3.0, True], [{"p": 0.5}, {"p": 1}, {"q": 0.5}, {}, []]
    outcomes = [_check(guards, f, s, x, n, o) for s in selves for x in xs for n in ns
                for o in optss]
    assert sum(outcomes) == 1 and outcomes[0]


# ----- GuardSet: de-duplication, order, printing -----------------------------------------------

def test_duplicates_keep_the_first_guard_and_its_location():
    first = Guard("EQUALS_MATCH", N, 2, GuardLocation("a.py", 1, "first"))
    guards = _guard_set(first)
    assert guards.add(Guard("EQUALS_MATCH", N, 2, GuardLocation("a.py", 9, "later"))) is first
    assert len(guards) == 1 and list(guards) == [first]
    assert guards.add(Guard("TYPE_MATCH", N, int)) is not first
    assert len(guards) == 2


def test_conflicting_duplicates_are_a_tracer_bug():
    guards = _guard_set(Guard("EQUALS_MATCH", N, 2))
    with pytest.raises(AssertionError, match="conflicting guards on n"):
        guards.add(Guard("EQUALS_MATCH", N, 3))
    with pytest.raises(AssertionError):
        guards.add(Guard("EQUALS_MATCH", N, 2.0))


def test_tensor_match_with_strides_refines_an_existing_one():
    x = jg.ones(4, 3)
    guards = _guard_set(Guard("TENSOR_MATCH", X, x, AT_12))
    kept = guards.add(Guard("TENSOR_MATCH", X, TensorMatch.of(x, strides=True)))
    assert kept.expected.strides == (3, 1) and kept.location is AT_12
    assert list(guards) == [kept]
    assert guards.add(Guard("TENSOR_MATCH", X, x)) is kept


def test_order_is_grad_mode_then_per_source_type_len_value_tensor_bases_first():
    w = AttrSource(SELF, "w")
    layers = AttrSource(SELF, "layers")
    guards = _guard_set(
        Guard("TENSOR_MATCH", w, jg.ones(2)),
        Guard("EQUALS_MATCH", N, 1),
        Guard("LENGTH_MATCH", layers, [1]),
        Guard("TYPE_MATCH", layers, list),
        Guard("TYPE_MATCH", SELF, Net),
        Guard("TYPE_MATCH", N, int),
        Guard("GRAD_MODE", GradModeSource(), True),
        Guard("ID_MATCH", ItemSource(layers, 0), print),
    )
    assert [(g.kind.name, g.source.name()) for g in guards] == [
        ("GRAD_MODE", "jitgrad.is_grad_enabled()"),
        ("TYPE_MATCH", "self"),            # a base gets its slot before self.w was guarded
        ("TENSOR_MATCH", "self.w"),
        ("TYPE_MATCH", "n"),
        ("EQUALS_MATCH", "n"),
        ("TYPE_MATCH", "self.layers"),
        ("LENGTH_MATCH", "self.layers"),
        ("ID_MATCH", "self.layers[0]"),
    ]


def test_printed_guard_set():
    x = jg.ones(4, 3)
    guards = _guard_set(
        Guard("GRAD_MODE", GradModeSource(), True),
        Guard("TYPE_MATCH", SELF, Net, GuardLocation("model.py", 10, "def forward(self, x, n):")),
        Guard("TENSOR_MATCH", X, x, AT_12),
        Guard("EQUALS_MATCH", N, 2, GuardLocation("model.py", 13, "for _ in range(n):")),
        Guard("LENGTH_MATCH", AttrSource(SELF, "layers"), [1, 2]),
        Guard("DICT_KEYS_MATCH", GlobalSource("LIMITS"), LIMITS),
        Guard("CODE_MATCH", GlobalSource("HELPER"), HELPER.__code__),
        Guard("NOT_PRESENT", GlobalSource("max"), None),
        Guard("ID_MATCH", BuiltinSource("max"), max),
        Guard("EQUALS_MATCH", LocalSource("mode"), None),
    )
    assert str(guards) == (
        "jitgrad.is_grad_enabled()\n"
        "type(self) is Net                                         # model.py:10: `def forward(self, x, n):`\n"
        "type(x) is Tensor and x.shape == (4, 3) and x.dtype == jitgrad.float32 and not x.requires_grad  # model.py:12: `y = x.reshape(4, -1)`\n"
        "n == 2                                                    # model.py:13: `for _ in range(n):`\n"
        "type(self.layers) is list and len(self.layers) == 2\n"
        "type(G['LIMITS']) is dict and list(G['LIMITS']) == ['low', 'high']\n"
        f"G['HELPER'].__code__ is <code helper at test_guards.py:{HELPER.__code__.co_firstlineno}>\n"
        "'max' not in G\n"
        "builtins.max is max\n"
        "mode is None")
    assert str(GuardSet()) == ""


def test_generated_source_reads_each_source_once_after_its_type_check():
    def forward(self, x, n=2):
        return x

    guards = _guard_set(
        Guard("GRAD_MODE", GradModeSource(), True),
        Guard("TYPE_MATCH", SELF, Net, GuardLocation("model.py", 10, "y = self.w * x")),
        Guard("TENSOR_MATCH", AttrSource(SELF, "w"), jg.ones(3)),
        Guard("EQUALS_MATCH", N, 2),
        Guard("EQUALS_MATCH", GlobalSource("SCALE"), 2.0),
        Guard("TYPE_MATCH", AttrSource(AttrSource(SELF, "cfg"), "a"), int),
        Guard("TYPE_MATCH", AttrSource(AttrSource(SELF, "cfg"), "b"), int),
    )
    guard = guards.build_guard_fn(forward)
    assert guard_source(guard) == (
        "def __jg_guard_forward(self, x, n):\n"
        "    # guards of test_generated_source_reads_each_source_once_after_its_type_check.<locals>.forward\n"
        "    try:\n"
        "        return (\n"
        "            __jg_grad_mode.enabled\n"
        "            and type(self) is __jg_Net  # model.py:10: `y = self.w * x`\n"
        "            and type((__jg_t1 := self.w)) is __jg_Tensor and (__jg_d0 := __jg_t1._data).shape == (3,) and __jg_d0.dtype == __jg_float32 and not __jg_t1._requires_grad\n"
        "            and type(n) is int and n == 2\n"
        "            and type((__jg_t2 := __jg_G['SCALE'])) is float and __jg_t2 == 2.0\n"
        "            and type((__jg_t3 := self.cfg).a) is int\n"
        "            and type(__jg_t3.b) is int\n"
        "        )\n"
        "    except Exception:\n"
        "        return False\n")
    net = Net()
    net.w, net.cfg = jg.ones(3), type("Cfg", (), {"a": 1, "b": 2})
    assert guard(net, jg.ones(3)) and not guard(net, jg.ones(3), 3)


def test_empty_guard_set_accepts_every_call_that_binds():
    guard = GuardSet().build_guard_fn(one)
    assert guard(1) is True and guard(None) is True


# ----- construction errors ----------------------------------------------------------------------

def test_expected_values_are_validated_with_a_hint():
    with pytest.raises(TypeError, match="LENGTH_MATCH guard on x expects a LengthMatch, got int; "
                                        "pass the container itself"):
        Guard("LENGTH_MATCH", X, 3)
    with pytest.raises(TypeError, match="DICT_KEYS_MATCH guard on x expects a KeysMatch, got tuple"):
        Guard("DICT_KEYS_MATCH", X, ("a", "b"))
    with pytest.raises(TypeError, match="EQUALS_MATCH guard on x needs None, bool, int"):
        Guard("EQUALS_MATCH", X, [1, 2])
    with pytest.raises(TypeError, match="TYPE_MATCH guard on x expects a type, got int"):
        Guard("TYPE_MATCH", X, 3)
    with pytest.raises(ValueError, match="NOT_PRESENT checks a global, an item or an attribute"):
        Guard("NOT_PRESENT", X, None)
    with pytest.raises(ValueError, match="GRAD_MODE guards go with GradModeSource"):
        Guard("GRAD_MODE", X, True)
    with pytest.raises(ValueError, match="GRAD_MODE guards go with GradModeSource"):
        Guard("EQUALS_MATCH", GradModeSource(), True)
    with pytest.raises(ValueError):
        Guard("NO_SUCH_KIND", X, 1)


def test_expected_values_are_normalized_to_records():
    assert Guard("LENGTH_MATCH", X, (1, 2)).expected == LengthMatch(tuple, 2)
    assert Guard("DICT_KEYS_MATCH", X, {"b": 1, "a": 2}).expected == KeysMatch(dict, ("b", "a"))
    x = jg.ones(2, 3, dtype=jg.float64, requires_grad=True)
    assert Guard("TENSOR_MATCH", X, x).expected == TensorMatch(jg.Tensor, (2, 3), jg.float64, True)
    assert Guard(GuardKind.TYPE_MATCH, X, int).kind is GuardKind.TYPE_MATCH
    assert repr(Guard("TENSOR_MATCH", X, x)) == (
        "Guard(TENSOR_MATCH, x, Tensor(shape=(2, 3), dtype=jitgrad.float64, requires_grad=True))")


def test_guards_reading_what_the_function_cannot_see_are_rejected_when_built():
    with pytest.raises(ValueError, match="a guard reads 'y', which is not a parameter of one"):
        _guard_set(Guard("EQUALS_MATCH", LocalSource("y"), 1)).build_guard_fn(one)
    with pytest.raises(ValueError, match="free variable 'k'"):
        _guard_set(Guard("EQUALS_MATCH", ClosureSource("k"), 1)).build_guard_fn(one)
    with pytest.raises(ValueError, match="was not built by GuardSet.build_guard_fn"):
        guard_source(one)


def test_type_and_code_sources_can_be_guarded():
    guards = _guard_set(Guard("ID_MATCH", TypeSource(X), Net),
                        Guard("ID_MATCH", CodeSource(GlobalSource("HELPER")), HELPER.__code__))
    assert _check(guards, one, Net())
    assert not _check(guards, one, Other())


# ----- the reason is the guard's own check (Note [One definition per guard kind]) ---------

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(
    [0.5, -0.0, 0.0, float("nan"), float("inf")]), st.sampled_from(["a", "b"]))
_PLAIN = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.tuples(inner, inner), st.lists(inner, max_size=3),
    st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)), max_leaves=4)


@st.composite
def _tensors(draw):
    shape = draw(st.lists(st.integers(1, 3), min_size=0, max_size=3))
    dtype = draw(st.sampled_from([jg.float32, jg.float64, jg.int64]))
    t = jg.zeros(*shape, dtype=dtype) if shape else jg.tensor(0, dtype=dtype)
    if len(shape) >= 2 and draw(st.booleans()):
        t = t.transpose(0, 1)
    if shape and shape[0] > 1 and draw(st.booleans()):
        t = t[1:]
    if dtype is not jg.int64 and draw(st.booleans()):
        t = t.detach().requires_grad_()
    return t


_VALUES = st.one_of(_PLAIN, _tensors(), st.sampled_from([Net, Other, len, one, np]))


def _guards_on(draw, source, value) -> list[Guard]:
    """The guards a trace could put on `source` having seen `value`."""
    guards = [Guard("TYPE_MATCH", source, type(value))]
    if isinstance(value, Tensor):
        exact = dense_order(value._data) is not None
        dynamic = frozenset(d for d in range(value.dim()) if exact and draw(st.booleans()))
        guards.append(Guard("TENSOR_MATCH", source, TensorMatch.of(
            value, strides=draw(st.booleans()), storage_offset=draw(st.booleans()),
            dynamic=dynamic)))
        if 0 in dynamic:
            guards.append(Guard("SIZE_RELATION", source, SizeRelation(
                ("size", SizeSource(source, 0)), draw(st.sampled_from(["<", "==", ">="])),
                draw(st.integers(1, 3)))))
    elif type(value) is list:
        guards.append(Guard("LENGTH_MATCH", source, value))
    elif type(value) is dict:
        guards.append(Guard("DICT_KEYS_MATCH", source, value))
    elif is_constant(value) or type(value) is tuple:
        guards.append(Guard("EQUALS_MATCH", source, value))
    else:
        guards.append(Guard("ID_MATCH", source, value))
    return guards


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_explain_failure_fails_exactly_the_calls_the_guard_rejects(data):
    """The generated guard and explain_failure run the same checks: for any traced values and
    any call, a reason is given exactly when the guard says no, and it names the source."""
    def f(x, y):
        return x

    traced = data.draw(_VALUES), data.draw(_VALUES)
    guards = [*_guards_on(data.draw, X, traced[0]),
              *_guards_on(data.draw, LocalSource("y"), traced[1])]
    if traced[0] is traced[1] or data.draw(st.booleans()):
        guards.append(Guard("DUPLICATE_INPUT", LocalSource("y"), X))
    guard_set = _guard_set(*guards)
    call = tuple(value if data.draw(st.booleans()) else data.draw(_VALUES) for value in traced)
    passed = guard_set.build_guard_fn(f)(*call)
    failed = explain_failure(guard_set, f, call, {})
    assert bool(passed) == (failed is None), failed
    if failed is not None:
        assert re.search(r"\b[xy]\b", failed.reason), failed.reason
