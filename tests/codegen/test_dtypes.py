"""Kernels compute each op in the dtype eager computes it in: every lowered op, compiled with
the numba backend, on bool, int8, int32, int64, float32 and float64 inputs, alone and mixed,
with Python numbers too, gives eager's dtype and values.

Exact comparison (NaN equal to NaN, the sign of zero checked) except for the math library's
functions (exp, tanh, ...: within 4 ulp of numpy's, Note in mathlib.py), which get moderate
inputs. An op that raises in eager must raise the same exception class compiled.
"""

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use
from jitgrad.codegen.lowering import LOWERINGS
from jitgrad.eager import xp_tensor
from tests.codegen.test_backend import batched, compile_numba, in_chunks

_I32, _I64 = np.iinfo(np.int32), np.iinfo(np.int64)
VALUES = {  # extremes of each dtype: int min (abs/neg wrap), 2**24 + 1 and 2**53 + 1 (float casts)
    "bool": [True, False, True, True, False, False, True, False, True, False, False, True],
    "int8": [-128, 127, -1, 0, 1, 5, -7, 100, 3, -3, 2, 64],
    "int32": [_I32.min, _I32.max, -1, 0, 1, 5, -7, 16777217, 3, -3, 2, 46341],
    "int64": [_I64.min, _I64.max, -1, 0, 1, 5, -7, 2**53 + 1, 3, -3, 16777217, 3037000500],
    "float32": [-0.0, 0.0, 1.5, -2.5, np.inf, -np.inf, np.nan, 3e38, 1e-45, 0.1, -7.0,
                16777217.0],
    "float64": [-0.0, 0.0, 1.5, -2.5, np.inf, -np.inf, np.nan, 1.7e308, 5e-324, 0.1, -7.0,
                2.0**53 + 1],
}
MODERATE = {  # inputs of the math functions: within the math library's accurate range
    "bool": VALUES["bool"],
    "int8": [-3, -1, 0, 1, 2, 5, 7, -7, 3, 4, -2, 6],
    "float32": [-0.0, 0.0, 0.5, -2.5, np.inf, -np.inf, np.nan, 3.0, -0.1, 10.0, 1e-3, -30.0],
}
MODERATE |= {"int32": MODERATE["int8"], "int64": MODERATE["int8"],
             "float64": MODERATE["float32"]}


def tensor(dtype, values=VALUES):
    with np.errstate(over="ignore"):
        return jg.tensor(np.array(values[dtype], dtype=dtype))


# binary ops: each name is the OpDef the case reaches (the coverage test checks LOWERINGS)
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "maximum": jg.maximum,
    "minimum": jg.minimum,
    "logical_and": jg.logical_and,
    "logical_or": jg.logical_or,
    "logical_xor": jg.logical_xor,
    "where": lambda a, b: jg.where(a > 1, a, b),
    "masked_fill": lambda a, b: a.masked_fill(b > 1, 3),
    "clamp": lambda a, b: jg.clamp(a, min=b),
    "fmax": jg.fmax,
    "fmin": jg.fmin,
    "copysign": jg.copysign,
    "hypot": jg.hypot,
}
SCALARS = [3, 2.5, True, -200]  # -200: outside int8 (eager: OverflowError or exact compare)
EXACT_UNARY = {
    # a backward formula's zero gradient (Note [Zero gradients read their gradient])
    "zeros_like": lambda x: xp_tensor.zeros_like(x) + x,
    "neg": lambda x: -x,
    "abs": jg.abs,
    "floor": jg.floor,
    "ceil": jg.ceil,
    "trunc": jg.trunc,
    "relu": jg.relu,
    "sqrt": jg.sqrt,
    "rsqrt": jg.rsqrt,
    "reciprocal": jg.reciprocal,
    "logical_not": jg.logical_not,
    "hardtanh": F.hardtanh,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.25),
    "detach": lambda x: x.detach() * 1,
    "to_dtype": lambda x: (x.to(jg.bool), x.to(jg.int8), x.to(jg.float32), x.double()),
    "pow": lambda x: (x ** 2, x ** 0.5),
    "frac": jg.frac,
    "scale": lambda x: (jg.deg2rad(x), jg.rad2deg(x)),
    "threshold": lambda x: F.threshold(x, 0.5, -2.0),
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
}
MATH_UNARY = {name: getattr(jg, name) for name in (
    "exp", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "tanh", "erf",
    "sigmoid", "sinh", "cosh", "asinh", "acosh", "atanh", "asin", "acos", "atan", "erfc")}
MATH_UNARY |= {
    "silu": F.silu,
    "gelu": lambda x: (F.gelu(x), F.gelu(x, approximate="tanh")),
    "elu": F.elu,
    "softplus": lambda x: F.softplus(x, beta=2.0, threshold=5.0),
    "logsigmoid": F.logsigmoid,
    "mish": F.mish,
    "pow_float": lambda x: (x ** 3, x ** -1.5),
}


def test_every_lowered_op_has_a_case():
    covered = set(BINARY) | set(EXACT_UNARY) | set(MATH_UNARY)
    missing = {op.name for op in LOWERINGS} - covered
    assert not missing, f"lowered ops without a dtype case here: {sorted(missing)}"


def flatten(results):
    out = []
    for r in results:
        out += list(r) if isinstance(r, tuple) else [r]
    return out


