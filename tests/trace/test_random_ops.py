"""Random ops under jitgrad.compile draw from the default generator in eager's order.

Dropout is captured (its mask is an impure `dropout_mask` node, drawn when the graph
runs, never fused); other random ops break the graph and run eagerly, and tracing them
leaves the generator as it was.
"""

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use


def dropout_step(x, w):
    return F.dropout(x @ w, 0.5, True).relu().sum()


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_dropout_in_a_graph_draws_as_eager_does(backend):
    rng = np.random.default_rng(0)
    x = jg.tensor(rng.normal(size=(8, 6)).astype(np.float32))
    w = jg.tensor(rng.normal(size=(6, 5)).astype(np.float32), requires_grad=True)
    compiled = jg.compile(dropout_step, backend=backend)
    report = jg.explain(compiled)
    jg.manual_seed(0)
    eager = [dropout_step(x, w) for _ in range(3)]
    eager[-1].backward()
    eager_grad = w.grad.numpy().copy()
    w.grad = None
    jg.manual_seed(0)
    out = report(x, w)
    assert out.graph_count == 1 and out.graph_break_count == 0
    got = [out.result] + [compiled(x, w) for _ in range(2)]
    for g, e in zip(got, eager, strict=True):
        np.testing.assert_allclose(g.item(), e.item(), rtol=1e-6)
    got[-1].backward()
    np.testing.assert_allclose(w.grad.numpy(), eager_grad, rtol=1e-6)


def noisy(x):
    return (x + jg.randn(3)).sum()


def test_an_uncaptured_random_op_leaves_the_generator_to_the_eager_run():
    x = jg.ones(3)
    jg.manual_seed(1)
    eager = [noisy(x).item() for _ in range(3)]
    jg.manual_seed(1)
    compiled = jg.compile(noisy, backend="eager")
    np.testing.assert_allclose([compiled(x).item() for _ in range(3)], eager, rtol=1e-6)
