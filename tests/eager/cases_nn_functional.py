"""Op cases for nn.functional (forward vs numpy, gradcheck in float64).

Targets and ids are drawn as int64 inputs ("index" args, no gradient); float targets of
the regression and binary losses are ordinary float inputs, so their gradients are
checked too.
"""

import numpy as np
from scipy import special

import jitgrad as jg
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use
from tests.eager.op_table import Arg, OpCase

LOGITS = Arg((4, 5))
TARGET = Arg((4,), 0, 5, kind="index")
NO_GRAD = Arg((5,), 0.5, 2.0, requires_grad=False)


def _softmax(a, axis):
    e = np.exp(a - a.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _log_softmax(a, axis):
    shifted = a - a.max(axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis, keepdims=True))


def _nll(logp, target, weight=None, ignore_index=-100, reduction="mean"):
    """Reference nll over (N, C, *) log-probabilities, straight from the definition."""
    logp = np.moveaxis(logp, 1, -1).reshape(-1, logp.shape[1])
    target = target.reshape(-1)
    kept = target != ignore_index
    safe = np.where(kept, target, 0)
    w = (np.ones(logp.shape[1]) if weight is None else weight)[safe] * kept
    loss = -logp[np.arange(len(target)), safe] * w
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / w.sum()


def _cross_entropy(x, target, weight=None, smoothing=0.0):
    logp = _log_softmax(x, 1)
    nll = _nll(logp, target, weight)
    w = np.ones(x.shape[1]) if weight is None else weight
    smooth = (-(logp * w).sum(1)).sum() / w[target].sum()
    return (1 - smoothing) * nll + smoothing * smooth / x.shape[1]


def _layer_norm(x, w=None, b=None, k=1, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    xhat = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)
    return xhat * (1 if w is None else w) + (0 if b is None else b)


def _bce_logits(z, y, pos_weight=1.0):
    return ((1 - y) * z + (1 + (pos_weight - 1) * y) * np.logaddexp(0, -z)).mean()


