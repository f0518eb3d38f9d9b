"""A user's mistake in a compiled function raises what eager raises (Note [User errors]).

Each case runs the same function eagerly and compiled (fullgraph False and True) and
compares the exception class and message exactly; the compiled error comes from the
user's frame, unchained to any tracer exception, with no "internal error" warning, and
the next good call still compiles.
"""

import warnings

import numpy as np
import pytest

import jitgrad as jg


class Config:
    pass


class Scaled:
    scale = 2.0


def add(x, y):
    return x + y


def matmul(x, y):
    return x @ y


def index(x, i):
    return x[i]


def scale_and_shift(x):
    return x * 2 + 1


def apply(x, f):
    return f(x)


def scaled(x, obj):
    return x * obj.scale


def pair(x, y):
    return x * y


def t(*shape, seed=0):
    return jg.tensor(np.random.default_rng(seed).normal(size=shape).astype(np.float32))


MISTAKES = [
    ("add_shapes", add, lambda: (t(3, 4), t(5)), lambda: (t(3, 4), t(4))),
    ("matmul_shapes", matmul, lambda: (t(3, 4), t(5, 2)), lambda: (t(3, 4), t(4, 2))),
    ("float_index", index, lambda: (t(3, 4), jg.tensor([0.5, 1.0])),
     lambda: (t(3, 4), jg.tensor([0, 2]))),
    ("none_argument", scale_and_shift, lambda: (None,), lambda: (t(3),)),
    ("not_callable", apply, lambda: (t(3), 3), lambda: (t(3), jg.relu)),
    ("missing_attribute", scaled, lambda: (t(3), Config()), lambda: (t(3), Scaled())),
    ("too_few_arguments", pair, lambda: (t(3),), lambda: (t(3), t(3))),
    ("too_many_arguments", pair, lambda: (t(3), t(3), t(3)), lambda: (t(3), t(3))),
]


def chained_types(err):
    types = []
    while err is not None:
        types.append(type(err))
        err = err.__cause__ or err.__context__
    return types


def eager_error(fn, args):
    with pytest.raises(Exception) as excinfo:
        fn(*args)
    return excinfo.value


@pytest.mark.parametrize("fullgraph", [False, True])
@pytest.mark.parametrize("case", MISTAKES, ids=lambda c: c[0])
def test_user_mistake_raises_eagers_error(case, fullgraph):
    _, fn, bad_args, good_args = case
    expected = eager_error(fn, bad_args())
    compiled = jg.compile(fn, fullgraph=fullgraph)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "internal error" or "runs eagerly" warning
        with pytest.raises(type(expected)) as excinfo:
            compiled(*bad_args())
    err = excinfo.value
    assert type(err) is type(expected) and str(err) == str(expected)
    assert chained_types(err) == chained_types(expected)  # not chained to the tracer's
    assert not any("jitgrad/trace/" in str(entry.path) and entry.name != "_run_eagerly"
                   and entry.name not in ("__call__", "_call", "_compile_and_run")
                   for entry in excinfo.traceback)
    report = jg.explain(compiled)(*good_args())
    np.testing.assert_allclose(report.result.numpy(), fn(*good_args()).numpy(), rtol=1e-6)
    assert report.graph_count == 1
    assert [str(o).split(": ", 1)[1] for o in report.frame_outcomes] == ["compiled"]


def test_error_inside_an_inlined_callee_is_raised_from_the_callees_line():
    def inner(x, y):
        return x + y

    def outer(x, y):
        return inner(x * 2, y)

    expected = eager_error(outer, (t(3, 4), t(5)))
    with pytest.raises(RuntimeError) as excinfo:
        jg.compile(outer)(t(3, 4), t(5))
    assert str(excinfo.value) == str(expected)
    assert [e.name for e in excinfo.traceback if e.name in ("outer", "inner")] == \
        ["outer", "inner"]


class FailsOnFirstRead:
    """An attribute whose first read raises: the trace fails where the eager run does not."""

    def __init__(self):
        self.reads = 0

    @property
    def scale(self):
        self.reads += 1
        if self.reads == 1:
            raise LookupError("first read")
        return 2.0


def test_trace_failure_that_eager_does_not_repeat_keeps_the_frame_eager_with_a_warning():
    compiled = jg.compile(scaled)
    x = t(3)
    with pytest.warns(UserWarning, match="runs eagerly after an internal error LookupError: "
                                         "first read"):
        np.testing.assert_allclose(compiled(x, FailsOnFirstRead()).numpy(), x.numpy() * 2)
    report = jg.explain(compiled)(x, FailsOnFirstRead())
    assert report.graph_count == 0
    jg.reset()
    with pytest.raises(jg.CompileError, match="ran eagerly without this error"):
        jg.compile(scaled, fullgraph=True)(x, FailsOnFirstRead())
