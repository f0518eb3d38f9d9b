"""Rearranging copies: cat/stack (joining), repeat/tile, flip, roll, tril/triu,
repeat_interleave.

Unlike the view ops in `shape.py`, these return new storage. Their backward formulas
move the gradient back where each element came from (split for cat, unbind for stack,
summing tiles for repeat, the inverse flip/roll, a mask for tril/triu, index-add for
repeat_interleave). Errors follow research/eager_autograd.md §2.7.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from jitgrad.eager import dtypes
from jitgrad.eager.ops._binary import cast_operands
from jitgrad.eager.ops.creation import int_sizes
from jitgrad.eager.ops.registry import apply_op, register
from jitgrad.eager.tensor import Tensor, normalize_dim


def along(dim: int, index: Any) -> tuple:
    """A numpy index applying `index` (int, slice or array) to dimension `dim`.

    The trailing `...` makes numpy return a (0-d) array view even when every dim gets
    an int, where plain `x[1]` would return a scalar copy.
    """
    return (slice(None),) * dim + (index, Ellipsis)


def _skipped(shape: tuple[int, ...], result_ndim: int) -> bool:
    """Whether cat's legacy rule skips an input of this shape: 1-D empty, joined to more dims."""
    return shape == (0,) and result_ndim != 1


def _cat_forward(*arrays: np.ndarray, dim: int) -> np.ndarray:
    ndim = max(a.ndim for a in arrays)
    return np.concatenate([a for a in arrays if not _skipped(a.shape, ndim)], axis=dim)


def _cat_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    """Each input's slice of g; a skipped 1-D empty input gets an empty gradient (it stays
    in the graph, as torch's cat keeps every input as an edge)."""
    dim = ctx.params["dim"]
    grads, start = [], 0
    for need, (shape, _) in zip(ctx.needs_input_grad, ctx.input_metadata, strict=True):
        if _skipped(shape, g.ndim):
            grads.append(xp.reshape(xp.getitem(g, along(0, slice(0, 0))), (0,)) if need else None)
            continue
        size = shape[dim]
        grads.append(xp.getitem(g, along(dim, slice(start, start + size))) if need else None)
        start += size
    return tuple(grads)


def _stack_forward(*arrays: np.ndarray, dim: int) -> np.ndarray:
    return np.stack(arrays, axis=dim)


def _stack_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    dim = ctx.params["dim"]
    return tuple(xp.getitem(g, along(dim, i)) if need else None
                 for i, need in enumerate(ctx.needs_input_grad))


def _repeat_forward(x: np.ndarray, repeats: tuple[int, ...]) -> np.ndarray:
    padded = (1,) * (len(repeats) - x.ndim) + x.shape
    return np.tile(x.reshape(padded), repeats)


def _repeat_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    """Each output dim of size r*s is r tiles of s: view it as (r, s) and sum the tiles."""
    shape = ctx.input_metadata[0][0]
    repeats = ctx.params["repeats"]
    padded = (1,) * (len(repeats) - len(shape)) + shape
    split_shape = tuple(n for pair in zip(repeats, padded, strict=True) for n in pair)
    tiles = tuple(range(0, 2 * len(repeats), 2))
    return (xp.reshape(xp.sum(xp.reshape(g, split_shape), tiles), shape),)


