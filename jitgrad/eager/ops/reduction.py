"""Reductions over `dim` (int, tuple or None; negative allowed) with `keepdim`.

PyTorch conventions (research/eager_autograd.md §2.5): an empty dim tuple means all
dims; integer/bool sums and products give int64; mean/var/std of an integer tensor are
errors; `axis=` and `keepdims=` are accepted as aliases, as PyTorch does. Gradient
conventions: ties of a full max/min/amax/amin share the gradient evenly (a full
max/min/median selects g at its hits, amax/amin multiply by the hit mask, as PyTorch);
`max(dim)` routes it to the returned index (see sorting.py, Note [Values at indices]);
prod and std are zero-safe. Over no elements, reductions with an identity give it (sum
0, prod 1, logsumexp -inf) and the others raise PyTorch's error
(`check_nonempty_reduction`). Float16/float32 sums accumulate accurately (Note
[Accumulating float sums]). The sorting and scan family lives in `sorting.py` and is
re-exported here.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from jitgrad.eager import dtypes
from jitgrad.eager.ops import comparison
from jitgrad.eager.ops.pointwise import not_implemented_for
from jitgrad.eager.ops.registry import apply_op, register
from jitgrad.eager.ops.sorting import (
    argsort,
    cumprod,
    cumsum,
    of_0d,
    return_type,
    sort,
    topk,
    values_and_indices,
)
from jitgrad.eager.tensor import Tensor, normalize_dim

MaxResult = return_type("max")
MinResult = return_type("min")
MedianResult = return_type("median")


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


def _alias(dim: Any, keepdim: bool, axis: Any, keepdims: bool | None) -> tuple[Any, bool]:
    """Resolve numpy's spellings `axis=` / `keepdims=`, which PyTorch accepts too."""
    if axis is not None:
        dim = axis
    return dim, bool(keepdim if keepdims is None else keepdims)


def restore_reduced(xp: Any, g: Any, shape: tuple[int, ...], dims: tuple[int, ...] | None,
                    keepdim: bool) -> Any:
    """Reshape a reduction's gradient so it broadcasts against the input `shape`."""
    if keepdim or not shape:
        return g
    if dims is None:
        return xp.reshape(g, (1,) * len(shape))
    kept = tuple(1 if i in dims else s for i, s in enumerate(shape))
    return xp.reshape(g, kept)


def reduced_count(shape: tuple[int, ...], dims: tuple[int, ...] | None) -> int:
    """How many input elements each output element of a reduction over `dims` reads."""
    return math.prod(shape[d] for d in (dims if dims is not None else range(len(shape))))


def _axis(x: np.ndarray, dims: tuple[int, ...] | None) -> tuple[int, ...] | None:
    return dims if x.ndim else None


# Forwards call ufunc.reduce directly: np.sum/np.amax/np.mean add 1.5-8 us of Python
# dispatch per call, more than the reduction itself costs on small tensors. numpy's stubs
# take reduce's keepdims only as a literal True or False (a bool only with out=), so the
# calls passing a bool keepdims carry `type: ignore[call-overload]`.

# Note [Accumulating float sums]: numpy sums pairwise (error ~ log n ulps, like PyTorch's
# cascade sum) only along the contiguous trailing dims of a C-contiguous array; along any
# other dim it adds naively in the input's dtype, so a float32 sum of 2^25 ones over dim 0
# stopped at 2^24. There, and for float16 always, sums accumulate in float64 and round
# once. Products never pair up: float16/float32 products always accumulate in float64.


_FLOAT16, _FLOAT32 = np.dtype(np.float16), np.dtype(np.float32)


def _sum_accumulator(x: np.ndarray, axis: tuple[int, ...] | None) -> Any:
    """dtype= for add.reduce of x over `axis` (sorted dims): float64 for float16, and for
    float32 unless numpy sums pairwise there (Note above); None keeps x's dtype."""
    dtype = x.dtype
    if dtype is _FLOAT32 or dtype == _FLOAT32:
        # pairwise: C-contiguous and the dims are the trailing ones (axis sorted, distinct)
        if x.flags.c_contiguous and (axis is None or axis[0] == x.ndim - len(axis)):
            return None
        return np.float64
    return np.float64 if dtype == _FLOAT16 else None


def accumulate_sum(x: np.ndarray, axis: tuple[int, ...] | None, keepdims: bool = False) -> Any:
    """add.reduce of a float array, in float64 where x's dtype would lose the sum (see
    Note [Accumulating float sums]); the caller rounds to x's dtype after its last step."""
    return np.add.reduce(  # type: ignore[call-overload]  # bool keepdims
        x, axis=axis, keepdims=keepdims, dtype=_sum_accumulator(x, axis))


