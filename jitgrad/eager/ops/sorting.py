"""Ops that order or select along one dim: sort, argsort, topk, max/min/median over a
dim (their values), cumulative sums and products.

Note [Values at indices]: every op here that returns `(values, indices)` computes the
int64 indices first with an op that has no gradient (argsort, argmax, ...), then takes
the values with the `take_along` op, whose backward puts the gradient back at those
indices (`xp.put_along_dim`). So the gradient goes to exactly the returned index
(PyTorch's rule for `max(dim)` ties, research/eager_autograd.md §2.5), and one backward
formula serves all of them.
`reduction.py` re-exports the public functions.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from jitgrad.eager import dtypes
from jitgrad.eager.ops.registry import apply_op, register
from jitgrad.eager.tensor import Tensor, normalize_dim
from jitgrad.eager.xp import scan_accumulating


def return_type(name: str, fields: tuple[str, str] = ("values", "indices")) -> type:
    """A `(values, indices)` namedtuple (or other `fields`) printed like
    `torch.return_types.<name>`."""
    cls = namedtuple(name, fields)  # type: ignore[misc]  # mypy types only a literal name

    def __repr__(self: Any) -> str:  # noqa: N807
        listed = ",\n".join(f"{field}={value!r}" for field, value in zip(fields, self, strict=True))
        return f"jitgrad.return_types.{name}(\n{listed})"

    cls.__repr__ = __repr__  # type: ignore[method-assign]  # torch.return_types' repr
    cls.__module__ = "jitgrad.return_types"
    return cls


SortResult = return_type("sort")
TopkResult = return_type("topk")


# ----- values at indices (see Note [Values at indices]) -------------------------------


def _take_forward(x: np.ndarray, index: np.ndarray, dim: int, squeeze: bool) -> np.ndarray:
    out = np.take_along_axis(x, index, axis=dim)
    return out.squeeze(dim) if squeeze else out


def _take_backward(xp: Any, ctx: Any, g: Any, index: Any) -> tuple:
    dim = ctx.params["dim"]
    if ctx.params["squeeze"]:
        g = xp.reshape(g, ctx.input_metadata[1][0])
    return xp.put_along_dim(ctx.input_metadata[0][0], dim, index, g), None


def _put_forward(values: np.ndarray, index: np.ndarray, shape: tuple[int, ...],
                 dim: int) -> np.ndarray:
    out = np.zeros(shape, dtype=values.dtype)
    np.put_along_axis(out, index, values, axis=dim)
    return out


def _put_backward(xp: Any, ctx: Any, g: Any, index: Any) -> tuple:
    return xp.take_along_dim(g, index, ctx.params["dim"]), None


TAKE_ALONG = register("take_along", _take_forward, _take_backward, saves=("index",),
                      inputs=("x", "index"), source="gradient flows to the selected index")
# sort's values: take_along laid out as its input and indices are (torch's sort writes
# values like its input, where a gather's result is C-contiguous)
SORT_VALUES = register("sort_values", _take_forward, _take_backward, saves=("index",),
                       inputs=("x", "index"), source="gradient flows to the selected index",
                       node_name="Sort", elementwise=True)
PUT_ALONG = register("put_along", _put_forward, _put_backward, saves=("index",),
                     inputs=("values", "index"), source="adjoint of take_along")


def take_along(input: Tensor, index: Tensor, dim: int, squeeze: bool = False) -> Tensor:
    """`input`'s values at int64 `index` (same ndim) along `dim`, optionally squeezing `dim`."""
    return apply_op(TAKE_ALONG, (input, index), (input._data, index._data),
                    {"dim": dim, "squeeze": squeeze})


def put_along(values: Tensor, index: Tensor, shape: tuple[int, ...], dim: int) -> Tensor:
    """zeros(shape) with `values` written at `index` along `dim` (indices distinct per slice)."""
    return apply_op(PUT_ALONG, (values, index), (values._data, index._data),
                    {"shape": tuple(shape), "dim": dim})


