"""Layout inside numba-compiled code is eager's (tests/trace/test_layout.py runs the full
list on the eager backend): metadata read in the graph, and values computed through views
and copies of non-contiguous inputs, with and without grad."""

import numpy as np
import pytest

import jitgrad as jg
from tests.trace.test_layout import INPUTS, VIEWS_AND_OPS, layout, layout_program, outcome


@pytest.mark.parametrize("name", ["t", "add_t", "col_step", "t_contiguous", "t_view", "expand",
                                  "square_matmul", "sort"])
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


def permuted(shape, order):
    """A float32 tensor of `shape` whose memory runs along dims `order` (outermost first)."""
    base = np.arange(np.prod(shape), dtype=np.float32).reshape([shape[d] for d in order])
    return jg.tensor(base / 7.0 - 3.0).permute(*np.argsort(order).tolist())


def kernel_outputs(x, y):
    a = (x.exp() * 2.0 - y).abs()  # a pointwise chain: a fused kernel's output
    return a, a.sum(-1, keepdim=True), (x * y).amax(0), x.softmax(-1), a + 1.0


@pytest.mark.parametrize("order", [(1, 0, 2), (2, 1, 0), (0, 2, 1), (1, 2, 0)])
@pytest.mark.parametrize("grad", [False, True])
def test_kernel_outputs_have_eager_strides(order, grad):
    shape = (3, 4, 5)
    compiled = jg.compile(kernel_outputs, backend="numba")
    x, y = permuted(shape, order), permuted(shape, order[::-1])
    if grad:
        x.requires_grad_()
    got, want = compiled(x, y), kernel_outputs(x, y)
    for g, w in zip(got, want, strict=True):
        assert g.stride() == w.stride() and g.is_contiguous() == w.is_contiguous()
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-5, atol=1e-6)


EXTERN_RESULTS = {  # ops the program runs as numpy forwards, on transposed operands
    "cumsum": lambda a, b: a.t().cumsum(0), "cat": lambda a, b: jg.cat([a.t(), b.t()], 0),
    "square_einsum": lambda a, b: jg.einsum("ij,jk->ik", a.t(), b.t()),
    "stack": lambda a, b: jg.stack([a.t(), b.t()]), "sort": lambda a, b: a.t().sort(0)[0],
    "flip": lambda a, b: a.t().flip(0), "roll": lambda a, b: a.t().roll(1, 0),
    "einsum_transposing": lambda a, b: jg.einsum("ji,kj->ik", a, b),
    "softmax": lambda a, b: a.t().softmax(0), "matmul": lambda a, b: a.t() @ b.t(),
}


@pytest.mark.parametrize("name", sorted(EXTERN_RESULTS))
def test_extern_results_of_the_compiled_program_have_eagers_strides(name):
    # numpy's layout differs from eager's (new-user report: a compiled cumsum of a.t() came
    # out transposed and view(-1) refused it); the program lays results out as apply_op
    fn = EXTERN_RESULTS[name]
    a, b = jg.randn(4, 4), jg.randn(4, 4)
    want = fn(a, b)
    got = jg.compile(fn, backend="numba")(a, b)
    assert got.stride() == want.stride() and got.is_contiguous() == want.is_contiguous()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)  # a row kernel rounds
