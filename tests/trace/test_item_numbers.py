"""A number read with `.item()` crosses a graph break as a graph input (a FakeNumber while
the resume function is traced); Python code inspecting it still sees a Python number."""

import numpy as np

import jitgrad as jg


def scaled_if_float(x):
    n = x.sum().item()
    return x * n if isinstance(n, float) else x * 0


def doubled_if_named_float(x):
    n = x.sum().item()
    return x * 2 if type(n).__name__ == "float" else x


def test_isinstance_and_type_of_an_item_number():
    x = jg.tensor([1.0, 2.0])
    for program in (scaled_if_float, doubled_if_named_float):
        compiled = jg.compile(program)
        for k in (1.0, 2.0, 3.0):  # the number changes: it is a graph input from the start
            np.testing.assert_allclose(compiled(x * k).numpy(), program(x * k).numpy())
