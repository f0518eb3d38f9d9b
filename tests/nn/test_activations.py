"""Activations added to match torch.nn.functional: values, gradients with finite and
inf upstream gradients, in-place forms, errors and modules.

Expected values and gradients were measured on torch 2.13.0+cpu at the points XS (float64)
and are written out, so the tests need no torch; forward values and gradchecks over random
inputs are op-table cases (tests/eager/cases_nn_functional.py).
"""

import inspect
import math
import pickle

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use

INF, NAN = math.inf, math.nan
XS = [-4.0, -3.0, -1.0, 0.0, 3.0, 4.0]

# name: (fn, torch's values at XS, its gradient for upstream 1, and for upstream inf)
MEASURED = {
    "hardsigmoid": (F.hardsigmoid, [0, 0, 1 / 3, 0.5, 1, 1], [0, 0, 1 / 6, 1 / 6, 0, 0],
                    [0, 0, INF, INF, 0, 0]),
    "hardswish": (F.hardswish, [0, 0, -1 / 3, 0, 3, 4], [0, 0, 1 / 6, 0.5, 1, 1],
                  [0, 0, INF, INF, INF, INF]),
    "threshold": (lambda x: F.threshold(x, -1.0, 7.0), [7, 7, 7, 0, 3, 4], [0, 0, 0, 1, 1, 1],
                  [0, 0, 0, INF, INF, INF]),
    "hardshrink": (lambda x: F.hardshrink(x, 1.0), [-4, -3, 0, 0, 3, 4], [1, 1, 0, 0, 1, 1],
                   [INF, INF, 0, 0, INF, INF]),
    "softshrink": (lambda x: F.softshrink(x, 1.0), [-3, -2, 0, 0, 2, 3], [1, 1, 0, 0, 1, 1],
                   [INF, INF, 0, 0, INF, INF]),
    "selu": (F.selu, [-1.725899, -1.670569, -1.111331, 0.0, 3.152103, 4.202804],
             [0.0322007, 0.0875306, 0.6467686, 1.7580993, 1.050701, 1.050701], [INF] * 6),
    "celu": (lambda x: F.celu(x, 2.0), [-1.729329, -1.55374, -0.786939, 0.0, 3.0, 4.0],
             [0.1353353, 0.2231302, 0.6065307, 1.0, 1.0, 1.0], [INF] * 6),
    "mish": (F.mish, [-0.072592, -0.145647, -0.303401, 0.0, 2.986535, 3.997413],
             [-0.0537732, -0.0933931, 0.0592168, 0.6, 1.0211069, 1.0044329],
             [-INF, -INF, INF, INF, INF, INF]),
    "softsign": (F.softsign, [-0.8, -0.75, -0.5, 0.0, 0.75, 0.8],
                 [0.04, 0.0625, 0.25, 1.0, 0.0625, 0.04], [NAN] * 6),
    "tanhshrink": (F.tanhshrink, [-3.000671, -2.004945, -0.238406, 0.0, 2.004945, 3.000671],
                   [0.998659, 0.990134, 0.5800257, 0.0, 0.990134, 0.998659], [NAN] * 6),
}


def _run(fn, upstream):
    x = jg.tensor(XS, dtype=jg.float64, requires_grad=True)
    y = fn(x)
    y.backward(jg.full(y.shape, upstream, dtype=jg.float64))
    return y.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("name", MEASURED)