def _float_accumulator(x: np.ndarray, out_dtype: Any) -> Any:
    """dtype= for a product: float64 for float16/float32 (Note [Accumulating float sums])."""
    if out_dtype is None and x.dtype.kind == "f" and x.dtype.itemsize < 8:
        return np.float64
    return out_dtype


# ----- sum, mean, prod ----------------------------------------------------------------


def _sum_forward(x: np.ndarray, dims: tuple[int, ...] | None, keepdim: bool,
                 out_dtype: Any) -> np.ndarray:
    axis, keep = _axis(x, dims), keepdim and x.ndim > 0
    accumulator = _sum_accumulator(x, axis) if out_dtype is None else None
    if accumulator is not None:
        return np.asarray(np.add.reduce(  # type: ignore[call-overload]  # bool keepdims
            x, axis=axis, dtype=accumulator, keepdims=keep)
                          .astype(x.dtype))
    return np.asarray(np.add.reduce(  # type: ignore[call-overload]  # bool keepdims
        x, axis=axis, dtype=out_dtype, keepdims=keep))


def _sum_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    shape = ctx.input_metadata[0][0]
    g = restore_reduced(xp, g, shape, ctx.params["dims"], ctx.params["keepdim"])
    return (xp.expand(g, shape),)


def _mean_forward(x: np.ndarray, dims: tuple[int, ...] | None, keepdim: bool) -> np.ndarray:
    axis = _axis(x, dims)
    total = accumulate_sum(x, axis, keepdim and x.ndim > 0)
    if x.dtype.kind == "f" and x.dtype.itemsize < 8:
        # the sum in PyTorch's accumulation type (float32 for float16/float32), then the
        # division: a float32 sum that overflows gives inf whatever the layout, as torch's
        # (a strided input accumulated in float64 gave a finite mean, a contiguous one inf)
        total = total.astype(np.float32, copy=False)
    return np.asarray((total / reduced_count(x.shape, axis)).astype(x.dtype, copy=False))


def _mean_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    shape = ctx.input_metadata[0][0]
    dims = ctx.params["dims"]
    g = restore_reduced(xp, g, shape, dims, ctx.params["keepdim"])
    return (xp.expand(g / reduced_count(shape, dims), shape),)


def _prod_forward(x: np.ndarray, dims: tuple[int, ...] | None, keepdim: bool,
                  out_dtype: Any) -> np.ndarray:
    out = np.multiply.reduce(  # type: ignore[call-overload]  # bool keepdims
        x, axis=_axis(x, dims), dtype=_float_accumulator(x, out_dtype),
        keepdims=keepdim and x.ndim > 0)
    return np.asarray(out.astype(out_dtype or x.dtype, copy=False))


def _prod_backward(xp: Any, ctx: Any, g: Any, x: Any, out: Any) -> tuple:
    """PyTorch's prod_backward: g * out / x when no element of x is zero; otherwise g times
    the product of the other entries of the slice (`_products_of_others`, no division),
    except a full product with two or more zeros, whose gradient is all 0.

    The choice is made on the whole tensor, as PyTorch's, so at inf or NaN the values
    (inf / inf = NaN, 0 * inf = NaN) are PyTorch's; it is a select, not a branch.
    """
    shape = ctx.input_metadata[0][0]
    if not shape:
        return (g,)
    dims, keepdim = ctx.params["dims"], ctx.params["keepdim"]
    g = restore_reduced(xp, g, shape, dims, keepdim)
    out = restore_reduced(xp, out, shape, dims, keepdim)
    is_zero = x == 0
    zeros = xp.sum(xp.cast(is_zero, np.int64), None)
    divided = g * (out / xp.where(is_zero, 1, x))  # selected only when there is no zero
    others = g * _products_of_others(xp, x, shape, dims)
    if dims is None:
        others = xp.where(zeros > 1, xp.zeros_like(others), others)
    return (xp.where(zeros == 0, divided, others),)


def _products_of_others(xp: Any, x: Any, shape: tuple[int, ...],
                        dims: tuple[int, ...] | None) -> Any:
    """For each element, the product of the other elements of its slice over `dims`, as
    PyTorch's prod_safe_zeros_backward: the exclusive cumulative product from the front
    times the one from the back (`[a, b, c]` -> `[b c, a c, a b]`)."""
    dims = tuple(range(len(shape))) if dims is None else dims
    order = tuple(d for d in range(len(shape)) if d not in dims) + dims
    kept = tuple(shape[d] for d in order[:len(order) - len(dims)])
    flat = xp.reshape(xp.permute(x, order), kept + (reduced_count(shape, dims),))
    last = len(kept)
    ones = xp.ones_like(xp.getitem(flat, (Ellipsis, slice(0, 1))))
    before = xp.cumprod(xp.cat([ones, xp.getitem(flat, (Ellipsis, slice(None, -1)))], last),
                        last)
    rest = xp.flip(xp.getitem(flat, (Ellipsis, slice(1, None))), (last,))
    after = xp.flip(xp.cumprod(xp.cat([ones, rest], last), last), (last,))
    products = xp.reshape(before * after, tuple(shape[d] for d in order))
    return xp.permute(products, tuple(order.index(d) for d in range(len(shape))))


