"""Declared pointwise ops (jitgrad/eager/ops/declare.py): what one declaration generates.

Every declared op: its public function lives in (and is exported by) the declaring module,
with its aliases; it is the Tensor method of that name, and its in-place method writes the
function's result. The generated entry points bind arguments as Python does. (A new op
declared in one file gets its function, methods, gradients and a fused kernel:
tests/codegen/test_declared_ops.py.)
"""

import importlib
import inspect

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.eager.ops import declare
from jitgrad.eager.ops.registry import OPS

DECLARED = sorted(declare.DECLARED.items())


@pytest.mark.parametrize(("name", "function"), DECLARED, ids=[n for n, _ in DECLARED])
def test_declared_function_is_bound_exported_and_a_method(name, function):
    module = importlib.import_module(function.__module__)
    assert function.op is OPS[name] and function.__name__ == name and function.__doc__
    for public in (name, *function.aliases):
        assert getattr(module, public) is function, f"{module.__name__}.{public} is not bound"
        if public in declare.exported(module.__name__):
            assert public in module.__all__ and getattr(jg, public) is function
        if public in declare.METHODS:
            assert getattr(jg.Tensor, public) is function


@pytest.mark.parametrize("name", sorted(n for n in declare.METHODS if n.endswith("_")))
def test_inplace_method_writes_the_function_result(name):
    function = declare.DECLARED.get(name[:-1]) or getattr(jg, name[:-1])
    data = np.array([0.25, 0.5, 0.75, 2.0], dtype=np.float32)
    x = jg.tensor(data.copy())
    expected = function(jg.tensor(data.copy())).numpy()
    out = getattr(x, name)()
    assert out is x and x._version == 1
    np.testing.assert_array_equal(x.numpy(), expected)


def test_inplace_through_a_graph_rebases_history():
    x = jg.tensor([0.5, 1.5], requires_grad=True)
    y = x * 1.0
    y.exp_()
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, 1.5]), rtol=1e-6)
    assert y.grad_fn.name() == "ExpBackward"


def test_parameters_bind_by_position_and_keyword():
    x = jg.tensor([np.nan, np.inf, -np.inf, 1.0])
    by_position = jg.nan_to_num(x, 1.0, 2.0, -2.0).numpy()
    by_keyword = jg.nan_to_num(x, neginf=-2.0, posinf=2.0, nan=1.0).numpy()
    np.testing.assert_array_equal(by_position, [1.0, 2.0, -2.0, 1.0])
    np.testing.assert_array_equal(by_keyword, by_position)
    assert str(inspect.signature(jg.nan_to_num)) == \
        "(input, nan=0.0, posinf=None, neginf=None, *, out=None)"  # torch's, out= included
    assert str(inspect.signature(jg.threshold)) == "(input, threshold, value, *, out=None)"


@pytest.mark.parametrize(("call", "message"), [
    (lambda x: jg.nan_to_num(x, 0.0, 1.0, 2.0, 3.0),
     "nan_to_num() takes 4 positional arguments but 5 were given"),
    (lambda x: jg.nan_to_num(x, nun=0.0), "nan_to_num() got an unexpected keyword argument 'nun'"),
    (lambda x: jg.nan_to_num(x, 0.0, nan=1.0),
     "nan_to_num() got multiple values for argument 'nan'"),
    (lambda x: jg.threshold(x, 0.5), "threshold() missing required argument(s): 'value'"),
])
def test_binding_errors_are_pythons_type_errors(call, message):
    with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(jg.tensor([1.0]))


def test_dtype_policies_of_the_entry_point():
    ints = jg.tensor([1, 2])
    assert jg.exp(ints).dtype == jg.float32  # to_float
    assert jg.floor(ints).dtype == jg.int64  # keeps the dtype
    with pytest.raises(NotImplementedError, match="\"frac_cpu\" not implemented for 'Long'"):
        jg.frac(ints)  # require_float
    with pytest.raises(NotImplementedError, match="\"abs_cpu\" not implemented for 'Bool'"):
        jg.abs(jg.tensor([True]))  # refuse_bool
