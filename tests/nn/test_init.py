"""nn.init: bounds and statistics with a fixed seed, gains and fans, in-place semantics."""

import math

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import nn
from jitgrad.nn import init


@pytest.mark.parametrize("name, param, gain", [
    ("linear", None, 1.0), ("conv2d", None, 1.0), ("sigmoid", None, 1.0), ("tanh", None, 5 / 3),
    ("relu", None, math.sqrt(2)), ("leaky_relu", None, math.sqrt(2 / (1 + 0.01**2))),
    ("leaky_relu", math.sqrt(5), math.sqrt(2 / 6)), ("selu", None, 0.75),
])
def test_calculate_gain(name, param, gain):
    assert init.calculate_gain(name, param) == pytest.approx(gain, rel=1e-15)


def test_calculate_gain_errors():
    with pytest.raises(ValueError, match="Unsupported nonlinearity gelu"):
        init.calculate_gain("gelu")
    with pytest.raises(ValueError, match="negative_slope True not a valid number"):
        init.calculate_gain("leaky_relu", True)


def test_fans_and_their_errors():
    assert init._calculate_fan_in_and_fan_out(jg.empty(6, 4, 3, 3)) == (36, 54)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.kaiming_uniform_(jg.empty(3))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_normal_(jg.empty(3, 3), mode="fan_avg")


def test_fills_write_in_place_bump_version_and_are_not_recorded():
    w = nn.Parameter(jg.empty(3, 4))
    data, version = w._data, w._version
    assert init.constant_(w, 0.5) is w
    assert w._data is data and w._version == version + 1
    assert w.is_leaf and w.grad_fn is None and w.requires_grad
    np.testing.assert_array_equal(w.detach().numpy(), np.full((3, 4), 0.5, np.float32))
    np.testing.assert_array_equal(init.zeros_(w).detach().numpy(), np.zeros((3, 4)))
    np.testing.assert_array_equal(init.ones_(w).detach().numpy(), np.ones((3, 4)))
    np.testing.assert_array_equal(init.eye_(w).detach().numpy(), np.eye(3, 4))
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.eye_(jg.empty(2, 2, 2))


def test_fill_through_a_view_writes_the_base():
    base = jg.zeros(2, 3)
    init.ones_(base[1])
    np.testing.assert_array_equal(base.numpy(), [[0, 0, 0], [1, 1, 1]])


def test_seeded_draws_are_reproducible_and_use_a_given_generator():
    jg.manual_seed(1)
    a = init.normal_(jg.empty(5)).numpy().copy()
    jg.manual_seed(1)
    np.testing.assert_array_equal(init.normal_(jg.empty(5)).numpy(), a)
    g1, g2 = jg.Generator().manual_seed(7), jg.Generator().manual_seed(7)
    np.testing.assert_array_equal(init.uniform_(jg.empty(5), generator=g1).numpy(),
                                  init.uniform_(jg.empty(5), generator=g2).numpy())


def test_uniform_and_normal_statistics():
    jg.manual_seed(0)
    u = init.uniform_(jg.empty(100_000), -2.0, 4.0).numpy()
    assert u.min() >= -2.0 and u.max() < 4.0
    assert abs(u.mean() - 1.0) < 0.02 and abs(u.var() - 36 / 12) < 0.03
    n = init.normal_(jg.empty(100_000, dtype=jg.float64), mean=3.0, std=0.5).numpy()
    assert abs(n.mean() - 3.0) < 0.01 and abs(n.std() - 0.5) < 0.005
    assert n.dtype == np.float64


def test_xavier_bounds_and_std():
    jg.manual_seed(0)
    w = init.xavier_uniform_(jg.empty(300, 200), gain=2.0).numpy()
    bound = 2.0 * math.sqrt(6 / 500)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    w = init.xavier_normal_(jg.empty(300, 200)).numpy()
    assert abs(w.std() - math.sqrt(2 / 500)) < 0.002


def test_kaiming_bounds_and_std():
    jg.manual_seed(0)
    w = init.kaiming_uniform_(jg.empty(400, 100), a=math.sqrt(5)).numpy()
    assert np.abs(w).max() <= 1 / math.sqrt(100) and np.abs(w).max() > 0.099  # Linear's rule
    w = init.kaiming_normal_(jg.empty(400, 100), mode="fan_out", nonlinearity="relu").numpy()
    assert abs(w.std() - math.sqrt(2 / 400)) < 0.001
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        init.kaiming_uniform_(jg.empty(0, 3))


def test_trunc_normal_stays_in_bounds_with_the_truncated_std():
    jg.manual_seed(0)
    w = init.trunc_normal_(jg.empty(200_000, dtype=jg.float64), mean=0.5, std=1.0, a=-1.0,
                           b=2.0).numpy()
    assert w.min() >= -1.0 and w.max() <= 2.0
    # moments of N(0.5, 1) truncated to [-1, 2], i.e. alpha=-1.5, beta=1.5 standardised
    pdf = math.exp(-1.5**2 / 2) / math.sqrt(2 * math.pi)
    mass = math.erf(1.5 / math.sqrt(2))
    variance = 1 - 2 * 1.5 * pdf / mass
    assert abs(w.mean() - 0.5) < 0.01 and abs(w.var() - variance) < 0.01
    with pytest.warns(UserWarning, match="mean is more than 2 std from \\[a, b\\]"):
        init.trunc_normal_(jg.empty(3), mean=10.0)


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 2, 3)])
def test_orthogonal_rows_or_columns_are_orthonormal(shape):
    jg.manual_seed(0)
    w = init.orthogonal_(jg.empty(*shape, dtype=jg.float64), gain=2.0).numpy()
    flat = w.reshape(shape[0], -1)
    small = min(flat.shape)
    gram = flat @ flat.T if flat.shape[0] == small else flat.T @ flat
    np.testing.assert_allclose(gram, 4.0 * np.eye(small), atol=1e-12)
    with pytest.raises(ValueError, match="Only tensors with 2 or more dimensions are supported"):
        init.orthogonal_(jg.empty(3))
