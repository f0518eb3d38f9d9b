"""In-place ops inside compiled functions (Note [Functionalized in-place ops] in
jitgrad/trace/capture/functionalize.py): values, version counters and identities match
eager; refused cases break the graph (or run eagerly) with eager's values and errors.

Each test runs the same function compiled and eagerly on equal copies of the inputs.
"""

import inspect
import re
import warnings

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F  # noqa: N812 - the PyTorch convention
from jitgrad.trace.runtime import report as report_module
from jitgrad.trace.testing import CountingBackend


def compile_eager(fn):
    """Compiled with the eager backend: these tests are about capture, not kernels."""
    return jg.compile(fn, backend="eager")


def data(seed=0, shape=(2, 3), dtype=np.float32):
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


def pair(array, requires_grad=False):
    """Two equal tensors: one for the compiled run, one for the eager run."""
    return (jg.tensor(array, requires_grad=requires_grad),
            jg.tensor(array, requires_grad=requires_grad))


def assert_same_tensor(compiled, eager):
    np.testing.assert_array_equal(compiled.detach().numpy(), eager.detach().numpy())
    assert compiled.dtype == eager.dtype and compiled._version == eager._version


def update_chain(x, y):
    x.add_(y, alpha=2)
    x.mul_(0.5)
    z = x * 3  # reads the written value
    y += 1
    x.addcdiv_(y, y + 2, value=0.25)
    x.lerp_(y, 0.1)
    x.clamp_(-1.0, 1.0)
    return z


def test_inplace_ops_on_inputs_are_one_graph_written_back_with_eager_versions():
    x, x_ref = pair(data(0))
    y, y_ref = pair(data(1))
    counter = CountingBackend()
    compiled = jg.compile(update_chain, backend=counter)
    with report_module.recording() as report:
        for _ in range(3):  # each call updates the inputs exactly once
            z = compiled(x, y)
            z_ref = update_chain(x_ref, y_ref)
            assert_same_tensor(z, z_ref)
            assert_same_tensor(x, x_ref)
            assert_same_tensor(y, y_ref)
    assert counter.compile_count == 1 and report.graph_break_count == 0
    assert x._version == 15 and y._version == 3  # 5 and 1 writes per call, as eager


def test_runner_copies_final_values_back_after_the_graph():
    def f(x):
        x.mul_(2)
        x.add_(1)
        return x.sum()

    compiled = compile_eager(f)
    compiled(jg.ones(3))
    text = compiled.show()
    assert ("def __jg_run_f(x):\n    __out = __graph(x)\n    __write_back(x, __out[1], 2)\n"
            "    return __out[0]\n") in text
    assert "%mul = call_function[mul](%x, 2)" in text


def test_returned_input_is_the_callers_tensor():
    def f(x):
        x.sub_(1)
        return x, x.data, x.detach()

    x, x_ref = pair(data(2))
    out, alias, detached = compile_eager(f)(x)
    out_ref, _, _ = f(x_ref)
    assert out is x
    assert_same_tensor(out, out_ref)
    np.testing.assert_array_equal(alias.numpy(), x_ref.numpy())
    assert detached._version == x._version == 1  # detach() shares the version counter


@pytest.mark.parametrize("src", ["tensor", "broadcast", "float64", "number", "0-d"],
                         ids=str)
def test_copy_and_fill_cast_and_broadcast_as_eager(src):
    sources = {"tensor": data(3), "broadcast": data(3, shape=(3,)),
               "float64": data(3, dtype=np.float64), "number": 2.5, "0-d": np.float32(4.0)}
    value = sources[src]

    def f(x, v):
        x.copy_(v)
        x.add_(1)
        return x * 2

    def g(x, v):
        x.fill_(v if isinstance(v, float) else v.sum())
        return x + 1

    for fn in (f, g):
        x, x_ref = pair(data(4))
        v = value if isinstance(value, float) else jg.tensor(value)
        assert_same_tensor(compile_eager(fn)(x, v), fn(x_ref, v))
        assert_same_tensor(x, x_ref)