def _flip_forward(x: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    return np.flip(x, dims).copy()


def _flip_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (xp.flip(g, ctx.params["dims"]),)


def _roll_forward(x: np.ndarray, shifts: tuple[int, ...],
                  dims: tuple[int, ...] | None) -> np.ndarray:
    return np.roll(x, shifts, axis=dims)


def _roll_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (xp.roll(g, tuple(-s for s in ctx.params["shifts"]), ctx.params["dims"]),)


def triangle_mask(shape: tuple[int, ...], diagonal: int, upper: bool) -> np.ndarray:
    """bool mask of the last two dims kept by triu (upper) or tril, broadcastable to `shape`."""
    ones = np.ones(shape[-2:], dtype=np.bool_)
    return np.triu(ones, diagonal) if upper else np.tril(ones, diagonal)


def _tril_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (xp.where(triangle_mask(ctx.input_metadata[0][0], ctx.params["diagonal"], False), g, 0),)


def _triu_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (xp.where(triangle_mask(ctx.input_metadata[0][0], ctx.params["diagonal"], True), g, 0),)


def _repeat_interleave_forward(x: np.ndarray, repeats: Any, dim: int) -> np.ndarray:
    return np.repeat(x, repeats, axis=dim)


def _repeat_interleave_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    shape = ctx.input_metadata[0][0]
    dim, repeats = ctx.params["dim"], ctx.params["repeats"]
    source = np.repeat(np.arange(shape[dim]), repeats)  # input index of each output slice
    return (xp.index_add_into(shape, along(dim, source), g),)


CAT = register("cat", _cat_forward, _cat_backward, source="split g along dim")
STACK = register("stack", _stack_forward, _stack_backward, source="unbind g along dim")
REPEAT = register("repeat", _repeat_forward, _repeat_backward, source="sum over the tiles")
FLIP = register("flip", _flip_forward, _flip_backward, source="flip is its own inverse",
                elementwise=True)
ROLL = register("roll", _roll_forward, _roll_backward, source="roll back by -shifts")
TRIL = register("tril", lambda x, diagonal: np.tril(x, diagonal), _tril_backward,
                source="mask g like the output")
TRIU = register("triu", lambda x, diagonal: np.triu(x, diagonal), _triu_backward,
                source="mask g like the output")
REPEAT_INTERLEAVE = register("repeat_interleave", _repeat_interleave_forward,
                             _repeat_interleave_backward,
                             source="sum g over the copies of each element")


def _joined(tensors: Sequence[Tensor], name: str) -> tuple[tuple[Tensor, ...], np.dtype]:
    """The tensors and their common dtype (PyTorch promotes across cat/stack inputs)."""
    if isinstance(tensors, Tensor):
        raise TypeError(f"{name}(): argument 'tensors' must be a sequence of Tensors, not Tensor")
    tensors = tuple(tensors)
    if not tensors:
        if name == "stack":
            raise RuntimeError("stack expects a non-empty TensorList")
        raise ValueError(f"{name}(): expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}(): expected Tensor as element {i} in argument 0, but got "
                            f"{type(t).__name__}")
    result = dtypes.from_numpy_dtype(tensors[0]._data.dtype)
    for t in tensors[1:]:
        result = dtypes.promote_types(result, dtypes.from_numpy_dtype(t._data.dtype))
    return tensors, cast(np.dtype, result.np)  # promoted from arrays' dtypes: never bfloat16


def cat(tensors: Sequence[Tensor], dim: int = 0, *, axis: int | None = None) -> Tensor:
    """Concatenate along an existing dim; 1-D empty tensors are skipped (legacy rule).

    Dtype: the promoted dtype of the inputs.
    Raises RuntimeError for 0-d inputs, differing ranks or sizes outside `dim`.
    """
    tensors, np_dtype = _joined(tensors, "cat")
    dim = dim if axis is None else axis
    for i, t in enumerate(tensors):
        if t._data.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    # legacy rule: 1-D empty tensors joined to more dims are skipped (in the checks and
    # the forward; they stay inputs of the op, so autograd keeps their edges)
    ndim = max(t._data.ndim for t in tensors)
    kept_at = [i for i, t in enumerate(tensors) if not _skipped(t._data.shape, ndim)]
    ref = tensors[kept_at[0]]._data.shape
    d = normalize_dim(dim, len(ref))
    for i in kept_at[1:]:
        shape = tensors[i]._data.shape
        if len(shape) != len(ref):
            raise RuntimeError(f"Tensors must have same number of dimensions: got {len(ref)} and "
                               f"{len(shape)}")
        for j, (a, b) in enumerate(zip(ref, shape, strict=True)):
            if j != d and a != b:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size {a} but "
                    f"got size {b} for tensor number {i} in the list.")
    return apply_op(CAT, tensors, cast_operands(tensors, np_dtype), {"dim": d})


