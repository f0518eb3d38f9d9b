"""Kernels compute what eager computes, in eager's order (Note [No fast-math in pointwise code]).

Each expression below changes value under one of LLVM's fast-math flags (reassoc, arcp,
nsz, contract, afn): cancellation, overflow, NaN from inf - inf, the sign of zero,
division by constants, products of constants. Compiled with the numba backend, as
pointwise kernels and as prologues and epilogues of sum/mean/amax/softmax kernels, they
must give eager's results on inputs that include ±0, ±inf, NaN, huge, tiny and subnormal
values. Pointwise results and max reductions are compared exactly (NaN equal to NaN, and
the sign of zero too), since eager's numpy runs the same operations in the same order;
sums and softmax, which accumulate in float64 by design, within a few ulps.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import jitgrad as jg
from tests.codegen.test_backend import batched, compile_numba, in_chunks

DTYPES = [np.float32, np.float64]


EXPRESSIONS = {
    "add_then_sub_1e8": lambda x: (x + 1e8) - 1e8,
    "sub_then_add_1e8": lambda x: (x - 1e8) + 1e8,
    "plus_one_minus_x": lambda x: (x + 1.0) - x,
    "double_minus_x": lambda x: (x + x) - x,
    "two_x_minus_x": lambda x: 2.0 * x - x,
    "axpy_minus_quarter": lambda x: x * -0.25 + x,
    "x_minus_x": lambda x: x - x,
    "times_10_over_10": lambda x: x * 10.0 / 10.0,
    "times_1e30_1e-30": lambda x: x * 1e30 * 1e-30,
    "times_1e-30_1e30": lambda x: x * 1e-30 * 1e30,
    "times_3_times_tenth": lambda x: x * 3.0 * 0.1,
    "over_3_times_3": lambda x: (x / 3.0) * 3.0,
    "over_3": lambda x: x / 3.0,
    "over_10": lambda x: x / 10.0,
    "over_tenth": lambda x: x / 0.1,
    "over_3_over_7": lambda x: x / 3.0 / 7.0,
    "reciprocal": lambda x: 1.0 / x,
    "one_over_sqrt": lambda x: 1.0 / jg.sqrt(x),
    "rsqrt": lambda x: jg.rsqrt(x),
    "plus_zero": lambda x: x + 0.0,
    "zero_minus_x": lambda x: 0.0 - x,
    "times_zero": lambda x: x * 0.0,
    "neg_then_relu": lambda x: jg.relu(-x),
    "mul_add": lambda x: x * 1.1 + 0.3,
    "product_minus_product": lambda x: x * 0.1 - x * 0.1,
    # float32 x * x overflows at 1.9e19 where an FMA's single rounding ends finite
    "square_minus_1e38": lambda x: x * x - 1e38,
    "over_one_plus_x": lambda x: x / (x + 1.0),
}
# the most sensitive ones, as prologues of reductions (a kernel each)
PROLOGUES = ["add_then_sub_1e8", "two_x_minus_x", "times_10_over_10", "one_over_sqrt",
             "zero_minus_x", "over_3", "times_3_times_tenth", "mul_add"]


def special_values(dtype):
    """±0, ±1, ±inf, NaN, huge (near max and near sqrt(max)), tiny, subnormal, 1e8 and
    values of many magnitudes (seeded)."""
    info = np.finfo(dtype)
    root = np.sqrt(info.max)
    fixed = [0.0, -0.0, 1.0, -1.0, 3.0, 0.1, -7.5, np.inf, -np.inf, np.nan, 1e8, -1e8,
             1e8 + 8, info.max, -info.max, info.max / 4, root * 1.05, -root * 1.05,
             info.tiny, -info.tiny, info.smallest_subnormal, -info.smallest_subnormal,
             info.tiny / 3, 123456.78, 1 / 3]
    rng = np.random.default_rng(0)
    spread = rng.standard_normal(64) * 10.0 ** rng.uniform(-30, 30, 64)
    return np.concatenate([np.array(fixed, dtype), spread.astype(dtype)])


def assert_identical(got, want, name):
    """Same dtype, shape and values: NaN where eager has NaN, zeros of the same sign."""
    assert got.dtype == want.dtype and got.shape == want.shape, name
    g, w = got.numpy(), want.numpy()
    np.testing.assert_array_equal(g, w, err_msg=name)
    zeros = w == 0
    np.testing.assert_array_equal(np.signbit(g[zeros]), np.signbit(w[zeros]),
                                  err_msg=f"{name}: sign of zero")


# four kernels per dtype rather than one per expression (tests.codegen.test_backend.batched)
all_expressions = batched(in_chunks(list(EXPRESSIONS.values()), 7))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_pointwise_kernels_compute_eager_values_exactly(dtype):
    x = jg.tensor(special_values(dtype))
    compiled, produced = compile_numba(all_expressions)
    with np.errstate(all="ignore"):
        got, want = compiled(x), all_expressions(x)
    assert len(produced) == 1 and produced[0].kernels, "one compiled graph, with kernels"
    for name, g, w in zip(EXPRESSIONS, got, want, strict=True):
        assert_identical(g, w, name)


@settings(max_examples=25, deadline=None)
@given(data=hnp.arrays(np.float32, 48, elements=st.floats(width=32)))
def test_pointwise_kernels_match_eager_on_any_float32(data):
    x = jg.tensor(data)
    compiled = _compiled_all_expressions()
    with np.errstate(all="ignore"):
        got, want = compiled(x), all_expressions(x)
    for name, g, w in zip(EXPRESSIONS, got, want, strict=True):
        assert_identical(g, w, name)


_COMPILED = {}


def _compiled_all_expressions():
    # one compiled function for every example (compiling per example would recompile)
    if "f" not in _COMPILED:
        _COMPILED["f"] = compile_numba(all_expressions)[0]
    return _COMPILED["f"]


def test_pow_with_a_float_exponent_is_not_rewritten_into_products():
    # afn lets LLVM expand pow(x, -3.0) into 1 / (x * x * x): 0 at 1e103 instead of 1e-309
    x = jg.tensor(np.array([1e103, 3e102, 2.0, 0.5, 7.0]))
    compiled, _ = compile_numba(lambda x: x ** -3.0)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(compiled(x).numpy(), (x ** -3.0).numpy(), rtol=1e-15, atol=0)


def reduction_rows(dtype):
    """(n, 4) rows, each one value v of `special_values` (|v| <= max / 8, so sums do not
    overflow where eager's do not) as [v, v/2, v/4, 3v/4]: the same sign in every row, so
    float64 and eager's float32 sums differ by rounding only."""
    values = special_values(dtype)
    with np.errstate(invalid="ignore"):
        values = values[~(np.abs(values) > np.finfo(dtype).max / 8)]
    return jg.tensor(values[:, None] * np.array([1, 0.5, 0.25, 0.75], dtype))


REDUCTIONS = {
    "sum": lambda y: y.sum(1),
    "mean": lambda y: y.mean(1),
    "amax": lambda y: y.amax(1),
    "softmax": lambda y: y.softmax(1),
}


def assert_reduction_matches(got, want, kind, name, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape, name
    if kind == "amax":  # the maximum of the same values: exact
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=name)
    else:
        rtol = 8 * np.finfo(dtype).eps
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=rtol, atol=0, err_msg=name)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("kind", REDUCTIONS)
def test_reduction_prologues_are_not_reassociated(kind, dtype):
    x = reduction_rows(dtype)
    reduce = REDUCTIONS[kind]

    def fn(x):
        results = []
        for name in PROLOGUES:
            results.append(reduce(EXPRESSIONS[name](x)))
        return tuple(results)

    compiled, produced = compile_numba(fn)
    with np.errstate(all="ignore"):
        got, want = compiled(x), fn(x)
    groups = [g for c in produced for g in c.fusion_groups]
    assert len(groups) == len(PROLOGUES) and all(g.reduction is not None for g in groups)
    for name, g, w in zip(PROLOGUES, got, want, strict=True):
        assert_reduction_matches(g, w, kind, name, dtype)


