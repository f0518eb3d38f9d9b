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
    "float": [(0.3, 0.7), (0.1, 0.2), (-1.5, 0.25), (1e16, 3.0), (-0.0, 1.0), (2.5, 0.0),
              (0.1, 0.1000000001)],
    "int": [(7, 2), (-7, 3), (3, -2), (5, 0), (-9, -4)],
    "mixed": [(0.3, 2), (0.1, 3), (-1.5, -4), (2.5, 0)],
}
TENSOR_DTYPES = (jg.float32, jg.float64, jg.int64)


def numbers_program(op):
    def program(x, a, b):
        r = op(a, b)
        return r, x * r, op(a, 3), op(2.5, b), op(a, b) - 1, (a > b) + (a < b), -(a > 0)
    return program


def item_program(x, t):
    n = t.item()
    return (n, type(n).__name__, x * n, n * 3, n / 7, n + n, n > 0.1, -n, n - 0.1, n // 2,
            n % 2, math.sqrt(abs(n)))


def assert_same(expected, got):
    """Equal values of equal types (tensors: equal dtype and values), or equal errors."""
    if isinstance(expected, Exception):
        # compiled code adds where it came from (Note [Errors at the user's line])
        message, _, location = str(got).partition("\n\nfrom user code:\n")
        assert type(got) is type(expected) and message == str(expected), (expected, got)
        assert location == "" or __file__ in location, location
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


# a number used with a tensor: weak-scalar promotion, eager's checks (x ** -2 on ints raises)
WITH_TENSORS = {
    "mul": lambda x, s: x * s, "radd": lambda x, s: s + x, "div": lambda x, s: x / s,
    "rdiv": lambda x, s: s / x, "pow": lambda x, s: x ** s, "rpow": lambda x, s: s ** x,
    "floordiv": lambda x, s: x // s, "mod": lambda x, s: x % s, "rsub": lambda x, s: s - x,
    "lt": lambda x, s: x < s, "eq": lambda x, s: x == s,
    "where": lambda x, s: jg.where(x > 0, s, x), "where_numbers": lambda x, s: jg.where(
        x > 0, s, 0.5), "where_two": lambda x, s: jg.where(x > 0, s * 2, s),
    "clamp": lambda x, s: x.clamp(min=s), "add_alpha": lambda x, s: jg.add(x, s, alpha=2),
    "sub_alpha": lambda x, s: jg.sub(x, 1, alpha=s), "full": lambda x, s: jg.full((2,), s),
    "full_like": lambda x, s: jg.full_like(x, s), "fill": lambda x, s: x.clone().fill_(s),
    "masked_fill": lambda x, s: x.masked_fill(x > 0, s), "mul_": lambda x, s: x.clone().mul_(s),
    "leaky_relu": lambda x, s: jg.nn.functional.leaky_relu(x, s),
}
# (tensor dtype, successive values of s)
WITH_TENSOR_SERIES = [(jg.float32, [0.3, 0.7, 0.1000000001]), (jg.float64, [0.3, 0.7, 3.0]),
                      (jg.int64, [0.3, 0.7, -2.5]), (jg.int64, [3, 2, -2])]


def with_tensor_program(expression):
    return lambda x, s: (expression(x, s),)


@pytest.mark.parametrize("series", WITH_TENSOR_SERIES, ids=lambda s: f"{s[0]}-{s[1][0]}")
@pytest.mark.parametrize("name", sorted(WITH_TENSORS))
def test_numbers_with_tensors_match_eager(name, series):
    dtype, values = series
    check_series(with_tensor_program(WITH_TENSORS[name]), "eager",
                 jg.tensor([1, -2, 3], dtype=dtype), [(v,) for v in values])


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
