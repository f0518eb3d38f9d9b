"""Fused neural-net ops whose numerically stable or fast form matters: softmax,
log_softmax, layer_norm, nll_loss, embedding, and the element losses of binary
cross-entropy. `jitgrad.nn.functional` builds the public API on them.

Conventions are PyTorch's, as measured in research/eager_autograd.md §2.9: softmax of
a fully -inf row is NaN (and so are its gradients); log_softmax([1000, 0]) is exact;
layer_norm uses the biased variance with eps inside the square root; nll_loss's mean
divides by the summed weights of the non-ignored targets; embedding gradients of
repeated ids accumulate and the padding row gets none.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from jitgrad.eager import dtypes
from jitgrad.eager.ops.checks import check_values
from jitgrad.eager.ops.index_parsing import dim_index_error
from jitgrad.eager.ops.registry import apply_op, register
from jitgrad.eager.tensor import Tensor, normalize_dim
from jitgrad.eager.xp import embedding_backward_forward

# ----- softmax, log_softmax ---------------------------------------------------------


# `dims` is (dim,), or None for a 0-d input (whose only "slice" is itself)


# Note [Composite forwards in place]: softmax, log_softmax and layer_norm compute with the ufuncs of
# their formula, step by step, but into buffers they allocated themselves, not one fresh
# array per step: a fresh array of 1 MiB costs numpy an mmap and its page faults on first
# write (measured: layer_norm over 256x1024 float32 512 us with five allocations, torch
# 126 us). Each step is the same ufunc on the same operands, so the values are unchanged.


def _shifted(x: np.ndarray, dims: tuple[int] | None) -> np.ndarray:
    # initial=-inf: a size-0 dim has no maximum, and its (empty) result needs none
    return x - np.maximum.reduce(x, axis=dims, keepdims=True, initial=-np.inf)


def _softmax_forward(x: np.ndarray, dims: tuple[int] | None) -> np.ndarray:
    if not x.size:  # nothing to compute: an empty result of x's dtype, ints included (torch)
        return x.copy()
    e = _shifted(x, dims)
    if type(e) is not np.ndarray:  # 0-d: a numpy scalar (float: _softmax_input checks)
        e = np.exp(e)
        return e / np.add.reduce(e, axis=dims, keepdims=True)
    # the same ufuncs into the one fresh buffer (Note [Composite forwards in place])
    np.exp(e, out=e)
    return np.divide(e, np.add.reduce(e, axis=dims, keepdims=True), out=e)


def _softmax_backward(xp: Any, ctx: Any, g: Any, out: Any) -> tuple:
    return (out * (g - xp.sum(g * out, ctx.params["dims"], True)),)


def _log_softmax_forward(x: np.ndarray, dims: tuple[int] | None) -> np.ndarray:
    if not x.size:  # as in _softmax_forward
        return x.copy()
    shifted = _shifted(x, dims)
    log_sum = np.log(np.add.reduce(np.exp(shifted), axis=dims, keepdims=True))
    if type(shifted) is not np.ndarray:  # 0-d: a numpy scalar
        return shifted - log_sum
    return np.subtract(shifted, log_sum, out=shifted)  # Note [Composite forwards in place]


def _log_softmax_backward(xp: Any, ctx: Any, g: Any, out: Any) -> tuple:
    return (g - xp.exp(out) * xp.sum(g, ctx.params["dims"], True),)


SOFTMAX = register("softmax", _softmax_forward, _softmax_backward, saves=("out",),
                   source="d softmax = out * (g - sum(g * out))")
LOG_SOFTMAX = register("log_softmax", _log_softmax_forward, _log_softmax_backward,
                       saves=("out",), source="d log_softmax = g - exp(out) * sum(g)")


def _softmax_input(input: Tensor, dim: Any, dtype: Any, name: str) -> tuple[np.ndarray, Any]:
    data = input._data
    if dtype is not None:
        data = data.astype(dtypes.numpy_dtype(dtypes.to_dtype(dtype), name))
    if data.dtype.kind != "f" and data.size:  # the kernel runs only on elements
        raise NotImplementedError(f'"{name}_lastdim_kernel_impl" not implemented for '
                                  f"'{TORCH_TYPE_NAMES.get(data.dtype.name, data.dtype.name)}'; "
                                  f"convert first, e.g. t.float().{name}(dim)")
    if dim is None:  # PyTorch's legacy implicit dim: 0 for 0-D, 1-D and 3-D inputs, else 1
        dim = 0 if data.ndim in (0, 1, 3) else 1
        warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the "
                      "call to include dim=X as an argument.", UserWarning, stacklevel=3)
    dim = normalize_dim(int(dim), data.ndim)
    return data, ((dim,) if data.ndim else None)


def softmax(input: Tensor, dim: Any = None, dtype: Any = None) -> Tensor:
    """exp(x) / sum(exp(x)) along `dim`, shifted by the max (no overflow).

    dtype: cast the input first. A fully -inf slice gives NaN (as PyTorch).
    Raises NotImplementedError for integer inputs.
    """
    data, dims = _softmax_input(input, dim, dtype, "softmax")
    return apply_op(SOFTMAX, (input,), (data,), {"dims": dims})


def log_softmax(input: Tensor, dim: Any = None, dtype: Any = None) -> Tensor:
    """x - logsumexp(x) along `dim`, exact for large gaps (`[1000, 0]` -> `[0, -1000]`)."""
    data, dims = _softmax_input(input, dim, dtype, "log_softmax")
    return apply_op(LOG_SOFTMAX, (input,), (data,), {"dims": dims})


# PyTorch's C++ scalar type names, used in its dtype error messages
TORCH_TYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
                    "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
                    "bool": "Bool"}

# ----- layer_norm ---------------------------------------------------------------------


def _layer_norm_forward(x: np.ndarray, weight: np.ndarray | None, bias: np.ndarray | None,
                        normalized_ndim: int, eps: float) -> np.ndarray:
    axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
    centered = x - np.mean(x, axis=axes, keepdims=True)
    squares = centered * centered
    var = np.mean(squares, axis=axes, keepdims=True)
    # into the squares' buffer (Note [Composite forwards in place]) where the result keeps
    # its dtype: weight and bias of another dtype promote, as their ufuncs would
    out = np.divide(centered, np.sqrt(var + eps),
                    out=squares if type(squares) is np.ndarray else None)
    for operand, ufunc in ((weight, np.multiply), (bias, np.add)):
        if operand is not None:
            same = type(out) is np.ndarray and np.result_type(out, operand) == out.dtype \
                and np.broadcast_shapes(out.shape, np.shape(operand)) == out.shape
            out = ufunc(out, operand, out=out) if same else ufunc(out, operand)
    return out


def _layer_norm_backward(xp: Any, ctx: Any, g: Any, x: Any, weight: Any) -> tuple:
    """LayerNorm backward in PyTorch's CPU form, recomputing mean and rstd from the saved
    input, so inf and NaN spread as in torch (a row with an inf gradient is all NaN).

    Over the n normalized elements, with gw = g * weight, ds = sum(gw * x), db = sum(gw):
    b = (db * mean - ds) * rstd^3 / n, c = -b * mean - db * rstd / n,
    grad_x = rstd * gw + b * x + c (aten/src/ATen/native/cpu/layer_norm_kernel.cpp);
    grad_weight = g * xhat, grad_bias = g (summed over the batch by the engine).
    """
    shape = ctx.input_metadata[0][0]
    k = ctx.params["normalized_ndim"]
    axes = tuple(range(len(shape) - k, len(shape)))
    n = math.prod(shape[len(shape) - k:])
    mean = xp.sum(x, axes, True) / n
    centered = x - mean
    rstd = 1 / xp.sqrt(xp.sum(centered * centered, axes, True) / n + ctx.params["eps"])
    need_x, need_w, need_b = ctx.needs_input_grad
    grad_x = None
    if need_x:
        gw = g if weight is None else g * weight
        ds = xp.sum(gw * x, axes, True)
        db = xp.sum(gw, axes, True)
        b = (db * mean - ds) * rstd * rstd * rstd / n
        c = -b * mean - db * rstd / n
        grad_x = rstd * gw + b * x + c
    return grad_x, (g * (centered * rstd) if need_w else None), (g if need_b else None)


LAYER_NORM = register("layer_norm", _layer_norm_forward, _layer_norm_backward,
                      saves=("x", "weight"),
                      source="Ba et al. 2016, LayerNorm; PyTorch's CPU backward")


def layer_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalize over the trailing `normalized_shape` dims (biased variance, eps inside
    the sqrt), then scale by `weight` and shift by `bias` (both of that shape, optional).

    Raises RuntimeError when the input's trailing dims differ from `normalized_shape`.
    """
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(int(s) for s in normalized_shape)
    data = input._data
    k = len(normalized_shape)
    if data.ndim < k or data.shape[data.ndim - k:] != normalized_shape:
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with "
                           f"shape [*, {', '.join(map(str, normalized_shape))}], but got input of "
                           f"size{list(data.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t._data.shape != normalized_shape:
            raise RuntimeError(f"layer_norm: {name} of shape {list(t._data.shape)} must have "
                               f"normalized_shape {list(normalized_shape)}")
    _check_layer_norm_dtypes(data.dtype, weight, bias)
    arrays = (data, None if weight is None else weight._data.astype(data.dtype, copy=False),
              None if bias is None else bias._data.astype(data.dtype, copy=False))
    return apply_op(LAYER_NORM, (input, weight, bias), arrays,
                    {"normalized_ndim": k, "eps": float(eps)})


