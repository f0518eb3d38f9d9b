"""A new pointwise op declared by one `pointwise_op` call, in this one file, gets its
public function, Tensor methods, in-place method, gradient and a lowering that fuses with
the ops around it (Note [Declaring an op once] in jitgrad/eager/ops/declare.py); one
declared with an nn form gets its nn.functional forms and nn.Module class as well."""

import importlib
import inspect
import pickle

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
import jitgrad.nn.functional as F  # noqa: N812 - PyTorch's spelling
from jitgrad.codegen import lowering
from jitgrad.eager.gradcheck import gradcheck
from jitgrad.eager.ops import declare
from jitgrad.eager.ops.registry import OPS
from tests.codegen.test_backend import compile_numba


def _square_plus_one_backward(xp, ctx, g, x):
    return (g * (2 * x),)


@pytest.fixture(scope="module")
def square_plus_one():
    """A new op declared by one call; removed from the registries afterwards, so the rest
    of the suite sees the library's ops only."""
    function = declare.pointwise_op(
        "square_plus_one", lambda x: x * x + 1, _square_plus_one_backward, saves=("x",),
        source="d/dx (x^2 + 1) = 2x", scalar=lambda s, x: x * x + 1, inplace=True,
        doc="x * x + 1.")
    yield function
    lowering.LOWERINGS.pop(OPS.pop("square_plus_one"), None)
    del declare.DECLARED["square_plus_one"]
    declare._EXPORTED[__name__].remove("square_plus_one")
    for method in ("square_plus_one", "square_plus_one_"):
        del declare.METHODS[method]
        delattr(jg.Tensor, method)


def test_a_new_declared_op_has_function_methods_gradient_and_kernel(square_plus_one):
    data = np.array([[-1.5, 0.0, 2.0], [0.5, -0.25, 3.0]])
    x = jg.tensor(data, requires_grad=True)
    np.testing.assert_array_equal(square_plus_one(x).detach().numpy(), data * data + 1)
    np.testing.assert_array_equal(x.square_plus_one().detach().numpy(), data * data + 1)
    assert gradcheck(square_plus_one, (x,))
    y = jg.tensor(data.copy())
    y.square_plus_one_()
    np.testing.assert_array_equal(y.numpy(), data * data + 1)

    fn, produced = compile_numba(lambda t: square_plus_one(t).exp() * 2.0)
    compiled = fn(jg.tensor(data.astype(np.float32)))
    np.testing.assert_allclose(compiled.numpy(), np.exp(data * data + 1).astype(np.float32) * 2,
                               rtol=2e-6)
    assert len(produced[0].kernels) == 1  # the new op fused with exp and mul
    assert "square_plus_one" in str(produced[0].kernels[0].source)


def _soft_clip_backward(xp, ctx, g, x):
    t = xp.tanh(x / ctx.params["bound"])
    return (g * (1 - t * t),)


NN_NAMES = {"SoftClip": ("jitgrad.nn.modules.activation", "jitgrad.nn.modules", "jitgrad.nn"),
            "soft_clip": ("jitgrad.nn.functional_activation", "jitgrad.nn.functional"),
            "soft_clip_": ("jitgrad.nn.functional_activation", "jitgrad.nn.functional")}


@pytest.fixture(scope="module")
def soft_clip():
    """A new nn activation declared by one call, with its nn form; removed afterwards from
    the registries and from jitgrad.nn's namespaces."""
    function = declare.pointwise_op(
        "soft_clip", lambda x, bound: bound * np.tanh(x / bound), _soft_clip_backward,
        saves=("x",), source="d/dx b tanh(x / b) = 1 - tanh(x / b)^2", params={"bound": 2.0},
        scalar=lambda s, x, bound: bound * s.tanh(x / bound), doc="bound * tanh(x / bound).",
        nn=declare.NNForm("SoftClip", inplace=True, inplace_function=True))
    yield function
    lowering.LOWERINGS.pop(OPS.pop("soft_clip"), None)
    del declare.DECLARED["soft_clip"], declare.NN_FORMS["soft_clip"], declare.METHODS["soft_clip"]
    declare._EXPORTED[__name__].remove("soft_clip")
    delattr(jg.Tensor, "soft_clip")
    for name, modules in NN_NAMES.items():
        for module in map(importlib.import_module, modules):
            delattr(module, name)
            module.__all__.remove(name)


