"""The numba backend equals eager in autograd-visible ways: the tables of
tests/trace/parity_cases.py and tests/trace/test_functional_views.py (run there on the
eager backend) through compiled regions (Note [Joint graphs]), plus reductions and
normalizations over size-1 dims whose kernels mixed up prologue and epilogue."""

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use
from jitgrad.codegen.autograd import CompiledRegion
from tests.codegen.test_backend import compile_numba
from tests.trace.eager_parity import assert_matches_eager
from tests.trace.parity_cases import (
    GRAD_MODES,
    GRAD_NONENESS,
    OUTER_MODES,
    RETURNED_ALIASES,
    SAVED_WRITE_WORDS,
    SAVED_WRITES,
    UNSEEN_WRITES,
    Case,
)
from tests.trace.test_functional_views import VIEWS, inputs, program_for


def by_name(case):
    return case.name


@pytest.fixture(autouse=True)
def fresh_caches():
    jg.reset()
    yield
    jg.reset()


@pytest.mark.parametrize("case", UNSEEN_WRITES, ids=by_name)
def test_writes_autograd_does_not_see_keep_history(case):
    assert_matches_eager(case.program, case.make_inputs, "numba", **case.options)


@pytest.mark.parametrize("case", RETURNED_ALIASES, ids=by_name)
def test_returned_aliases_match_eager(case):
    assert_matches_eager(case.program, case.make_inputs, "numba", **case.options)


@pytest.mark.parametrize("case", GRAD_NONENESS, ids=by_name)
def test_grad_none_ness_matches_eager(case):
    assert_matches_eager(case.program, case.make_inputs, "numba", **case.options)


@pytest.mark.parametrize("case", SAVED_WRITES, ids=by_name)
def test_saved_values_written_in_place_raise_as_eager(case):
    assert_matches_eager(case.program, case.make_inputs, "numba", words=SAVED_WRITE_WORDS,
                         **case.options)


@pytest.mark.parametrize("outer", OUTER_MODES)
@pytest.mark.parametrize("case", GRAD_MODES, ids=by_name)
def test_grad_mode_regions_match_eager_under_each_outer_mode(case, outer):
    assert_matches_eager(case.program, case.make_inputs, "numba", outer=OUTER_MODES[outer])


def test_enable_grad_inside_a_call_under_no_grad_is_a_compiled_region():
    def f(x):
        with jg.enable_grad():
            return (x * x).sum()

    compiled, produced = compile_numba(f)
    x = jg.tensor(np.arange(3, dtype=np.float32), requires_grad=True)
    with jg.no_grad():
        loss = compiled(x)
    assert [type(p) for p in produced] == [CompiledRegion]
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), 2 * np.arange(3, dtype=np.float32))


@pytest.mark.parametrize("target", ["base", "view", "other_view"])
@pytest.mark.parametrize("view", VIEWS)
def test_write_with_live_views_matches_eager(view, target):
    assert_matches_eager(program_for(view, "mul_by_input", target), inputs, "numba")


@pytest.mark.parametrize("write", ["add_", "copy_", "zero_", "fill_", "clamp_", "setitem"])
def test_writes_through_a_transposed_view_match_eager(write):
    assert_matches_eager(program_for("t", write, "view"), inputs, "numba")


@pytest.mark.parametrize("view", ["t", "rows", "select", "view"])
def test_write_after_a_graph_break_matches_eager(view):
    assert_matches_eager(program_for(view, "mul_", "base", graph_break=True), inputs, "numba")


# ----- reductions and normalizations over size-1 dims --------------------------------------

def layer_norm_loss(x, w, b):
    return (F.layer_norm(x, tuple(w.shape), w, b) * 2.0).sum()


NORM_SHAPES = [((4, 1), (1,)), ((2, 3, 1), (1,)), ((1, 1), (1,)), ((3, 1, 1), (1, 1)),
               ((1, 4), (4,)), ((2, 1, 3), (1, 3))]


# "error": an internal error (the frame then runs eagerly) or a kernel numba fails to
# compile (the graph then runs eagerly) warns, and must not happen here
@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("input_grad", [False, True])
@pytest.mark.parametrize("shapes", NORM_SHAPES, ids=str)
def test_layer_norm_with_affine_grads_over_size_one_dims_matches_eager(shapes, input_grad):
    x_shape, w_shape = shapes
    case = Case("layer_norm", layer_norm_loss, (x_shape, w_shape, w_shape),
                (input_grad, True, True))
    assert_matches_eager(case.program, case.make_inputs, "numba")


def epilogue_before_reduction(x, y):
    z = y * 2.0  # an epilogue member that comes before the reduction in graph order
    return x.sum(1, keepdim=True) + z


def mean_times_weight(x, y):
    return x.mean(-1, keepdim=True) * y


def softmax_over_size_one(x, y):
    return F.softmax(x, dim=-1) * y


def var_over_size_one(x, y):
    return x.var(-1, keepdim=True, correction=0) + y


def normalize_rows(x, y):
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True, correction=0) + 1.0) * y


REDUCTIONS = [epilogue_before_reduction, mean_times_weight, softmax_over_size_one,
              var_over_size_one, normalize_rows]


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("x_shape", [(4, 1), (4, 3), (1, 1)], ids=str)
@pytest.mark.parametrize("program", REDUCTIONS, ids=lambda p: p.__name__)
def test_reduction_with_epilogue_and_grads_matches_eager(program, x_shape):
    case = Case(program.__name__, program, (x_shape, (x_shape[0], 1)))
    assert_matches_eager(case.program, case.make_inputs, "numba")


def _zeroed_layer_norm(a):
    normed = F.layer_norm(a, (a.shape[-1],))
    zeroed = normed.clone()
    zeroed.zero_()
    return zeroed.sum(), normed


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_a_zero_gradient_from_zero_is_computed_through_the_ops_before_it(backend):
    # fuzz seed 664842: zero_()'s backward gives zeros, which eager runs through
    # layer_norm's backward (a -inf row gives NaN); the compiled backward pruned them as
    # if no gradient had arrived (Note [Zero gradients read their gradient])
    rows = np.array([[0.5, -0.2, -0.7, 0.3], [-np.inf, 0.7, -0.1, 0.5]], np.float32)
    results = []
    for fn in (_zeroed_layer_norm, jg.compile(_zeroed_layer_norm, backend=backend)):
        a = jg.tensor(rows, requires_grad=True)
        total, _ = fn(a)
        total.backward()
        results.append(a.grad.numpy())
    np.testing.assert_array_equal(results[1], results[0])
    assert np.isnan(results[0][1]).all() and (results[0][0] == 0).all()
