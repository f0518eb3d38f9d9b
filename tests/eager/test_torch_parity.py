"""Eager jitgrad against PyTorch 2.13's behaviour where the two used to differ silently.

Expected values come from numpy references; where PyTorch's own behaviour is the
reference (which backward selects instead of multiplying, error classes), it was
measured on torch 2.13.0+cpu and is written down here, so the tests need no torch.
"""

import math

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use

INF, NAN = math.inf, math.nan
XS = np.array([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0])


# ----- backward formulas select where PyTorch selects -------------------------------------

def _grad_with_upstream(fn, upstream, xs=XS):
    x = jg.tensor(xs, requires_grad=True)
    y = fn(x)
    y.backward(jg.full(y.shape, upstream, dtype=jg.float64))
    return x.grad.numpy()


# op, where the op's gradient is 0 (torch 2.13: exactly 0 there even for an inf/NaN
# upstream gradient, because its backward is a select, not a multiplication by a mask)
SELECTING = {
    "relu": (jg.relu, XS <= 0),
    "relu_then_sqrt": (lambda x: jg.sqrt(jg.relu(x)), XS <= 0),
    "relu6": (F.relu6, (XS <= 0) | (XS >= 6)),
    "hardtanh": (F.hardtanh, (XS <= -1) | (XS >= 1)),
    "clamp": (lambda x: x.clamp(-1.0, 1.0), (XS < -1) | (XS > 1)),
    "clamp_min": (lambda x: x.clamp(min=0.0), XS < 0),
    "where": (lambda x: jg.where(x > 0, x, jg.zeros(6, dtype=jg.float64)), XS <= 0),
    "masked_fill": (lambda x: x.masked_fill(x > 0, 0.0), XS > 0),
    "maximum": (lambda x: jg.maximum(x, jg.zeros(6, dtype=jg.float64)), XS < 0),
    "max": (lambda x: x.max(), XS != 3.0),
    "min": (lambda x: x.min(), XS != -2.0),
    "median": (lambda x: x.median(), XS != 0.0),
    "max_dim": (lambda x: x.reshape(2, 3).max(1)[0], ~np.isin(XS, [0.0, 3.0])),
    "sort": (lambda x: jg.sort(x)[0][:2], XS > -1),
    "topk": (lambda x: jg.topk(x, 2)[0], XS < 1),
}


@pytest.mark.parametrize("upstream", [INF, -INF, NAN], ids=["inf", "-inf", "nan"])
@pytest.mark.parametrize("name", SELECTING)
def test_backward_selects_so_inf_and_nan_upstream_stay_off(name, upstream):
    fn, zero = SELECTING[name]
    grad = _grad_with_upstream(fn, upstream)
    np.testing.assert_array_equal(grad[zero], 0.0)
    assert np.all(~np.isfinite(grad[~zero]))  # the selected entries carry the upstream value


def test_relu_backward_with_a_negative_power_upstream_is_zero_below_zero():
    x = jg.tensor(XS, requires_grad=True)
    (jg.relu(x) ** -1).sum().backward()
    expected = np.where(XS > 0, -1 / np.where(XS > 0, XS, 1) ** 2, 0.0)
    np.testing.assert_array_equal(x.grad.numpy(), expected)


# ops whose PyTorch backward multiplies (measured): an inf upstream becomes NaN at 0 * inf
MULTIPLYING = {
    "abs": (jg.abs, XS == 0),
    "amax_dim": (lambda x: x.reshape(2, 3).amax(1), ~np.isin(XS, [0.0, 3.0])),
    "norm_inf": (lambda x: jg.linalg.vector_norm(x, math.inf), XS != 3.0),
}


@pytest.mark.parametrize("name", MULTIPLYING)
def test_backward_that_multiplies_in_torch_still_multiplies(name):
    fn, zero = MULTIPLYING[name]
    assert np.all(np.isnan(_grad_with_upstream(fn, INF)[zero]))