def test_a_new_nn_activation_has_functional_module_gradient_and_kernel(soft_clip):
    data = np.array([[-3.0, -0.5, 0.0], [0.25, 1.5, 4.0]])
    x = jg.tensor(data, requires_grad=True)
    np.testing.assert_allclose(F.soft_clip(x).detach().numpy(), 2 * np.tanh(data / 2))
    np.testing.assert_allclose(x.soft_clip(0.5).detach().numpy(), 0.5 * np.tanh(data / 0.5))
    assert str(inspect.signature(F.soft_clip)) == "(input, bound=2.0, inplace=False)"
    y = jg.tensor(data.copy())
    assert F.soft_clip_(y, 1.0) is y
    np.testing.assert_allclose(y.numpy(), np.tanh(data))
    assert F.soft_clip(y, inplace=True) is y

    module = nn.SoftClip(1.5)
    assert repr(module) == "SoftClip(bound=1.5)" and repr(nn.SoftClip()) == "SoftClip(bound=2.0)"
    assert repr(nn.SoftClip(1.5, True)) == "SoftClip(bound=1.5, inplace=True)"
    assert type(module).__module__ == "jitgrad.nn.modules.activation"
    assert "SoftClip" in nn.__all__ and "soft_clip_" in F.__all__
    assert repr(pickle.loads(pickle.dumps(nn.Sequential(module)))) == \
        "Sequential(\n  (0): SoftClip(bound=1.5)\n)"
    np.testing.assert_allclose(module(x).detach().numpy(), 1.5 * np.tanh(data / 1.5))
    assert gradcheck(module, (x,))

    fn, produced = compile_numba(lambda t: module(t).exp() * 2.0)
    compiled = fn(jg.tensor(data.astype(np.float32)))
    np.testing.assert_allclose(compiled.numpy(),
                               np.exp(1.5 * np.tanh(data / 1.5)).astype(np.float32) * 2,
                               rtol=2e-6)
    assert len(produced[0].kernels) == 1  # the new activation fused with exp and mul
    assert "soft_clip" in str(produced[0].kernels[0].source)


def test_a_new_nn_activation_in_place_compiles_as_eager(soft_clip):
    module = nn.SoftClip(0.5, inplace=True)
    data = np.array([-2.0, -0.1, 0.0, 0.3, 5.0], dtype=np.float32)
    fn, _ = compile_numba(lambda t: module(t * 3.0) + 1.0)
    np.testing.assert_array_equal(fn(jg.tensor(data)).numpy(),
                                  module(jg.tensor(data) * 3.0).numpy() + 1.0)


def _mean_sq_backward(xp, ctx, g, a, b):
    need_a, need_b = ctx.needs_input_grad
    return (g * a if need_a else None), (g * b if need_b else None)


@pytest.fixture(scope="module")
def mean_sq():
    """A new binary op declared by one call; removed from the registries afterwards."""
    function = declare.binary_op(
        "mean_sq", lambda a, b: (a * a + b * b) / 2, _mean_sq_backward, saves=("a", "b"),
        source="d (a^2 + b^2)/2 = a da + b db", scalar=lambda s, a, b: (a * a + b * b) / 2,
        numbers="other", to_float=True, doc="(input^2 + other^2) / 2.")
    yield function
    lowering.LOWERINGS.pop(OPS.pop("mean_sq"), None)
    del declare.DECLARED["mean_sq"], declare.METHODS["mean_sq"]
    declare._EXPORTED[__name__].remove("mean_sq")
    delattr(jg.Tensor, "mean_sq")


def test_a_new_binary_op_promotes_checks_and_fuses(mean_sq):
    a_data, b_data = np.array([[-1.5, 0.0, 2.0]]), np.array([[0.5], [-3.0]])
    a, b = jg.tensor(a_data, requires_grad=True), jg.tensor(b_data, requires_grad=True)
    np.testing.assert_array_equal(mean_sq(a, b).detach().numpy(), (a_data**2 + b_data**2) / 2)
    assert a.mean_sq(other=2).dtype == jg.float64 and mean_sq(jg.tensor([1, 2]), 1).dtype == jg.float32
    assert mean_sq(jg.tensor([1.0], dtype=jg.float32), 2.5).dtype == jg.float32
    with pytest.raises(TypeError, match=r"mean_sq\(\): argument 'input' \(position 1\) must be"):
        mean_sq(2.0, b)
    assert str(inspect.signature(mean_sq)) == "(input, other, *, out=None)"
    assert gradcheck(mean_sq, (a, b))

    fn, produced = compile_numba(lambda x, y: mean_sq(x, y).exp())
    compiled = fn(jg.tensor(a_data.astype(np.float32)), jg.tensor(b_data.astype(np.float32)))
    np.testing.assert_allclose(compiled.numpy(), np.exp((a_data**2 + b_data**2) / 2), rtol=2e-6)
    assert len(produced[0].kernels) == 1  # the new op fused with exp
    assert "mean_sq" in str(produced[0].kernels[0].source)