def test_zero_and_inplace_operators_on_int_tensors():
    def f(counts, step):
        counts += step
        counts *= 3
        total = counts.sum()
        counts.zero_()
        return total

    counts, counts_ref = pair(np.arange(6, dtype=np.int64))
    step = jg.tensor(np.ones(6, dtype=np.int64))
    assert_same_tensor(compile_eager(f)(counts, step), f(counts_ref, step))
    assert_same_tensor(counts, counts_ref)


def test_parameter_update_under_no_grad_stays_in_the_graph():
    def sgd_step(p, lr):
        with jg.no_grad():
            p.data.copy_(p - lr * p.grad)
            p.add_(p.grad, alpha=-lr)
        return p

    p, p_ref = pair(data(5), requires_grad=True)
    g = jg.tensor(data(6))
    p.grad, p_ref.grad = g, g.clone()
    counter = CountingBackend()
    compiled = jg.compile(sgd_step, backend=counter)
    with report_module.recording() as report:
        for _ in range(3):
            assert compiled(p, 0.1) is p
            sgd_step(p_ref, 0.1)
            assert_same_tensor(p, p_ref)
    assert counter.compile_count == 1 and report.graph_break_count == 0
    assert p.is_leaf and p.requires_grad


def test_writes_are_visible_after_a_graph_break():
    def f(x):
        x.add_(1)
        jg.graph_break()
        x.mul_(2)
        return x + 1

    x, x_ref = pair(data(7))
    with report_module.recording() as report:
        out = compile_eager(f)(x)
    assert report.graph_count == 2 and report.graph_break_count == 1
    assert_same_tensor(out, f(x_ref))
    assert_same_tensor(x, x_ref)


def test_one_input_through_two_arguments_sees_its_own_write():
    def f(a, b):
        a.add_(1)
        return b * 2

    x, x_ref = pair(data(8))
    assert_same_tensor(compile_eager(f)(x, x), f(x_ref, x_ref))
    assert_same_tensor(x, x_ref)


def test_tensors_made_in_the_graph_are_written_freely_with_gradients():
    def f(w):
        h = w * 2
        h.add_(1)
        h *= w
        h.sub_(w.exp())
        return h.sum()

    w, w_ref = pair(data(9), requires_grad=True)
    with report_module.recording() as report:
        out = compile_eager(f)(w)
    assert report.graph_break_count == 0
    out_ref = f(w_ref)
    np.testing.assert_allclose(out.item(), out_ref.item(), rtol=1e-6)
    out.backward()
    out_ref.backward()
    np.testing.assert_allclose(w.grad.numpy(), w_ref.grad.numpy(), rtol=1e-6)


def test_grad_is_read_and_assigned_through_the_parameter():
    def f(p):
        g = p.grad * 2
        p.grad = None
        return g

    p = jg.tensor(data(10), requires_grad=True)
    p.grad = jg.tensor(data(11))
    out = compile_eager(f)(p)
    np.testing.assert_array_equal(out.numpy(), data(11) * 2)
    assert p.grad is None


# ----- refused: eager's values or errors, through a graph break or an eager frame -----

def test_inplace_on_a_leaf_requiring_grad_raises_eagers_error():
    def f(w):
        w.add_(1)
        return w

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            compile_eager(f)(jg.ones(3, requires_grad=True))


def test_inplace_result_that_cannot_be_cast_raises_eagers_error():
    def f(counts):
        counts.add_(1.5)
        return counts

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="result type Float can't be cast to the "
                                               "desired output type Long"):
            compile_eager(f)(jg.tensor([1, 2]))


def views_then_write(x):
    v = x.view(-1)
    x.add_(1)
    return v * 1


def write_through_view(x):
    x[0].mul_(3)
    return x + 0


@pytest.mark.parametrize("fn", [views_then_write, write_through_view],
                         ids=lambda f: f.__name__)