EPILOGUES = {  # each reads the reduction once, so it fuses into the reduction's kernel
    "sum": lambda x: (x.sum(1) + 1e8) - 1e8,
    "mean": lambda x: x.mean(1) * 1e30 * 1e-30,
    "amax": lambda x: x.amax(1) * 10.0 / 10.0,
    "softmax": lambda x: (x.softmax(1) + 1e4) - 1e4,
}


@pytest.mark.parametrize("kind", EPILOGUES)
def test_reduction_epilogues_are_not_reassociated(kind):
    # rows whose sums and means are exact in eager's float32 and in our float64
    values = np.array([[1, 2, 3, 4], [5, 6, 7, 8], [0, -0.0, 0, 0], [np.inf, 1, 2, 3],
                       [-np.inf, 1, 2, 3], [np.nan, 1, 2, 3], [3e38, 1, 2, 3],
                       [-9, -1, -20, -3], [1e10, 1e10, 1e10, 1e10]], np.float32)
    x = jg.tensor(values)
    fn = EPILOGUES[kind]
    compiled, produced = compile_numba(fn)
    with np.errstate(all="ignore"):
        got, want = compiled(x), fn(x)
    assert [g.reduction is not None for c in produced for g in c.fusion_groups] == [True]
    if kind == "softmax":
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
    else:
        assert_identical(got, want, kind)
