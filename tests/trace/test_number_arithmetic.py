"""Python numbers that became graph inputs (FakeNumbers) compute as Python does.

A number changing between calls is a graph input from the recompile on (Note
[Unspecialized numbers]); `.item()` values cross a graph break as graph inputs from the
start. Among themselves they compute exactly as Python (float64, int64, bools as ints,
ZeroDivisionError with Python's message); with tensors they promote as weak scalars. Each
program is compared with its own eager run, on the first call and after the recompile.
"""

import math
import operator

import numpy as np
import pytest

import jitgrad as jg

OPERATORS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
             "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
             "pow": operator.pow, "lt": operator.lt, "le": operator.le, "eq": operator.eq,
             "ne": operator.ne}
# per kind, the (a, b) of successive calls: the second call makes a and b graph inputs
SERIES = {
    "float": [(0.3, 0.7), (0.1, 0.2), (-1.5, 0.25), (1e16, 3.0), (-0.0, 1.0), (2.5, 0.0)],
    "int": [(7, 2), (-7, 3), (3, -2), (5, 0), (-9, -4)],
    "mixed": [(0.3, 2), (0.1, 3), (-1.5, -4), (2.5, 0)],
}
TENSOR_DTYPES = (jg.float32, jg.float64, jg.int64)


def numbers_program(op):
    def program(x, a, b):
        r = op(a, b)
        return r, x * r, op(a, 3), op(2.5, b), op(a, b) + 1, (a > b) + (a < b), -(a > 0)
    return program


def item_program(x, t):
    n = t.item()
    return (n, type(n).__name__, x * n, n * 3, n / 7, n + n, n > 0.1, -n, n - 0.1, n // 2,
            n % 2, math.sqrt(abs(n)))


def assert_same(expected, got):
    """Equal values of equal types (tensors: equal dtype and values), or equal errors."""
    if isinstance(expected, Exception):
        assert type(got) is type(expected) and str(got) == str(expected)
        return
    assert not isinstance(got, Exception), got
    assert len(got) == len(expected)
    for e, g in zip(expected, got, strict=True):
        if isinstance(e, jg.Tensor):
            assert g.dtype == e.dtype
            np.testing.assert_array_equal(g.numpy(), e.numpy())
        else:
            assert type(g) is type(e) and (g == e or (e != e and g != g)), (e, g)


def outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as err:  # compared with the compiled run's
        return err


def check_series(program, backend, x, series):
    jg.reset()
    compiled = jg.compile(program, backend=backend)
    for args in series:
        assert_same(outcome(program, x, *args), outcome(compiled, x, *args))
    return compiled


@pytest.mark.parametrize("kind", sorted(SERIES))
@pytest.mark.parametrize("dtype", TENSOR_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_number_arithmetic_matches_python(name, dtype, kind):
    program = numbers_program(OPERATORS[name])
    compiled = check_series(program, "eager", jg.ones(2, dtype=dtype), SERIES[kind])
    if kind == "float" and name != "pow":  # `**` runs in Python at a graph break
        assert "a: f64[]" in jg.show(compiled)


def test_half_of_a_changed_float_is_exact():
    def half(s):
        return s * 0.5

    compiled = jg.compile(half)
    for s in (0.3, 0.7, 0.9):
        assert compiled(s) == s * 0.5


ITEM_VALUES = {jg.float32: [0.1, 0.2, 0.7], jg.float64: [0.1, 0.2, 0.3],
               jg.int64: [3, 4, -5], jg.bool: [True, False, True]}


@pytest.mark.parametrize("dtype", sorted(ITEM_VALUES, key=str), ids=str)
def test_item_numbers_compute_as_python(dtype):
    series = [(jg.tensor(v, dtype=dtype),) for v in ITEM_VALUES[dtype]]
    check_series(item_program, "eager", jg.ones(2), series)
