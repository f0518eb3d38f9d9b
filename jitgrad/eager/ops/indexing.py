"""Indexing: `Tensor.__getitem__` and the index-based ops (gather, scatter, index_select,
index_add, index_put, masked_select, take_along_dim, nonzero).

Note [Basic then advanced]: PyTorch applies an index in two stages, and so does jitgrad.
Ints, slices, None and `...` give a *view* (`getitem` op + `views.make_view`); integer
and boolean tensors (or lists) are kept, one per dim they index, and applied afterwards
to that view by one advanced-indexing op that copies (`index` op). The two stages matter
where numpy differs: `x[0, :, [1, 2]]` on a (5, 6, 7) tensor is (6, 2) in PyTorch (the
int selects first) but (2, 6) in numpy (ints count as advanced indices). After the first
stage only arrays and full slices remain, where numpy's placement rule (adjacent index
arrays stay in place, separated ones go first) is PyTorch's. Boolean masks become the
arrays of their nonzero positions, as in both libraries.

Backward of every indexing op is an index-add into zeros (`xp.index_add_into`, numpy's
`add.at`), so duplicate indices accumulate (`x[[0, 0, 2, 0]]` -> grad [3, 0, 1],
research/eager_autograd.md §4 case 16).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jitgrad.eager import layout
from jitgrad.eager.node import tensor_type_name
from jitgrad.eager.ops.checks import check_array, check_values
from jitgrad.eager.ops.creation import tensor
from jitgrad.eager.ops.index_parsing import bounds_check, dim_index_error, parse_index
from jitgrad.eager.ops.joining import along
from jitgrad.eager.ops.registry import apply_op, register
from jitgrad.eager.tensor import Tensor, normalize_dim, values_known
from jitgrad.eager.views import make_view


def _index_forward(x: np.ndarray, index: tuple) -> np.ndarray:
    return x[index]


def _advanced_index_forward(x: np.ndarray, index: tuple) -> np.ndarray:
    out = x[index]
    if type(index) is tuple and x.flags.c_contiguous and 1 not in out.shape \
            and all(type(item) is int for item in index):
        # `x[k, t]` of a C-contiguous x (a backward formula's step of a sequence) is a
        # C-contiguous view, which is the layout index_strides gives: skip computing it
        return out
    return layout.with_strides(out, layout.index_strides(x, index, out.shape))


def _rows_forward(x: np.ndarray, ids: np.ndarray) -> np.ndarray:
    return _advanced_index_forward(x, (ids,))


def _rows_backward(xp: Any, ctx: Any, g: Any, ids: Any) -> tuple:
    return xp.embedding_backward(g, ids, ctx.input_metadata[0][0][0]), None


def _index_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (xp.index_add_into(ctx.input_metadata[0][0], ctx.params["index"], g),)


def _index_add_into_forward(values: np.ndarray, shape: tuple[int, ...], index: tuple) -> np.ndarray:
    out = np.zeros(shape, dtype=values.dtype)
    np.add.at(out, index, values)
    return out


def _index_add_into_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (xp.getitem(g, ctx.params["index"]),)


def _unwritten_mask(shape: tuple[int, ...], index: tuple) -> np.ndarray:
    """bool array of `shape`: True where `x[index] = ...` does not write."""
    keep = np.ones(shape, dtype=np.bool_)
    keep[index] = False
    return keep


def _put_forward(x: np.ndarray, values: Any, index: tuple, accumulate: bool) -> np.ndarray:
    out = x.copy()
    if accumulate:
        np.add.at(out, index, values)
    else:
        out[index] = values
    return out


def _put_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    """x: g, with written positions zeroed unless accumulating; values: g at the positions
    (every value gets its gradient even where a duplicate write overwrote it, as PyTorch)."""
    need_x, need_values = ctx.needs_input_grad
    shape = ctx.input_metadata[0][0]
    index, accumulate = ctx.params["index"], ctx.params["accumulate"]
    grad_x = grad_values = None
    if need_x:
        grad_x = g if accumulate else xp.where(_unwritten_mask(shape, index), g, 0)
    if need_values:
        grad_values = xp.getitem(g, index)
    return grad_x, grad_values


GETITEM = register("getitem", _index_forward, _index_backward,
                   source="zeros with g written into the indexed region")
INDEX = register("index", _advanced_index_forward, _index_backward,
                 source="index-add g into zeros (duplicates accumulate)", own_layout=True)
INDEX_ROWS = register("index_rows", _rows_forward, _rows_backward, saves=("ids",),
                      source="index-add of g into the rows of x", own_layout=True)
INDEX_ADD_INTO = register("index_add_into", _index_add_into_forward, _index_add_into_backward,
                          source="adjoint of indexing: index the gradient")
INDEX_PUT = register("index_put", _put_forward, _put_backward,
                     source="x: g with written positions zeroed (or g when accumulating); "
                            "values: g indexed", elementwise=True)
GATHER = register("gather", _index_forward, _index_backward,
                  source="scatter-add g into zeros")
INDEX_SELECT = register("index_select", _index_forward, _index_backward,
                        source="index-add g into zeros")
TAKE = register("take", _index_forward, _index_backward, source="index-add g into zeros")
MASKED_SELECT = register("masked_select", _index_forward, _index_backward,
                         source="scatter g into zeros at the mask")
SCATTER = register("scatter", _put_forward, _put_backward,
                   source="self: g with written positions zeroed; src: gather(g)")
SCATTER_ADD = register("scatter_add", _put_forward, _put_backward,
                       source="self: g; src: gather(g)")
INDEX_ADD = register("index_add", _put_forward, _put_backward,
                     source="self: g; source: index_select(g)")


def _nonzero_meta(x: Any) -> Any:
    raise RuntimeError("nonzero: the number of rows of the result depends on the input's values, "
                       "so no shape rule can predict it")


NONZERO = register("nonzero", lambda x: np.argwhere(x), meta=_nonzero_meta)


def _broadcast_error(err: IndexError, arrays: tuple) -> IndexError:
    shapes = ", ".join(str(list(a.shape)) for a in arrays if isinstance(a, np.ndarray))
    return IndexError(f"shape mismatch: indexing tensors could not be broadcast together with "
                      f"shapes {shapes}") if "broadcast" in str(err) else err


def getitem(input: Tensor, index: Any) -> Tensor:
    """`input[index]` with PyTorch's semantics (see Note [Basic then advanced]).

    Ints, slices (step > 0), None and `...` give a view; integer/boolean tensors or lists
    give a copy whose gradient accumulates over duplicate indices.
    Raises IndexError (out of bounds, too many indices, mask shape) or ValueError
    (slice step <= 0).
    """
    if isinstance(index, Tensor) and index._data.dtype.kind in "iu" and index._data.ndim and \
            not values_known(index._data) and input._data.ndim:
        # a compiler is tracing and the ids are unknown: take rows with the ids as an op
        # input, so the captured graph follows new ids on every call
        rows = input._data.shape[0]
        if rows and not input._data.size:
            # rows of no element: eager never reads the ids (index_parsing._check_arrays)
            index = index * 0
        else:
            index = check_values(index, **bounds_check(0, rows))
        return apply_op(INDEX_ROWS, (input, index), (input._data, index._data))
    basic, advanced = parse_index(input._data.shape, index)
    out = input
    if basic is not None:
        params = {"index": basic}
        out = make_view(input, apply_op(GETITEM, (input,), (input._data,), params), GETITEM, params)
    if advanced is not None:
        try:
            out = apply_op(INDEX, (out,), (out._data,), {"index": advanced})
        except IndexError as err:
            raise _broadcast_error(err, advanced) from None
    return out


def index_with(x: Tensor, index: tuple) -> Tensor:
    """`x[index]` for an already-normalized numpy index (backward formulas' `xp.getitem`)."""
    return apply_op(INDEX, (x,), (x._data,), {"index": index})


def index_add_into(shape: tuple[int, ...], index: tuple, values: Tensor) -> Tensor:
    """zeros(shape) with `values` added at `index` (duplicates accumulate); differentiable."""
    params = {"shape": tuple(shape), "index": index}
    return apply_op(INDEX_ADD_INTO, (values,), (values._data,), params)


# ----- index_put -------------------------------------------------------------------------

def put_index(shape: tuple[int, ...], indices: Any) -> tuple:
    """The numpy index for `index_put(indices)`: one tensor (or None = all) per leading dim."""
    if isinstance(indices, Tensor):
        indices = (indices,)
    items = tuple(slice(None) if i is None else i for i in indices)
    basic, advanced = parse_index(shape, items)
    assert basic is None or all(b == slice(None) or b is Ellipsis for b in basic), \
        "index_put indices are tensors or None"
    if advanced is not None:
        return advanced
    assert basic is not None, "parse_index returns a basic index when there is no advanced one"
    return basic


def _values(values: Any, x: Tensor) -> Any:
    """A Python number stays one; anything else becomes a Tensor."""
    if isinstance(values, (Tensor, bool, int, float)):
        return values
    return tensor(values, dtype=x.dtype)


def scalar_type_name(t: Tensor) -> str:
    """PyTorch's name of a tensor's dtype in error messages: Float, Double, Long, ..."""
    return tensor_type_name(t).removeprefix("jitgrad.").removesuffix("Tensor")


_DTYPE_ERRORS = {
    "index_put": "Index put requires the source and destination dtypes match, got {self} for "
                 "the destination and {src} for the source.",
    "scatter": "scatter(): Expected self.dtype to be equal to src.dtype (got {self} and {src})",
    "scatter_add": "scatter(): Expected self.dtype to be equal to src.dtype (got {self} and {src})",
    "index_add": "index_add_(): self ({self}) and source ({src}) must have the same scalar type",
}


def put_operand(op: Any, input: Tensor, index: tuple, values: Any) -> tuple[Any, Any]:
    """The values of a put-style op as (operand, array for the forward).

    Raises RuntimeError when a values tensor has another dtype than `input` or does not
    broadcast to `input[index]`.
    """
    values = _values(values, input)
    if not isinstance(values, Tensor):
        return values, values
    data = input._data
    if values._data.dtype != data.dtype:
        raise RuntimeError(_DTYPE_ERRORS[op.name].format(
            self=scalar_type_name(input), src=scalar_type_name(values)))
    target = np.broadcast_to(np.zeros((), np.bool_), data.shape)[index].shape
    vshape = values._data.shape
    trimmed = vshape[len(vshape) - len(target):] if len(vshape) > len(target) else vshape
    leading = vshape[:len(vshape) - len(trimmed)]
    if any(s != 1 for s in leading) or not _broadcasts(trimmed, target):
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(vshape)} cannot be "
                           f"broadcast to indexing result of shape {list(target)}")
    return values, values._data.reshape(trimmed)


