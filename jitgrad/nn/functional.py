"""`jitgrad.nn.functional` (imported as `F`): PyTorch's functional neural-net API.

Fused ops (softmax, log_softmax, layer_norm, nll_loss, embedding, binary cross-entropy
element losses, constant padding) live in `jitgrad.eager.ops.nn_ops`, activations in
`jitgrad.eager.ops.activation` (their nn forms, `inplace` flags included, are made from
their declarations in `functional_activation`), convolutions in `functional_conv`;
everything else here is a composite of existing ops, so its gradient comes from theirs.
Behaviours and messages follow PyTorch as measured in research/eager_autograd.md §2.9.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from jitgrad.eager.grad_mode import no_grad
from jitgrad.eager.ops import linalg, nn_ops, pointwise, shape
from jitgrad.eager.ops import reduction as reduce_ops
from jitgrad.eager.ops.comparison import clamp_min, where
from jitgrad.eager.ops.linalg import linear
from jitgrad.eager.ops.nn_ops import layer_norm, log_softmax, nll_loss, softmax
from jitgrad.eager.ops.random import dropout_mask
from jitgrad.eager.tensor import Tensor
from jitgrad.nn import functional_sampling as sampling
from jitgrad.nn.functional_activation import *  # noqa: F403 - relu, elu_, gelu, ...
from jitgrad.nn.functional_activation import __all__ as _activation_all
from jitgrad.nn.functional_conv import (
    avg_pool1d,
    avg_pool2d,
    conv1d,
    conv2d,
    conv_transpose1d,
    conv_transpose2d,
    max_pool1d,
    max_pool2d,
)
from jitgrad.nn.functional_norm import batch_norm, group_norm, instance_norm
from jitgrad.nn.functional_sampling import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    dropout1d,
    dropout2d,
    interpolate,
    pixel_shuffle,
    pixel_unshuffle,
    prelu,
)
from jitgrad.nn.functional_sparse import embedding, embedding_bag

# ----- losses -------------------------------------------------------------------------


def _reduction(size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    """PyTorch's legacy `size_average`/`reduce` flags mapped onto `reduction`."""
    if size_average is None and reduce is None:
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"{reduction} is not a valid value for reduction")
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    result = "none" if not reduce else ("mean" if size_average else "sum")
    warnings.warn(f"size_average and reduce args will be deprecated, please use "
                  f"reduction='{result}' instead.", UserWarning, stacklevel=3)
    return result


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return reduce_ops.mean(loss)
    if reduction == "sum":
        return reduce_ops.sum(loss)
    return loss