def read_back(fn):
    """`fn`'s results, each followed by its float64 copy: an op that reads the value inside
    the kernel (a bool `b + b` read as 2 instead of True shows only there)."""
    def case(*inputs):
        out = fn(*inputs)
        results = []
        for r in (out if isinstance(out, tuple) else (out,)):
            results.append(r)
            results.append(r.double())
        return tuple(results)

    return case


def eager_outcomes(cases, *inputs):
    """{name: results or the exception class eager raised} for (name, fn) cases."""
    outcomes = {}
    for name, fn in cases:
        try:
            with np.errstate(all="ignore"):
                outcomes[name] = flatten([fn(*inputs)])
        except Exception as err:  # noqa: BLE001 - the class itself is what is compared
            outcomes[name] = type(err)
    return outcomes


# exact cases per kernel (measured cold, 18 binary ops on int32: 12.6 s of CPU in a kernel
# each, 6.3 s three a kernel, 4.7 s six, 5.6 s nine); math-library cases get a kernel each
# (tests.codegen.test_backend.batched)
EXACT_CASES_PER_KERNEL = 6


def run_compiled(cases, inputs, inexact):
    """The cases that eager computes, compiled as one function; returns {name: results}."""
    exact = [(name, fn) for name, fn in cases if name not in inexact]
    chunks = in_chunks(exact, EXACT_CASES_PER_KERNEL)
    chunks += [[(name, fn)] for name, fn in cases if name in inexact]
    ordered = [case for chunk in chunks for case in chunk]
    compiled, produced = compile_numba(batched([[fn for _, fn in chunk] for chunk in chunks]))
    with np.errstate(all="ignore"):
        got = compiled(*inputs)
    assert len(produced) == 1 and produced[0].kernels, "one graph, computed by kernels"
    return {name: flatten([r]) for (name, _), r in zip(ordered, got, strict=True)}


def assert_same(name, got, want, exact):
    assert len(got) == len(want), name
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (
            f"{name}: compiled {g.dtype}{list(g.shape)}, eager {w.dtype}{list(w.shape)}")
        gv, wv = g.numpy(), w.numpy()
        if exact or not w.dtype.is_floating_point:
            np.testing.assert_array_equal(gv, wv, err_msg=name)
            if w.dtype.is_floating_point:
                zeros = wv == 0
                np.testing.assert_array_equal(np.signbit(gv[zeros]), np.signbit(wv[zeros]),
                                              err_msg=f"{name}: sign of zero")
        else:  # float32 tolerances also for the float64 copies read_back makes of them
            ulp = np.finfo(np.float32).eps
            np.testing.assert_allclose(gv, wv, rtol=8 * ulp, atol=4 * ulp, err_msg=name)


def check(cases, inputs, inexact=()):
    """Compiled vs eager for (name, fn) cases on `inputs`; `inexact` names the cases that
    compute math-library functions."""
    cases = [(name, read_back(fn)) for name, fn in cases]
    outcomes = eager_outcomes(cases, *inputs)
    computed = [(name, fn) for name, fn in cases if isinstance(outcomes[name], list)]
    got = run_compiled(computed, inputs, inexact)
    for name, _ in computed:
        assert_same(name, got[name], outcomes[name], exact=name not in inexact)
    for name, fn in cases:
        if not isinstance(outcomes[name], list):
            compiled, _ = compile_numba(fn)
            with pytest.raises(outcomes[name]), np.errstate(all="ignore"):
                compiled(*inputs)


def _scalar_second(fn, scalar):
    return lambda a: fn(a, scalar)


def _scalar_first(fn, scalar):
    return lambda a: fn(scalar, a)


def _of_input(k, fn):
    return lambda *inputs: fn(inputs[k])


PAIRS = [("bool", "bool"), ("int8", "int8"), ("int32", "int32"), ("int64", "int64"),
         ("float32", "float32"), ("float64", "float64"), ("bool", "int8"), ("int8", "int64"),
         ("int32", "float32"), ("int64", "float64"), ("bool", "float32"),
         ("float32", "float64")]


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_binary_ops_on_tensors(a, b):
    check(list(BINARY.items()), (tensor(a), tensor(b)))


@pytest.mark.parametrize("dtype", ["bool", "int8", "float32"])
def test_binary_ops_with_python_numbers(dtype):
    cases = [(f"{name}({scalar!r})", _scalar_second(fn, scalar))
             for name, fn in BINARY.items() for scalar in SCALARS
             if name not in ("where", "masked_fill", "clamp")]
    cases += [(f"{name}({scalar!r}, tensor)", _scalar_first(fn, scalar))
              for name, fn in BINARY.items() for scalar in SCALARS[:3]
              if name in ("add", "sub", "mul", "div", "lt", "maximum")]
    check(cases, (tensor(dtype),))


@pytest.mark.parametrize("dtype", ["bool", "int8", "int64", "float32"])
def test_unary_ops(dtype):
    cases = [(name, _of_input(0, fn)) for name, fn in EXACT_UNARY.items()]
    cases += [(name, _of_input(1, fn)) for name, fn in MATH_UNARY.items()]
    check(cases, (tensor(dtype), tensor(dtype, MODERATE)), inexact=set(MATH_UNARY))