def put(op: Any, input: Tensor, index: tuple, values: Any, accumulate: bool) -> Tensor:
    """Run a put-style op (index_put, scatter, index_add): a copy of input with values
    written (or added) at `index`. Raises RuntimeError as `put_operand`."""
    values, array = put_operand(op, input, index, values)
    return apply_op(op, (input, values), (input._data, array),
                    {"index": index, "accumulate": accumulate})


def _broadcasts(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    return len(shape) <= len(target) and all(
        s in (1, t) for s, t in zip(shape[::-1], target[::-1], strict=False))


def index_put(input: Tensor, indices: Any, values: Any, accumulate: bool = False) -> Tensor:
    """A copy of input with `values` written (or added, with accumulate) at `indices`.

    indices: a tuple with one int/bool tensor (or None) per leading dim. With duplicate
    indices and accumulate=False one of the writes wins; every value still gets gradient.
    """
    return put(INDEX_PUT, input, put_index(input._data.shape, indices), values, accumulate)


# ----- gather / scatter ------------------------------------------------------------------

def _dim_index(index: Tensor, input: Tensor, dim: int, name: str) -> tuple:
    """The advanced numpy index of `name(input, dim, index)`: arange in every dim but `dim`."""
    idx = index._data
    if idx.dtype.kind not in "iu" or idx.dtype.itemsize < 4:
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index (got {index.dtype})")
    shape = input._data.shape
    if idx.ndim != len(shape) and not (idx.ndim <= 1 and len(shape) <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor "
                           f"(index shape {list(idx.shape)}, input shape {list(shape)})")
    idx = idx.reshape(idx.shape + (1,) * (len(shape) - idx.ndim)) if idx.ndim < len(shape) else idx
    for d, (i, s) in enumerate(zip(idx.shape, shape, strict=True)):
        if d != dim and i > s:
            raise RuntimeError(f"Size does not match at dimension {d} expected index "
                               f"{list(idx.shape)} to be no larger than self {list(shape)} apart "
                               f"from dimension {dim}")
    size = shape[dim] if shape else 1
    check_array(idx, reject="outside", low=0, high=size, error="RuntimeError",  # no negatives
                message=f"index {{bad}} is out of bounds for dimension {dim} with size {size}")
    return tuple(idx if d == dim else np.arange(n).reshape((-1,) + (1,) * (len(shape) - d - 1))
                 for d, n in enumerate(idx.shape))


def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """out[i][j] = input[index[i][j]][j] for dim 0 (any rank); out has index's shape.

    Raises RuntimeError for an index that is not int32/int64, differing ranks, an index
    larger than the input outside `dim`, or out-of-range values (negative ones included,
    as PyTorch).
    """
    if input._data.ndim == 0:
        return gather(input.reshape(1), 0, index.reshape(-1)).reshape(index._data.shape)
    d = normalize_dim(dim, input._data.ndim)
    params = {"index": _dim_index(index, input, d, "gather")}
    return apply_op(GATHER, (input,), (input._data,), params)


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """Values of input at `indices` along `dim` (flattened when None); other dims broadcast.
    Negative indices count from the end.

    Raises RuntimeError for a non-int64 `indices`.
    """
    if indices._data.dtype != np.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{scalar_type_name(indices)}")
    if dim is None:
        flat = input.reshape(-1)
        return gather(flat, 0, _wrap_negative(indices.reshape(-1), flat._data.shape[0]))
    d = normalize_dim(dim, input._data.ndim)
    indices = _wrap_negative(indices, input._data.shape[d])
    a, i = list(input._data.shape), list(indices._data.shape)
    a[d] = i[d] = 1
    common = np.broadcast_shapes(tuple(a), tuple(i))
    target_x = common[:d] + (input._data.shape[d],) + common[d + 1:]
    target_i = common[:d] + (indices._data.shape[d],) + common[d + 1:]
    return gather(input.expand(target_x), d, indices.expand(target_i))


def _wrap_negative(indices: Tensor, size: int) -> Tensor:
    """Negative indices counted from the end (take_along_dim takes them; gather does not)."""
    return indices + (indices < 0).long() * size


def _scatter_like(op: Any, input: Tensor, dim: int, index: Tensor, src: Any,
                  accumulate: bool, name: str) -> Tensor:
    d = normalize_dim(dim, input._data.ndim)
    target = _dim_index(index, input, d, name)
    if isinstance(src, Tensor):
        if src._data.ndim != index._data.ndim:
            raise RuntimeError(f"{name}(): Expected src to have the same number of dimensions as "
                               f"index (src shape {list(src.shape)}, index shape "
                               f"{list(index.shape)})")
        if any(i > n for i, n in zip(index._data.shape, src._data.shape, strict=True)):
            raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than self "
                               f"{list(input.shape)} apart from dimension {d} and to be no larger "
                               f"size than src {list(src.shape)}")
        if src._data.shape != index._data.shape:
            src = src[tuple(slice(0, n) for n in index._data.shape)]
    return put(op, input, target, src, accumulate)