def test_writes_involving_views_are_one_graph_with_eager_values(fn):
    # Note [Functionalized views] in jitgrad/trace/capture/view_writes.py
    x, x_ref = pair(data(12))
    with report_module.recording() as report:
        out = compile_eager(fn)(x)
    assert report.graph_count == 1 and report.graph_break_count == 0
    out_ref = fn(x_ref)
    assert_same_tensor(out, out_ref)
    assert_same_tensor(x, x_ref)


def test_an_input_that_is_a_view_is_written_eagerly_into_its_base():
    def f(x):
        x.add_(1)
        return x

    base, base_ref = pair(data(13, shape=(4,)))
    with report_module.recording() as report:
        compile_eager(f)(base[1:])
    f(base_ref[1:])
    assert [r.kind for r in report.break_reasons] == ["INPLACE_ON_VIEW"]
    assert_same_tensor(base, base_ref)


def accumulate(x, total=jg.zeros(3)):  # noqa: B008 - the trap under test
    total.add_(x)
    return total * 1


def test_a_tensor_reached_without_a_source_is_written_by_its_own_frame():
    # inlined, the callee's default is a constant of the caller's graph: refused there; the
    # callee then runs compiled on its own, where the default is an input written back
    def f(x):
        return accumulate(x) + 1

    compiled = compile_eager(f)
    with report_module.recording() as report:
        compiled(jg.ones(3))
        out = compiled(jg.ones(3))
    assert report.break_reasons[0].kind == "INPLACE_ON_CONSTANT"
    np.testing.assert_array_equal(out.numpy(), [3.0, 3.0, 3.0])
    np.testing.assert_array_equal(accumulate.__defaults__[0].numpy(), [2.0, 2.0, 2.0])


def test_a_default_argument_of_the_compiled_function_is_an_input_written_back():
    def f(x, total=jg.zeros(3)):  # noqa: B008 - the trap under test
        total.add_(x)
        return total * 1

    compiled = compile_eager(f)
    with report_module.recording() as report:
        compiled(jg.ones(3))
        out = compiled(jg.ones(3))
    assert report.graph_break_count == 0
    np.testing.assert_array_equal(out.numpy(), [2.0, 2.0, 2.0])
    assert f.__defaults__[0]._version == 2


def test_writing_an_input_whose_memory_another_input_shares_runs_eagerly():
    def f(a, b):
        a.add_(1)
        return b * 2

    x, x_ref = pair(data(14))
    with report_module.recording() as report, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = compile_eager(f)(x, x.detach())
    assert report.frame_outcomes[0].outcome == "eager"
    assert "INPLACE_ON_ALIASED_INPUT" not in [r.kind for r in report.break_reasons]
    assert "shares" in report.frame_outcomes[0].reason
    assert_same_tensor(out, f(x_ref, x_ref.detach()))


def test_a_tensor_made_in_the_graph_copies_an_input_instead_of_aliasing_it():
    def f(x):
        buffer = jg.zeros(3)
        buffer.copy_(x)
        return buffer, x

    x = jg.ones(3)
    buffer, same = compile_eager(f)(x)
    assert same is x and buffer is not x
    buffer.add_(1)
    np.testing.assert_array_equal(x.numpy(), [1.0, 1.0, 1.0])


def test_handwritten_sgd_over_a_parameter_list_is_one_graph():
    def sgd(params, lr):
        with jg.no_grad():
            for p in params:
                p -= lr * p.grad
                p.grad = None

    params = [jg.tensor(data(20 + i), requires_grad=True) for i in range(3)]
    refs = [jg.tensor(data(20 + i), requires_grad=True) for i in range(3)]
    compiled = compile_eager(sgd)
    with report_module.recording() as report:
        for step in range(2):
            for i, (p, q) in enumerate(zip(params, refs, strict=True)):
                p.grad, q.grad = jg.tensor(data(30 + i + step)), jg.tensor(data(30 + i + step))
            compiled(params, 0.1)
            sgd(refs, 0.1)
    assert report.graph_count == 1 and report.graph_break_count == 0
    for p, q in zip(params, refs, strict=True):
        assert_same_tensor(p, q)
        assert p.grad is None and p.is_leaf


