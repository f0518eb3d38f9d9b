"""The activations written as composites of other ops (gelu, softplus, leaky_relu,
logsigmoid) give PyTorch's values and gradients at edge inputs: ±0, ±inf, NaN, subnormals,
overflow of exp, the softplus threshold, eagerly and compiled.

Reference: PyTorch's outputs, committed in fixtures/activation_edges.npz (made by
fixtures/make_activation_edges.py). Where either side is NaN, infinite or zero the values
must be equal (the sign of zero too, not that of NaN); elsewhere within rounding: rtol 2e-4
in float32 (the tanh form cancels in 1 + tanh near x = -3, where PyTorch's float kernel
rounds otherwise), 1e-13 in float64, and subnormal results within the smallest normal.
"""

from pathlib import Path

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use

REFERENCE = np.load(Path(__file__).parent / "fixtures" / "activation_edges.npz")
EDGES = REFERENCE["edges"]
CASES = {
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "softplus": F.softplus,
    "softplus_beta_threshold": lambda x: F.softplus(x, beta=2.0, threshold=5.0),
    "leaky_relu": F.leaky_relu,
    "leaky_relu_slope": lambda x: F.leaky_relu(x, 0.2),
    "logsigmoid": F.logsigmoid,
}
RTOL = {"float32": 2e-4, "float64": 1e-13}
# gelu(inf) in float32: x * Phi(x) = inf here; PyTorch's vectorized float kernel gives NaN
KNOWN = {("gelu", "float32", "y"): EDGES == np.inf}


def values_and_grad(fn, dtype):
    x = jg.tensor(EDGES.astype(dtype), requires_grad=True)
    y = fn(x)
    y.sum().backward()
    return {"y": y.detach().numpy(), "g": x.grad.numpy()}


def assert_matches_torch(name, dtype, got):
    for part, value in got.items():
        want = REFERENCE[f"{name}|{dtype}|{part}"]
        keep = ~KNOWN.get((name, dtype, part), np.zeros(EDGES.shape, bool))
        value, want = value[keep], want[keep]
        special = ~np.isfinite(want) | ~np.isfinite(value) | (want == 0) | (value == 0)
        np.testing.assert_array_equal(value[special], want[special], err_msg=f"{name} {part}")
        zeros = want == 0
        np.testing.assert_array_equal(np.signbit(value[zeros]), np.signbit(want[zeros]),
                                      err_msg=f"{name} {part}: sign of zero")
        np.testing.assert_allclose(value[~special], want[~special], rtol=RTOL[dtype],
                                   atol=np.finfo(dtype).tiny, err_msg=f"{name} {part}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", CASES)
def test_eager_matches_torch_at_edges(name, dtype):
    with np.errstate(all="ignore"):
        assert_matches_torch(name, dtype, values_and_grad(CASES[name], dtype))


@pytest.mark.parametrize("name", CASES)
def test_compiled_matches_torch_at_edges(name):
    jg.reset()
    fn = CASES[name]
    compiled = jg.compile(lambda x: fn(x))
    with np.errstate(all="ignore"):
        assert_matches_torch(name, "float32", values_and_grad(compiled, "float32"))