def scatter(input: Tensor, dim: int, index: Tensor, src: Any = None, *,
            value: Any = None) -> Tensor:
    """A copy of input with src[i][j] written to [index[i][j]][j] (dim 0); src may be a number.

    Duplicate targets: one write wins, every src element still gets gradient.
    """
    src = value if src is None else src
    return _scatter_like(SCATTER, input, dim, index, src, False, "scatter")


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """A copy of input with src added at the positions `index` names along `dim`."""
    return _scatter_like(SCATTER_ADD, input, dim, index, src, True, "scatter_add")


def _dim_select_index(input: Tensor, dim: int, index: Tensor, name: str) -> tuple[int, np.ndarray]:
    d = normalize_dim(dim, input._data.ndim)
    idx = index._data if isinstance(index, Tensor) else np.asarray(index)
    if idx.dtype.kind not in "iu" or idx.dtype.itemsize < 4:
        raise RuntimeError(f"{name}(): Expected dtype int32 or int64 for index (got {idx.dtype})")
    if idx.ndim > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector (got shape "
                         f"{list(idx.shape)})")
    if not values_known(idx):  # a compiler's fake index: kept fake, so the op runs eagerly
        return d, idx.reshape(-1).astype(np.int64, copy=False)
    size = input._data.shape[d]
    check_array(idx, reject="outside", low=0, high=size,  # negatives are out of range too
                **dim_index_error(name, d, size, input._data))
    return d, np.array(idx.reshape(-1), dtype=np.int64)


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """The slices of `input` at `index` (a vector) along `dim`; repeated indices repeat.

    Raises IndexError for indices out of range (negative ones included, as PyTorch).
    """
    if input._data.ndim == 0:
        return index_select(input.reshape(1), 0, index).reshape(())
    d, idx = _dim_select_index(input, dim, index, "index_select")
    return apply_op(INDEX_SELECT, (input,), (input._data,), {"index": along(d, idx)})


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: Any = 1) -> Tensor:
    """A copy of input with alpha * source[i] added to slice index[i] along `dim` (duplicates add).

    Raises RuntimeError unless source has input's shape with dim `dim` of len(index), or
    for an index out of range (negative ones included), as PyTorch.
    """
    d, idx = _dim_select_index(input, dim, index, "index_add")
    expected = list(input._data.shape)
    expected[d] = idx.shape[0]
    if list(source._data.shape) != expected:
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the "
                           f"specified dimension. Got self.shape = {list(input.shape)} "
                           f"source.shape = {list(source.shape)}")
    if alpha != 1:
        source = source * alpha
    return put(INDEX_ADD, input, along(d, idx), source, True)


