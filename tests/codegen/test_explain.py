"""explain() lists the numba backend's fusion groups per graph (issue 4 §6)."""

import numpy as np

import jitgrad as jg


def test_explain_lists_the_fusion_group_of_a_pointwise_chain():
    jg.reset()

    def chain(x, y):
        return jg.tanh(x * y + 1) * 2

    x, y = jg.ones(8), jg.full((8,), 0.5)
    report = jg.explain(jg.compile(chain, backend="numba"))(x, y)
    assert report.graph_count == 1 and len(report.fusion_groups) == 1
    (groups,) = report.fusion_groups
    assert len(groups) == 1 and "mul, add, tanh, mul" in groups[0]
    assert "Fusion groups of graph 0:" in str(report)
    np.testing.assert_allclose(report.result.numpy(), np.tanh(1.5) * 2 * np.ones(8), rtol=1e-6)
    jg.reset()
