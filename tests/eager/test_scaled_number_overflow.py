"""`input + alpha * other` with a Python number whose product with alpha leaves the
dtype's range: one rounding of the whole sum, as PyTorch's fused CPU loop gives
(campaign seed 1068125: `add(-inf, 3e38, alpha=2)` was NaN, torch's -inf)."""

import numpy as np
import pytest

import jitgrad as jg

SPECIAL = [-np.inf, np.inf, np.nan, -3.4e38, 3.4e38, -3e38, -1e38, -1.0, 0.0, -0.0, 1e38]
CASES = [(np.float32, "add", 3e38, 2), (np.float32, "add", -3e38, 2.0),
         (np.float32, "sub", 3e38, 1.5), (np.float32, "sub", -2e38, -3),
         (np.float16, "add", 6e4, 2), (np.float16, "sub", -4e4, 2.5)]  # float16's max: 65504


def _reference(name, values, other, alpha, dtype):
    wide = values.astype(np.float64)
    scale = float(dtype(other)) * float(dtype(alpha))  # torch rounds both to the dtype
    exact = wide + scale if name == "add" else wide - scale
    with np.errstate(over="ignore"):
        return exact.astype(dtype)


@pytest.mark.parametrize("dtype,name,other,alpha", CASES)
def test_functional_in_place_and_compiled_round_the_fused_sum_once(dtype, name, other, alpha):
    values = np.array(SPECIAL, dtype=np.float64).astype(dtype)
    want = _reference(name, values, other, alpha, dtype)
    got = getattr(jg, name)(jg.tensor(values), other, alpha=alpha)
    assert got.dtype == jg.tensor(values).dtype
    np.testing.assert_array_equal(got.numpy(), want)
    inplace = jg.tensor(values)
    getattr(inplace, f"{name}_")(other, alpha=alpha)
    np.testing.assert_array_equal(inplace.numpy(), want)
    for backend in ("numba", "eager"):
        fn = jg.compile(lambda x: getattr(jg, name)(x, other, alpha=alpha), backend=backend)
        np.testing.assert_array_equal(fn(jg.tensor(values)).numpy(), want)


def test_the_gradient_of_the_fused_sum_is_one_in_the_input_dtype():
    x = jg.tensor(np.array([-3e38, 1.0], np.float32), requires_grad=True)
    y = jg.add(x, 3e38, alpha=2)
    np.testing.assert_array_equal(y.detach().numpy(), np.array([3e38, np.inf], np.float32))
    y.sum().backward()
    assert x.grad.dtype == jg.float32
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_products_within_range_keep_the_product_first():
    x = jg.tensor(np.array([1.0, -1.0], np.float32))
    np.testing.assert_array_equal(jg.add(x, 0.1, alpha=3).numpy(),
                                  np.float32([1.0, -1.0]) + np.float32(0.1 * 3))
