"""Matrix products reject what PyTorch rejects: mixed dtypes and mismatched vector lengths
(texts measured on torch 2.13)."""

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use


@pytest.mark.parametrize("a_dtype, b_dtype, names", [
    (jg.float32, jg.float64, "float != double"),
    (jg.float64, jg.float32, "double != float"),
    (jg.int64, jg.float32, "long int != float"),
])
@pytest.mark.parametrize("a_shape, b_shape", [((2, 2), (2, 2)), ((2,), (2, 2)),
                                              ((3, 2, 2), (2, 2))])
def test_matmul_of_mixed_dtypes_raises_instead_of_promoting(a_dtype, b_dtype, names, a_shape,
                                                            b_shape):
    a, b = jg.ones(*a_shape, dtype=a_dtype), jg.ones(*b_shape, dtype=b_dtype)
    with pytest.raises(RuntimeError, match=f"expected m1 and m2 to have the same dtype, but got: "
                                           f"{names}") as excinfo:
        a @ b
    assert "x.float()" in str(excinfo.value)


def test_mm_bmm_dot_of_mixed_dtypes_raise():
    f32, f64 = jg.ones(2, 2), jg.ones(2, 2, dtype=jg.float64)
    with pytest.raises(RuntimeError, match="same dtype"):
        jg.mm(f32, f64)
    with pytest.raises(RuntimeError, match="same dtype"):
        jg.bmm(f32[None], f64[None])
    with pytest.raises(RuntimeError, match="same dtype"):
        jg.dot(f32[0], f64[0])


def test_float64_batch_into_float32_linear_raises():
    # the classic mistake: a float64 numpy batch fed to a float32 model
    layer = nn.Linear(3, 2)
    x = jg.from_numpy(np.ones((4, 3)))
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but got: "
                                           "double != float"):
        layer(x)
    with pytest.raises(RuntimeError, match="long int != float"):
        layer(jg.ones(4, 3, dtype=jg.int64))
    with pytest.raises(RuntimeError, match="self and mat2 must have the same dtype, but got "
                                           "Double and Float"):
        F.linear(jg.ones(4, 3), layer.weight, jg.zeros(2, dtype=jg.float64))
    np.testing.assert_allclose(layer(x.float()).detach().numpy(),
                               np.ones((4, 3)) @ layer.weight.detach().numpy().T
                               + layer.bias.detach().numpy(), rtol=1e-6)


def test_same_dtype_products_still_work_for_ints_and_float64():
    a = jg.tensor([[1, 2], [3, 4]])
    assert (a @ a).dtype is jg.int64
    assert (a @ a).tolist() == [[7, 10], [15, 22]]
    d = jg.tensor([[1.0, 2.0]], dtype=jg.float64)
    assert (d @ d.t()).dtype is jg.float64 and (d @ d.t()).item() == 5.0


def test_vector_dot_of_different_lengths_names_both_lengths():
    with pytest.raises(RuntimeError, match=r"inconsistent tensor size, expected tensor \[3\] and "
                                           r"src \[4\] to have the same number of elements, but "
                                           r"got 3 and 4 elements respectively"):
        jg.ones(3) @ jg.ones(4)


@pytest.mark.parametrize("a_shape, b_shape", [((4, 3, 5), (5, 2)), ((2, 3, 4, 5), (5, 6)),
                                              ((0, 3, 5), (5, 2)), ((2, 3, 0), (0, 4)),
                                              ((2, 1, 5), (5, 0))])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_a_stack_of_matrices_times_a_matrix_matches_numpy_with_gradients(a_shape, b_shape,
                                                                         layout):
    # run as one 2-D product (jitgrad.eager.xp.matmul); values and grads as numpy's
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal(a_shape)
    if layout == "transposed":  # a non-contiguous left operand
        a_np = np.ascontiguousarray(np.swapaxes(a_np, 0, 1)).swapaxes(0, 1)
    b_np = rng.standard_normal(b_shape)
    a, b = jg.tensor(a_np, requires_grad=True), jg.tensor(b_np, requires_grad=True)
    out = a @ b
    np.testing.assert_allclose(out.detach().numpy(), a_np @ b_np, rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(out.shape)
    out.backward(jg.tensor(g))
    np.testing.assert_allclose(a.grad.numpy(), g @ b_np.T, rtol=1e-12, atol=1e-12)
    rows = int(np.prod(a_shape[:-1]))
    np.testing.assert_allclose(b.grad.numpy(), a_np.reshape(rows, a_shape[-1]).T @ g.reshape(
                                   rows, b_shape[-1]),
                               rtol=1e-12, atol=1e-12)
    weight = jg.tensor(b_np.T.copy())  # F.linear's (out, in) weight
    np.testing.assert_allclose(F.linear(a, weight).detach().numpy(), a_np @ b_np,
                               rtol=1e-12, atol=1e-12)
    ints = jg.tensor(np.arange(np.prod(a_shape)).reshape(a_shape)) @ jg.ones(*b_shape,
                                                                          dtype=jg.int64)
    assert ints.dtype == jg.int64 and ints.shape == out.shape