def _check_layer_norm_dtypes(np_dtype: np.dtype, *params: Tensor | None) -> None:
    """PyTorch's CPU rules: a float input, and parameters of its dtype (float32 parameters
    of a float16 input are allowed: mixed precision).

    Raises NotImplementedError for a non-float input, RuntimeError for other mixes.
    """
    if np_dtype.kind != "f":
        raise NotImplementedError(
            f'"LayerNormKernelImpl" not implemented for '
            f"'{TORCH_TYPE_NAMES[np_dtype.name]}'; convert first, e.g. t.float()")
    for t in params:
        if t is None or t._data.dtype == np_dtype \
                or (np_dtype == np.float16 and t._data.dtype == np.float32):
            continue
        if np_dtype == np.float64:
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype. Got "
                               f"input Double and parameter {TORCH_TYPE_NAMES[t._data.dtype.name]}"
                               "; convert one first, e.g. weight.double()")
        raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float; "
                           "convert the parameters first, e.g. weight.float()")


# ----- nll_loss -----------------------------------------------------------------------


def _class_dim(ndim: int) -> int:
    return 0 if ndim == 1 else 1


def _nll_forward(log_probs: np.ndarray, target: np.ndarray, weight: np.ndarray | None,
                 ignore_index: int, reduction: str) -> np.ndarray:
    class_dim = _class_dim(log_probs.ndim)
    kept = target != ignore_index
    safe = target if kept.all() else np.where(kept, target, 0)
    if log_probs.ndim == 2:  # (N, C): plain fancy indexing is 5x faster than take_along_axis
        picked = log_probs[np.arange(len(safe)), safe]
    else:
        picked = np.take_along_axis(log_probs, np.expand_dims(safe, class_dim), class_dim)
        picked = picked.squeeze(class_dim)
    w = kept.astype(log_probs.dtype) if weight is None else weight[safe] * kept
    loss = -picked * w
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.asarray(np.add.reduce(loss, axis=None))
    return np.asarray(np.add.reduce(loss, axis=None) / np.add.reduce(w, axis=None))