SUM = register("sum", _sum_forward, _sum_backward, source="d(sum x)/dx_i = 1")
MEAN = register("mean", _mean_forward, _mean_backward, source="d(mean x)/dx_i = 1/N")
PROD = register("prod", _prod_forward, _prod_backward, saves=("x", "out"),
                source="product rule, zero-aware (PyTorch prod_backward)")


def _integer_accumulator(data: np.ndarray, dtype: Any, what: str) -> np.dtype | None:
    if dtype is not None:
        return dtypes.numpy_dtype(dtypes.to_dtype(dtype), what)
    return np.dtype(np.int64) if data.dtype.kind in "biu" else None


def sum(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None,  # noqa: A001
        axis: Any = None, keepdims: bool | None = None) -> Tensor:
    """Sum over `dim` (all dims by default). Integer and bool inputs sum to int64."""
    data = input._data
    dim, keepdim = _alias(dim, keepdim, axis, keepdims)
    dims = normalize_dims(dim, data.ndim)
    return apply_op(SUM, (input,), (data,),
                    {"dims": dims, "keepdim": keepdim,
                     "out_dtype": _integer_accumulator(data, dtype, "sum")})


def mean(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None,
         axis: Any = None, keepdims: bool | None = None) -> Tensor:
    """Arithmetic mean over `dim`. Raises RuntimeError for integer inputs (as PyTorch)."""
    data = input._data
    dim, keepdim = _alias(dim, keepdim, axis, keepdims)
    if dtype is not None:
        data = data.astype(dtypes.numpy_dtype(dtypes.to_dtype(dtype), "mean"))
    if data.dtype.kind != "f":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {input.dtype.name}; convert first, e.g. t.float().mean()")
    return apply_op(MEAN, (input,), (data,),
                    {"dims": normalize_dims(dim, data.ndim), "keepdim": keepdim})


def prod(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None,
         axis: Any = None, keepdims: bool | None = None) -> Tensor:
    """Product over `dim` (all dims by default); integer/bool inputs give int64.

    Gradient is zero-safe (no 0/0): see `_prod_backward`.
    """
    data = input._data
    dim, keepdim = _alias(dim, keepdim, axis, keepdims)
    return apply_op(PROD, (input,), (data,),
                    {"dims": normalize_dims(dim, data.ndim), "keepdim": keepdim,
                     "out_dtype": _integer_accumulator(data, dtype, "prod")})


# ----- extrema ------------------------------------------------------------------------


def _amax_forward(x: np.ndarray, dims: tuple[int, ...] | None, keepdim: bool) -> np.ndarray:
    return np.asarray(np.maximum.reduce(  # type: ignore[call-overload]  # bool keepdims
        x, axis=_axis(x, dims), keepdims=keepdim and x.ndim > 0))


def _amin_forward(x: np.ndarray, dims: tuple[int, ...] | None, keepdim: bool) -> np.ndarray:
    return np.asarray(np.minimum.reduce(  # type: ignore[call-overload]  # bool keepdims
        x, axis=_axis(x, dims), keepdims=keepdim and x.ndim > 0))


def _extremum_backward(xp: Any, ctx: Any, g: Any, x: Any, out: Any) -> tuple:
    """g shared evenly by every entry equal to the extremum ([1,3,3].max() -> [0,.5,.5])."""
    shape, np_dtype = ctx.input_metadata[0]
    dims, keepdim = ctx.params["dims"], ctx.params["keepdim"]
    g = restore_reduced(xp, g, shape, dims, keepdim)
    out = restore_reduced(xp, out, shape, dims, keepdim)
    hits = xp.cast(x == out, np_dtype)
    return (g * hits / xp.sum(hits, dims, True),)


def _evenly_distribute_backward(xp: Any, ctx: Any, g: Any, x: Any, out: Any) -> tuple:
    """g / (number of hits) at each hit of a full max/min/median, 0 elsewhere (selected,
    so an inf/NaN g stays off the other entries); a NaN result's hits are the NaNs.

    PyTorch's evenly_distribute_backward (CPU), unlike amax/amin's, which multiply g by the
    hit mask (and so spread an inf g as NaN, or NaN everywhere for a NaN result).
    """
    np_dtype = ctx.input_metadata[0][1]
    hits = xp.where(out != out, x != x, x == out)
    share = g / xp.sum(xp.cast(hits, np_dtype), None)
    return (xp.where(hits, share, 0.0),)


AMAX = register("amax", _amax_forward, _extremum_backward, saves=("x", "out"),
                source="g times the hit mask over the number of hits (PyTorch amax)")
