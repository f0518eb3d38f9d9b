"""Backends: the registry, the "eager" backend (values and gradients through generated
code), CountingBackend, and OpDef.__call__ which generated code uses to run ops."""

import operator

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.eager.ops.registry import OPS
from jitgrad.trace.ir.graph import Graph
from jitgrad.trace.ir.graph_module import GraphModule
from jitgrad.trace.runtime import backends
from jitgrad.trace.runtime.backends import (
    InvalidBackendError,
    eager,
    list_backends,
    lookup_backend,
    register_backend,
)
from jitgrad.trace.testing import CountingBackend


def _loss_graph():
    """(x * w).sum() + split(x)[1].mean(): a reduction, a multi-output op and a getitem."""
    g = Graph()
    x, w = g.placeholder("x"), g.placeholder("w")
    prod = g.call_function(OPS["mul"], (x, w))
    total = g.call_function(OPS["sum"], (prod,), {"dims": None, "keepdim": False,
                                                  "out_dtype": None})
    parts = g.call_function(OPS["split"], (x,), {"dim": 0, "sizes": (1, 2)})
    second = g.call_function(operator.getitem, (parts, 1))
    mean = g.call_function(OPS["mean"], (second,), {"dims": None, "keepdim": False})
    loss = g.call_function(OPS["add"], (total, mean), name="loss")
    g.output((loss, prod))
    return g


def _loss_eager(x, w):
    prod = x * w
    return prod.sum() + jg.split(x, [1, 2])[1].mean(), prod


# ----- registry -------------------------------------------------------------------------

def test_eager_is_built_in_and_callables_pass_through():
    assert "eager" in list_backends()
    assert lookup_backend("eager") is eager

    def mine(gm, example_inputs):
        return gm.forward

    assert lookup_backend(mine) is mine


def test_unknown_backend_names_the_available_ones():
    with pytest.raises(InvalidBackendError) as info:
        lookup_backend("inductor")
    names = ", ".join(repr(n) for n in list_backends())
    assert str(info.value) == (f"unknown backend 'inductor'; available: {names}. Pass one of "
                               "these names or a callable (gm, example_inputs) -> callable")
    assert isinstance(info.value, RuntimeError)


def test_backend_must_be_a_name_or_callable():
    with pytest.raises(TypeError, match="backend must be a name or a callable .* got int"):
        lookup_backend(3)


def test_register_backend(monkeypatch):
    monkeypatch.setattr(backends, "_BACKENDS", dict(backends._BACKENDS))

    def first(gm, example_inputs):
        return gm.forward

    def second(gm, example_inputs):
        return gm.forward

    assert register_backend("mine", first) is first
    assert register_backend("mine", first) is first  # the same callable again is fine
    assert lookup_backend("mine") is first and "mine" in list_backends()
    with pytest.raises(ValueError, match="backend 'mine' is already registered"):
        register_backend("mine", second)


# ----- the eager backend ---------------------------------------------------------------------

def test_eager_backend_values_and_gradients_match_eager():
    rng = np.random.default_rng(0)
    x0, w0 = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    x, w = jg.tensor(x0, requires_grad=True), jg.tensor(w0, requires_grad=True)
    gm = GraphModule(_loss_graph())
    compiled = lookup_backend("eager")(gm, [x, w])
    loss, prod = compiled(x, w)
    loss.backward()
    grads = x.grad.numpy(), w.grad.numpy()

    xe, we = jg.tensor(x0, requires_grad=True), jg.tensor(w0, requires_grad=True)
    loss_e, prod_e = _loss_eager(xe, we)
    loss_e.backward()
    np.testing.assert_allclose(loss.item(), loss_e.item(), rtol=1e-12)
    np.testing.assert_allclose(prod.detach().numpy(), x0 * w0, rtol=1e-12)
    np.testing.assert_allclose(grads[0], xe.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(grads[1], we.grad.numpy(), rtol=1e-12)
    # hand-computed: d/dx = w + 1/8 on rows 1..2 (mean over 8 elements), d/dw = x
    expected_x = w0 + np.array([[0.0], [0.125], [0.125]])
    np.testing.assert_allclose(grads[0], expected_x, rtol=1e-12)
    np.testing.assert_allclose(grads[1], x0, rtol=1e-12)
    assert type(loss.grad_fn).__name__ == "AddBackward"


def test_eager_backend_passes_gradcheck():
    gm = GraphModule(_loss_graph())
    compiled = eager(gm, [])
    rng = np.random.default_rng(1)
    inputs = tuple(jg.tensor(rng.normal(size=(3, 4)), requires_grad=True) for _ in range(2))
    assert jg.autograd.gradcheck(lambda x, w: compiled(x, w), inputs)


def test_eager_backend_respects_no_grad():
    gm = GraphModule(_loss_graph())
    x = jg.ones(3, 4, requires_grad=True)
    with jg.no_grad():
        loss, prod = eager(gm, [x, x])(x, x)
    assert (loss.requires_grad, prod.requires_grad) == (False, False)
    assert loss.item() == 13.0


# ----- CountingBackend ------------------------------------------------------------------------

def test_counting_backend_counts_graphs_and_call_nodes_then_runs_eager():
    counter = CountingBackend()
    gm = GraphModule(_loss_graph())
    compiled = counter(gm, [])
    assert (counter.compile_count, counter.op_count, counter.graphs) == (1, 6, [gm])
    assert compiled is gm.forward
    small = Graph()
    a = small.placeholder("a")
    small.output((small.call_function(OPS["neg"], (a,)),))
    (out,) = counter(GraphModule(small), [])(jg.tensor([2.0]))
    assert out.tolist() == [-2.0]
    assert (counter.compile_count, counter.op_count) == (2, 7)
    counter.clear()
    assert (counter.compile_count, counter.op_count, counter.graphs) == (0, 0, [])


def test_counting_backend_delegates_to_another_backend():
    calls = []

    def recording(gm, example_inputs):
        calls.append(len(example_inputs))
        return gm.forward

    counter = CountingBackend(recording)
    g = Graph()
    g.output((g.placeholder("a"),))
    counter(GraphModule(g), [jg.ones(1)])
    assert calls == [1] and counter.compile_count == 1 and counter.op_count == 0


# ----- OpDef.__call__ ---------------------------------------------------------------------------

def test_opdef_call_applies_the_op_with_autograd():
    x = jg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = OPS["mul"](x, 2.0)
    s = OPS["sum"](y, dims=None, keepdim=False, out_dtype=None)
    assert y.tolist() == [2.0, -4.0, 6.0] and s.item() == 4.0
    assert type(s.grad_fn).__name__ == "SumBackward"
    s.backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_opdef_call_multi_output_and_int_results():
    x = jg.arange(6).reshape(2, 3)
    first, second = OPS["split"](x, dim=1, sizes=(1, 2))
    assert first.tolist() == [[0], [3]] and second.tolist() == [[1, 2], [4, 5]]
    total = OPS["sum"](x, dims=(0,), keepdim=True, out_dtype=np.dtype("int64"))
    assert total.tolist() == [[3, 5, 7]] and total.dtype == jg.int64


def test_one_function_compiled_for_two_backends_uses_each():
    def double(x):
        return x * 2

    calls = []

    def backend_for(name):
        def backend(gm, example_inputs):
            calls.append(name)
            return gm.forward
        return backend

    x = jg.ones(3)
    first, second = backend_for("first"), backend_for("second")
    for backend in (first, second, first):
        np.testing.assert_array_equal(jg.compile(double, backend=backend)(x).numpy(), [2, 2, 2])
    assert calls == ["first", "second"]  # the third call hits the first backend's entry