def values_and_indices(input: Tensor, index: Tensor, dim: int, keepdim: bool,
                       result: type) -> Any:
    """`result(values, indices)` for indices computed with keepdim=True along `dim`."""
    values = take_along(input, index, dim, squeeze=not keepdim)
    return result(values, index if keepdim else index.squeeze(dim))  # an op: traceable


def of_0d(input: Tensor, result: type) -> Any:
    """`result(input's value, index 0)`: a 0-d tensor is its own max, sort, median."""
    zero = Tensor._make(np.zeros((1,), dtype=np.int64))
    values = take_along(input.reshape(1), zero, 0, squeeze=True)
    return result(values, Tensor._make(np.zeros((), dtype=np.int64)))


# ----- sorting ------------------------------------------------------------------------


def _argsort_forward(data: np.ndarray, dim: int, descending: bool) -> np.ndarray:
    """Stable argsort along `dim`; descending keeps ties in their original order and
    puts NaN first (NaN counts as the largest value, as in PyTorch)."""
    if not descending:
        return np.argsort(data, axis=dim, kind="stable").astype(np.int64, copy=False)
    flipped = np.flip(data, axis=dim)
    order = np.flip(np.argsort(flipped, axis=dim, kind="stable"), axis=dim)
    return (data.shape[dim] - 1 - order).astype(np.int64)


def _topk_forward(data: np.ndarray, k: int, dim: int, largest: bool) -> np.ndarray:
    return np.take(_argsort_forward(data, dim, largest), np.arange(k), axis=dim)


ARGSORT = register("argsort", _argsort_forward, elementwise=True)
TOPK_INDICES = register("topk_indices", _topk_forward)


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
    """`(values, indices)` sorted along `dim`. Always stable (ties keep input order).

    Gradient: scattered back to `indices`. `stable` is accepted for PyTorch
    compatibility; numpy's stable sort is used either way.
    """
    data = input._data
    if data.ndim == 0:
        return of_0d(input, SortResult)
    dim = normalize_dim(dim, data.ndim)
    index = apply_op(ARGSORT, (input,), (data,), {"dim": dim, "descending": bool(descending)})
    values = apply_op(SORT_VALUES, (input, index), (data, index._data),
                      {"dim": dim, "squeeze": False})
    return SortResult(values, index)


def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """int64 indices that sort `input` along `dim` (stable; see `sort`)."""
    data = input._data
    if data.ndim == 0:
        return Tensor._make(np.zeros((), dtype=np.int64))
    return apply_op(ARGSORT, (input,), (data,),
                    {"dim": normalize_dim(dim, data.ndim), "descending": bool(descending)})


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:  # noqa: A002
    """`(values, indices)` of the k largest (or smallest) entries along `dim`.

    Values come out sorted (also when `sorted=False`, whose order PyTorch leaves open).
    Which of several tied entries is chosen is implementation-defined in PyTorch; here
    the earliest. Raises RuntimeError when k exceeds the dim's size.
    """
    data = input._data
    if data.dtype.kind == "b":
        raise RuntimeError("topk does not support bool dtypes on CPU; convert first, e.g. "
                           "t.int().topk(k)")
    dim = normalize_dim(dim, data.ndim)
    size = data.shape[dim] if data.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError(f"selected index k out of range: k={k} but dim {dim} of input shape "
                           f"{list(data.shape)} has size {size}; pass k <= {size}")
    if data.ndim == 0:
        return of_0d(input, TopkResult)
    index = apply_op(TOPK_INDICES, (input,), (data,),
                     {"k": int(k), "dim": dim, "largest": bool(largest)})
    return TopkResult(take_along(input, index, dim), index)


# ----- cumulative ops -----------------------------------------------------------------


def _cumsum_forward(x: np.ndarray, dim: int, out_dtype: Any) -> np.ndarray:
    if x.ndim == 0:
        return x.astype(out_dtype or x.dtype, copy=True)
    return scan_accumulating(np.add.accumulate, x, dim, out_dtype)


def _cumsum_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    shape = ctx.input_metadata[0][0]
    dim = ctx.params["dim"]
    if not shape or shape[dim] == 1:
        return (g,)
    return (_reversed_cumsum(xp, g, dim),)


