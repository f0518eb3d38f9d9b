"""Python numbers that became graph inputs compute as Python does in numba kernels too
(tests/trace/test_number_arithmetic.py runs the same programs on the eager backend).

A kernel's `/` is numpy's correctly rounded division (`n / 7` is not `n * (1 / 7)`).
"""

import pytest

import jitgrad as jg
from tests.trace.test_number_arithmetic import (
    ITEM_VALUES,
    OPERATORS,
    SERIES,
    WITH_TENSOR_SERIES,
    WITH_TENSORS,
    check_series,
    item_program,
    numbers_program,
    with_tensor_program,
)


@pytest.mark.parametrize("kind", ["float", "int"])
@pytest.mark.parametrize("name", ["mul", "truediv", "floordiv", "mod", "lt"])
def test_number_arithmetic_matches_python(name, kind):
    program = numbers_program(OPERATORS[name])
    check_series(program, "numba", jg.ones(2), SERIES[kind])


@pytest.mark.parametrize("dtype", [jg.float32, jg.float64, jg.int64], ids=str)
def test_item_numbers_compute_as_python(dtype):
    series = [(jg.tensor(v, dtype=dtype),) for v in ITEM_VALUES[dtype]]
    check_series(item_program, "numba", jg.ones(2), series)


@pytest.mark.parametrize("name", ["mul", "div", "pow", "where_two", "add_alpha", "lt"])
def test_numbers_with_tensors_match_eager(name):
    for dtype, values in WITH_TENSOR_SERIES:
        check_series(with_tensor_program(WITH_TENSORS[name]), "numba",
                     jg.tensor([1, -2, 3], dtype=dtype), [(v,) for v in values])


def test_division_of_float64_is_correctly_rounded():
    def divide(x, y):
        return x / y, x / 7.0

    x = jg.tensor([0.1, 0.2, 0.3, 1e-300, 3.0], dtype=jg.float64)
    y = jg.tensor([7.0, 3.0, 11.0, 7.0, 10.0], dtype=jg.float64)
    for got, expected in zip(jg.compile(divide, backend="numba")(x, y), divide(x, y),
                             strict=True):
        assert got.numpy().tolist() == expected.numpy().tolist()
