"""Layout inside numba-compiled code is eager's (tests/trace/test_layout.py runs the full
list on the eager backend): metadata read in the graph, and values computed through views
and copies of non-contiguous inputs, with and without grad."""

import numpy as np
import pytest

import jitgrad as jg
from tests.trace.test_layout import INPUTS, VIEWS_AND_OPS, layout, layout_program, outcome


@pytest.mark.parametrize("name", ["t", "add_t", "col_step", "t_contiguous", "t_view", "expand"])
def test_layout_inside_compiled_code_is_eager(name):
    program = layout_program(VIEWS_AND_OPS[name])
    compiled = jg.compile(program, backend="numba")
    for make in INPUTS.values():
        x = make()
        assert outcome(compiled, x) == outcome(program, x)


def test_values_and_grads_through_views_of_strided_inputs():
    def program(x):
        y = x.t().contiguous() * 2 if not x.is_contiguous() else x.t() * 3
        return (y.sum(0) * y[1]).sum(), layout(y)

    compiled = jg.compile(program, backend="numba")
    for make in INPUTS.values():
        x, x_compiled = make().requires_grad_(), make().requires_grad_()
        loss, meta = program(x)
        loss_compiled, meta_compiled = compiled(x_compiled)
        assert meta_compiled == meta
        loss.backward()
        loss_compiled.backward()
        np.testing.assert_allclose(loss_compiled.item(), loss.item(), rtol=1e-6)
        np.testing.assert_allclose(x_compiled.grad.numpy(), x.grad.numpy(), rtol=1e-6)
