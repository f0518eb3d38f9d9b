"""Backward formulas run on numpy arrays and on Tensors: both namespaces must agree."""

import numpy as np

import jitgrad as jg
from jitgrad.eager import xp, xp_tensor


def test_tensor_namespace_defines_every_numpy_name():
    missing = [name for name in xp.NAMES if not hasattr(xp_tensor, name)]
    assert not missing, f"xp_tensor lacks {missing}"


def test_namespaces_compute_the_same_values():
    rng = np.random.default_rng(0)
    a = rng.uniform(0.5, 2.0, size=(3, 4))
    t = jg.from_numpy(a)
    for name in ("exp", "log", "tanh", "sqrt", "sin", "cos", "abs", "sign", "erf", "sigmoid", "log1p"):
        np.testing.assert_allclose(getattr(xp_tensor, name)(t).numpy(), getattr(xp.NUMPY, name)(a),
                                   rtol=1e-12, err_msg=name)
    np.testing.assert_allclose(xp_tensor.sum(t, (1,), True).numpy(), xp.NUMPY.sum(a, (1,), True))
    np.testing.assert_allclose(xp_tensor.sum_to(t, (1, 4)).numpy(), xp.NUMPY.sum_to(a, (1, 4)))
    np.testing.assert_allclose(xp_tensor.permute(t, (1, 0)).numpy(), xp.NUMPY.permute(a, (1, 0)))
    np.testing.assert_allclose(xp_tensor.matmul(t, t.T).numpy(), xp.NUMPY.matmul(a, a.T))
