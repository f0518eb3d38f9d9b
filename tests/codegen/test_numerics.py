"""Numerics of the reduction kernels (issue 4, Acceptance): accuracy of long float32 sums,
stable softmax/log_softmax/logsumexp for large and infinite inputs, NaN propagation.

References are float64 sums of the same float32 data (numpy's pairwise float64 sum: a
relative error near 1e-16, far below float32's 6e-8) or math.fsum (exact rounding).
"""

import math
import warnings

import numpy as np
import pytest

import jitgrad as jg
from tests.codegen.test_backend import compile_numba


def compiled(fn):
    return compile_numba(fn)[0]


def test_a_float32_sum_of_2_24_elements_is_no_less_accurate_than_eager():
    data = np.random.default_rng(0).random(1 << 24, dtype=np.float32)  # all positive
    x = jg.tensor(data)
    reference = float(np.add.reduce(data, dtype=np.float64))
    eager = x.sum().item()
    got = compiled(lambda x: x.sum())(x).item()
    assert abs(got - reference) <= abs(eager - reference)
    # float64 accumulation: only the final rounding to float32 remains
    assert abs(got - reference) <= np.spacing(np.float32(reference)) / 2
    mean = compiled(lambda x: x.mean())(x).item()
    assert abs(mean - reference / data.size) <= np.spacing(np.float32(0.5))


def test_float32_column_sums_of_a_2_24_matrix():
    data = np.random.default_rng(1).random((1 << 12, 1 << 12), dtype=np.float32)
    x = jg.tensor(data)
    reference = np.add.reduce(data, axis=0, dtype=np.float64)
    eager_error = np.abs(x.sum(0).numpy() - reference).max()
    got = compiled(lambda x: x.sum(0))(x).numpy()
    assert np.abs(got - reference).max() <= eager_error
    np.testing.assert_allclose(got, reference, rtol=6e-8)


def test_a_float64_sum_matches_fsum():
    data = np.random.default_rng(2).standard_normal(1 << 20) * 1e3
    got = compiled(lambda x: x.sum())(jg.tensor(data)).item()
    exact = math.fsum(data)
    assert abs(got - exact) <= 1e-12 * np.abs(data).sum() / math.sqrt(data.size)


def test_variance_of_float32_data_far_from_zero():
    data = (1e4 + np.random.default_rng(3).standard_normal((16, 4096))).astype(np.float32)
    x = jg.tensor(data)
    reference = data.astype(np.float64).var(axis=1, ddof=1)
    eager_error = np.abs(x.var(1).numpy() - reference).max()
    got = compiled(lambda x: x.var(1))(x).numpy()
    assert np.abs(got - reference).max() <= eager_error + 1e-6
    np.testing.assert_allclose(got, reference, rtol=1e-5)