def _nll_backward(xp: Any, ctx: Any, g: Any, target: Any, weight: Any) -> tuple:
    """-g * w[target] at each target position (divided by sum(w) for 'mean')."""
    shape, np_dtype = ctx.input_metadata[0]
    class_dim = _class_dim(len(shape))
    ignore_index, reduction = ctx.params["ignore_index"], ctx.params["reduction"]
    kept = target != ignore_index
    safe = xp.where(kept, target, 0)
    w = xp.cast(kept, np_dtype)
    if weight is not None:
        w = xp.getitem(weight, safe) * w
    if reduction == "mean":
        g = g / xp.sum(w, None)
    values = xp.where(kept, -(w * g), 0)  # an all-ignored batch divides by 0: keep grad 0
    index_shape = ctx.input_metadata[1][0]
    unsqueezed = index_shape[:class_dim] + (1,) + index_shape[class_dim:]
    grad = xp.put_along_dim(shape, class_dim, xp.reshape(safe, unsqueezed),
                            xp.reshape(values, unsqueezed))
    return grad, None, None


NLL_LOSS = register("nll_loss", _nll_forward, _nll_backward, saves=("target", "weight"),
                    inputs=("log_probs", "target", "weight"),
                    source="d(-w_t * x_t) / dx_t = -w_t")


