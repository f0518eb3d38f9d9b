"""Interpreter and Retracer: a graph run node by node, and run again into a new graph.

Graphs are traced from real functions; values are compared with eager jitgrad runs.
"""

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.eager.grad_mode import STATE, set_grad_mode
from jitgrad.trace.capture.recorder import OpRecorder
from jitgrad.trace.capture.tracing import trace_function
from jitgrad.trace.capture.variables import tensors_in
from jitgrad.trace.ir.graph import Graph
from jitgrad.trace.ir.interpreter import Interpreter, Retracer
from jitgrad.trace.ir.lint import lint


def step(x, w):
    h = (x @ w).relu()
    with jg.no_grad():
        scale = h.detach().amax()
    return (h * scale).sum(1), h[0]


def _inputs():
    rng = np.random.default_rng(3)
    return (jg.tensor(rng.normal(size=(5, 4)).astype(np.float32)),
            jg.tensor(rng.normal(size=(4, 3)).astype(np.float32), requires_grad=True))


def _graph():
    result = trace_function(step, _inputs(), {})
    result.graph.output(tuple(t.fake.output_node() for t in tensors_in(result.output)))
    return result.graph


def test_interpreter_returns_eager_values_and_keeps_every_node_value():
    graph, (x, w), (x2, w2) = _graph(), _inputs(), _inputs()
    run = Interpreter(graph)
    total, first = run.run(x, w)
    want_total, want_first = step(x2, w2)
    np.testing.assert_allclose(total.detach().numpy(), want_total.detach().numpy(), rtol=1e-6)
    np.testing.assert_array_equal(first.detach().numpy(), want_first.detach().numpy())
    total.sum().backward()  # eager ops ran: autograd recorded them as eager would
    want_total.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), w2.grad.numpy(), rtol=1e-6)
    assert set(run.env) == {n for n in graph.nodes if n.op != "output"}


def test_interpreter_hooks_see_each_kind_of_node_once_in_order():
    seen = []

    class Recording(Interpreter):
        def placeholder(self, node, value):
            seen.append(("placeholder", node.target))
            return value

        def call_function(self, node, args, kwargs):
            seen.append(("call", node.name))
            return super().call_function(node, args, kwargs)

        def output(self, node, values):
            seen.append(("output", len(values)))
            return values

    graph = _graph()
    Recording(graph).run(*_inputs())
    calls = [n.name for n in graph.nodes if n.op == "call_function"]
    assert seen == [("placeholder", "x"), ("placeholder", "w"),
                    *(("call", name) for name in calls), ("output", 2)]


def test_retracer_records_the_same_graph():
    graph = _graph()
    new = Graph()
    retrace = Retracer(graph, OpRecorder(new, lambda t: new.get_attr("_tensor_constant", t)))
    outputs = retrace.run(*_inputs())
    new.output(tuple(v.node for v in outputs))
    lint(new)
    listing = [line.split("   ")[0] for line in str(graph).splitlines()]
    assert [line.split("   ")[0] for line in str(new).splitlines()] == listing


def test_retracer_refuses_a_call_that_is_not_an_op_and_restores_grad_mode():
    graph = Graph()
    x = graph.placeholder("x")
    graph.call_function(set_grad_mode, (False,))
    graph.output((graph.call_function(print, (x,)),))
    new = Graph()
    retrace = Retracer(graph, OpRecorder(new, lambda t: None))
    with pytest.raises(TypeError, match=r"%print calls <built-in function print>, which is "
                                        "not an op"):
        retrace.run(jg.ones(2))
    assert STATE.enabled is True
    assert [n.op for n in new.nodes] == ["placeholder", "call_function"]  # the switch