AMIN = register("amin", _amin_forward, _extremum_backward, saves=("x", "out"),
                source="g times the hit mask over the number of hits (PyTorch amin)")
MAX_ALL = register("max", _amax_forward, _evenly_distribute_backward, saves=("x", "out"),
                   source="g selected at the hits, split evenly (PyTorch evenly_distribute)")
MIN_ALL = register("min", _amin_forward, _evenly_distribute_backward, saves=("x", "out"),
                   source="g selected at the hits, split evenly (PyTorch evenly_distribute)")


def check_nonempty_reduction(name: str, shape: tuple[int, ...], dims: tuple[int, ...] | None,
                             all_dims_error: type[Exception] = RuntimeError) -> None:
    """PyTorch's errors for a reduction without identity (max, argmax, ...) over no elements.

    Raises `all_dims_error` (RuntimeError for max/amax, IndexError for argmax, as PyTorch)
    when reducing all dims of an empty tensor, IndexError when a reduced dim has size 0.
    A size-0 dim that is kept is fine: the result is empty.
    """
    if dims is None:
        if math.prod(shape) == 0:
            raise all_dims_error(
                f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                f"Specify the reduction dim with the 'dim' argument (input shape {list(shape)})")
        return
    for d in dims:
        if shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size "
                             f"(input shape {list(shape)})")


def _extremum(op: Any, input: Tensor, dim: Any, keepdim: bool) -> Tensor:
    data = input._data
    dims = normalize_dims(dim, data.ndim)
    if data.ndim:
        check_nonempty_reduction(op.name, data.shape, dims)
    return apply_op(op, (input,), (data,), {"dims": dims, "keepdim": keepdim})


def amax(input: Tensor, dim: Any = (), keepdim: bool = False, *, axis: Any = None,
         keepdims: bool | None = None) -> Tensor:
    """Maximum over `dim` (all dims by default); gradient split evenly among ties."""
    dim, keepdim = _alias(dim, keepdim, axis, keepdims)
    return _extremum(AMAX, input, dim, keepdim)


def amin(input: Tensor, dim: Any = (), keepdim: bool = False, *, axis: Any = None,
         keepdims: bool | None = None) -> Tensor:
    """Minimum over `dim` (all dims by default); gradient split evenly among ties."""
    dim, keepdim = _alias(dim, keepdim, axis, keepdims)
    return _extremum(AMIN, input, dim, keepdim)


def _max_or_min(input: Tensor, dim: Any, keepdim: bool, largest: bool) -> Any:
    if isinstance(dim, Tensor):  # max(a, b): the elementwise maximum
        return comparison.maximum(input, dim) if largest else comparison.minimum(input, dim)
    if dim is None:
        return _extremum(MAX_ALL if largest else MIN_ALL, input, None, False)
    data = input._data
    d = normalize_dim(int(dim), data.ndim)
    if data.ndim:
        check_nonempty_reduction("max" if largest else "min", data.shape, (d,))
    result = MaxResult if largest else MinResult
    if data.ndim == 0:
        return of_0d(input, result)
    # first occurrence on ties; NaN wins
    index = apply_op(ARGMAX if largest else ARGMIN, (input,), (data,), {"dim": d, "keepdim": True})
    return values_and_indices(input, index, d, keepdim, result)


def max(input: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None,  # noqa: A001
        keepdims: bool | None = None) -> Any:
    """Full maximum (no dim), `(values, indices)` along `dim`, or `maximum(input, other)`.

    Gradient: a full max splits g evenly among ties; `max(dim)` sends it to the returned
    index, the first maximum (measured PyTorch behaviour, research §2.5). NaN propagates.
    """
    dim, keepdim = _alias(dim, keepdim, axis, keepdims)
    return _max_or_min(input, dim, keepdim, True)


def min(input: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None,  # noqa: A001
        keepdims: bool | None = None) -> Any:
    """Full minimum, `(values, indices)` along `dim`, or `minimum(input, other)` (see max)."""
    dim, keepdim = _alias(dim, keepdim, axis, keepdims)
    return _max_or_min(input, dim, keepdim, False)


ARGMAX = register("argmax", lambda x, dim, keepdim: _arg(np.argmax, x, dim, keepdim))
ARGMIN = register("argmin", lambda x, dim, keepdim: _arg(np.argmin, x, dim, keepdim))


def _arg(fn: Any, x: np.ndarray, dim: int | None, keepdim: bool) -> np.ndarray:
    if dim is None or x.ndim == 0:
        out = np.asarray(fn(x), dtype=np.int64)
        return out.reshape((1,) * x.ndim) if keepdim else out
    return np.asarray(fn(x, axis=dim, keepdims=keepdim), dtype=np.int64)