def take(input: Tensor, index: Tensor) -> Tensor:
    """Elements of the flattened input at `index` (any shape; negatives count from the end).

    Raises IndexError for an index out of range.
    """
    flat = input.reshape(-1)
    idx = index._data
    size = flat._data.shape[0]
    if not values_known(idx):  # a compiler's fake index: kept fake, so the op runs eagerly
        return apply_op(TAKE, (flat,), (flat._data,), {"index": (idx,)})
    bad = idx[(idx >= size) | (idx < -size)]
    if bad.size:
        raise IndexError(f"out of range: tried to access index {bad.reshape(-1)[0]} on a tensor of "
                         f"{size} elements.")
    return apply_op(TAKE, (flat,), (flat._data,), {"index": (np.where(idx < 0, idx + size, idx),)})


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The 1-D tensor of input's elements where `mask` (bool, broadcast with input) is True."""
    m = mask._data
    if m.dtype != np.bool_:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask (got {mask.dtype})")
    shape = np.broadcast_shapes(input._data.shape, m.shape)
    x = input if input._data.shape == shape else input.expand(shape)
    positions = np.nonzero(np.broadcast_to(m, shape, subok=True))  # a fake mask stays fake
    return apply_op(MASKED_SELECT, (x,), (x._data,), {"index": positions})


def nonzero(input: Tensor, *, as_tuple: bool = False) -> Any:
    """Indices of nonzero elements: an int64 (n, ndim) tensor, or one 1-D tensor per dim."""
    out = apply_op(NONZERO, (input,), (input._data,))
    if not as_tuple:
        return out
    if input._data.ndim == 0:
        return (Tensor._make(np.zeros(int(bool(input._data)), dtype=np.int64)),)
    return tuple(Tensor._make(np.ascontiguousarray(out._data[:, d]))
                 for d in range(input._data.ndim))


def argwhere(input: Tensor) -> Tensor:
    """`nonzero(input)`: an int64 (n, ndim) tensor of the nonzero positions."""
    return apply_op(NONZERO, (input,), (input._data,))


__all__ = ["gather", "scatter", "scatter_add", "index_select", "index_add", "index_put", "take",
           "masked_select", "take_along_dim", "nonzero", "argwhere"]

METHODS = {
    "__getitem__": getitem, "gather": gather, "scatter": scatter, "scatter_add": scatter_add,
    "index_select": index_select, "index_add": index_add, "index_put": index_put,
    "take": take, "masked_select": masked_select, "take_along_dim": take_along_dim,
    "nonzero": nonzero,
    "argwhere": argwhere,
}