def _warn_target_size(input: Tensor, target: Tensor) -> None:
    if target.shape != input.shape:
        warnings.warn(f"Using a target size ({target.shape!r}) that is different to the input "
                      f"size ({input.shape!r}). This will likely lead to incorrect results due "
                      "to broadcasting. Please ensure they have the same size.",
                      UserWarning, stacklevel=3)


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  size_average: bool | None = None, ignore_index: int = -100,
                  reduce: bool | None = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy of logits `input` against class indices or class probabilities.

    Shapes: input (N, C), (N, C, d1, ...) or (C,); target int64 (N, d1, ...) class
    indices, or float probabilities of input's shape. weight (C,) rescales classes;
    'mean' over index targets divides by the summed weights of non-ignored targets (NaN
    when all are ignored). label_smoothing e mixes in the uniform distribution:
    (1-e) * nll + e * mean_c(-log p_c). Computed as nll_loss(log_softmax(input)) (stable).
    Raises RuntimeError for int32 targets ("expected target dtype to be Long or Byte"),
    IndexError "Target 3 is out of bounds." for bad class ids.
    """
    reduction = _reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    class_dim = 0 if input.ndim == 1 else 1
    log_probs = log_softmax(input, class_dim)
    if target.is_floating_point():
        return _cross_entropy_probabilities(log_probs, target, weight, reduction,
                                            label_smoothing, class_dim)
    loss = nll_loss(log_probs, target, weight, ignore_index, reduction)
    if label_smoothing == 0.0:
        return loss
    smooth = _smoothing_term(log_probs, target, weight, ignore_index, reduction, class_dim)
    n_classes = input.shape[class_dim]
    return loss * (1 - label_smoothing) + smooth * (label_smoothing / n_classes)


def _class_weights(weight: Tensor, ndim: int, class_dim: int) -> Tensor:
    """weight (C,) reshaped to broadcast along the class dim of an ndim-D input."""
    return shape.reshape(weight, tuple(-1 if d == class_dim else 1 for d in range(ndim)))


def _smoothing_term(log_probs: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int,
                    reduction: str, class_dim: int) -> Tensor:
    """sum_c -w_c log p_c per target (0 where ignored), reduced as PyTorch's
    cross_entropy_loss_label_smoothing does."""
    if weight is not None:
        log_probs = log_probs * _class_weights(weight, log_probs.ndim, class_dim)
    kept = target._data != ignore_index
    keep = Tensor._make(kept.astype(log_probs._data.dtype))
    per_target = -reduce_ops.sum(log_probs, class_dim) * keep
    if reduction == "sum":
        return reduce_ops.sum(per_target)
    if reduction == "none":
        return per_target
    if weight is None:
        return reduce_ops.sum(per_target) / int(kept.sum())
    labels = target._data[kept]
    return reduce_ops.sum(per_target) / float(weight._data[labels].sum())


def _cross_entropy_probabilities(log_probs: Tensor, target: Tensor, weight: Tensor | None,
                                 reduction: str, label_smoothing: float, class_dim: int) -> Tensor:
    if target.shape != log_probs.shape:
        # PyTorch then takes the target for class indices and checks as nll_loss does:
        # the batch sizes first (ValueError), then the dtype (fuzz seed 670546)
        shape, target_shape = tuple(log_probs.shape), tuple(target.shape)
        target_batch = target_shape[0] if target_shape else 0
        if len(shape) >= 2 and shape[0] != target_batch:
            raise ValueError(f"Expected input batch_size ({shape[0]}) to match target "
                             f"batch_size ({target_batch}). (float targets are class "
                             f"probabilities of the input's shape {list(shape)}, got "
                             f"{list(target_shape)})")
        name = nn_ops.TORCH_TYPE_NAMES.get(target._data.dtype.name, target._data.dtype.name)
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {name}; float "
                           f"(probability) targets must have the input's shape {list(shape)}, "
                           f"got {list(target_shape)}")
    n_classes = log_probs.shape[class_dim]
    if label_smoothing > 0:
        target = target * (1 - label_smoothing) + label_smoothing / n_classes
    terms = log_probs * target
    if weight is not None:
        terms = terms * _class_weights(weight, log_probs.ndim, class_dim)
    loss = -reduce_ops.sum(terms, class_dim)
    if reduction == "mean":
        return reduce_ops.sum(loss) / (log_probs.numel() // n_classes)
    return _reduce(loss, reduction)


def mse_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
             reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Mean squared error; warns (UserWarning) when target's shape differs from input's.

    Raises NotImplementedError when both are integer tensors (as PyTorch).
    """
    reduction = _reduction(size_average, reduce, reduction)
    _warn_target_size(input, target)
    if input._data.dtype.kind != "f" and target._data.dtype.kind != "f":
        raise pointwise.not_implemented_for("mse_cpu", input._data.dtype)
    diff = input - target
    return _reduce(diff * diff, reduction)