COUNTS = jg.zeros(3)


def test_global_and_closure_tensors_are_written_back():
    def count(x):
        COUNTS.add_(x)
        return COUNTS * 1

    def make_accumulator():
        total = jg.zeros(3)

        def accumulate(x):
            total.add_(x)
            return total * 1
        return accumulate, total

    accumulate, total = make_accumulator()
    compiled_count, compiled_accumulate = compile_eager(count), compile_eager(accumulate)
    start = COUNTS.numpy().copy()
    with report_module.recording() as report:
        for _ in range(2):
            compiled_count(jg.ones(3))
            out = compiled_accumulate(jg.ones(3))
    assert report.graph_break_count == 0
    np.testing.assert_array_equal(COUNTS.numpy(), start + 2)
    np.testing.assert_array_equal(out.numpy(), [2.0, 2.0, 2.0])
    assert total._version == 2


def test_item_assignment_records_index_put_with_gradients():
    def f(x):
        y = x * 2
        y[0] = 0
        y[:, 1] = x[:, 0]
        y[[0, 2]] += 1.5
        y[1, 1:3] = jg.tensor([3, 4])  # int values are cast, as eager's copy
        return (y * y).sum(), y

    x, x_ref = pair(data(40, shape=(3, 4)), requires_grad=True)
    with report_module.recording() as report:
        loss, y = compile_eager(f)(x)
    assert report.graph_count == 1 and report.graph_break_count == 0
    assert "call_function[index_put]" in str(report.graphs[0])
    loss_ref, y_ref = f(x_ref)
    # a tensor made in the graph comes out new (version 0), not written four times
    np.testing.assert_array_equal(y.detach().numpy(), y_ref.detach().numpy())
    loss.backward()
    loss_ref.backward()
    np.testing.assert_allclose(x.grad.numpy(), x_ref.grad.numpy(), rtol=1e-6)


def test_item_assignment_into_an_input_under_no_grad_is_written_back():
    def f(x, row):
        with jg.no_grad():
            x[1:] = 0
            x[0, :2] = row
        return x

    x, x_ref = pair(data(41))
    row = jg.tensor(data(42, shape=(2,), dtype=np.float64))
    with report_module.recording() as report:
        assert compile_eager(f)(x, row) is x
    assert report.graph_break_count == 0
    assert_same_tensor(x, f(x_ref, row))


def test_item_assignment_through_a_mask_breaks_with_eager_values():
    def f(x):
        y = x * 2
        y[y > 0] = 0.0  # the positions depend on the values
        return y + 1

    x = jg.tensor(data(43))
    with report_module.recording() as report:
        out = compile_eager(f)(x)
    assert [r.kind for r in report.break_reasons] == ["TENSOR_TO_PYTHON"]
    assert_same_tensor(out, f(x))


# ----- in-place view ops (Note [In-place view ops]) --------------------------------------------

@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_in_place_view_ops_on_an_intermediate_stay_in_the_graph(backend):
    def f(x):
        h = x * 2
        h.unsqueeze_(0)
        y = h.sum(1)
        h.squeeze_(0)
        h.transpose_(0, 1)
        return h + 1, y, h.shape

    report = jg.explain(f)(jg.tensor(data()))
    assert report.graph_count == 1 and report.graph_break_count == 0
    compiled = jg.compile(f, backend=backend)
    a, b = pair(data(), requires_grad=True)
    got, want = compiled(a), f(b)
    assert got[2] == want[2] == jg.Size((3, 2))
    for g, w in zip(got[:2], want[:2], strict=True):
        assert g.shape == w.shape and g.stride() == w.stride()
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-6)
    (got[0].sum() + got[1].sum()).backward()
    (want[0].sum() + want[1].sum()).backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_an_in_place_view_op_bumps_the_version_of_a_value_saved_before(backend):
    def f(x, w):
        h = x * w
        s = h.sin()  # saves h
        h.unsqueeze_(0)
        return s

    for fn in (jg.compile(f, backend=backend), f):
        x, w = jg.tensor(data(shape=(3,)), requires_grad=True), jg.tensor(data(1, (3,)))
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            fn(x, w).sum().backward()