def _arg_extremum(op: Any, input: Tensor, dim: Any, keepdim: bool) -> Tensor:
    data = input._data
    if data.dtype.kind == "b":
        raise RuntimeError(f"{op.name}(): does not support bool input; convert first, e.g. "
                           f"t.int().{op.name}()")
    d = None if dim is None else normalize_dim(int(dim), data.ndim)
    if data.ndim:
        check_nonempty_reduction(op.name, data.shape, None if d is None else (d,), IndexError)
    return apply_op(op, (input,), (data,), {"dim": d, "keepdim": keepdim})


def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False, *, axis: Any = None,
           keepdims: bool | None = None) -> Tensor:
    """int64 index of the maximum (flattened when dim is None); first on ties, NaN wins."""
    dim, keepdim = _alias(dim, keepdim, axis, keepdims)
    return _arg_extremum(ARGMAX, input, dim, keepdim)


def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False, *, axis: Any = None,
           keepdims: bool | None = None) -> Tensor:
    """int64 index of the minimum (flattened when dim is None); first on ties, NaN wins."""
    dim, keepdim = _alias(dim, keepdim, axis, keepdims)
    return _arg_extremum(ARGMIN, input, dim, keepdim)


def _median_forward(x: np.ndarray, dims: None, keepdim: bool) -> np.ndarray:
    flat = np.sort(x, axis=None)  # NaN sorts last
    if flat.size == 0 or np.isnan(flat[-1]):
        return np.asarray(np.nan, dtype=x.dtype)
    return np.asarray(flat[(flat.size - 1) // 2])


def _argmedian_forward(x: np.ndarray, dim: int) -> np.ndarray:
    """Index of the lower median along `dim` (keepdims); a slice with NaN: its first NaN."""
    k = (x.shape[dim] - 1) // 2
    index = np.take(np.argsort(x, axis=dim, kind="stable"), [k], axis=dim)
    nans = np.isnan(x)
    if nans.any():
        index = np.where(nans.any(axis=dim, keepdims=True),
                         np.argmax(nans, axis=dim, keepdims=True), index)
    return index.astype(np.int64)


MEDIAN = register("median", _median_forward, _evenly_distribute_backward, saves=("x", "out"),
                  source="g selected at the hits, split evenly (PyTorch evenly_distribute)")
ARGMEDIAN = register("argmedian", _argmedian_forward)


def median(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """Lower median of all elements, or `(values, indices)` along `dim`; NaN propagates.

    Full reduction: gradient split evenly among entries equal to the median
    (`[1,2,2,3]` -> `[0,.5,.5,0]`); along a dim it goes to the returned index.
    """
    data = input._data
    if data.dtype.kind == "b":
        raise not_implemented_for("median_cpu", data.dtype)
    if dim is None:
        return apply_op(MEDIAN, (input,), (data,), {"dims": None, "keepdim": False})
    d = normalize_dim(int(dim), data.ndim)
    if data.ndim == 0:
        return of_0d(input, MedianResult)
    check_nonempty_reduction("median", data.shape, (d,))
    index = apply_op(ARGMEDIAN, (input,), (data,), {"dim": d})
    return values_and_indices(input, index, d, keepdim, MedianResult)


# ----- variance and standard deviation -------------------------------------------------


def _unrounded_var(x: np.ndarray, dims: tuple[int, ...] | None, keepdim: bool,
                   correction: float) -> np.ndarray:
    """The variance in float64 for float16/float32 x (x's dtype otherwise), not yet rounded:
    as PyTorch's Welford accumulation in double, neither the mean nor the squares overflow
    where the result does not (fuzz seed 630925: the variance of [3e38, 3e38] is 0, the
    standard deviation of [3e38, 1] is 1.5e38), and equal values give exactly 0."""
    axis = _axis(x, dims)
    keep = keepdim and x.ndim > 0
    n = reduced_count(x.shape, axis)
    wide = x.astype(_float_accumulator(x, None) or x.dtype, copy=False)
    mean = np.add.reduce(wide, axis=axis, keepdims=True) / n
    # the corrected two-pass mean (Chan, Golub & LeVeque 1983): the deviations' sum puts
    # back what rounding the mean lost, so equal values have variance exactly 0, as with
    # PyTorch's Welford mean (fuzz seed 651576: std of [a, a, a] was 2.7e-16, so its
    # gradient was 0.41 per element where torch's zero std gives 0)
    with np.errstate(invalid="ignore"):  # inf - inf of an infinite row: NaN either way
        mean = mean + np.add.reduce(wide - mean, axis=axis, keepdims=True) / n
    centered = wide - mean
    # PyTorch divides by max(0, N - correction): 0/0 = nan, positive/0 = inf
    dof = wide.dtype.type(n - correction if n > correction else 0)
    return np.add.reduce(  # type: ignore[call-overload]  # bool keepdims
        centered * centered, axis=axis, keepdims=keep) / dof


def _var_forward(x: np.ndarray, dims: tuple[int, ...] | None, keepdim: bool,
                 correction: float) -> np.ndarray:
    return np.asarray(_unrounded_var(x, dims, keepdim, correction).astype(x.dtype, copy=False))


def _std_forward(x: np.ndarray, dims: tuple[int, ...] | None, keepdim: bool,
                 correction: float) -> np.ndarray:
    out = np.sqrt(_unrounded_var(x, dims, keepdim, correction))
    return np.asarray(out.astype(x.dtype, copy=False))


def _centered_scaled(xp: Any, ctx: Any, x: Any) -> Any:
    """(x - mean) / max(0, N - correction), the building block of var/std gradients."""
    shape = ctx.input_metadata[0][0]
    dims = ctx.params["dims"]
    n = reduced_count(shape, dims)
    dof = n - ctx.params["correction"]
    centered = x - xp.sum(x, dims, True) / n
    return centered * (1.0 / dof if dof > 0 else math.inf)


def _var_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    shape = ctx.input_metadata[0][0]
    g = restore_reduced(xp, g, shape, ctx.params["dims"], ctx.params["keepdim"])
    return (2 * g * _centered_scaled(xp, ctx, x),)


def _std_backward(xp: Any, ctx: Any, g: Any, x: Any, out: Any) -> tuple:
    """var'/(2 std), and 0 where std == 0 (constant input, pytorch#4320)."""
    shape = ctx.input_metadata[0][0]
    dims, keepdim = ctx.params["dims"], ctx.params["keepdim"]
    g = restore_reduced(xp, g, shape, dims, keepdim)
    out = restore_reduced(xp, out, shape, dims, keepdim)
    zero = out == 0
    grad = g * _centered_scaled(xp, ctx, x) / xp.where(zero, 1, out)
    return (xp.where(zero, 0, grad),)


VAR = register("var", _var_forward, _var_backward, saves=("x",),
               source="d var / dx_i = 2 (x_i - mean) / (N - correction)")
STD = register("std", _std_forward, _std_backward, saves=("x", "out"),
               source="d std = d var / (2 std), 0 where std == 0")


def _var_args(input: Tensor, name: str, dim: Any, unbiased: Any, keepdim: bool,
              correction: Any) -> tuple[np.ndarray, dict[str, Any]]:
    data = input._data
    if data.dtype.kind != "f":
        raise RuntimeError(f"{name}(): std and var only support floating point and complex "
                           f"dtypes, got {input.dtype.name}; convert first, e.g. "
                           f"t.float().{name}()")
    if isinstance(dim, bool):  # var(input, unbiased): the legacy positional form
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    dims = normalize_dims(dim, data.ndim)
    n = reduced_count(data.shape, dims if data.ndim else None)
    if n - correction <= 0:
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the reduction factor (input numel divided by output numel).",
                      UserWarning, stacklevel=3)
    return data, {"dims": dims, "keepdim": keepdim, "correction": correction}


def var(input: Tensor, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: float | None = None, axis: Any = None, keepdims: bool | None = None) -> Tensor:
    """Variance over `dim` with Bessel's correction by default (`correction=1`).

    `unbiased=False` or `correction=0` gives the population variance. Warns (UserWarning)
    when N - correction <= 0; the result is then nan or inf, as in PyTorch.
    """
    dim, keepdim = _alias(dim, keepdim, axis, keepdims)
    data, params = _var_args(input, "var", dim, unbiased, keepdim, correction)
    return apply_op(VAR, (input,), (data,), params)


def std(input: Tensor, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: float | None = None, axis: Any = None, keepdims: bool | None = None) -> Tensor:
    """Standard deviation over `dim` (see `var`); gradient 0 where the result is 0."""
    dim, keepdim = _alias(dim, keepdim, axis, keepdims)
    data, params = _var_args(input, "std", dim, unbiased, keepdim, correction)
    return apply_op(STD, (input,), (data,), params)


def var_mean(input: Tensor, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False,
             *, correction: float | None = None) -> tuple[Tensor, Tensor]:
    """`(var, mean)` over `dim` (see `var`)."""
    return (var(input, dim, unbiased, keepdim, correction=correction),
            mean(input, None if isinstance(dim, bool) else dim, keepdim))


def std_mean(input: Tensor, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False,
             *, correction: float | None = None) -> tuple[Tensor, Tensor]:
    """`(std, mean)` over `dim` (see `std`)."""
    return (std(input, dim, unbiased, keepdim, correction=correction),
            mean(input, None if isinstance(dim, bool) else dim, keepdim))


# ----- logsumexp and norms ------------------------------------------------------------


def _logsumexp_forward(x: np.ndarray, dims: tuple[int, ...] | None, keepdim: bool) -> np.ndarray:
    axis = _axis(x, dims)
    shift = np.maximum.reduce(x, axis=axis, keepdims=True, initial=-np.inf)
    if not np.isfinite(shift).all():  # an all -inf (or empty) slice gives -inf (not nan)
        shift = np.where(np.isfinite(shift), shift, x.dtype.type(0))
    total = accumulate_sum(np.exp(x - shift), axis, True).astype(x.dtype, copy=False)
    out = np.log(total) + shift
    if not keepdim:
        out = out.reshape(()) if axis is None else out.squeeze(axis)
    return np.asarray(out)


def _logsumexp_backward(xp: Any, ctx: Any, g: Any, x: Any, out: Any) -> tuple:
    shape = ctx.input_metadata[0][0]
    dims, keepdim = ctx.params["dims"], ctx.params["keepdim"]
    g = restore_reduced(xp, g, shape, dims, keepdim)
    return (g * xp.exp(x - restore_reduced(xp, out, shape, dims, keepdim)),)


LOGSUMEXP = register("logsumexp", _logsumexp_forward, _logsumexp_backward, saves=("x", "out"),
                     source="d logsumexp = softmax(x)")


def logsumexp(input: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) over `dim`, shifted by the max; an all -inf slice gives -inf.

    Integer inputs give the default float dtype. Gradient: g * softmax(x) (NaN for an
    all -inf slice, as PyTorch).
    """
    data = input._data
    if data.dtype.kind != "f":
        data = data.astype(dtypes.get_default_dtype().np)
    return apply_op(LOGSUMEXP, (input,), (data,),
                    {"dims": normalize_dims(dim, data.ndim), "keepdim": bool(keepdim)})


def _vector_norm_forward(x: np.ndarray, ord: float, dims: tuple[int, ...] | None,  # noqa: A002
                         keepdim: bool) -> np.ndarray:
    axis = _axis(x, dims)
    keep = keepdim and x.ndim > 0
    if ord == 2:
        return np.sqrt(accumulate_sum(x * x, axis, keep)).astype(x.dtype, copy=False)
    magnitude = np.abs(x)
    if ord == math.inf:
        return np.asarray(np.amax(magnitude, axis=axis, keepdims=keep))
    if ord == -math.inf:
        return np.asarray(np.amin(magnitude, axis=axis, keepdims=keep))
    if ord == 0:
        return np.asarray(np.sum(magnitude != 0, axis=axis, keepdims=keep).astype(x.dtype))
    if ord == 1:
        return np.asarray(accumulate_sum(magnitude, axis, keep).astype(x.dtype, copy=False))
    total = accumulate_sum(magnitude ** ord, axis, keep)
    return np.asarray((total ** (1.0 / ord)).astype(x.dtype, copy=False))


def _vector_norm_backward(xp: Any, ctx: Any, g: Any, x: Any, out: Any) -> tuple:
    """PyTorch's norm_backward: 0 where the norm is 0 (norm'(0) = 0, pytorch#2421)."""
    shape, np_dtype = ctx.input_metadata[0]
    ord, dims, keepdim = ctx.params["ord"], ctx.params["dims"], ctx.params["keepdim"]  # noqa: A001
    g = restore_reduced(xp, g, shape, dims, keepdim)
    out = restore_reduced(xp, out, shape, dims, keepdim)
    if ord == 0:
        return (xp.zeros_like(x),)
    if ord == 1:
        return (g * xp.sign(x),)
    if ord in (math.inf, -math.inf):
        hits = xp.cast(xp.abs(x) == out, np_dtype)
        return (g * xp.sign(x) * hits / xp.sum(hits, dims, True),)
    zero_norm = out == 0
    safe_norm = xp.where(zero_norm, 1, out)
    if ord == 2:
        return (xp.where(zero_norm, 0, g * x / safe_norm),)
    is_zero = x == 0
    scaled = xp.sign(x) * xp.where(is_zero, 1, xp.abs(x)) ** (ord - 1)  # x |x|^(p-2)
    scaled = xp.where(is_zero, 0, scaled)
    return (xp.where(zero_norm, 0, g * scaled / safe_norm ** (ord - 1)),)


VECTOR_NORM = register("vector_norm", _vector_norm_forward, _vector_norm_backward,
                       saves=("x", "out"), source="d ||x||_p = x |x|^(p-2) / ||x||^(p-1)")


def vector_norm(input: Tensor, ord: float = 2, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
                dtype: Any = None) -> Tensor:
    """The p-norm `(sum |x|^ord)^(1/ord)` over `dim` (all dims by default).

    ord: any real, `inf` (max |x|), `-inf` (min |x|), 0 (count of nonzeros).
    Gradient 0 where the norm is 0 (as PyTorch). Raises RuntimeError on integer input.
    """
    data = input._data
    if dtype is not None:
        data = data.astype(dtypes.numpy_dtype(dtypes.to_dtype(dtype), "linalg.vector_norm"))
    if data.dtype.kind != "f":
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as "
                           f"input. Got {input.dtype.name}; convert first, e.g. t.float()")
    dims = normalize_dims(dim, data.ndim)
    if ord in (math.inf, -math.inf) and data.size == 0:
        _check_empty_inf_norm(float(ord), data.shape, dims)
    return apply_op(VECTOR_NORM, (input,), (data,),
                    {"ord": float(ord), "dims": dims, "keepdim": bool(keepdim)})


def _check_empty_inf_norm(ord: float, shape: tuple[int, ...],  # noqa: A002
                          dims: tuple[int, ...] | None) -> None:
    """The +-inf norm is a max/min: PyTorch's RuntimeError when it reduces no elements."""
    if dims is None:
        raise RuntimeError(f"linalg.vector_norm cannot compute the {ord} norm on an empty "
                           "tensor because the operation does not have an identity")
    for d in dims:
        if shape[d] == 0:
            raise RuntimeError(f"linalg.vector_norm cannot compute the {ord} norm on the "
                               f"dimension {d} because this dimension is empty and the "
                               "operation does not have an identity")


def norm(input: Tensor, p: Any = "fro", dim: Any = None, keepdim: bool = False,
         dtype: Any = None) -> Tensor:
    """`torch.norm`: p-norm of the entries over `dim` ('fro' = 2-norm of all entries).

    Raises RuntimeError for p='nuc' and other matrix norms (use vector norms).
    """
    if p == "fro" or p is None:
        p = 2
    elif isinstance(p, str):
        raise RuntimeError(f"norm: p={p!r} (a matrix norm) is not supported by jitgrad; "
                           "use p='fro' or a number")
    return vector_norm(input, p, dim, keepdim, dtype=dtype)


# ----- logical reductions (no gradient) -----------------------------------------------


def _logical_result(x: np.ndarray, out: Any) -> np.ndarray:
    # bool, except uint8 in, uint8 out (PyTorch's legacy rule for any/all)
    return np.asarray(out, dtype=np.uint8 if x.dtype == np.uint8 else np.bool_)


def _any_forward(x: np.ndarray, dims: tuple[int, ...] | None, keepdim: bool) -> np.ndarray:
    return _logical_result(x, np.any(x, axis=_axis(x, dims), keepdims=keepdim and x.ndim > 0))


def _all_forward(x: np.ndarray, dims: tuple[int, ...] | None, keepdim: bool) -> np.ndarray:
    return _logical_result(x, np.all(x, axis=_axis(x, dims), keepdims=keepdim and x.ndim > 0))


def _count_nonzero_forward(x: np.ndarray, dims: tuple[int, ...] | None) -> np.ndarray:
    return np.asarray(np.count_nonzero(x, axis=_axis(x, dims)), dtype=np.int64)


ANY = register("any", _any_forward)
ALL = register("all", _all_forward)
COUNT_NONZERO = register("count_nonzero", _count_nonzero_forward)


def _bool_reduce(op: Any, input: Tensor, dim: Any, keepdim: bool) -> Tensor:
    data = input._data
    return apply_op(op, (input,), (data,),
                    {"dims": normalize_dims(dim, data.ndim), "keepdim": keepdim})


def any(input: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None,  # noqa: A001
        keepdims: bool | None = None) -> Tensor:
    """True where any element over `dim` is nonzero (bool result)."""
    dim, keepdim = _alias(dim, keepdim, axis, keepdims)
    return _bool_reduce(ANY, input, dim, keepdim)


def all(input: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None,  # noqa: A001
        keepdims: bool | None = None) -> Tensor:
    """True where every element over `dim` is nonzero (bool result)."""
    dim, keepdim = _alias(dim, keepdim, axis, keepdims)
    return _bool_reduce(ALL, input, dim, keepdim)


def count_nonzero(input: Tensor, dim: Any = None) -> Tensor:
    """int64 count of nonzero elements over `dim` (all dims by default)."""
    data = input._data
    return apply_op(COUNT_NONZERO, (input,), (data,), {"dims": normalize_dims(dim, data.ndim)})


__all__ = ["sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "median",
           "var", "std", "var_mean", "std_mean", "logsumexp", "norm", "any", "all",
           "count_nonzero", "sort", "argsort", "topk", "cumsum", "cumprod"]

METHODS = {
    "sum": sum, "mean": mean, "prod": prod, "amax": amax, "amin": amin, "max": max, "min": min,
    "argmax": argmax, "argmin": argmin, "median": median, "var": var, "std": std,
    "logsumexp": logsumexp, "norm": norm, "any": any, "all": all, "count_nonzero": count_nonzero,
    "sort": sort, "argsort": argsort, "topk": topk, "cumsum": cumsum, "cumprod": cumprod,
}
