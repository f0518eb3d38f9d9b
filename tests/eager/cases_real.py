"""Op cases for the ops the real programs' API inventory added (issue 6): bincount,
histc, histogram, conv2d / max_pool2d / avg_pool2d and their window ops.

unique (whose output size depends on the values, so it has no shape rule) and the
in-place view ops squeeze_/unsqueeze_ (which reshape the tensor an earlier op returned,
which the shape-rule test observes) are checked in tests/realprograms/test_api_additions.py.
"""

import numpy as np

import jitgrad as jg
from jitgrad.eager.ops import conv
from jitgrad.nn import functional as F  # noqa: N812
from tests.eager.op_table import Arg, OpCase

IDS = Arg((9,), 0, 5, kind="index")
WEIGHTS = Arg((9,))


def _pad2d(x, padding, value):
    (ph, pw) = padding
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)


def _window_slices(x, kernel, stride, dilation):
    """(ki, kj, x[:, :, window rows at ki, window cols at kj]) for every kernel position."""
    oh = (x.shape[2] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    ow = (x.shape[3] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    for ki in range(kernel[0]):
        for kj in range(kernel[1]):
            r, c = ki * dilation[0], kj * dilation[1]
            yield ki, kj, x[:, :, r:r + stride[0] * (oh - 1) + 1:stride[0],
                            c:c + stride[1] * (ow - 1) + 1:stride[1]]


def conv2d_ref(x, w, b=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    """Direct cross-correlation: a sum over kernel positions of weighted input slices."""
    out = sum(np.einsum("nchw,oc->nohw", part, w[:, :, ki, kj])
              for ki, kj, part in _window_slices(_pad2d(x, padding, 0), w.shape[2:], stride,
                                                 dilation))
    return out if b is None else out + b[:, None, None]


def max_pool2d_ref(x, kernel, stride, padding=(0, 0)):
    parts = [part for _, _, part in _window_slices(_pad2d(x, padding, -np.inf), kernel, stride,
                                                   (1, 1))]
    return np.maximum.reduce(parts)


def _histc_ref(a):
    return np.histogram(a, bins=5, range=(-2.0, 2.0))[0].astype(a.dtype)


CASES = [
    OpCase("bincount", lambda i: jg.bincount(i), np.bincount, (IDS,), differentiable=False),
    OpCase("bincount_minlength", lambda i: jg.bincount(i, minlength=8),
           lambda i: np.bincount(i, minlength=8), (IDS,), differentiable=False),
    OpCase("bincount_weights", lambda i, w: jg.bincount(i, w, minlength=7),
           lambda i, w: np.bincount(i, w, minlength=7).astype(w.dtype), (IDS, WEIGHTS)),
    OpCase("bincount_weights_strided", lambda i, w: i.bincount(w),
           lambda i, w: np.bincount(i, w).astype(w.dtype),
           (IDS, Arg((9,), layout="strided"))),
    OpCase("histc", lambda a: jg.histc(a, bins=5, min=-2, max=2), _histc_ref,
           (Arg((4, 6)),), differentiable=False),
    OpCase("histc_data_range_transposed", lambda a: a.histc(bins=3),
           lambda a: np.histogram(a, bins=3)[0].astype(a.dtype),
           (Arg((4, 6), layout="transposed"),), differentiable=False),
    OpCase("histogram_range", lambda a: tuple(jg.histogram(a, bins=5, range=(-2.0, 2.0))),
           lambda a: (_histc_ref(a), np.linspace(-2, 2, 6).astype(a.dtype)),
           (Arg((4, 6)),), differentiable=False),
    OpCase("histogram_weighted_density",
           lambda a, w: jg.histogram(a, bins=4, weight=w, density=True).hist,
           lambda a, w: np.histogram(a, bins=4, weights=w, density=True)[0].astype(a.dtype),
           (Arg((12,)), Arg((12,), 0.5, 1.5)), differentiable=False),
    OpCase("conv2d", lambda x, w, b: F.conv2d(x, w, b), conv2d_ref,
           (Arg((2, 3, 6, 5)), Arg((4, 3, 3, 2)), Arg((4,)))),
    OpCase("conv2d_stride_padding_dilation",
           lambda x, w: F.conv2d(x, w, stride=(2, 1), padding=(1, 2), dilation=(2, 1)),
           lambda x, w: conv2d_ref(x, w, None, (2, 1), (1, 2), (2, 1)),
           (Arg((2, 2, 7, 6)), Arg((3, 2, 2, 3)))),
    OpCase("conv2d_transposed_input", lambda x, w: F.conv2d(x, w, stride=2),
           lambda x, w: conv2d_ref(x, w, stride=(2, 2)),
           (Arg((2, 3, 6, 5), layout="transposed"), Arg((2, 3, 2, 2), layout="strided"))),
    OpCase("conv2d_same_unbatched", lambda x, w: F.conv2d(x, w, padding="same"),
           lambda x, w: conv2d_ref(x[None], w, padding=(1, 1))[0],
           (Arg((2, 5, 4)), Arg((3, 2, 3, 3)))),
    OpCase("fold2d", lambda p: conv.fold2d(p, (2, 3, 5, 6), (2, 3), (1, 2), (1, 1)),
           lambda p: conv.fold_forward(p, (2, 3, 5, 6), (2, 3), (1, 2), (1, 1)),
           (Arg((2, 4, 2, 3, 2, 3)),)),
    OpCase("max_pool2d", lambda x: F.max_pool2d(x, 2), lambda x: max_pool2d_ref(x, (2, 2), (2, 2)),
           (Arg((2, 3, 6, 5)),)),
    OpCase("max_pool2d_stride_padding_strided",
           lambda x: F.max_pool2d(x, 3, stride=2, padding=1),
           lambda x: max_pool2d_ref(x, (3, 3), (2, 2), (1, 1)),
           (Arg((2, 2, 7, 6), layout="strided"),)),
    OpCase("max_pool2d_ceil_mode", lambda x: F.max_pool2d(x, (2, 2), ceil_mode=True),
           lambda x: max_pool2d_ref(np.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1)),
                                           constant_values=-np.inf), (2, 2), (2, 2)),
           (Arg((1, 2, 5, 5)),)),
    OpCase("avg_pool2d_padding", lambda x: F.avg_pool2d(x, 3, stride=1, padding=1),
           lambda x: sum(part for _, _, part in _window_slices(_pad2d(x, (1, 1), 0), (3, 3),
                                                               (1, 1), (1, 1))) / 9,
           (Arg((2, 2, 4, 5)),)),
]