def test_in_place_view_ops_on_an_input_change_the_callers_tensor_as_eager():
    def f(x):
        x.unsqueeze_(0)
        x.add_(1)
        x.transpose_(0, 1)
        return x * 2

    a, b = pair(data())
    with report_module.recording() as seen:
        got = compile_eager(f)(a)
    want = f(b)
    assert seen.graph_count == 1 and seen.graph_break_count == 0
    assert a.shape == b.shape == (2, 1, 3) and a.stride() == b.stride()
    assert a._version == b._version == 3
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_an_in_place_view_op_on_a_leaf_that_requires_grad_raises_eagers_error():
    def f(w):
        w.unsqueeze_(0)
        return w

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            compile_eager(f)(jg.ones(3, requires_grad=True))


def test_in_place_views_and_a_print_in_a_helper_take_torchs_graph_count():
    # torch.compile: 3 graphs, 2 breaks; the in-place view ops are no longer breaks
    def helper(h):
        print("in helper", end="")
        return h * 2

    def f(x):
        h = x + 1
        h.unsqueeze_(0)
        h = helper(h)
        h.squeeze_(0)
        return h.relu()

    report = jg.explain(f)(jg.tensor(data()))
    assert report.graph_count == 3 and report.graph_break_count == 2
    a, b = pair(data())
    np.testing.assert_array_equal(compile_eager(f)(a).numpy(), f(b).numpy())


def test_resize_in_place_still_breaks_the_graph_with_eagers_values():
    def f(x):
        h = x * 2
        h.resize_(6)
        return h + 1

    report = jg.explain(f)(jg.tensor(data()))
    assert [r.kind for r in report.break_reasons] == ["INPLACE_SHAPE_CHANGE"]
    a, b = pair(data())
    np.testing.assert_array_equal(compile_eager(f)(a).numpy(), f(b).numpy())


# A value saved for backward that is a mutated input's final value is, in eager, the input
# tensor itself: a write to the input after the graph (at a break, or after the call) makes
# eager's backward raise. The graph's copy was saved instead, so compiled backward ran on
# (campaign seed 1042040); its counter now follows the input's from the write-back on.
def _saves_the_written_input(b, c):
    c *= 0.5
    v = b * c  # saves c, as written by `*=`
    c.copy_(b)  # a break (copy from a value that requires grad into an input)
    return c + v


def _saves_then_returns(b, c):
    c *= 0.5
    return b * c


LATER_WRITES = {
    "at_a_break": (_saves_the_written_input, None),
    "after_the_call": (_saves_then_returns, lambda c: c.add_(1.0)),
    "none": (_saves_then_returns, None),
}


@pytest.mark.parametrize("backend", ["eager", "numba"])
@pytest.mark.parametrize("case", sorted(LATER_WRITES))
def test_a_saved_written_input_written_again_raises_as_eager(backend, case):
    fn, later = LATER_WRITES[case]
    outcomes = []
    for run in (jg.compile(fn, backend=backend), fn):
        b = jg.tensor(1.5, requires_grad=True)
        c = jg.ones(2, 3)
        out = run(b, c)
        if later is not None:
            later(c)
        try:
            out.sum().backward()
            outcomes.append(("grad", float(b.grad), c._version))
        except RuntimeError as err:
            outcomes.append(("raised", str(err), c._version))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == ("grad" if case == "none" else "raised")


def _saves_a_view_of_the_input(b, c):
    return b * c[0]


def _saves_a_view_of_the_written_input(b, c):
    c *= 0.5
    return b * c[0]


def _saves_a_view_of_a_returned_output(b, c):
    out = c * 2
    return b * out[0], out


