"""Reductions over `dim` (int, tuple or None; negative allowed) with `keepdim`.

PyTorch conventions (research/eager_autograd.md §2.5): an empty dim tuple means all
dims; integer/bool sums give int64; mean of an integer tensor is an error.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jitgrad.eager import dtypes
from jitgrad.eager.ops.registry import apply_op, register
from jitgrad.eager.tensor import Tensor, normalize_dim


def normalize_dims(dim: Any, ndim: int) -> tuple[int, ...] | None:
    """`dim` as a sorted tuple of non-negative dims, or None for all dims."""
    if dim is None:
        return None
    if isinstance(dim, (list, tuple)):
        if len(dim) == 0:
            return None
        dims = tuple(sorted(normalize_dim(int(d), ndim) for d in dim))
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"dim {list(dim)} appears multiple times in the list of dims")
        return dims
    return (normalize_dim(int(dim), ndim),)


def restore_reduced(xp: Any, g: Any, shape: tuple[int, ...], dims: tuple[int, ...] | None,
                    keepdim: bool) -> Any:
    """Reshape a reduction's gradient so it broadcasts against the input `shape`."""
    if keepdim or not shape:
        return g
    if dims is None:
        return xp.reshape(g, (1,) * len(shape))
    kept = tuple(1 if i in dims else s for i, s in enumerate(shape))
    return xp.reshape(g, kept)


def _sum_forward(x: np.ndarray, dims: tuple[int, ...] | None, keepdim: bool,
                 out_dtype: Any) -> np.ndarray:
    axis = dims if x.ndim else None
    return np.asarray(np.sum(x, axis=axis, keepdims=keepdim and x.ndim > 0, dtype=out_dtype))


def _sum_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    shape = ctx.input_metadata[0][0]
    g = restore_reduced(xp, g, shape, ctx.params["dims"], ctx.params["keepdim"])
    return (xp.expand(g, shape),)


def _mean_forward(x: np.ndarray, dims: tuple[int, ...] | None, keepdim: bool) -> np.ndarray:
    axis = dims if x.ndim else None
    return np.asarray(np.mean(x, axis=axis, keepdims=keepdim and x.ndim > 0))


def _mean_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    shape = ctx.input_metadata[0][0]
    dims = ctx.params["dims"]
    count = int(np.prod([shape[d] for d in (dims if dims is not None else range(len(shape)))]))
    g = restore_reduced(xp, g, shape, dims, ctx.params["keepdim"])
    return (xp.expand(g / count, shape),)


SUM = register("sum", _sum_forward, _sum_backward, source="d(sum x)/dx_i = 1")
MEAN = register("mean", _mean_forward, _mean_backward, source="d(mean x)/dx_i = 1/N")


def sum(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:  # noqa: A001
    """Sum over `dim` (all dims by default). Integer and bool inputs sum to int64."""
    data = input._data
    if dtype is not None:
        out_dtype = dtypes.to_dtype(dtype).np
    elif data.dtype.kind in "biu":
        out_dtype = np.dtype(np.int64)
    else:
        out_dtype = None
    dims = normalize_dims(dim, data.ndim)
    return apply_op(SUM, (input,), (data,),
                    {"dims": dims, "keepdim": bool(keepdim), "out_dtype": out_dtype})


def mean(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """Arithmetic mean over `dim`. Raises RuntimeError for integer inputs (as PyTorch)."""
    data = input._data
    if dtype is not None:
        data = data.astype(dtypes.to_dtype(dtype).np)
    if data.dtype.kind != "f":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {input.dtype.name}; convert first, e.g. t.float().mean()")
    return apply_op(MEAN, (input,), (data,),
                    {"dims": normalize_dims(dim, data.ndim), "keepdim": bool(keepdim)})


__all__ = ["sum", "mean"]

METHODS = {"sum": sum, "mean": mean}