@pytest.mark.parametrize("fn", [lambda x: x.max(), lambda x: x.min(), lambda x: x.median()],
                         ids=["max", "min", "median"])
def test_full_extremum_of_nan_input_sends_the_gradient_to_the_nans(fn):
    # torch's evenly_distribute_backward: for a NaN result, the hits are the NaN entries
    xs = np.array([1.0, NAN, 2.0, NAN])
    np.testing.assert_array_equal(_grad_with_upstream(fn, 1.0, xs), [0.0, 0.5, 0.0, 0.5])


@pytest.mark.parametrize("fn", [lambda x: x.max(), lambda x: x.amax()], ids=["max", "amax"])
def test_full_extremum_splits_ties_evenly(fn):
    xs = np.array([1.0, 3.0, 3.0, 2.0])
    np.testing.assert_array_equal(_grad_with_upstream(fn, 1.0, xs), [0.0, 0.5, 0.5, 0.0])


# ----- double backward through ops that save their output -----------------------------------

SAVES_OUTPUT = {
    "exp": (jg.exp, np.exp), "expm1": (jg.expm1, np.exp),
    "tanh": (jg.tanh, lambda x: -2 * np.tanh(x) / np.cosh(x) ** 2),
    "sigmoid": (jg.sigmoid, None), "sqrt": (jg.sqrt, lambda x: -0.25 * x ** -1.5),
    "rsqrt": (jg.rsqrt, lambda x: 0.75 * x ** -2.5),
    "reciprocal": (jg.reciprocal, lambda x: 2 / x ** 3), "tan": (jg.tan, None),
    "softmax": (lambda x: F.softmax(x, -1), None),
    "log_softmax": (lambda x: F.log_softmax(x, -1), None),
    "pow_tensor": (lambda x: jg.pow(x, x), None),
    "logsumexp": (lambda x: jg.logsumexp(x, -1), None),
}


def _first_grad(fn, x, weights):
    y = fn(x)
    seed = jg.tensor(weights[: y.numel()].reshape(y.shape))
    (g,) = jg.autograd.grad(y, x, seed, create_graph=True)
    return g


@pytest.mark.parametrize("shape", [(), (3,)], ids=["0d", "1d"])
@pytest.mark.parametrize("name", SAVES_OUTPUT)
def test_double_backward_matches_finite_differences_of_the_first_gradient(name, shape):
    fn, _ = SAVES_OUTPUT[name]
    rng = np.random.default_rng(0)
    xs = rng.uniform(0.5, 1.5, size=shape)
    weights = rng.uniform(0.5, 1.5, size=3)
    x = jg.tensor(xs, requires_grad=True)
    g = _first_grad(fn, x, weights)
    assert g.requires_grad, "the first gradient must be graph-connected under create_graph"
    probe = rng.uniform(0.5, 1.5, size=shape)
    (gg,) = jg.autograd.grad(g, x, jg.tensor(probe), allow_unused=True)
    eps = 1e-6

    def directional(point):
        with jg.enable_grad():
            t = jg.tensor(point, requires_grad=True)
            return float((_first_grad(fn, t, weights).detach().numpy() * probe).sum())
    flat = xs.reshape(-1)
    numerical = np.zeros(flat.size)
    for i in range(flat.size):
        plus, minus = flat.copy(), flat.copy()
        plus[i] += eps
        minus[i] -= eps
        numerical[i] = (directional(plus.reshape(shape)) - directional(minus.reshape(shape))) \
            / (2 * eps)
    analytical = np.zeros(flat.size) if gg is None else gg.numpy().reshape(-1)
    np.testing.assert_allclose(analytical, numerical, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", [n for n, (_, ref) in SAVES_OUTPUT.items() if ref is not None])
def test_second_derivative_of_a_0d_input_matches_the_closed_form(name):
    fn, second = SAVES_OUTPUT[name]
    x = jg.tensor(0.7, dtype=jg.float64, requires_grad=True)
    (g,) = jg.autograd.grad(fn(x), x, create_graph=True)
    (gg,) = jg.autograd.grad(g, x)
    np.testing.assert_allclose(gg.item(), second(0.7), rtol=1e-12)


# ----- hooks and retain_grad across in-place ops (measured in torch 2.13) -------------------

def _weighted_backward(y):
    (y * jg.tensor([1.0, 2.0, 3.0])).sum().backward()


@pytest.mark.parametrize("through_view", [False, True], ids=["direct", "through_view"])
def test_retain_grad_follows_the_in_place_value_and_hooks_stay_on_the_old(through_view):
    x = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    y.retain_grad()
    seen = []
    y.register_hook(lambda g: seen.append(g.numpy().copy()))
    if through_view:
        y[:2].mul_(10)
        old_value_grad = [10.0, 20.0, 3.0]
    else:
        y.mul_(10)
        old_value_grad = [10.0, 20.0, 30.0]
    _weighted_backward(y)
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 2.0, 3.0])  # grad of the new value
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], old_value_grad)  # grad of the value it hooked
    np.testing.assert_array_equal(x.grad.numpy(), old_value_grad)


