"""Every op case of the op table, compiled with the numba backend, matches eager.

Forward only, on tensors without grad, in every float dtype the case allows. The numba
backend fuses pointwise ops and row reductions into kernels and runs every other op as an
eager extern; cases the tracer cannot capture (random ops, value-dependent indexing) fall
back to eager, and must match all the same.

Tolerances: float32 within rtol 2e-6 / atol 1e-6 of eager (kernels compute each op in the
op's dtype as eager does, but the math library may differ from numpy's by an ulp or two),
float64 within rtol 1e-12 / atol 1e-12 (mathlib's float64 functions are within a few ulps);
integer and bool results exactly; Python values returned by a case equal.
"""

import warnings

import numpy as np
import pytest

import jitgrad as jg
from tests.eager.op_table import OP_CASES

TOLERANCES = {np.float32: (2e-6, 1e-6), np.float64: (1e-12, 1e-12)}
DTYPE_CASES = [(case, np_dtype) for case in OP_CASES for np_dtype in case.dtypes]


def user_function(op, arity):
    """A user's function calling `op` with `arity` tensors (a fixed arity: the tracer lifts
    positional parameters, not a *args tuple)."""
    return {0: lambda: op(), 1: lambda a: op(a), 2: lambda a, b: op(a, b),
            3: lambda a, b, c: op(a, b, c), 4: lambda a, b, c, d: op(a, b, c, d)}[arity]


def compiled_numba(fn):
    # closures made by user_function share one code object and the closed-over op is not
    # guarded: drop earlier entries (compiled kernels stay cached on disk and in memory)
    jg.reset()
    return jg.compile(fn, backend="numba")


def _as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def assert_same(compiled, eager, np_dtype):
    compiled, eager = _as_list(compiled), _as_list(eager)
    assert len(compiled) == len(eager)
    for c, e in zip(compiled, eager, strict=True):
        if not isinstance(e, jg.Tensor):
            assert c == e
            continue
        assert isinstance(c, jg.Tensor) and c.dtype == e.dtype and c.shape == e.shape, (
            f"compiled {c.dtype}{list(c.shape)} vs eager {e.dtype}{list(e.shape)}")
        if e.dtype.is_floating_point:
            rtol, atol = TOLERANCES[np_dtype]
            np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(c.numpy(), e.numpy())


@pytest.mark.parametrize(("case", "np_dtype"), DTYPE_CASES,
                         ids=[f"{c.name}-{np.dtype(d).name}" for c, d in DTYPE_CASES])
def test_compiled_matches_eager(case, np_dtype):
    arrays = case.arrays(np_dtype)
    eager = case.fn(*case.tensors(arrays, requires_grad=False))
    tensors = case.tensors(arrays, requires_grad=False)
    fn = compiled_numba(user_function(case.fn, len(tensors)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # graph-break fallbacks warn; they must still match
        compiled = fn(*tensors)
    assert_same(compiled, eager, np_dtype)


POINTWISE = {
    "add": lambda a, b: a + b, "mul_scalar": lambda a, b: a * 3.0 - b,
    "tanh_exp": lambda a, b: jg.tanh(a).exp() + b, "sigmoid": lambda a, b: a.sigmoid() * b,
    "where": lambda a, b: jg.where(a > 0, a, b), "gelu": lambda a, b: jg.nn.functional.gelu(a + b),
}
SHAPES = {"0d": ((), ()), "0d_broadcast": ((3,), ()), "empty": ((0, 4), (4,)),
          "empty_broadcast": ((2, 0), (1,))}


@pytest.mark.parametrize("shapes", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("name", POINTWISE)
def test_0d_and_empty_pointwise(name, shapes):
    rng = np.random.default_rng(0)
    a, b = (jg.tensor(rng.normal(size=s).astype(np.float32)) for s in shapes)
    fn = compiled_numba(POINTWISE[name])
    assert_same(fn(a, b), POINTWISE[name](a, b), np.float32)
