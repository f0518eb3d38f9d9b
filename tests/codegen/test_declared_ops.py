"""A new pointwise op declared by one `pointwise_op` call, in this one file, gets its
public function, Tensor methods, in-place method, gradient and a lowering that fuses with
the ops around it (Note [Declaring an op once] in jitgrad/eager/ops/declare.py)."""

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.codegen import lowering
from jitgrad.eager.gradcheck import gradcheck
from jitgrad.eager.ops import declare
from jitgrad.eager.ops.registry import OPS
from tests.codegen.test_backend import compile_numba


def _square_plus_one_backward(xp, ctx, g, x):
    return (g * (2 * x),)


@pytest.fixture(scope="module")
def square_plus_one():
    """A new op declared by one call; removed from the registries afterwards, so the rest
    of the suite sees the library's ops only."""
    function = declare.pointwise_op(
        "square_plus_one", lambda x: x * x + 1, _square_plus_one_backward, saves=("x",),
        source="d/dx (x^2 + 1) = 2x", scalar=lambda s, x: x * x + 1, inplace=True,
        doc="x * x + 1.")
    yield function
    lowering.LOWERINGS.pop(OPS.pop("square_plus_one"), None)
    del declare.DECLARED["square_plus_one"]
    declare._EXPORTED[__name__].remove("square_plus_one")
    for method in ("square_plus_one", "square_plus_one_"):
        del declare.METHODS[method]
        delattr(jg.Tensor, method)


def test_a_new_declared_op_has_function_methods_gradient_and_kernel(square_plus_one):
    data = np.array([[-1.5, 0.0, 2.0], [0.5, -0.25, 3.0]])
    x = jg.tensor(data, requires_grad=True)
    np.testing.assert_array_equal(square_plus_one(x).detach().numpy(), data * data + 1)
    np.testing.assert_array_equal(x.square_plus_one().detach().numpy(), data * data + 1)
    assert gradcheck(square_plus_one, (x,))
    y = jg.tensor(data.copy())
    y.square_plus_one_()
    np.testing.assert_array_equal(y.numpy(), data * data + 1)

    fn, produced = compile_numba(lambda t: square_plus_one(t).exp() * 2.0)
    compiled = fn(jg.tensor(data.astype(np.float32)))
    np.testing.assert_allclose(compiled.numpy(), np.exp(data * data + 1).astype(np.float32) * 2,
                               rtol=2e-6)
    assert len(produced[0].kernels) == 1  # the new op fused with exp and mul
    assert "square_plus_one" in str(produced[0].kernels[0].source)
