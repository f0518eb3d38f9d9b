"""jitgrad.codegen.mathlib: ulp error over dense sweeps, special values, and vectorization.

Each function is compiled once per dtype inside a kernel-shaped loop (the way generated
kernels call it, with the same options: no fast-math flags) and the loop is reused by every
test. float32 results are checked against numpy in float64, float64 results of the
vectorized forms against np.longdouble and those of the libm forms against numpy's float64.
"""

import numpy as np
import pytest
import scipy.special
from numba import njit

from jitgrad.codegen.mathlib import FUNCTIONS
from tests.codegen.vectorization import assert_vectorized, optimized_ir

MAX_ULP = 4
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
_LOOPS = {}


def _unary_loop(fn):
    @njit(error_model="numpy")
    def loop(x, out):
        for i in range(x.size):
            out[i] = fn(x[i])

    return loop


def _binary_loop(fn):
    @njit(error_model="numpy")
    def loop(x, y, out):
        for i in range(x.size):
            out[i] = fn(x[i], y[i])

    return loop


def run(name, *args):
    """FUNCTIONS[(name, dtype)] applied elementwise to 1-D arrays of one dtype."""
    key = (name, args[0].dtype)
    if key not in _LOOPS:
        make = _binary_loop if name == "pow" else _unary_loop
        _LOOPS[key] = make(FUNCTIONS[key])
    out = np.empty_like(args[0])
    _LOOPS[key](*args, out)
    return out


def _sigmoid(x, dtype):
    """Eager's (scipy's expit) and PyTorch's 1 / (1 + e**-x) in `dtype`: 0 once e**-x
    overflows `dtype`, else the exact value."""
    e = np.exp(-x)
    return np.where(e > np.finfo(dtype).max, 0, 1 / (1 + e))


def _erf(x):
    if x.dtype == np.longdouble:  # scipy has no long double erf
        return scipy.special.erf(x.astype(np.float64)).astype(np.longdouble)
    return scipy.special.erf(x)


REFERENCES = {
    "exp": np.exp,
    "expm1": np.expm1,
    "log": np.log,
    "log1p": np.log1p,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,  # also given the dtype (see `reference`)
    "erf": _erf,
    "sin": np.sin,
    "cos": np.cos,
    "pow": np.power,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
}
VECTORIZED_F64 = {"exp", "log", "sigmoid", "sqrt", "rsqrt"}


def ulp_error(out, reference):
    """|out - reference| in units of the last place of reference rounded to out's dtype;
    0 where both are the same non-finite value, inf where only one is finite."""
    with np.errstate(over="ignore"):
        rounded = reference.astype(out.dtype)
    finite = np.isfinite(rounded)
    with np.errstate(over="ignore"):  # spacing of float max is inf: any finite error is 0 ulp
        spacing = np.spacing(np.abs(rounded[finite]))
    error = np.zeros(out.shape)
    diff = np.abs(out[finite].astype(reference.dtype) - reference[finite])
    error[finite] = (diff / spacing.astype(reference.dtype)).astype(np.float64)
    same = (out[~finite] == rounded[~finite]) | (
        np.isnan(out[~finite]) & np.isnan(rounded[~finite])
    )
    error[~finite] = np.where(same, 0.0, np.inf)
    return error


def reference(name, dtype, *args):
    """Reference result: float64 for float32 inputs; long double for vectorized float64 forms,
    numpy's float64 libm for the others."""
    if dtype == F32:
        wide = np.float64
    else:
        wide = np.longdouble if name in VECTORIZED_F64 else np.float64
    with np.errstate(all="ignore"):
        if name == "sigmoid":
            return _sigmoid(args[0].astype(wide), dtype)
        return REFERENCES[name](*(a.astype(wide) for a in args))


def assert_within_ulp(name, *args):
    out = run(name, *args)
    ref = reference(name, args[0].dtype, *args)
    error = ulp_error(out, ref)
    worst = int(np.argmax(error))
    assert error[worst] <= MAX_ULP, (
        f"{name} {args[0].dtype}: {error[worst]:.3g} ulp at x={[a[worst] for a in args]} "
        f"(got {out[worst]!r}, reference {ref[worst]!r})"
    )


def signed_log_uniform(rng, n, dtype, lo_exp, hi_exp):
    """n values ±2**u, u uniform in [lo_exp, hi_exp]: tiny to huge magnitudes."""
    magnitude = np.exp2(rng.uniform(lo_exp, hi_exp, n))
    return (magnitude * rng.choice([-1.0, 1.0], n)).astype(dtype)


def sweep(name, dtype):
    """2**20 dense points over the function's useful range plus 2**16 over all magnitudes."""
    rng = np.random.default_rng(0)
    n = 1 << 20
    info = np.finfo(dtype)
    lo, hi = np.log2(float(info.smallest_subnormal)), np.log2(float(info.max))
    wide = signed_log_uniform(rng, 1 << 16, dtype, lo, hi)
    big = 88.8 if dtype == F32 else 709.8
    useful = {
        "exp": (-big - 15, big),
        "expm1": (-20, big),
        "sigmoid": (-big - 16, 40),
        "tanh": (-10, 10),
        "erf": (-5, 5),
        "sin": (-1e7, 1e7),
        "cos": (-1e7, 1e7),
        "log": (0, 10),
        "log1p": (-1, 10),
        "sqrt": (0, 100),
        "rsqrt": (0, 100),
    }[name]
    dense = rng.uniform(*useful, n).astype(dtype)
    return np.concatenate([dense, wide])