VIEW_SAVES = {"input": _saves_a_view_of_the_input,
              "written_input": _saves_a_view_of_the_written_input,
              "returned": _saves_a_view_of_a_returned_output}


@pytest.mark.parametrize("backend", ["eager", "numba"])
@pytest.mark.parametrize("case", sorted(VIEW_SAVES))
@pytest.mark.parametrize("write", [True, False])
def test_a_saved_view_of_a_callers_tensor_checks_its_writes_as_eager(backend, case, write):
    # eager saves the view, which shares the tensor's counter; compiled saved its own array
    # with no counter, so a write after the call went unseen (and the gradient read it)
    fn = VIEW_SAVES[case]
    outcomes = []
    for run in (jg.compile(fn, backend=backend), fn):
        b = jg.tensor(1.5, requires_grad=True)
        c = jg.ones(2, 3)
        out = run(b, c)
        if write:
            (out[1] if case == "returned" else c).add_(1.0)
        try:
            (out[0] if case == "returned" else out).sum().backward()
            outcomes.append(("grad", float(b.grad)))
        except RuntimeError as err:
            outcomes.append(("raised", "modified by an inplace operation" in str(err)))
    assert outcomes[0] == outcomes[1] == (("raised", True) if write else ("grad", outcomes[1][1]))


def test_in_place_view_ops_leave_earlier_values_their_own_description():
    """The value before `unsqueeze_` keeps its shape in the graph (its val is no longer
    the FakeTensor the op reshapes); lint(graph, meta=True) checks every node's."""
    def f(x):
        h = x * 2
        h.unsqueeze_(0)
        return h + 1

    compiled = jg.compile(f, backend="eager")
    compiled(jg.ones(2, 3))
    listing = jg.show(compiled).split("# graph:\n")[1].split("# runner:")[0].splitlines()
    described = {line.split()[0]: re.findall(r"f32\[[\d, ]*\]", line) for line in listing[1:4]}
    assert described == {"%mul": ["f32[2, 3]"], "%reshape": ["f32[1, 2, 3]"],
                         "%add": ["f32[1, 2, 3]"]}


def _inplace_forms():
    """Every jitgrad.nn.functional function with an `inplace` flag, except dropout (random)."""
    names = []
    for name in sorted(dir(F)):
        function = getattr(F, name)
        if name.startswith("_") or not callable(function) or "dropout" in name:
            continue
        try:
            parameters = inspect.signature(function).parameters
        except (TypeError, ValueError):
            continue
        if "inplace" in parameters:
            names.append(name)
    return names


@pytest.mark.parametrize("name", _inplace_forms())
def test_every_inplace_activation_form_is_captured_with_eagers_values_and_gradients(name):
    """`F.relu(h, inplace=True)` runs eager's apply_inplace with a function: traced, the
    function is inlined and its result written functionally (0 breaks; before, the lambda
    could not be passed on, and an `nn.ReLU(True)` inside a Sequential sent the whole
    frame to eager)."""
    function = getattr(F, name)
    extra = {"threshold": (0.1, -1.0)}.get(name, ())  # its required threshold and value

    def activation(h, inplace):
        return function(h, *extra, inplace=inplace)

    w_data = np.linspace(-1.5, 1.5, 12, dtype=np.float32).reshape(3, 4)

    def step(x, w):
        h = x @ w
        activation(h, inplace=True)
        return (h * h).sum(), h

    x = jg.tensor(np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3))
    w_eager, w_compiled = (jg.tensor(w_data, requires_grad=True) for _ in range(2))
    report = jg.explain(step)(x, jg.tensor(w_data, requires_grad=True))
    assert report.graph_count == 1 and report.graph_break_count == 0, report.break_reasons
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss, h = jg.compile(step, backend="numba")(x, w_compiled)
    want_loss, want_h = step(x, w_eager)
    loss.backward()
    want_loss.backward()
    np.testing.assert_allclose(h.detach().numpy(), want_h.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(w_compiled.grad.numpy(), w_eager.grad.numpy(), rtol=1e-5,
                               atol=1e-6)