def test_values_and_gradients_match_torch(name):
    fn, values, grad, grad_inf = MEASURED[name]
    out, g = _run(fn, 1.0)
    np.testing.assert_allclose(out, values, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(g, grad, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(_run(fn, INF)[1], grad_inf)


def test_glu_and_softmin():
    x = jg.tensor(XS, dtype=jg.float64, requires_grad=True)
    out = F.glu(x, 0)
    np.testing.assert_allclose(out.detach().numpy(), [-2.0, -2.857722, -0.982014], rtol=1e-6)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(),
                               [0.5, 0.9525741, 0.9820138, -1.0, -0.13553, -0.0176627],
                               rtol=1e-5)
    np.testing.assert_allclose(
        F.softmin(jg.tensor(XS), 0).numpy(),
        [0.695783, 0.255964, 0.034641, 0.012744, 0.000634, 0.000233], atol=1e-6)


REFUSED = {
    "glu_odd": (lambda: F.glu(jg.ones(2, 3)), RuntimeError,
                "Halving dimension must be even, but dimension 1 is size 3"),
    "softshrink_negative": (lambda: F.softshrink(jg.ones(2), -1.0), RuntimeError,
                            "lambda must be in range"),
    "hardsigmoid_int": (lambda: F.hardsigmoid(jg.tensor([1])), NotImplementedError,
                        '"hardsigmoid_cpu"'),
    "hardswish_int": (lambda: F.hardswish(jg.tensor([1])), NotImplementedError,
                      '"hardswish_cpu"'),
    "mish_int": (lambda: F.mish(jg.tensor([1])), NotImplementedError, '"mish_cpu"'),
    "selu_int": (lambda: F.selu(jg.tensor([1])), NotImplementedError, '"elu_cpu"'),
    "hardshrink_int": (lambda: F.hardshrink(jg.tensor([1])), NotImplementedError,
                       '"hardshrink_cpu"'),
    "threshold_bool": (lambda: F.threshold(jg.tensor([True]), 0.5, 2.0), NotImplementedError,
                       '"threshold_cpu"'),
}


@pytest.mark.parametrize("name", REFUSED)
def test_refused_as_torch(name):
    call, error, words = REFUSED[name]
    with pytest.raises(error) as info:
        call()
    assert words in str(info.value)


def test_threshold_of_ints_truncates_the_value_as_torch():
    out = F.threshold(jg.tensor([1, -4]), 0.5, 2.5)
    assert out.dtype == jg.int64 and out.tolist() == [1, 2]


@pytest.mark.parametrize("name", ["relu_", "elu_", "hardtanh_", "leaky_relu_", "threshold_",
                                  "selu_", "celu_"])
def test_in_place_forms_write_into_the_input_and_keep_the_gradient(name):
    args = (0.5, 9.0) if name == "threshold_" else ()
    data = np.array([-1.5, 0.7, 2.0])
    x = jg.tensor(data, requires_grad=True)
    y = x * 1
    out = getattr(F, name)(y, *args)
    assert out is y
    y.sum().backward()
    x2 = jg.tensor(data, requires_grad=True)
    expected = getattr(F, name[:-1])(x2 * 1, *args)
    expected.sum().backward()
    np.testing.assert_array_equal(y.detach().numpy(), expected.detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), x2.grad.numpy())


MODULES = {
    "Hardsigmoid": (nn.Hardsigmoid(), "Hardsigmoid()", F.hardsigmoid),
    "Hardswish": (nn.Hardswish(inplace=True), "Hardswish()", F.hardswish),  # torch prints no options
    "Mish": (nn.Mish(), "Mish()", F.mish),
    "SELU": (nn.SELU(), "SELU()", F.selu),
    "CELU": (nn.CELU(2.0), "CELU(alpha=2.0)", lambda x: F.celu(x, 2.0)),
    "Threshold": (nn.Threshold(0.1, 20.0), "Threshold(threshold=0.1, value=20.0)",
                  lambda x: F.threshold(x, 0.1, 20.0)),
    "Softsign": (nn.Softsign(), "Softsign()", F.softsign),
    "Tanhshrink": (nn.Tanhshrink(), "Tanhshrink()", F.tanhshrink),
    "Hardshrink": (nn.Hardshrink(0.3), "Hardshrink(0.3)", lambda x: F.hardshrink(x, 0.3)),
    "Softshrink": (nn.Softshrink(), "Softshrink(0.5)", F.softshrink),
    "Softmin": (nn.Softmin(1), "Softmin(dim=1)", lambda x: F.softmin(x, 1)),
    "GLU": (nn.GLU(), "GLU(dim=-1)", F.glu),
}


@pytest.mark.parametrize("name", MODULES)
def test_modules_print_as_torch_and_call_their_function(name):
    module, text, fn = MODULES[name]
    assert repr(module) == text
    x = np.random.default_rng(0).uniform(-4, 4, size=(3, 4))
    np.testing.assert_array_equal(module(jg.tensor(x)).numpy(), fn(jg.tensor(x)).numpy())