def _target_shape_error(input_shape: tuple[int, ...], target_shape: tuple[int, ...],
                        expected: tuple[int, ...]) -> Exception:
    """PyTorch's error for class-index targets of the wrong shape, in its order of checks:
    RuntimeError for a 2-D+ target of a (N, C) input, ValueError when the batch sizes differ
    (a 0-d target counts as batch size 0, as in torch), RuntimeError for other sizes."""
    shapes = (f"input shape {list(input_shape)} needs target shape {list(expected)}, got "
              f"{list(target_shape)}")
    if len(input_shape) <= 2 and len(target_shape) > 1:
        return RuntimeError(f"0D or 1D target tensor expected, multi-target not supported "
                            f"({shapes}; flatten it, e.g. target.view(-1))")
    target_batch = target_shape[0] if target_shape else 0
    if len(input_shape) >= 2 and input_shape[0] != target_batch:
        return ValueError(f"Expected input batch_size ({input_shape[0]}) to match target "
                          f"batch_size ({target_batch}). ({shapes})")
    return RuntimeError(f"Expected target size {list(expected)}, got {list(target_shape)} "
                        f"(input shape {list(input_shape)})")


def _check_targets(input: Tensor, target: Tensor, ignore_index: int) -> Tensor:
    """`target` with its dtype, shape and class ids checked (ids in a compiled graph: when
    it runs, see Note [Value checks in graphs])."""
    data, labels = input._data, target._data
    if labels.dtype not in (np.int64, np.uint8):
        name = TORCH_TYPE_NAMES.get(labels.dtype.name, labels.dtype.name)
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {name}; class "
                           "index targets must be int64, e.g. target.long()")
    class_dim = _class_dim(data.ndim)
    expected = data.shape[:class_dim] + data.shape[class_dim + 1:]
    if labels.shape != expected:
        raise _target_shape_error(data.shape, labels.shape, expected)
    return check_values(target, reject="outside", low=0, high=data.shape[class_dim],
                        ignore=int(ignore_index), error="IndexError",
                        message="Target {bad} is out of bounds.")


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of class-index targets given log-probabilities.

    Shapes: input (N, C) or (N, C, d1, ...) or (C,); target (N,), (N, d1, ...) or ();
    weight (C,). 'mean' divides by the summed weights of non-ignored targets (NaN when
    all are ignored). Raises IndexError "Target 3 is out of bounds." for bad class ids,
    ValueError when the batch sizes differ, RuntimeError for non-int64 targets or other
    mismatched shapes.
    """
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    target = _check_targets(input, target, ignore_index)
    w = None if weight is None else weight._data.astype(input._data.dtype, copy=False)
    if target._data.dtype != np.int64:  # uint8 class ids
        target = target.long()
    return apply_op(NLL_LOSS, (input, target, weight), (input._data, target._data, w),
                    {"ignore_index": int(ignore_index), "reduction": reduction})


# ----- embedding ----------------------------------------------------------------------


def _embedding_forward(weight: np.ndarray, indices: np.ndarray, padding_idx: int | None
                       ) -> np.ndarray:
    return weight[indices]


def _embedding_backward(xp: Any, ctx: Any, g: Any, indices: Any) -> tuple:
    """Rows of g added into the rows of W they came from (repeated ids accumulate);
    the padding row gets no gradient."""
    padding_idx = ctx.params["padding_idx"]
    shape = ctx.input_metadata[0][0]
    if padding_idx is not None:  # selected, so an inf/NaN g of a padding id stays off
        kept = xp.reshape(indices != padding_idx, tuple(ctx.input_metadata[1][0]) + (1,))
        g = xp.where(kept, g, 0.0)
    return xp.embedding_backward(g, indices, shape[0]), None


EMBEDDING = register("embedding", _embedding_forward, _embedding_backward, saves=("indices",),
                     source="index-add of g into the rows of W")


def _embedding_backward_backward(xp: Any, ctx: Any, g: Any, indices: Any) -> tuple:
    return xp.embedding_rows(g, indices), None


# the ids are an operand (not a param), so a compiled backward reads them at run time
EMBEDDING_BACKWARD = register("embedding_backward", embedding_backward_forward,
                              _embedding_backward_backward, saves=("indices",),
                              source="adjoint of the row index-add: gather rows of g")


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """Rows of `weight` (num_embeddings, dim) picked by int `input` (any shape) ->
    input.shape + (dim,).

    Raises IndexError "index out of range in self" for ids outside [0, num_embeddings),
    RuntimeError for non-integer ids.
    """
    ids = input._data
    if ids.dtype.kind not in "iu":
        name = TORCH_TYPE_NAMES.get(ids.dtype.name, ids.dtype.name)
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got {name} instead; "
                           "convert the ids with .long()")
    rows = weight._data.shape[0]
    if weight._data.size:
        error = {"error": "IndexError", "message": "index out of range in self (ids must be "
                 f"in [0, {rows}); got min {{min}}, max {{max}})"}
    else:  # PyTorch's index_select kernel checks an empty table
        error = dim_index_error("index_select", 0, rows, weight._data)
    checked = check_values(input, reject="outside", low=0, high=rows, **error)
    if padding_idx is not None:
        if not -rows <= padding_idx < rows:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = padding_idx % rows
    return apply_op(EMBEDDING, (weight, checked), (weight._data, checked._data),
                    {"padding_idx": padding_idx})


# ----- binary cross-entropy element losses --------------------------------------------


def _bce_forward(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    # each log is clamped at -100, so p = 0 with y = 1 costs 100, not inf
    log_p = np.maximum(np.log(p), p.dtype.type(-100))
    log_1mp = np.maximum(np.log1p(-p), p.dtype.type(-100))
    return -(y * log_p + (1 - y) * log_1mp)


def _bce_backward(xp: Any, ctx: Any, g: Any, p: Any, y: Any) -> tuple:
    """d/dp = (p - y) / max(p (1 - p), 1e-12) (PyTorch's eps), d/dy = log(1-p) - log(p)."""
    need_p, need_y = ctx.needs_input_grad
    grad_p = grad_y = None
    if need_p:
        grad_p = g * (p - y) / xp.maximum(p * (1 - p), 1e-12)
    if need_y:
        grad_y = g * (xp.maximum(xp.log1p(-p), -100) - xp.maximum(xp.log(p), -100))
    return grad_p, grad_y


def _softplus_neg(xp: Any, z: Any) -> Any:
    """log(1 + exp(-z)) without overflow."""
    return xp.log1p(xp.exp(-xp.abs(z))) + xp.maximum(-z, 0)


def _bce_logits_forward(z: np.ndarray, y: np.ndarray, pos_weight: np.ndarray | None
                        ) -> np.ndarray:
    softplus_neg = np.log1p(np.exp(-np.abs(z))) + np.maximum(-z, z.dtype.type(0))
    scale = 1 if pos_weight is None else 1 + (pos_weight - 1) * y
    return (1 - y) * z + scale * softplus_neg


def _bce_logits_backward(xp: Any, ctx: Any, g: Any, z: Any, y: Any, pos_weight: Any) -> tuple:
    """L = (1-y) z + (1 + (w-1) y) softplus(-z): dL/dz = (1-y) - (1 + (w-1) y) sigmoid(-z),
    dL/dy = -z + (w-1) softplus(-z), dL/dw = y softplus(-z)."""
    need_z, need_y, need_w = ctx.needs_input_grad
    scale = 1 if pos_weight is None else 1 + (pos_weight - 1) * y
    grad_z = g * ((1 - y) - scale * xp.sigmoid(-z)) if need_z else None
    grad_y = grad_w = None
    if need_y:
        grad_y = -g * z
        if pos_weight is not None:
            grad_y = grad_y + g * (pos_weight - 1) * _softplus_neg(xp, z)
    if need_w:
        grad_w = g * y * _softplus_neg(xp, z)
    return grad_z, grad_y, grad_w


BCE = register("binary_cross_entropy", _bce_forward, _bce_backward, saves=("p", "y"),
               source="d/dp -(y log p + (1-y) log(1-p)); PyTorch's clamps (-100, eps 1e-12)")
BCE_LOGITS = register("binary_cross_entropy_with_logits", _bce_logits_forward,
                      _bce_logits_backward, saves=("z", "y", "pos_weight"),
                      source="stable form via softplus(-z) = log1p(exp(-|z|)) + max(-z, 0)")


def bce_elements(input: Tensor, target: Tensor) -> Tensor:
    """Unreduced, unweighted binary cross-entropy of probabilities `input`."""
    y = target._data.astype(input._data.dtype, copy=False)
    return apply_op(BCE, (input, target), (input._data, y))


def bce_with_logits_elements(input: Tensor, target: Tensor, pos_weight: Tensor | None) -> Tensor:
    """Unreduced, unweighted binary cross-entropy of logits `input` (stable)."""
    dtype = input._data.dtype
    y = target._data.astype(dtype, copy=False)
    w = None if pos_weight is None else pos_weight._data.astype(dtype, copy=False)
    return apply_op(BCE_LOGITS, (input, target, pos_weight), (input._data, y, w))


# ----- constant padding ---------------------------------------------------------------


def _pad_forward(x: np.ndarray, widths: tuple[tuple[int, int], ...], value: float) -> np.ndarray:
    return np.pad(x, widths, constant_values=value)


def _pad_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    shape = ctx.input_metadata[0][0]
    region = tuple(slice(before, before + n) for (before, _), n in zip(ctx.params["widths"], shape,
                                                                       strict=True))
    return (xp.getitem(g, region),)


PAD = register("pad", _pad_forward, _pad_backward, source="the gradient of the copied region")


def pad_constant(input: Tensor, widths: tuple[tuple[int, int], ...], value: float) -> Tensor:
    """`input` with (before, after) elements of `value` added per dim (non-negative widths)."""
    return apply_op(PAD, (input,), (input._data,), {"widths": widths, "value": value})


__all__ = ["softmax", "log_softmax"]

METHODS = {"softmax": softmax, "log_softmax": log_softmax}
