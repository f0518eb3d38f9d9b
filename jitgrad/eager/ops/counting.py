"""Ops that count values: bincount, histc, histogram, unique, mode.

bincount's length (max + 1) is read from the values by its entry function, which breaks
a traced graph there; unique's size (the number of distinct values) is known only after
running it, so its shape rule raises, as nonzero's does.
Only `bincount` with weights has a gradient (to the weights: each weight gets the
gradient of its bin); PyTorch defines none for any of them, and jitgrad gives histc,
histogram and unique none either (their outputs do not require grad). `mode` returns
(values, indices) like max(dim): its gradient goes to the returned index (sorting.py,
Note [Values at indices]).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jitgrad.eager.ops.pointwise import not_implemented_for
from jitgrad.eager.ops.reduction import check_nonempty_reduction
from jitgrad.eager.ops.registry import TensorMeta, apply_op, register
from jitgrad.eager.ops.sorting import of_0d, return_type, values_and_indices
from jitgrad.eager.tensor import Tensor, normalize_dim

HistogramResult = return_type("histogram", ("hist", "bin_edges"))


def _unique_meta(x: Any, dim: int | None) -> Any:
    raise RuntimeError("unique: the number of distinct values depends on the input's values, "
                       "so no shape rule can predict it")


def _bincount_forward(x: np.ndarray, length: int) -> np.ndarray:
    return np.bincount(x, minlength=length).astype(np.int64, copy=False)


def _bincount_weighted_forward(x: np.ndarray, weights: np.ndarray, length: int) -> np.ndarray:
    out_dtype = np.float32 if weights.dtype == np.float32 else np.float64
    return np.bincount(x, weights, length).astype(out_dtype, copy=False)


def _bincount_meta(x: Any, length: int) -> TensorMeta:
    return TensorMeta((length,), np.dtype(np.int64))


def _bincount_weighted_meta(x: Any, weights: Any, length: int) -> TensorMeta:
    out_dtype = np.float32 if weights.dtype == np.float32 else np.float64
    return TensorMeta((length,), np.dtype(out_dtype))


def _bincount_weighted_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return None, xp.getitem(g, x)


BINCOUNT = register("bincount", _bincount_forward, meta=_bincount_meta)
BINCOUNT_WEIGHTED = register("bincount_weighted", _bincount_weighted_forward,
                             _bincount_weighted_backward, saves=("x",),
                             meta=_bincount_weighted_meta,
                             source="out[b] = sum of weights[i] with x[i] == b, so "
                                    "d out[b] / d weights[i] = [x[i] == b]")


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value 0..max occurs in a 1-D non-negative int tensor (sum of weights).

    Shape: (max(max(input) + 1, minlength),). Dtype: int64 without weights; float32 for
    float32 weights, float64 for other weights (as PyTorch). Gradient: to the weights.
    Raises RuntimeError for input not 1-D, negative values, or weights of another shape;
    NotImplementedError for a float or bool input.
    """
    data = input._data
    if data.dtype.kind in "fb":
        raise not_implemented_for("bincount_cpu", data.dtype)
    if data.ndim != 1 or data.dtype.kind not in "iub" or (data.size and data.min() < 0):
        raise RuntimeError(f"bincount only supports 1-d non-negative integral inputs. (got "
                           f"shape {tuple(data.shape)}, dtype {input.dtype}); "
                           "flatten the input, or shift it to start at 0")
    if minlength < 0:
        raise RuntimeError(f"minlength should be >= 0 (got {minlength})")
    # the length is read from the values here (a graph break when tracing), so the op's
    # shape rule knows it
    length = max(int(data.max()) + 1, minlength) if data.size else minlength
    if weights is None:
        return apply_op(BINCOUNT, (input,), (data,), {"length": length})
    if weights._data.shape != data.shape:
        raise RuntimeError(f"weights should be 1-d and have the same length as input (input "
                           f"shape {tuple(data.shape)}, weights shape {tuple(weights.shape)})")
    return apply_op(BINCOUNT_WEIGHTED, (input, weights), (data, weights._data),
                    {"length": length})


def _check_float(name: str, input: Tensor) -> None:
    if input._data.dtype.kind != "f":
        raise not_implemented_for(name, input._data.dtype)


def _histc_forward(x: np.ndarray, bins: int, low: float, high: float) -> np.ndarray:
    inside = x[(x >= low) & (x <= high)]
    index = ((inside - low) * bins / (high - low)).astype(np.int64)
    np.minimum(index, bins - 1, out=index)  # x == high falls in the last bin
    return np.bincount(index, minlength=bins).astype(x.dtype)


HISTC = register("histc", _histc_forward)


def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
    """Counts of input's elements in `bins` equal-width bins over [min, max].

    min == max (the default) uses the data's min and max; a zero-width range is widened
    by 1 on each side. Elements outside the range (and NaN) are not counted. Shape:
    (bins,); dtype: input's (float). No gradient.
    Raises RuntimeError for max < min, bins <= 0 or a non-finite range;
    NotImplementedError for integer input.
    """
    _check_float("histogram_cpu", input)
    if bins <= 0:
        raise RuntimeError(f"torch.histc: bins must be > 0, but got {bins} for bins")
    if max < min:
        raise RuntimeError(f"torch.histc: max must be larger than min (got min={min}, max={max})")
    data = input._data
    low, high = float(min), float(max)
    if low == high and data.size:
        low, high = float(data.min()), float(data.max())
    if low == high:
        low, high = low - 1, high + 1
    if not (np.isfinite(low) and np.isfinite(high)):
        raise RuntimeError(f"torch.histc: range of [{low}, {high}] is not finite; "
                           "pass finite min and max, or remove inf/nan from the input")
    return apply_op(HISTC, (input,), (data,), {"bins": int(bins), "low": low, "high": high})