def _sdpa(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    return _softmax(scores, -1) @ v


CAUSAL = np.tril(np.ones((3, 3), dtype=bool))
WIDE = Arg((4, 5), -2.9, 2.9)
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

CASES = [
    OpCase("softmax", lambda a: F.softmax(a, -1), lambda a: _softmax(a, -1), (LOGITS,)),
    OpCase("softmax_dim0_transposed", lambda a: a.softmax(0), lambda a: _softmax(a, 0),
           (Arg((4, 5), layout="transposed"),)),
    OpCase("softmax_0d", lambda a: jg.softmax(a, 0), lambda a: np.ones_like(a), (Arg(()),)),
    OpCase("log_softmax", lambda a: F.log_softmax(a, dim=1), lambda a: _log_softmax(a, 1),
           (Arg((2, 3, 4), layout="strided"),)),
    OpCase("log_softmax_method", lambda a: a.log_softmax(-1), lambda a: _log_softmax(a, -1),
           (LOGITS,)),
    OpCase("layer_norm", lambda x, w, b: F.layer_norm(x, (5,), w, b), _layer_norm,
           (LOGITS, Arg((5,)), Arg((5,)))),
    OpCase("layer_norm_2d_no_affine", lambda x: F.layer_norm(x, (3, 4)),
           lambda x: _layer_norm(x, k=2), (Arg((2, 3, 4), layout="strided"),), rtol=1e-4),
    OpCase("layer_norm_weight_only", lambda x, w: F.layer_norm(x, [5], weight=w),
           lambda x, w: _layer_norm(x, w), (Arg((4, 5), layout="transposed"), Arg((5,)))),
    OpCase("linear_functional", F.linear, lambda x, w: x @ w.T, (LOGITS, Arg((3, 5)))),
    OpCase("cross_entropy", F.cross_entropy, _cross_entropy, (LOGITS, TARGET)),
    OpCase("cross_entropy_weight_smoothing",
           lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.2),
           lambda x, t, w: _cross_entropy(x, t, w, 0.2), (LOGITS, TARGET, NO_GRAD)),
    OpCase("cross_entropy_spatial_sum", lambda x, t: F.cross_entropy(x, t, reduction="sum"),
           lambda x, t: _nll(_log_softmax(x, 1), t, reduction="sum"),
           (Arg((2, 5, 3)), Arg((2, 3), 0, 5, kind="index"))),
    OpCase("cross_entropy_ignore_index_none",
           lambda x, t: F.cross_entropy(x, t, ignore_index=2, reduction="none"),
           lambda x, t: _nll(_log_softmax(x, 1), t, ignore_index=2, reduction="none"),
           (LOGITS, TARGET)),
    OpCase("cross_entropy_probabilities", lambda x, p: F.cross_entropy(x, F.softmax(p, 1)),
           lambda x, p: -(_log_softmax(x, 1) * _softmax(p, 1)).sum(1).mean(), (LOGITS, LOGITS)),
    OpCase("nll_loss_weighted", lambda x, t, w: F.nll_loss(x, t, w),
           lambda x, t, w: _nll(x, t, w), (LOGITS, TARGET, NO_GRAD)),
    OpCase("nll_loss_1d", lambda x: F.nll_loss(x, jg.tensor(2)), lambda x: -x[2], (Arg((5,)),)),
    OpCase("embedding", lambda w, i: F.embedding(i, w), lambda w, i: w[i],
           (Arg((6, 3)), Arg((2, 4), 0, 6, kind="index"))),
    # the padding row's gradient is 0 by convention, not the derivative: no gradcheck
    OpCase("embedding_padding_idx", lambda w, i: F.embedding(i, w, padding_idx=1),
           lambda w, i: w[i], (Arg((6, 3)), Arg((5,), 0, 6, kind="index")),
           differentiable=False),
    OpCase("mse_loss", F.mse_loss, lambda a, b: ((a - b) ** 2).mean(), (LOGITS, LOGITS)),
    OpCase("mse_loss_sum", lambda a, b: F.mse_loss(a, b, reduction="sum"),
           lambda a, b: ((a - b) ** 2).sum(), (LOGITS, Arg((4, 5), layout="transposed"))),
    OpCase("l1_loss", F.l1_loss, lambda a, b: np.abs(a - b).mean(), (LOGITS, LOGITS)),
    OpCase("smooth_l1_loss", lambda a, b: F.smooth_l1_loss(a, b, beta=0.5),
           lambda a, b: np.where(np.abs(a - b) < 0.5, (a - b) ** 2, np.abs(a - b) - 0.25).mean(),
           (LOGITS, LOGITS)),
    OpCase("huber_loss", lambda a, b: F.huber_loss(a, b, reduction="none", delta=0.5),
           lambda a, b: np.where(np.abs(a - b) < 0.5, 0.5 * (a - b) ** 2,
                                 0.5 * (np.abs(a - b) - 0.25)), (LOGITS, LOGITS)),
    OpCase("binary_cross_entropy", F.binary_cross_entropy,
           lambda p, y: -(y * np.log(p) + (1 - y) * np.log(1 - p)).mean(),
           (Arg((4, 3), 0.05, 0.95), Arg((4, 3), 0.0, 1.0))),
    OpCase("binary_cross_entropy_weighted_sum",
           lambda p, y, w: F.binary_cross_entropy(p, y, w, reduction="sum"),
           lambda p, y, w: (-(y * np.log(p) + (1 - y) * np.log(1 - p)) * w).sum(),
           (Arg((4, 3), 0.05, 0.95), Arg((4, 3), 0.0, 1.0), Arg((3,)))),
    OpCase("bce_with_logits", F.binary_cross_entropy_with_logits, _bce_logits,
           (Arg((4, 3), -4.0, 4.0), Arg((4, 3), 0.0, 1.0))),
    OpCase("bce_with_logits_pos_weight",
           lambda z, y, w: F.binary_cross_entropy_with_logits(z, y, pos_weight=w),
           _bce_logits, (Arg((4, 3), -4.0, 4.0), Arg((4, 3), 0.0, 1.0), Arg((3,), 0.5, 2.0))),
    OpCase("sdpa", F.scaled_dot_product_attention, _sdpa,
           (Arg((2, 3, 4)), Arg((2, 3, 4)), Arg((2, 3, 4)))),
    OpCase("sdpa_causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
           lambda q, k, v: _sdpa(q, k, v, CAUSAL), (Arg((1, 2, 3, 4)),) * 3),
    OpCase("sdpa_float_mask_scale",
           lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.3),
           lambda q, k, v, m: _softmax(q @ np.swapaxes(k, -1, -2) * 0.3 + m, -1) @ v,
           (Arg((3, 4)), Arg((5, 4)), Arg((5, 2)), Arg((3, 5)))),
    OpCase("pad_constant", lambda a: F.pad(a, (1, 2, 0, 1), value=0.5),
           lambda a: np.pad(a, ((0, 1), (1, 2)), constant_values=0.5), (LOGITS,)),
    OpCase("pad_3d_strided", lambda a: F.pad(a, (2, 0)),
           lambda a: np.pad(a, ((0, 0), (0, 0), (2, 0))), (Arg((2, 3, 4), layout="strided"),)),
    OpCase("sigmoid_functional", F.sigmoid, special.expit, (LOGITS,)),
] + [  # activations; inputs avoid their kinks (+-3, thresholds) for gradcheck
    OpCase("hardsigmoid", F.hardsigmoid, lambda a: np.clip(a + 3, 0, 6) / 6, (WIDE,)),
    OpCase("hardswish", F.hardswish, lambda a: a * np.clip(a + 3, 0, 6) / 6, (WIDE,)),
    OpCase("threshold", lambda a: F.threshold(a, 0.1, -2.0),
           lambda a: np.where(a > 0.1, a, -2.0), (LOGITS,)),
    OpCase("mish", F.mish, lambda a: a * np.tanh(np.log1p(np.exp(a))), (LOGITS,)),
    OpCase("selu", F.selu, lambda a: SELU_SCALE * np.where(a > 0, a, SELU_ALPHA * np.expm1(a)),
           (LOGITS,)),
    OpCase("celu", lambda a: F.celu(a, 2.0), lambda a: np.where(a > 0, a, 2 * np.expm1(a / 2)),
           (LOGITS,)),
    OpCase("softsign", F.softsign, lambda a: a / (1 + np.abs(a)), (LOGITS,)),
    OpCase("tanhshrink", F.tanhshrink, lambda a: a - np.tanh(a), (LOGITS,)),
    OpCase("hardshrink", lambda a: F.hardshrink(a, 0.3), lambda a: np.where(np.abs(a) > 0.3, a, 0),
           (LOGITS,)),
    OpCase("softshrink", F.softshrink,
           lambda a: np.where(a > 0.5, a - 0.5, np.where(a < -0.5, a + 0.5, 0)), (LOGITS,)),
    OpCase("softmin", lambda a: F.softmin(a, 1), lambda a: _softmax(-a, 1), (LOGITS,)),
    OpCase("glu", lambda a: F.glu(a, 0), lambda a: a[:2] * special.expit(a[2:]),
           (Arg((4, 5)),)),
]