concat = concatenate = cat


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join equally shaped tensors along a new dim `dim` (negative counts from ndim + 1).

    Raises RuntimeError naming the first two shapes that differ.
    """
    tensors, np_dtype = _joined(tensors, "stack")
    ref = tensors[0]._data.shape
    for i, t in enumerate(tensors[1:], 1):
        if t._data.shape != ref:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(ref)} "
                               f"at entry 0 and {list(t._data.shape)} at entry {i}")
    d = normalize_dim(dim, len(ref) + 1)
    return apply_op(STACK, tensors, cast_operands(tensors, np_dtype), {"dim": d})


def hstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenate along dim 1, or dim 0 when the inputs are 1-D (0-d become 1-D)."""
    tensors = [t.reshape(1) if t._data.ndim == 0 else t for t in tensors]
    return cat(tensors, 0 if tensors and tensors[0]._data.ndim == 1 else 1)


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenate along dim 0 after making every input at least 2-D (as rows)."""
    return cat([t.reshape(1, -1) if t._data.ndim < 2 else t for t in tensors], 0)


def atleast_1d(*tensors: Any) -> Any:
    """Each tensor with at least 1 dim (0-d becomes shape (1,)); one tensor or a tuple."""
    return _each(tensors, lambda t: t.reshape(1) if t._data.ndim == 0 else t)


def atleast_2d(*tensors: Any) -> Any:
    """Each tensor with at least 2 dims: 0-d -> (1, 1), (n,) -> (1, n)."""
    return _each(tensors, lambda t: t.reshape(1, -1) if t._data.ndim < 2 else t)


def atleast_3d(*tensors: Any) -> Any:
    """Each tensor with at least 3 dims: 0-d -> (1, 1, 1), (n,) -> (1, n, 1), (m, n) -> (m, n, 1).
    """
    def lift(t: Tensor) -> Tensor:
        shape = t._data.shape
        if len(shape) >= 3:
            return t
        return t.reshape((1, -1, 1) if len(shape) < 2 else shape + (1,))
    return _each(tensors, lift)


def _each(tensors: tuple, fn: Any) -> Any:
    """PyTorch's atleast_*: one tensor in, one out; several (or a sequence) in, a tuple out."""
    if len(tensors) == 1 and isinstance(tensors[0], Tensor):
        return fn(tensors[0])
    items = tensors[0] if len(tensors) == 1 else tensors
    return tuple(fn(t) for t in items)


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenate along dim 2 after making every input at least 3-D."""
    return cat([atleast_3d(t) for t in tensors], 2)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """Stack 0-d/1-D inputs as columns (2-D inputs are kept) and concatenate along dim 1."""
    return cat([t.reshape(-1, 1) if t._data.ndim < 2 else t for t in tensors], 1)


def repeat(input: Tensor, *repeats: Any) -> Tensor:
    """Tile the tensor `repeats[i]` times along each dim (extra leading repeats add dims).

    Raises RuntimeError when fewer repeats than dims are given.
    """
    if len(repeats) == 1 and isinstance(repeats[0], (tuple, list)):
        repeats = tuple(repeats[0])
    repeats = int_sizes(repeats, "repeats")
    if len(repeats) < input._data.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of "
                           f"dimensions of tensor (repeats {list(repeats)} for shape "
                           f"{list(input._data.shape)})")
    if any(r < 0 for r in repeats):
        raise RuntimeError(f"Trying to create tensor with negative dimension: repeats "
                           f"{list(repeats)} for shape {list(input._data.shape)}")
    return apply_op(REPEAT, (input,), (input._data,), {"repeats": repeats})


def tile(input: Tensor, dims: Sequence[int]) -> Tensor:
    """`repeat`, with missing leading repeats taken as 1."""
    dims = tuple(int(d) for d in dims)
    return repeat(input, (1,) * (input._data.ndim - len(dims)) + dims)


def _tile_method(self: Tensor, *dims: Any) -> Tensor:
    """`x.tile(2, 2)` or `x.tile((2, 2))`: the method takes varargs."""
    return tile(self, dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims)


def _dims_arg(dims: Any, ndim: int) -> tuple[int, ...]:
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    out = tuple(normalize_dim(int(d), ndim) for d in dims)
    for d in out:
        if out.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return out


def flip(input: Tensor, dims: Any) -> Tensor:
    """Reverse the order of elements along `dims` (a copy, as in PyTorch)."""
    return apply_op(FLIP, (input,), (input._data,), {"dims": _dims_arg(dims, input._data.ndim)})


def _flip_method(self: Tensor, *dims: Any, **kwargs: Any) -> Tensor:
    """`x.flip(0, 1)`, `x.flip([0, 1])` or `x.flip(dims=(0, 1))`: the method takes varargs."""
    if kwargs or not dims:
        return flip(self, *dims, **kwargs)
    return flip(self, dims[0] if len(dims) == 1 else dims)


def fliplr(input: Tensor) -> Tensor:
    """Reverse the columns (dim 1). Raises RuntimeError for inputs below 2-D."""
    if input._data.ndim < 2:
        raise RuntimeError(f"Input must be >= 2-d. (got shape {list(input._data.shape)})")
    return flip(input, 1)


def flipud(input: Tensor) -> Tensor:
    """Reverse the rows (dim 0). Raises RuntimeError for 0-d inputs."""
    if input._data.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, 0)


def roll(input: Tensor, shifts: Any, dims: Any = None) -> Tensor:
    """Shift elements cyclically by `shifts` along `dims` (the flattened tensor when None).

    Raises RuntimeError when shifts and dims differ in length.
    """
    shifts_t = tuple(shifts) if isinstance(shifts, (tuple, list)) else (shifts,)
    shifts_t = tuple(int(s) for s in shifts_t)
    if dims is None:
        if len(shifts_t) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts_t)}, dims:0 "
                               "(without dims, roll takes one shift for the flattened tensor)")
        dims_t = None
    else:
        dims_t = _dims_arg(dims, input._data.ndim)
        if len(dims_t) != len(shifts_t):
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts_t)}, "
                               f"dims:{len(dims_t)}")
    return apply_op(ROLL, (input,), (input._data,), {"shifts": shifts_t, "dims": dims_t})


def _triangle(input: Tensor, diagonal: int, upper: bool) -> Tensor:
    if input._data.ndim < 2:
        name = "triu" if upper else "tril"
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions (got shape "
                           f"{list(input._data.shape)})")
    return apply_op(TRIU if upper else TRIL, (input,), (input._data,), {"diagonal": int(diagonal)})


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """Zero the elements above the `diagonal`-th diagonal of the last two dims."""
    return _triangle(input, diagonal, False)


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """Zero the elements below the `diagonal`-th diagonal of the last two dims."""
    return _triangle(input, diagonal, True)


def repeat_interleave(input: Tensor, repeats: Any = None, dim: int | None = None, *,
                      output_size: int | None = None) -> Tensor:
    """Repeat each element (or slice along `dim`) `repeats` times (int or one count per element).

    With a single int64 tensor argument, returns indices repeated by its counts
    (`repeat_interleave(tensor([2, 1]))` -> [0, 0, 1]). Flattens first when dim is None.
    Raises RuntimeError when the counts do not match the dim's size.
    """
    if repeats is None:
        positions = Tensor._make(np.arange(input._data.shape[0], dtype=np.int64))
        return repeat_interleave(positions, input, 0)
    if dim is None:
        return repeat_interleave(input.reshape(-1), repeats, 0)
    d = normalize_dim(dim, input._data.ndim)
    if isinstance(repeats, Tensor):
        counts = np.array(repeats._data, dtype=np.int64, subok=True).reshape(-1)
        reps: Any = int(counts[0]) if counts.size == 1 else counts
    else:
        reps = int(repeats)
    if isinstance(reps, np.ndarray) and reps.shape[0] != input._data.shape[d]:
        raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                           f"repeats.size(0) = {reps.shape[0]} and input.size({d}) = "
                           f"{input._data.shape[d]}")
    if np.any(np.asarray(reps) < 0):
        raise RuntimeError(f"Repeats must be non-negative (got {reps})")
    return apply_op(REPEAT_INTERLEAVE, (input,), (input._data,), {"repeats": reps, "dim": d})


__all__ = ["cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack",
           "atleast_1d", "atleast_2d", "atleast_3d", "tile", "flip", "fliplr", "flipud", "roll",
           "tril", "triu", "repeat_interleave"]

METHODS = {"repeat": repeat, "tile": _tile_method, "flip": _flip_method, "fliplr": fliplr,
           "flipud": flipud, "roll": roll, "tril": tril, "triu": triu,
           "repeat_interleave": repeat_interleave}
