"""The compiled-versus-eager check the layer tests share."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import jitgrad as jg


def assert_compiled_matches_eager_in_one_graph(module: jg.nn.Module,
                                               loss_of: Callable[[jg.Tensor], jg.Tensor],
                                               x: jg.Tensor, backend: str) -> None:
    """loss_of(x) and the gradients of module's parameters, compiled with `backend`, equal
    eager's (rtol 1e-5 / 1e-4); loss_of is captured as one graph without breaks."""
    expected = loss_of(x)
    expected.backward()
    grads = [p.grad.numpy().copy() for p in module.parameters()]
    module.zero_grad()
    compiled = jg.compile(loss_of, backend=backend)(x)
    compiled.backward()
    np.testing.assert_allclose(compiled.detach().numpy(), expected.detach().numpy(), rtol=1e-5)
    for p, g in zip(module.parameters(), grads, strict=True):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-4, atol=1e-6)
    report = jg.explain(loss_of)(x)
    assert report.graph_count == 1 and report.graph_break_count == 0