def l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
            reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Mean absolute error (gradient 0 where input == target)."""
    reduction = _reduction(size_average, reduce, reduction)
    _warn_target_size(input, target)
    return _reduce(pointwise.abs(input - target), reduction)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                   reduce: bool | None = None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target)."""
    reduction = _reduction(size_average, reduce, reduction)
    _warn_target_size(input, target)
    if beta == 0.0:
        return l1_loss(input, target, reduction=reduction)
    diff = input - target
    magnitude = pointwise.abs(diff)
    loss = where(magnitude < beta, diff * diff * (0.5 / beta), magnitude - 0.5 * beta)
    return _reduce(loss, reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean",
               delta: float = 1.0) -> Tensor:
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)."""
    _warn_target_size(input, target)
    diff = input - target
    magnitude = pointwise.abs(diff)
    loss = where(magnitude < delta, diff * diff * 0.5, (magnitude - 0.5 * delta) * delta)
    return _reduce(loss, reduction)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """-(y log p + (1-y) log(1-p)) with each log clamped at -100 (PyTorch's rule).

    Raises ValueError when target's shape differs from input's, RuntimeError when an
    input is outside [0, 1] or target's dtype is not input's.
    """
    reduction = _reduction(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(f"Using a target size ({target.shape!r}) that is different to the input "
                         f"size ({input.shape!r}) is deprecated. Please ensure they have the "
                         "same size.")
    if target._data.dtype != input._data.dtype:
        raise RuntimeError(f"Found dtype {nn_ops.TORCH_TYPE_NAMES[target._data.dtype.name]} but "
                           f"expected {nn_ops.TORCH_TYPE_NAMES[input._data.dtype.name]}; convert "
                           "the target first, e.g. target.to(input.dtype)")
    p = input._data
    if p.size and (p.min() < 0 or p.max() > 1):
        raise RuntimeError("all elements of input should be between 0 and 1 (apply sigmoid "
                           "first, or use binary_cross_entropy_with_logits)")
    loss = nn_ops.bce_elements(input, target)
    return _reduce(loss if weight is None else loss * weight, reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average: bool | None = None, reduce: bool | None = None,
                                     reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross-entropy of logits, computed stably (loss 100, grad -1 at z=-100, y=1).

    pos_weight (broadcast along the last dim) scales the positive term. Raises
    ValueError when target's shape differs from input's.
    """
    reduction = _reduction(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(f"Target size ({target.shape!r}) must be the same as input size "
                         f"({input.shape!r})")
    loss = nn_ops.bce_with_logits_elements(input, target, pos_weight)
    return _reduce(loss if weight is None else loss * weight, reduction)


# ----- encodings, attention, padding, dropout --------------------------------------------


def kl_div(input: Tensor, target: Tensor, size_average: bool | None = None,
           reduce: bool | None = None, reduction: str = "mean", log_target: bool = False
           ) -> Tensor:
    """KL(target || exp(input)) elementwise: target * (log target - input), 0 where target is 0.

    input holds log-probabilities; target probabilities (log-probabilities if log_target).
    reduction "batchmean" (the mathematical KL divergence) sums and divides by input.size(0);
    "mean" averages over every element and warns, as PyTorch does.
    """
    if size_average is not None or reduce is not None:
        reduction = _reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", UserWarning, stacklevel=2)
    elif reduction not in ("batchmean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_target:
        loss = pointwise.exp(target) * (target - input)
    else:  # xlogy(target, target) - target * input
        loss = where(target == 0, 0.0, target * pointwise.log(target)) - target * input
    if reduction == "batchmean":
        total = reduce_ops.sum(loss)
        return total / input.shape[0] if input.ndim else total
    return _reduce(loss, reduction)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding: shape tensor.shape + (num_classes,).

    num_classes=-1 uses max(tensor) + 1. Raises RuntimeError for non-int64 input,
    negative values or values >= num_classes.
    """
    ids = tensor._data
    if ids.dtype != np.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor "
                           f"(got {tensor.dtype.name}); convert with .long()")
    if ids.size and ids.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        num_classes = int(ids.max()) + 1 if ids.size else 0
    if ids.size and ids.max() >= num_classes:
        raise RuntimeError(f"Class values must be smaller than num_classes (got {int(ids.max())} "
                           f"for num_classes={num_classes}).")
    return Tensor._make((ids[..., None] == np.arange(num_classes)).astype(np.int64))


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """softmax(q k^T * scale + mask) v over the last two dims (..., L, E) x (..., S, E).

    scale defaults to 1/sqrt(E). attn_mask: bool (True = attend) or float (added),
    broadcast to (..., L, S); is_causal masks j > i. A fully masked row gives NaN, as
    in PyTorch. dropout_p > 0 drops attention weights (always, as PyTorch does).
    """
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set "
                           "when is_causal=True")
    if enable_gqa:
        raise RuntimeError("scaled_dot_product_attention: enable_gqa=True is not supported by "
                           "jitgrad; repeat the key/value heads instead")
    length, source = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    order = tuple(range(key.ndim - 2)) + (key.ndim - 1, key.ndim - 2)
    scores = linalg.matmul(query, shape.permute(key, order)) * scale
    if is_causal:
        attn_mask = Tensor._make(np.tril(np.ones((length, source), dtype=np.bool_)))
    if attn_mask is not None:
        if attn_mask._data.dtype == np.bool_:
            bias = np.where(attn_mask._data, 0.0, -np.inf).astype(scores._data.dtype)
            attn_mask = Tensor._make(bias)
        scores = scores + attn_mask
    weights = softmax(scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return linalg.matmul(weights, value)


def pad(input: Tensor, pad: Any, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad by `pad`, (left, right) pairs from the last dim backwards: `pad(x, (1, 2))` adds 1
    before and 2 after the last dim. mode: "constant" (with `value`, 0 by default),
    "reflect", "replicate" or "circular" (jitgrad.nn.functional_sampling).

    Raises RuntimeError for negative (cropping) widths, more pairs than dims, or
    reflect/circular widths the input is too small for; NotImplementedError for other modes.
    """
    pairs = sampling.pad_pairs(pad, input.ndim)
    if any(p < 0 for pair in pairs for p in pair):
        raise RuntimeError(f"pad: negative (cropping) widths {list(pad)} are not supported by "
                           "jitgrad; slice the tensor instead")
    if mode in ("reflect", "replicate", "circular"):
        if len(pairs) not in (input.ndim - 2, input.ndim - 1) or not 1 <= len(pairs) <= 3:
            raise NotImplementedError(f"pad: mode={mode!r} pads the 1 to 3 trailing spatial "
                                      f"dims of a (batched or unbatched) input, but got "
                                      f"{len(pairs)} pairs for a {input.ndim}-D input")
        return sampling.pad_indexed(input, pairs, mode)
    if mode != "constant":
        raise NotImplementedError(f"pad: mode={mode!r} is not supported by jitgrad; use "
                                  "'constant', 'reflect', 'replicate' or 'circular'")
    widths = tuple([(0, 0)] * (input.ndim - len(pairs)) + pairs)
    return nn_ops.pad_constant(input, widths, 0.0 if value is None else value)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1-p) (training only).

    The mask is drawn from jitgrad's default generator (seed with `jitgrad.manual_seed`);
    it cannot reproduce PyTorch's random stream. p=1 gives zeros; eval is the identity.
    Raises ValueError unless 0 <= p <= 1, RuntimeError for a non-float input (0 < p < 1).
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if input._data.dtype.kind != "f" and p < 1.0:  # the 1/(1-p) scale is a float
        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{nn_ops.TORCH_TYPE_NAMES[input._data.dtype.name]}; convert first, "
                           "e.g. t.float()")
    if p == 1.0:
        mask = Tensor._make(np.zeros(input._data.shape, dtype=input._data.dtype))
    else:
        mask = dropout_mask(input, p)
    if inplace:
        return input.mul_(mask)
    return input * mask


# ----- similarity --------------------------------------------------------------------------


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """input / max(||input||_p along dim, eps): unit-norm slices (zero slices stay zero)."""
    denom = clamp_min(_norm_keepdim(input, p, dim), eps)
    return input / denom


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """sum(x1/||x1|| * x2/||x2||) along `dim` (broadcast first), each norm at least `eps`.

    As PyTorch, the eps clamp is applied without recording it, so the gradient flows
    through the unclamped norms; the result stays within [-1, 1].
    """
    x1, x2 = shape.broadcast_tensors(x1, x2)
    n1, n2 = _norm_keepdim(x1, 2, dim).clone(), _norm_keepdim(x2, 2, dim).clone()
    with no_grad():
        n1.clamp_min_(eps)
        n2.clamp_min_(eps)
    return reduce_ops.sum((x1 / n1) * (x2 / n2), dim)


def _norm_keepdim(input: Tensor, p: float, dim: int) -> Tensor:
    """The p-norm of `input` along `dim`, kept as a size-1 dim."""
    return reduce_ops.norm(input, p, dim, keepdim=True)


__all__ = [
    "linear", "softmax", "log_softmax", "layer_norm", "embedding", "dropout", "cross_entropy",
    "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "one_hot", "scaled_dot_product_attention", "pad",
    "kl_div", "normalize", "cosine_similarity", "conv2d", "max_pool2d",
    "avg_pool2d", "batch_norm", "instance_norm", "group_norm", "conv1d", "conv_transpose1d",
    "conv_transpose2d", "interpolate", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
    "adaptive_max_pool1d", "adaptive_max_pool2d", "dropout1d", "dropout2d", "prelu",
    *_activation_all, "embedding_bag", "max_pool1d", "avg_pool1d", "pixel_shuffle",
    "pixel_unshuffle",
]
del _activation_all  # only for __all__
