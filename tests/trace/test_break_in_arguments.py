"""A graph break inside the arguments of another call (`F.cross_entropy(model(x), y)` whose
model prints, or breaks for any reason) resumes after the inner call: the pending call's
NULL is pushed again by the resume function, and the rest of the frame is compiled."""

import warnings

import numpy as np

import jitgrad as jg
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use

CALLS = []


class Noisy(jg.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = jg.nn.Linear(4, 3)

    def forward(self, x):
        h = self.linear(x)
        CALLS.append(h.shape)  # a side effect on a list the graph does not own
        jg.graph_break()
        return h.relu()


def test_break_inside_the_arguments_of_a_call_resumes_compiled():
    jg.manual_seed(0)
    model = Noisy()
    x = jg.randn(5, 4)
    y = jg.tensor([0, 1, 2, 0, 1])

    def step(x, y):
        return F.cross_entropy(model(x), y) * 2.0

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no frame may fall back to eager
        report = jg.explain(step)(x, y)
    assert report.graph_break_count >= 1
    assert all(o.outcome == "compiled" for o in report.frame_outcomes)
    report.result.backward()
    compiled_grad = model.linear.weight.grad.numpy().copy()
    model.linear.weight.grad = None
    eager = step(x, y)
    eager.backward()
    np.testing.assert_allclose(report.result.item(), eager.item(), rtol=1e-6)
    np.testing.assert_allclose(compiled_grad, model.linear.weight.grad.numpy(), rtol=1e-6)