def hard_rows(dtype):
    """Rows of randn, of ±1e4, with some -inf, all -inf, a +inf, equal values, and near
    1e4 (where x - (max + log(sum)) would lose digits)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 16))
    x[1] = rng.choice([-1e4, 1e4], size=16) + rng.standard_normal(16)
    x[2, ::3] = -np.inf
    x[3] = -np.inf
    x[4] = 7.0
    x[5, 3] = np.inf
    x[6] = 1e4 - np.arange(16)
    x[7] = -1e4 + rng.standard_normal(16)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_softmax_family_on_hard_rows(dtype):
    x = jg.tensor(hard_rows(dtype))

    def fn(x):
        return (x.softmax(-1), x.log_softmax(-1), x.logsumexp(-1),
                x.t().softmax(0), x.t().log_softmax(0))

    got = compiled(fn)(x)
    expected = fn(x)
    tolerance = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12,
                                                                               atol=1e-12)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g.numpy(), e.numpy(), **tolerance)  # NaN where eager
    softmax, log_softmax, lse = (t.numpy() for t in got[:3])
    assert np.isnan(softmax[3]).all() and np.isnan(log_softmax[3]).all()
    assert lse[3] == -np.inf and lse[5] == np.inf
    np.testing.assert_array_equal(softmax[2, ::3], 0.0)
    np.testing.assert_allclose(softmax[[0, 1, 2, 4, 6, 7]].sum(axis=-1), 1.0, rtol=1e-6)
    # log_softmax of rows near ±1e4 is exact to the output's own precision
    rows = hard_rows(dtype)[[1, 6, 7]].astype(np.float64)
    shifted = rows - rows.max(axis=-1, keepdims=True)
    reference = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(log_softmax[[1, 6, 7]], reference,
                               atol=4 * np.finfo(dtype).eps * 16)


def test_cross_entropy_of_large_logits():
    rng = np.random.default_rng(5)
    logits = (rng.standard_normal((6, 5)) * 1e4).astype(np.float32)
    target = jg.tensor(np.array([0, 1, 2, 3, 4, 0]))
    fn = lambda x, t: jg.nn.functional.cross_entropy(x, t, reduction="none")  # noqa: E731
    got = compiled(fn)(jg.tensor(logits), target).numpy()
    x = logits.astype(np.float64)
    lse = x.max(1) + np.log(np.exp(x - x.max(1, keepdims=True)).sum(1))
    reference = lse - x[np.arange(6), target.numpy()]
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, reference, rtol=1e-6, atol=1e-3)


def test_nan_propagates_through_extrema_and_sums():
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    data[1, 2] = np.nan
    data[2, 0] = np.nan
    x = jg.tensor(data)

    def fn(x):
        return (x.amax(1), x.amin(0), x.max(), x.min(), *x.max(1), *x.min(0), x.sum(1),
                x.mean(0), x.var(1), x.logsumexp(1))

    got = compiled(fn)(x)
    for g, e in zip(got, fn(x), strict=True):  # NaN in the same places
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6, atol=0)
    amax, _, full_max = got[:3]
    assert np.isnan(amax.numpy()[1:]).all() and amax.numpy()[0] == 3.0
    assert np.isnan(full_max.item())
    indices = got[5].numpy()
    np.testing.assert_array_equal(indices, [3, 2, 0])  # the first NaN wins


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_math_library_at_overflow_and_underflow_edges_equals_eager(dtype):
    # sigmoid computes eager's 1 / (1 + e**-x): 0 once e**-x overflows, not a subnormal
    big = 88.72 if dtype == np.float32 else 709.78
    x = np.array([-800, -big - 20, -big - 1, -big - 0.01, -big + 0.5, -50, -1, 0, 1, 30,
                  big + 1, np.inf, -np.inf, np.nan, -0.0], dtype)
    functions = (jg.sigmoid, jg.nn.functional.silu, jg.exp, jg.tanh, jg.nn.functional.gelu)

    def program(t):
        return (jg.sigmoid(t) * 1.0, jg.nn.functional.silu(t) * 1.0, jg.exp(t) * 1.0,
                jg.tanh(t) * 1.0, jg.nn.functional.gelu(t) * 1.0)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # compiled, not run eagerly
        got = compiled(program)(jg.tensor(x))
    for f, g in zip(functions, got, strict=True):
        want = f(jg.tensor(x)).numpy()
        np.testing.assert_allclose(g.numpy(), want, rtol=4 * np.finfo(dtype).eps, atol=0,
                                   err_msg=f.__name__)
        assert np.array_equal(g.numpy() == 0, want == 0), f.__name__  # zeros where eager's


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int8])
def test_signed_integer_arithmetic_wraps_as_eager(dtype):
    # numba's signed add is `nsw`: without the uint64 form, LLVM turned x + -2**63 into
    # x | -2**63 (-100 stayed -100; eager wraps to 2**63 - 100)
    info = np.iinfo(dtype)
    x = jg.tensor(np.array([-100, 5, info.max, info.min, info.max // 3], dtype))

    def program(x):
        return (x + info.min, x - info.max, x * 3, -x, x * x + x, 7 - x * 2)

    got = compiled(program)(x)
    for k, (g, w) in enumerate(zip(got, program(x), strict=True)):
        assert g.dtype == w.dtype and g.tolist() == w.tolist(), k