def _reversed_cumsum(xp: Any, g: Any, dim: int) -> Any:
    """grad_i = sum_{j >= i} g_j, summed from the end as PyTorch's reversed_cumsum (never
    total - cumsum, which is inf - inf = NaN once a partial sum overflows)."""
    return xp.flip(xp.cumsum(xp.flip(g, (dim,)), dim), (dim,))


def _cumprod_forward(x: np.ndarray, dim: int, out_dtype: Any) -> np.ndarray:
    if x.ndim == 0:
        return x.astype(out_dtype or x.dtype, copy=True)
    return scan_accumulating(np.multiply.accumulate, x, dim, out_dtype)


def _cumprod_backward(xp: Any, ctx: Any, g: Any, x: Any, out: Any) -> tuple:
    """PyTorch's cumprod_backward (its O(n) form), zero-aware, in three regions of each
    slice along `dim`, split by its first zero z1 and second zero z2:
    - k < z1: sum_{i >= k, i < z1} out_i g_i / x_k (reverse cumulative sum, then divide);
    - k = z1: out_{z1 - 1} * sum_{z1 <= i < z2} g_i prod_{z1 < j <= i} x_j;
    - k > z1: 0.
    A slice without zeros is all first region, PyTorch's reversed_cumsum(out g) / x, so the
    values at inf and NaN are PyTorch's.
    """
    shape = ctx.input_metadata[0][0]
    dim = ctx.params["dim"]
    if not shape or shape[dim] == 1:
        return (g,)
    is_zero = x == 0
    zeros_before = xp.cumsum(xp.cast(is_zero, np.int64), dim)  # zeros at or before k
    before = zeros_before == 0
    w = xp.where(before, out * g, 0)
    first = _reversed_cumsum(xp, w, dim) / xp.where(is_zero, 1, x)
    between = (zeros_before == 1) & ~is_zero  # strictly between z1 and z2
    partial = xp.cumprod(xp.where(between, x, 1), dim)
    # g is masked before the product, as PyTorch's: 0 * inf past z2 is NaN there too
    tail = xp.sum(xp.where(zeros_before == 1, g, 0) * partial, (dim,), keepdim=True)
    ones = xp.ones_like(xp.getitem(out, (slice(None),) * dim + (slice(0, 1),)))
    head = xp.cat([ones, xp.getitem(out, (slice(None),) * dim + (slice(None, -1),))], dim)
    at_first_zero = is_zero & (zeros_before == 1)
    return (xp.where(before, first, xp.where(at_first_zero, head * tail, 0)),)


CUMSUM = register("cumsum", _cumsum_forward, _cumsum_backward,
                  source="reverse cumulative sum of g")
CUMPROD = register("cumprod", _cumprod_forward, _cumprod_backward, saves=("x", "out"),
                   source="product rule, zero-aware (PyTorch cumprod_backward)")


def _scan(op: Any, input: Tensor, dim: int, dtype: Any) -> Tensor:
    data = input._data
    out_dtype: np.dtype | None
    if dtype is not None:
        out_dtype = dtypes.numpy_dtype(dtypes.to_dtype(dtype), op.name)
    elif data.dtype.kind in "biu":
        out_dtype = np.dtype(np.int64)  # PyTorch accumulates integers in int64
    else:
        out_dtype = None
    return apply_op(op, (input,), (data,),
                    {"dim": normalize_dim(dim, data.ndim), "out_dtype": out_dtype})


def cumsum(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Cumulative sum along `dim`; integer/bool inputs accumulate in int64.

    Gradient: the reverse cumulative sum of g (`[1,2,3].cumsum(0)` -> grad `[3,2,1]`).
    """
    return _scan(CUMSUM, input, dim, dtype)


def cumprod(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Cumulative product along `dim`; integer/bool inputs accumulate in int64.

    Gradient is zero-aware: `[2,0,3]` -> grad `[1,8,0]` (for g = ones).
    """
    return _scan(CUMPROD, input, dim, dtype)
