"""What explain(), the log channels and CompileError say, compared as exact text: only
what is true (a break is logged, a compiled frame is not; an empty graph is no graph),
every reason a frame runs eagerly, and `fix:` lines a user can apply."""

import logging
import os

import numpy as np
import pytest

import jitgrad as jg

FILE = os.path.basename(__file__)


def t(*shape):
    return jg.tensor(np.arange(np.prod(shape), dtype=np.float32).reshape(shape))


def line_of(fn, offset):
    return fn.__code__.co_firstlineno + offset


def double_then_print(x):
    y = x * 2
    print("y computed")
    return y + 1


def test_graph_breaks_channel_logs_the_break_and_no_compiled_frames(caplog, capsys):
    with caplog.at_level(logging.INFO, logger="jitgrad.graph_breaks"):
        out = jg.compile(double_then_print)(t(3))
    np.testing.assert_allclose(out.numpy(), [1.0, 3.0, 5.0])
    line = line_of(double_then_print, 2)
    assert [r.getMessage() for r in caplog.records] == [
        "jitgrad graph break: unsupported call\n"
        "  why:  call to print()\n"
        "  fix:  print outside the compiled function (return what you want to print)\n"
        f"  at {FILE}:{line}\n"
        '      print("y computed")\n'
        "      ^^^^^^^^^^^^^^^^^^^"]
    assert capsys.readouterr().out == "y computed\n"


def print_first(x):
    print("start")
    return x * 2


def test_an_empty_graph_before_a_break_is_not_counted():
    report = jg.explain(print_first)(t(3))
    np.testing.assert_allclose(report.result.numpy(), [0.0, 2.0, 4.0])
    assert report.graph_count == 1 and report.ops_per_graph == [1]
    assert report.graph_break_count == 1 and len(report.fusion_groups) == 1
    assert str(report).splitlines()[:3] == ["Graph count: 1", "Graph break count: 1",
                                            "Op count: 1 (1)"]


def closure_and_loop(x):
    scale = 2.0

    def scaled(v):
        return v * scale

    for i in range(2):
        print("step", i)
        x = scaled(x)
    return x


def test_a_frame_that_runs_eagerly_for_two_reasons_lists_both(capsys):
    with pytest.warns(UserWarning, match="runs eagerly"):
        report = jg.explain(closure_and_loop)(t(2))
    np.testing.assert_allclose(report.result.numpy(), [0.0, 4.0])
    name = f"closure_and_loop ({FILE}:{closure_and_loop.__code__.co_firstlineno})"
    assert [str(o) for o in report.frame_outcomes] == [
        f"{name}: eager (call to print() (the function creates closures over its own "
        "variables; the break is inside a loop; the frame runs eagerly))"]
    assert report.graph_count == 0


def with_print(x):
    print(x.shape)
    return x * 2


def with_backward(x):
    loss = (x * x).sum()
    loss.backward()
    return loss


def with_random(x):
    return jg.nn.Linear(3, 3)(x)  # its weight init draws outside a random op


def with_item_branch(x):
    if x.sum().item() > 0:
        return x * 2
    return x


@jg.disable
def eager_helper(x):
    return x + 1


def with_disabled(x):
    return eager_helper(x) * 2


def with_view_write(x):
    v = x.split(1)[0]  # a write through a view of a split output is not functionalized
    v.add_(1)
    return x * 2


CONSTRUCTS = [with_print, with_backward, with_random, with_item_branch, with_disabled,
              with_view_write]


@pytest.mark.parametrize("fn", CONSTRUCTS, ids=lambda f: f.__name__)
def test_fullgraph_fix_lines_are_fixes_not_fallbacks(fn):
    x = jg.tensor([1.0, 2.0, 3.0], requires_grad=fn is with_backward)
    with pytest.raises(jg.CompileError) as excinfo:
        jg.compile(fn, fullgraph=True)(x.clone().detach().requires_grad_(x.requires_grad)
                                       if fn is with_backward else x)
    fixes = [line for line in str(excinfo.value).splitlines() if line.startswith("  fix:")]
    assert len(fixes) == 1, str(excinfo.value)
    assert not any(word in fixes[0] for word in ("eager", "runs", "between graphs")), fixes


def test_fullgraph_compile_error_text():
    with pytest.raises(jg.CompileError) as excinfo:
        jg.compile(with_random, fullgraph=True)(t(3))
    assert str(excinfo.value) == (
        "jitgrad graph break: random op\n"
        "  why:  jitgrad.nn.modules.linear.Linear draws random numbers outside a random op\n"
        "  fix:  draw the random tensor outside the compiled function and pass it in "
        "(rand, randn, randint, *_like, in-place fills and dropout are captured)\n"
        f"  at {FILE}:{line_of(with_random, 1)}\n"
        "      return jg.nn.Linear(3, 3)(x)  # its weight init draws outside a random op\n"
        "             ^^^^^^^^^^^^^^^^^^")