# Measured with PyTorch 2.13: repr(torch.nn.<name>(*args)) for defaults and other options.
TORCH_REPRS = [
    ("ReLU", (), "ReLU()"), ("ReLU", (True,), "ReLU(inplace=True)"),
    ("LeakyReLU", (), "LeakyReLU(negative_slope=0.01)"),
    ("LeakyReLU", (0.2, True), "LeakyReLU(negative_slope=0.2, inplace=True)"),
    ("GELU", (), "GELU(approximate='none')"), ("GELU", ("tanh",), "GELU(approximate='tanh')"),
    ("SiLU", (), "SiLU()"), ("SiLU", (True,), "SiLU(inplace=True)"),
    ("ELU", (), "ELU(alpha=1.0)"), ("ELU", (0.5, True), "ELU(alpha=0.5, inplace=True)"),
    ("ELU", (2,), "ELU(alpha=2)"),
    ("Hardtanh", (), "Hardtanh(min_val=-1.0, max_val=1.0)"),
    ("Hardtanh", (-2.0, 3.0, True), "Hardtanh(min_val=-2.0, max_val=3.0, inplace=True)"),
    ("ReLU6", (), "ReLU6()"), ("ReLU6", (True,), "ReLU6(inplace=True)"),
    ("Softplus", (), "Softplus(beta=1.0, threshold=20.0)"),
    ("Softplus", (2.0, 10.0), "Softplus(beta=2.0, threshold=10.0)"),
    ("LogSigmoid", (), "LogSigmoid()"), ("Tanh", (), "Tanh()"), ("Sigmoid", (), "Sigmoid()"),
    ("Hardsigmoid", (), "Hardsigmoid()"), ("Hardsigmoid", (True,), "Hardsigmoid()"),
    ("Hardswish", (), "Hardswish()"), ("Hardswish", (True,), "Hardswish()"),
    ("Mish", (), "Mish()"), ("Mish", (True,), "Mish(inplace=True)"),
    ("SELU", (), "SELU()"), ("SELU", (True,), "SELU(inplace=True)"),
    ("CELU", (), "CELU(alpha=1.0)"), ("CELU", (0.5, True), "CELU(alpha=0.5, inplace=True)"),
    ("Threshold", (0.1, 20.0), "Threshold(threshold=0.1, value=20.0)"),
    ("Threshold", (0.1, 20, True), "Threshold(threshold=0.1, value=20, inplace=True)"),
    ("Softsign", (), "Softsign()"), ("Tanhshrink", (), "Tanhshrink()"),
    ("Hardshrink", (), "Hardshrink(0.5)"), ("Hardshrink", (0.3,), "Hardshrink(0.3)"),
    ("Softshrink", (), "Softshrink(0.5)"), ("Softshrink", (0.3,), "Softshrink(0.3)"),
]


@pytest.mark.parametrize(("name", "args", "text"), TORCH_REPRS,
                         ids=[f"{n}{a}" for n, a, _ in TORCH_REPRS])
def test_activation_modules_print_as_torch_and_survive_pickling(name, args, text):
    module = getattr(nn, name)(*args)
    assert repr(module) == text
    cls = type(module)
    assert (cls.__module__, cls.__qualname__) == ("jitgrad.nn.modules.activation", name)
    assert cls.forward.__qualname__ == f"{name}.forward"
    assert getattr(nn.modules.activation, name) is cls and name in nn.__all__
    copy = pickle.loads(pickle.dumps(module))
    assert type(copy) is cls and repr(copy) == text and copy.state_dict() == {}


# PyTorch 2.13's Python-level nn.functional signatures (names and defaults, in order).
TORCH_SIGNATURES = {
    "relu": "(input, inplace=False)", "relu6": "(input, inplace=False)",
    "leaky_relu": "(input, negative_slope=0.01, inplace=False)",
    "elu": "(input, alpha=1.0, inplace=False)", "celu": "(input, alpha=1.0, inplace=False)",
    "selu": "(input, inplace=False)", "silu": "(input, inplace=False)",
    "mish": "(input, inplace=False)", "hardsigmoid": "(input, inplace=False)",
    "hardswish": "(input, inplace=False)",
    "hardtanh": "(input, min_val=-1.0, max_val=1.0, inplace=False)",
    "threshold": "(input, threshold, value, inplace=False)",
    "sigmoid": "(input)", "tanh": "(input)", "softsign": "(input)", "tanhshrink": "(input)",
}


@pytest.mark.parametrize("name", TORCH_SIGNATURES)
def test_functional_activations_have_torchs_signature(name):
    signature = inspect.signature(getattr(F, name))
    # F.sigmoid and F.tanh are the declared ops' functions, which also take torch.sigmoid's
    # keyword out=
    plain = signature.replace(parameters=[p.replace(annotation=p.empty)
                                          for p in signature.parameters.values()
                                          if p.kind is not p.KEYWORD_ONLY or p.name != "out"],
                              return_annotation=signature.empty)
    assert str(plain) == TORCH_SIGNATURES[name]
    assert name in F.__all__ and getattr(F, name).__module__.startswith("jitgrad.")