def test_retain_grad_through_setitem_is_the_final_values_gradient():
    x = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    y[1] = 7.0
    _weighted_backward(y)
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 0.0, 6.0])


@pytest.mark.parametrize("upstream", [INF, NAN], ids=["inf", "nan"])
def test_embedding_padding_row_gets_zero_even_for_inf_and_nan_upstream(upstream):
    weight = jg.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    out = F.embedding(jg.tensor([0, 1, 1]), weight, padding_idx=1)
    out.backward(jg.full(out.shape, upstream))
    grad = weight.grad.numpy()
    np.testing.assert_array_equal(grad[1:], 0.0)  # torch 2.13: the padding row is exactly 0
    assert np.all(~np.isfinite(grad[0]))


@pytest.mark.parametrize("reduction_input", ["nll", "cross_entropy"])
def test_ignored_targets_get_zero_gradient_for_inf_upstream(reduction_input):
    logits = jg.tensor([[1.0, 2.0, 0.5], [0.1, -1.0, 3.0]], requires_grad=True)
    target = jg.tensor([0, -100])
    if reduction_input == "nll":
        loss = F.nll_loss(F.log_softmax(logits, 1), target, reduction="none")
    else:
        loss = F.cross_entropy(logits, target, reduction="none")
    loss.backward(jg.full((2,), INF))
    np.testing.assert_array_equal(logits.grad.numpy()[1], 0.0)


def test_add_alpha_is_cast_to_the_result_dtype():
    # torch 2.13: add(b, True, alpha=2) and add(b, b, alpha=2) stay bool (alpha -> True);
    # a float other keeps the float result
    b = jg.tensor([True, False])
    for got, expected in ((jg.add(b, True, alpha=2), [True, True]),
                          (jg.add(b, b, alpha=2), [True, False])):
        assert got.dtype == jg.bool
        np.testing.assert_array_equal(got.numpy(), expected)
    np.testing.assert_array_equal(jg.add(b, jg.tensor([False, True]), alpha=2).numpy(),
                                  [True, True])
    np.testing.assert_array_equal(jg.add(b, b, alpha=0).numpy(), [True, False])
    got = jg.add(b, 0.5, alpha=2)
    assert got.dtype == jg.float32
    np.testing.assert_array_equal(got.numpy(), [2.0, 1.0])


def test_relu_gradient_passes_at_nan_as_threshold_backward():
    # torch 2.13: relu's gradient is zero exactly where the output is <= 0
    for inplace in (False, True):
        a = jg.tensor([-1.0, float("nan"), 0.0, 2.0, -0.0], requires_grad=True)
        out = a.clone().relu_() if inplace else jg.relu(a)
        out.sum().backward()
        np.testing.assert_array_equal(a.grad.numpy(), [0.0, 1.0, 0.0, 1.0, 0.0])
