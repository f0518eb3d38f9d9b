"""Views and in-place writes in compiled code equal eager (Note [Functionalized views] in
jitgrad/trace/capture/view_writes.py): a view taken before a write to its base, or to another
view of the same base, reads the write and routes its gradient through it, in one graph
and across a graph break between the view and the write. Backend "eager" here (capture);
tests/codegen/test_training_semantics.py runs a part of the same table on numba.
"""

import numpy as np
import pytest

import jitgrad as jg
from tests.trace.eager_parity import assert_matches_eager

VIEWS = {
    "t": lambda v: v.t(),
    "transpose": lambda v: v.transpose(0, 1),
    "view": lambda v: v.view(6),
    "reshape": lambda v: v.reshape(3, 2),
    "rows": lambda v: v[1:],
    "strided_columns": lambda v: v[:, ::2],
    "select": lambda v: v[0],
    "select_dim1": lambda v: v.select(1, 2),
    "unsqueeze": lambda v: v.unsqueeze(0),
    "expand": lambda v: v[0:1].expand(4, 3),
    "narrow": lambda v: v.narrow(1, 1, 2),
    "diagonal": lambda v: v.diagonal(),
    "t_of_rows": lambda v: v.t()[1:],
    "unsqueeze_of_select": lambda v: v[1].unsqueeze(1),
}


def _setitem(t, y):
    t[0] = y * 3.0


WRITES = {
    "mul_": lambda t, y: t.mul_(0.5),
    "mul_by_input": lambda t, y: t.mul_(y),
    "add_": lambda t, y: t.add_(y),
    "copy_": lambda t, y: t.copy_(y * 2.0),
    "zero_": lambda t, y: t.zero_(),
    "fill_": lambda t, y: t.fill_(2.0),
    "clamp_": lambda t, y: t.clamp_(-0.5, 0.5),
    "setitem": _setitem,
}

# which tensor is written: the base, the view itself, or another view of the same base
TARGETS = {
    "base": lambda v, u: v,
    "view": lambda v, u: u,
    "other_view": lambda v, u: v[1],
}


def program_for(view, write, target, graph_break=False):
    view_fn, write_fn, target_fn = VIEWS[view], WRITES[write], TARGETS[target]

    def program(x, y):
        v = x * 1.0
        u = view_fn(v)
        if graph_break:
            jg.graph_break()
        write_fn(target_fn(v, u), y)
        return u, v * 1.5, u * u

    return program


def inputs():
    rng = np.random.default_rng(0)
    return [jg.tensor(rng.normal(size=(2, 3)).astype(np.float32), requires_grad=True),
            jg.tensor(np.float32(0.75), requires_grad=True)]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("write", WRITES)
@pytest.mark.parametrize("view", VIEWS)
def test_write_with_live_views_matches_eager(view, write, target):
    assert_matches_eager(program_for(view, write, target), inputs, "eager")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("write", ["mul_", "copy_", "setitem"])
@pytest.mark.parametrize("view", VIEWS)
def test_write_after_a_graph_break_matches_eager(view, write, target):
    assert_matches_eager(program_for(view, write, target, graph_break=True), inputs, "eager")


def test_view_before_a_write_to_its_base_gets_the_written_gradient_in_one_graph():
    def f(x):
        v = x * 1.0
        u = v.t()
        v.mul_(0.5)
        return u

    x = jg.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    report = jg.explain(f)(x)
    assert report.graph_count == 1 and report.graph_break_count == 0
    jg.reset()
    u = jg.compile(f)(x)
    u.sum().backward()
    np.testing.assert_array_equal(u.detach().numpy(), np.full((3, 2), 0.5, np.float32))
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 0.5, np.float32))


def test_views_of_an_input_written_under_no_grad_read_the_write_back():
    def f(w, g):
        row = w[0]
        col = w.t()[:, 1]
        with jg.no_grad():
            w.sub_(0.5 * g)
            row.mul_(2.0)
        return row * 1.0, col * 1.0

    def make():
        w = jg.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
        return [w, jg.tensor(np.ones((2, 3), np.float32))]

    assert_matches_eager(f, make, "eager")


def test_a_view_made_under_no_grad_stays_without_history_after_its_base_is_written():
    def f(x, y):
        v = x * 1.0
        with jg.no_grad():
            u = v[0]
        v.mul_(y)
        return u, v

    assert_matches_eager(f, inputs, "eager")


def test_write_through_an_alias_of_a_view_matches_eager():
    def f(x, y):
        v = x * 1.0
        u = v[1]
        u.detach().mul_(3.0)  # refused in the graph: runs eagerly at a break
        return u * 1.0, v

    assert_matches_eager(f, inputs, "eager")


def test_split_outputs_written_in_place_raise_eagers_error():
    def f(x, y):
        v = x * 1.0
        a, b = v.split(1, dim=0)
        a.mul_(2.0)
        return a, b

    outcome = assert_matches_eager(f, inputs, "eager")
    assert outcome.error is not None and outcome.error[0] is RuntimeError


WRITES_THROUGH_REORDERING_VIEWS = {
    "through_t": lambda x: _written(x + 1, lambda b: b.t().add_(1)),
    "into_a_transposed_base": lambda x: _written((x + 1).t(), lambda b: b[0].mul_(2)),
    "through_permute": lambda x: _written((x + 1).reshape(1, 2, 3),
                                          lambda b: b.permute(2, 0, 1)[1].zero_()),
}


def _written(base, write):
    write(base)
    return base


@pytest.mark.parametrize("backend", ["eager", "numba"])
@pytest.mark.parametrize("name", sorted(WRITES_THROUGH_REORDERING_VIEWS))
def test_a_write_through_a_reordering_view_keeps_the_bases_layout(name, backend):
    # new-user report: `b.t().add_(1)` left a compiled `b` transposed (view(-1) raised)
    fn = WRITES_THROUGH_REORDERING_VIEWS[name]
    x = jg.arange(6.0).reshape(2, 3)
    want = fn(x)
    got = jg.compile(fn, backend=backend)(x)
    assert got.stride() == want.stride() and got.tolist() == want.tolist()