# every unary function of the library (pow takes two arguments and has its own tests)
FUNCTION_NAMES = sorted({name for name, _ in FUNCTIONS} - {"pow"})
DTYPES = [F32, F64]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", FUNCTION_NAMES)
def test_unary_within_4_ulp_over_sweep(name, dtype):
    x = sweep(name, dtype)
    if name in ("log", "log1p", "sqrt", "rsqrt"):
        x = np.concatenate([x, np.abs(x)])  # the positive half of the wide sweep is the domain
    assert_within_ulp(name, x)


def test_sin_cos_f32_near_multiples_of_half_pi():
    """The float32 values nearest k pi/2, where the result is smallest relative to x."""
    k = np.arange(-6366, 6367, dtype=np.float64)
    x = np.concatenate([np.nextafter((k * np.pi / 2).astype(np.float32), s) for s in (-1, 0, 1)])
    x = x.astype(np.float32)
    assert_within_ulp("sin", x)
    assert_within_ulp("cos", x)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_pow_within_4_ulp_over_sweep(dtype):
    rng = np.random.default_rng(1)
    n = 1 << 18
    base = np.exp2(rng.uniform(-60, 60, n)).astype(dtype)
    exponent = rng.uniform(-8, 8, n).astype(dtype)
    assert_within_ulp("pow", base, exponent)
    negative = -np.exp2(rng.uniform(-10, 10, n)).astype(dtype)
    integral = rng.integers(-20, 21, n).astype(dtype)
    assert_within_ulp("pow", negative, integral)


def special_values(dtype):
    info = np.finfo(dtype)
    tiny = info.smallest_subnormal
    values = [
        np.nan,
        np.inf,
        -np.inf,
        0.0,
        -0.0,
        tiny,
        -tiny,
        info.smallest_normal,
        info.max,
        -info.max,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        -2.0,
        3.0,
        -3.0,
        1e4,
        -1e4,
        100.0,
        -100.0,
        1000.0,
        -1000.0,
    ]
    return np.array(values, dtype=dtype)


def assert_matches_numpy_special(name, out, expected):
    """Same NaN positions, same infinities, same signed zeros, other values within 4 ulp
    (expected is numpy's result in a wider dtype)."""
    with np.errstate(over="ignore"):
        rounded = expected.astype(out.dtype)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(rounded))
    zero = rounded == 0
    np.testing.assert_array_equal(np.signbit(out[zero]), np.signbit(rounded[zero]))
    error = ulp_error(out, expected)
    assert error.max() <= MAX_ULP, f"{name}: {error.max()} ulp, got {out}, numpy {rounded}"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", FUNCTION_NAMES)
def test_special_values_match_numpy(name, dtype):
    x = special_values(dtype)
    assert_matches_numpy_special(name, run(name, x), reference(name, dtype, x))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_pow_special_values_match_numpy(dtype):
    x = special_values(dtype)
    exponents = np.array(
        [0.0, -0.0, 0.5, -0.5, 1.0, 2.0, 3.0, -3.0, -2.0, np.inf, -np.inf, np.nan, 1e4, -1e4],
        dtype=dtype,
    )
    base, exponent = (a.ravel() for a in np.meshgrid(x, exponents))
    expected = reference("pow", dtype, base, exponent)
    assert_matches_numpy_special("pow", run("pow", base, exponent), expected)


@pytest.mark.parametrize(
    ("name", "x", "expected"),
    [
        ("exp", 89.0, np.inf),  # overflow
        ("exp", -100.0, 3.720075976020836e-44),  # subnormal result, rounded once
        ("exp", -105.0, 0.0),  # underflow to +0
        ("log", 1.401298464324817e-45, -103.27892990343184),  # subnormal input
        ("sigmoid", -88.0, 6.054601485195952e-39),  # subnormal result, as eager's
        ("sigmoid", -100.0, 0.0),  # e**100 overflows float32: 0, as eager and PyTorch
        ("tanh", -1e-30, -1e-30),
        ("log1p", -1.0, -np.inf),
    ],
)
def test_float32_edge_values(name, x, expected):
    out = run(name, np.array([x], np.float32))[0]
    assert (
        out == np.float32(expected)
        or ulp_error(np.array([out]), np.array([expected]))[0] <= MAX_ULP
    ), f"{name}({x}) = {out!r}, expected {expected!r}"


def _gelu_loop():
    tanh = FUNCTIONS[("tanh", F32)]
    c, a = np.float32(0.7978845608028654), np.float32(0.044715)
    half, one = np.float32(0.5), np.float32(1)

    @njit(error_model="numpy")
    def gelu(x, out):
        for i in range(x.size):
            v = x[i]
            out[i] = half * v * (one + tanh(c * (v + a * v * v * v)))

    return gelu


def test_gelu_loop_matches_numpy_and_vectorizes():
    gelu = _gelu_loop()
    x = np.linspace(-8, 8, 4099, dtype=np.float32)
    out = np.empty_like(x)
    gelu(x, out)
    xd = x.astype(np.float64)
    expected = 0.5 * xd * (1 + np.tanh(0.7978845608028654 * (xd + 0.044715 * xd**3)))
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-7)
    assert_vectorized(optimized_ir(gelu), "float")


@pytest.mark.parametrize(
    ("name", "dtype", "element"),
    [
        ("exp", F32, "float"),
        ("tanh", F32, "float"),
        ("sin", F32, "double"),
        ("exp", F64, "double"),
        ("log", F64, "double"),
    ],
)
def test_loop_calling_function_is_vectorized(name, dtype, element):
    """Vector types (<4 x double>, <8 x float>, ...) in the optimized LLVM IR of the kernel
    loop that run() compiled: the loop vectorizer handled the inlined function."""
    run(name, np.ones(4, dtype))
    assert_vectorized(optimized_ir(_LOOPS[(name, dtype)]), element)
