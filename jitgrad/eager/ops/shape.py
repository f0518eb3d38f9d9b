"""Shape and view ops: reshape/view, permute/transpose, expand, squeeze/unsqueeze, flatten.

View ops return tensors sharing storage with their input (see jitgrad.eager.views);
`reshape` is a view when numpy can express it as one and a copy otherwise, exactly
numpy's rule (and PyTorch's).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jitgrad.eager.ops.registry import apply_op, register
from jitgrad.eager.tensor import Tensor, normalize_dim
from jitgrad.eager.views import make_view


def _shape_arg(shape: tuple) -> tuple:
    """Accept `f(2, 3)`, `f((2, 3))` and `f([2, 3])` like PyTorch."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def infer_shape(shape: tuple[int, ...], numel: int, original: tuple[int, ...]) -> tuple[int, ...]:
    """Resolve one -1 in `shape`. Raises RuntimeError when the sizes do not fit."""
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            if s < 0:
                raise RuntimeError(f"invalid shape dimension {s}")
            known *= s
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel} "
                           f"(input shape {list(original)})")
    return shape


def _reshape_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (xp.reshape(g, ctx.input_metadata[0][0]),)


def _permute_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (xp.permute(g, tuple(np.argsort(ctx.params["dims"]))),)


def _expand_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (g,)  # the engine sums the broadcast gradient down to the input's shape


RESHAPE = register("reshape", lambda x, shape: np.reshape(x, shape), _reshape_backward,
                   source="reshape moves no values")
PERMUTE = register("permute", lambda x, dims: np.transpose(x, dims), _permute_backward,
                   source="inverse permutation")
EXPAND = register("expand", lambda x, shape: np.broadcast_to(x, shape), _expand_backward,
                  source="sum over broadcast dims")


def _view_of(x: Tensor, op: Any, params: dict[str, Any]) -> Tensor:
    out = apply_op(op, (x,), (x._data,), params)
    return make_view(x, out, op, params)


def reshape(input: Tensor, *shape: Any) -> Tensor:
    """Same data with a new shape (one dim may be -1): a view when strides allow, else a copy."""
    data = input._data
    target = infer_shape(_shape_arg(shape), data.size, data.shape)
    params = {"shape": target}
    try:
        np.reshape(data, target, copy=False)
    except ValueError:
        return apply_op(RESHAPE, (input,), (np.ascontiguousarray(data),), params)
    return _view_of(input, RESHAPE, params)


def view(input: Tensor, *shape: Any) -> Tensor:
    """A view with a new shape. Raises RuntimeError when the strides make that impossible."""
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int)):
        from jitgrad.eager.ops.creation import view_as_dtype

        return view_as_dtype(input, shape[0])
    data = input._data
    target = infer_shape(_shape_arg(shape), data.size, data.shape)
    try:
        np.reshape(data, target, copy=False)
    except ValueError:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead.") from None
    return _view_of(input, RESHAPE, {"shape": target})


def permute(input: Tensor, *dims: Any) -> Tensor:
    """Reorder dims (a view). Raises RuntimeError unless `dims` is a permutation."""
    ndim = input._data.ndim
    dims = tuple(normalize_dim(d, ndim) for d in _shape_arg(dims))
    if sorted(dims) != list(range(ndim)):
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {ndim} is not equal to len(dims) = {len(dims)}"
                           if len(dims) != ndim else f"permute(): dims {list(dims)} repeat a dim")
    return _view_of(input, PERMUTE, {"dims": dims})


def expand(input: Tensor, *sizes: Any) -> Tensor:
    """Broadcast to `sizes` without copying (-1 keeps a dim). New leading dims are allowed."""
    data = input._data
    sizes = _shape_arg(sizes)
    lead = len(sizes) - data.ndim
    if lead < 0:
        raise RuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater "
                           f"or equal to the number of dimensions in the tensor ({data.ndim})")
    target = []
    for i, s in enumerate(sizes):
        current = data.shape[i - lead] if i >= lead else None
        if s == -1:
            if current is None:
                raise RuntimeError("expand: -1 is not allowed in a leading, non-existing dimension")
            s = current
        elif current is not None and current != 1 and current != s:
            raise RuntimeError(
                f"The expanded size of the tensor ({s}) must match the existing size ({current}) "
                f"at non-singleton dimension {i}.  Target sizes: {list(sizes)}.  "
                f"Tensor sizes: {list(data.shape)}")
        target.append(s)
    return _view_of(input, EXPAND, {"shape": tuple(target)})


__all__ = ["reshape", "permute"]

METHODS = {"reshape": reshape, "view": view, "permute": permute, "expand": expand}
