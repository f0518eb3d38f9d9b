"""A user's mistake in a compiled function raises what eager raises (Note [User errors]).

Each case runs the same function eagerly and compiled (fullgraph False and True) and
compares the exception class and message exactly; the compiled error comes from the
user's frame, unchained to any tracer exception, with no "internal error" warning, and
the next good call still compiles.
"""

import operator
import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.trace.ir.graph import Graph, SourceLocation
from jitgrad.trace.ir.graph_module import GraphModule
from jitgrad.trace.runtime.user_lines import add_user_location


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
                   and entry.name not in ("__call__", "_call", "_call_compiled", "_compile_and_run")
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


# ----- runtime errors in generated code (Note [Errors at the user's line]) ---------------

def from_user_code(fn, line_offset, text, carets):
    """The section an error raised at `fn`'s line `co_firstlineno + line_offset` ends with."""
    line = fn.__code__.co_firstlineno + line_offset
    return (f'\n\nfrom user code:\n  File "{__file__}", line {line}, in {fn.__name__}\n'
            f"    {text}\n    {carets}")


def gather(x, idx):
    y = x * 2
    return y[idx] + 1


def add_one_in_place(w):
    w.add_(1)
    return w * 2


def backward_twice(w):
    loss = (w * w).sum()
    loss.backward()
    loss.backward()
    return loss


def gather_after_print(x, idx):
    y = x * 2
    print("between graphs")
    return y[idx] + 1


@pytest.mark.parametrize("fullgraph", [False, True])
def test_index_error_in_a_graph_is_raised_at_the_users_line(fullgraph):
    compiled = jg.compile(gather, fullgraph=fullgraph)
    x = t(4, 3)
    np.testing.assert_allclose(compiled(x, jg.tensor([0, 3])).numpy(),
                               gather(x, jg.tensor([0, 3])).numpy())
    expected = eager_error(gather, (x, jg.tensor([0, 7])))
    with pytest.raises(IndexError) as excinfo:
        compiled(x, jg.tensor([0, 7]))
    assert type(excinfo.value) is type(expected)
    assert str(excinfo.value).endswith(from_user_code(gather, 2, "return y[idx] + 1",
                                                      "       ^^^^^^"))


def test_in_place_write_into_a_leaf_is_raised_at_the_in_place_ops_line():
    w = jg.tensor([1.0, 2.0], requires_grad=True)
    expected = eager_error(add_one_in_place, (w,))
    with pytest.raises(RuntimeError) as excinfo:
        jg.compile(add_one_in_place)(w)
    assert str(excinfo.value) == str(expected) + from_user_code(
        add_one_in_place, 1, "w.add_(1)", "^^^^^^^^^")
    assert w._version == 0 and w.grad is None


def test_second_backward_at_a_graph_break_is_raised_at_the_second_backward_line():
    w = jg.tensor([1.0, 2.0], requires_grad=True)
    expected = eager_error(backward_twice, (jg.tensor([1.0, 2.0], requires_grad=True),))
    with pytest.raises(RuntimeError) as excinfo:
        jg.compile(backward_twice)(w)
    assert str(excinfo.value) == str(expected) + from_user_code(
        backward_twice, 3, "loss.backward()", "^^^^^^^^^^^^^^^")
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 4.0])  # the first backward ran


def test_error_in_a_resume_functions_graph_names_the_users_function(capsys):
    x = t(3)
    with pytest.raises(IndexError) as excinfo:
        jg.compile(gather_after_print)(x, jg.tensor([5]))
    assert str(excinfo.value).endswith(from_user_code(
        gather_after_print, 3, "return y[idx] + 1", "       ^^^^^^"))
    assert capsys.readouterr().out == "between graphs\n"


def test_error_in_user_code_called_at_a_break_keeps_eagers_message():
    def check(y):
        raise ValueError(f"bad value {y.shape}")

    def f(x):
        y = x * 2
        check(y)
        return y

    expected = eager_error(f, (t(3),))
    with pytest.raises(ValueError) as excinfo:
        jg.compile(f)(t(3))
    assert str(excinfo.value) == str(expected)  # the traceback ends in `check` already
    last = excinfo.traceback[-1]  # the user's `raise` line (in check's resume function)
    assert (str(last.path), last.lineno + 1) == (__file__, check.__code__.co_firstlineno + 1)


def graph_raising(target, *args):
    """A GraphModule calling `target(x, *args)` at a made-up user line 12 of train.py."""
    graph = Graph()
    x = graph.placeholder("x")
    node = graph.call_function(target, (x, *args))
    node.meta["source"] = SourceLocation("/project/train.py", 12, 8, 14, "    y = x[idx]",
                                         "step")
    graph.output((node,))
    return GraphModule(graph)


FROM_TRAIN_PY = ('from user code:\n  File "/project/train.py", line 12, in step\n'
                 "    y = x[idx]\n        ^^^^^^")


class StepError(Exception):
    pass


def raise_step_error(x, code):
    raise StepError(code)


@pytest.mark.parametrize("target, arg, kind, args", [
    (operator.getitem, 5, IndexError, None),
    (operator.getitem, "missing", KeyError, ("missing",)),
    (raise_step_error, "code-7", StepError, ("code-7",)),
], ids=["IndexError", "KeyError", "users_class"])
def test_an_error_from_a_graph_line_gets_the_users_line_once(target, arg, kind, args):
    gm = graph_raising(target, arg)
    with pytest.raises(kind) as excinfo:
        gm([1, 2] if kind is IndexError else {})
    err = excinfo.value
    if kind is StepError:  # raised in user code: its traceback already ends there
        add_user_location(err)
        assert err.args == args and not hasattr(err, "__notes__")
        return
    add_user_location(err)
    add_user_location(err)  # an outer runner re-raising it adds nothing
    if args is None:  # the builtin's message is args[0]: extended there
        assert str(err) == "list index out of range\n\n" + FROM_TRAIN_PY
        assert not hasattr(err, "__notes__")
    else:  # KeyError's str() is a repr: its args stay, the location is a note
        assert err.args == args and err.__notes__ == [FROM_TRAIN_PY]


def check_rows(x):
    if x.shape[0] != 3:
        raise ValueError(f"expected 3 rows, got {x.shape[0]}")
    return x


def normalized(x):
    return check_rows(x) / 2


def first_positive(xs):
    for x in xs:
        if x > 0:
            return x
        raise LookupError("no positive number first")
    return None


@pytest.mark.parametrize("fullgraph", [False, True])
@pytest.mark.parametrize("fn, bad, good", [
    (check_rows, lambda: (t(4, 2),), lambda: (t(3, 2),)),
    (normalized, lambda: (t(4, 2),), lambda: (t(3, 2),)),  # raised in an inlined callee
    (first_positive, lambda: ([-1, 2],), lambda: ([1, 2],)),  # raised inside a loop
], ids=["in_the_frame", "in_a_callee", "in_a_loop"])
def test_a_raise_statement_reached_while_tracing_raises_the_users_exception(fn, bad, good,
                                                                             fullgraph):
    expected = eager_error(fn, bad())
    compiled = jg.compile(fn, fullgraph=fullgraph)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(type(expected)) as excinfo:
            compiled(*bad())
    assert str(excinfo.value) == str(expected)
    assert chained_types(excinfo.value) == chained_types(expected)
    result = compiled(*good())
    expected_good = fn(*good())
    if isinstance(result, jg.Tensor):
        np.testing.assert_allclose(result.numpy(), expected_good.numpy())
    else:
        assert result == expected_good