def _histogram_forward(x: np.ndarray, edges: np.ndarray, weight: np.ndarray | None,
                       density: bool) -> tuple[np.ndarray, np.ndarray]:
    hist, _ = np.histogram(x, bins=edges, weights=weight, density=density)
    return hist.astype(x.dtype), edges


HISTOGRAM = register("histogram", _histogram_forward, num_outputs=2, inputs=("x",))


def histogram(input: Tensor, bins: int | Tensor = 100, *, range: tuple[float, float] | None = None,  # noqa: A002
              weight: Tensor | None = None, density: bool = False) -> Any:
    """`(hist, bin_edges)`: counts (or summed `weight`) of input's elements per bin.

    bins: a number of equal-width bins over `range` (default: the data's min and max),
    or a 1-D increasing tensor of edges. Each bin is half-open except the last, which
    includes its right edge. density=True divides by total count times bin width.
    Shapes: hist (nbins,), bin_edges (nbins + 1,); dtype: input's (float). No gradient.
    Raises NotImplementedError for integer input; RuntimeError for bad bins/range.
    """
    _check_float("histogram_cpu", input)
    data = input._data
    if isinstance(bins, Tensor):
        edges = bins._data.astype(data.dtype)
        if edges.ndim != 1 or edges.size < 2 or np.any(np.diff(edges) < 0):
            raise RuntimeError(f"torch.histogram(): bins tensor should be 1-d with at least "
                               f"2 increasing edges (got shape {tuple(bins.shape)})")
    else:
        if bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for bins")
        low, high = range if range is not None else (
            (float(data.min()), float(data.max())) if data.size else (0.0, 0.0))
        if low > high:
            raise RuntimeError(f"torch.histogram(): min should not exceed max, but got min "
                               f"{low} max {high}")
        edges = np.linspace(low, high, int(bins) + 1, dtype=data.dtype)
    weight_data = None if weight is None else weight._data
    hist, bin_edges = apply_op(HISTOGRAM, (input,), (data,),
                               {"edges": edges, "weight": weight_data, "density": density})
    return HistogramResult(hist, bin_edges)


def _unique_forward(x: np.ndarray, dim: int | None) -> tuple[np.ndarray, ...]:
    values, inverse, counts = np.unique(x, return_inverse=True, return_counts=True, axis=dim)
    return values, inverse.astype(np.int64).reshape(-1 if dim is not None else x.shape), \
        counts.astype(np.int64)


UNIQUE = register("unique", _unique_forward, num_outputs=3, inputs=("x",),
                  meta=_unique_meta)


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
           return_counts: bool = False, dim: int | None = None) -> Any:
    """The distinct values of input, ascending (flattened, or distinct slices along `dim`).

    return_inverse adds the int64 index of each element's value in the result (input's
    shape; (input.shape[dim],) with `dim`); return_counts adds each value's int64 count.
    Returns a Tensor, or a tuple (values, [inverse], [counts]). The result is sorted also
    for sorted=False (as PyTorch's CPU kernel). No gradient.
    """
    if dim is not None:
        dim = dim + input._data.ndim if dim < 0 else dim
    values, inverse, counts = apply_op(UNIQUE, (input,), (input._data,), {"dim": dim})
    if not (return_inverse or return_counts):
        return values
    return (values, *([inverse] if return_inverse else []), *([counts] if return_counts else []))


# ----- mode -----------------------------------------------------------------------------

ModeResult = return_type("mode")


def _argmode_forward(x: np.ndarray, dim: int) -> np.ndarray:
    """Index (keepdims) of the most frequent value along `dim`: among equally frequent
    values the smallest, at its last occurrence (what PyTorch's CPU kernel returns)."""
    rows = np.moveaxis(x, dim, -1)
    flat = rows.reshape(-1, rows.shape[-1])
    index = np.empty(flat.shape[0], dtype=np.int64)
    for r, row in enumerate(flat):
        values, counts = np.unique(row, return_counts=True)
        winner = values[np.argmax(counts)]  # unique sorts, argmax takes the first maximum
        hits = np.flatnonzero(row == winner) if winner == winner else np.flatnonzero(row != row)
        index[r] = hits[-1]
    return np.moveaxis(index.reshape(*rows.shape[:-1], 1), -1, dim)


ARGMODE = register("argmode", _argmode_forward)


def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> Any:
    """`(values, indices)`: the most frequent value along `dim` (ties: the smallest value)
    and the index of its last occurrence. Gradient: to that index.

    Raises IndexError when `dim` has size 0.
    """
    data = input._data
    if data.ndim == 0:
        return of_0d(input, ModeResult)
    d = normalize_dim(int(dim), data.ndim)
    check_nonempty_reduction("mode", data.shape, (d,))
    index = apply_op(ARGMODE, (input,), (data,), {"dim": d})
    return values_and_indices(input, index, d, keepdim, ModeResult)


__all__ = ["bincount", "histc", "histogram", "unique", "mode"]

METHODS = {"bincount": bincount, "histc": histc, "histogram": histogram, "unique": unique,
           "mode": mode}
