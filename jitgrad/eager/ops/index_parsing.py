"""How a PyTorch index (`x[...]`) splits into its two stages, as numpy indices.

See Note [Basic then advanced] in `indexing.py`: `parse_index` returns the basic part
(ints, slices, None: a view) and the advanced part (int arrays and full slices, applied
to that view), after checking bounds, slice steps and mask shapes with PyTorch's errors.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from jitgrad.eager import layout
from jitgrad.eager.ops.checks import check_array
from jitgrad.eager.tensor import Tensor, values_known

ERR_0D = ("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in "
          "C++ to convert a 0-dim tensor to a number")
WARN_SEQUENCE_INDEX = (
    "Using a non-tuple sequence for multidimensional indexing is deprecated and will be changed "
    "in pytorch 2.9; use x[tuple(seq)] instead of x[seq]. In pytorch 2.9 this will be "
    "interpreted as tensor index, x[torch.tensor(seq)], which will result either in an error or "
    "a different result")
ERR_TYPES = ("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
             "valid indices (got {})")


def _index_array(obj: Any) -> np.ndarray:
    """An index given as Tensor/ndarray/list/tuple, as an int or bool numpy array."""
    if isinstance(obj, Tensor):
        array = obj._data
    else:
        array = np.asarray(obj)
        if array.dtype.kind == "f" and array.size == 0:
            array = array.astype(np.int64)  # `x[[]]` selects nothing
    kind = array.dtype.kind
    if kind == "u" and array.dtype.itemsize == 1:
        warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                      "torch.bool instead.", UserWarning, stacklevel=4)
        return array.astype(np.bool_)
    if kind not in "iub":
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors "
                         f"(got dtype {array.dtype})")
    return array


def _classify(obj: Any) -> tuple[str, Any]:
    """(kind, value) of one index element: int, slice, none, ellipsis, bool, array, mask."""
    if obj is None:
        return "none", None
    if obj is Ellipsis:
        return "ellipsis", None
    if isinstance(obj, slice):
        return "slice", obj
    if isinstance(obj, (bool, np.bool_)):
        return "bool", bool(obj)
    if isinstance(obj, (int, np.integer)):
        return "int", int(obj)
    if isinstance(obj, (Tensor, np.ndarray, list, tuple, range)):
        array = _index_array(obj)
        if array.ndim == 0:
            return ("bool", bool(array)) if array.dtype.kind == "b" else ("int", int(array))
        return ("mask", array) if array.dtype.kind == "b" else ("array", array)
    raise IndexError(ERR_TYPES.format(type(obj).__name__))


def _as_tuple(index: Any) -> tuple:
    """PyTorch's rule for a list index: short lists holding sequences, tensors, slices, None
    or `...` are a tuple of indices (legacy numpy); other lists are one array index."""
    if isinstance(index, tuple):
        return index
    if isinstance(index, list) and len(index) < 32 and any(
            isinstance(x, (list, tuple, range, Tensor, np.ndarray, slice)) or x is None
            or x is Ellipsis
            for x in index):
        warnings.warn(WARN_SEQUENCE_INDEX, UserWarning, stacklevel=4)
        return tuple(index)
    return (index,)


def _check_slice(s: slice) -> slice:
    step = s.step
    if step is not None:
        step = _as_index(step)
        if step <= 0:
            raise ValueError(f"step must be greater than zero (got {step}); flip() reverses a "
                             "tensor")
    start = None if s.start is None else _as_index(s.start)
    stop = None if s.stop is None else _as_index(s.stop)
    return slice(start, stop, step)


def _as_index(value: Any) -> int:
    """`operator.index(value)`, an int subclass kept as itself (a compiler's symbolic size,
    jitgrad/eager/symbolic_int.py, stays in the recorded index)."""
    return value if isinstance(value, int) and type(value) is not bool else \
        operator.index(value)


def checked_array(array: np.ndarray, dim: int, size: int) -> np.ndarray:
    """An int index array for a dim of `size`: bounds checked, negatives wrapped, own copy.

    dim: the number PyTorch names in its error (for `x[..., idx]`, the position of idx
    among the index tensors). The values of a compiler's fake tensor are not known: such an
    index is passed on unchecked (the compiler then runs this indexing eagerly).
    """
    if not values_known(array):
        return array.astype(np.int64, copy=False)
    array = check_array(np.array(array, dtype=np.int64), **bounds_check(dim, size))
    array[array < 0] += size
    return array


def bounds_check(dim: int, size: int) -> dict[str, Any]:
    """The `check_values` arguments of an index into a dim of `size` (negatives count from
    the end): IndexError naming the first index out of range (PyTorch's own message for a
    dim of size 0)."""
    message = (f"index {{bad}} is out of bounds for dimension {dim} with size {size}" if size
               else "index is out of bounds for dimension with size 0")
    return {"reject": "outside", "low": -size, "high": size, "error": "IndexError",
            "message": message}


def dim_index_error(name: str, d: int, size: int, data: np.ndarray) -> dict[str, str]:
    """PyTorch's error for an index out of range along dim `d` (of `size`) of `data`:
    index_select (and embedding, which is index_select of the weight's rows) along dim 0 of
    a non-empty tensor, or of a 1-D one, raises IndexError; along a dim of size 0 its CPU
    kernel's "axis dim should be positive"; otherwise (another dim, another dim empty) its
    "INDICES element is out of DATA bounds"; the other ops a RuntimeError."""
    if name != "index_select":
        return {"error": "RuntimeError",
                "message": f"index {{bad}} is out of bounds for dimension {d} with size {size}"}
    if data.ndim <= 1 or (d == 0 and data.size):
        return {"error": "IndexError", "message": "index out of range in self (index {bad} "
                f"for dimension {d} of size {size})"}
    if size == 0:
        return {"error": "RuntimeError",
                "message": "index_select(): self indexing axis dim should be positive"}
    return {"error": "RuntimeError",
            "message": f"INDICES element is out of DATA bounds, id={{bad}} axis_dim={size}"}


def parse_index(shape: tuple[int, ...], index: Any) -> tuple[tuple | None, tuple | None]:
    """Split a PyTorch index into its two stages (see Note [Basic then advanced]).

    Returns (basic, advanced): basic is a tuple of ints, slices and None (then one
    trailing Ellipsis) giving a numpy view, or None when it would keep everything and
    advanced follows;
    advanced is a tuple of int arrays and full slices for the basic result, or None.
    Raises IndexError (out of range, too many indices, bad types, mask shape) or
    ValueError (negative slice step) like PyTorch.
    """
    simple = _simple_basic(shape, index)
    if simple is not None:
        return simple, None
    if type(index) is Tensor and index._data.dtype.kind == "i" and index._data.ndim and shape:
        ids = {0: index._data}  # `table[ids]`, e.g. embeddings
        _check_arrays(ids, {0: (0, shape[0])}, lambda: shape)
        return None, (ids[0],)
    items = [_classify(obj) for obj in _as_tuple(index)]
    ndim = len(shape)
    consumed = 0
    ellipses = 0
    for kind, value in items:
        if kind in ("int", "slice", "array"):
            consumed += 1
        elif kind == "mask":
            consumed += value.ndim
        elif kind == "ellipsis":
            ellipses += 1
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > ndim:
        if ndim == 0 and items[0][0] == "int":
            raise IndexError(ERR_0D)
        raise IndexError(f"too many indices for tensor of dimension {ndim} (got {consumed} "
                         f"indices for shape {list(shape)})")
    basic: list[Any] = []
    advanced: dict[int, np.ndarray] = {}
    sizes: dict[int, tuple[int, int]] = {}  # out dim of an int array -> (its number, size)
    in_dim = out_dim = tensors = 0
    keeps_all = True
    for kind, value in items:
        if kind == "int":
            size = shape[in_dim]
            if not -size <= value < size:
                raise IndexError(f"index {value} is out of bounds for dimension {in_dim} with "
                                 f"size {size}")
            basic.append(value)
            in_dim += 1
            keeps_all = False
        elif kind == "slice":
            value = _check_slice(value)
            basic.append(value)
            keeps_all = keeps_all and value.start is None and value.stop is None \
                and value.step in (None, 1)
            in_dim += 1
            out_dim += 1
        elif kind == "none" or kind == "bool":
            basic.append(None)
            if kind == "bool":  # PyTorch: unsqueeze, then take all (True) or nothing (False)
                advanced[out_dim] = np.zeros(1 if value else 0, dtype=np.int64)
            out_dim += 1
            keeps_all = False
        elif kind == "ellipsis":
            count = ndim - consumed
            basic.extend([slice(None)] * count)
            in_dim += count
            out_dim += count
        elif kind == "array":
            advanced[out_dim] = value
            sizes[out_dim] = (tensors, shape[in_dim])
            tensors += 1
            basic.append(slice(None))
            in_dim += 1
            out_dim += 1
        else:
            _check_mask(value, shape, in_dim)
            for j, positions in enumerate(np.nonzero(value)):
                advanced[out_dim + j] = positions
                basic.append(slice(None))
            tensors += value.ndim
            in_dim += value.ndim
            out_dim += value.ndim
    basic.append(Ellipsis)  # numpy returns a view (not a scalar) even when ints index every dim
    if not advanced:
        return tuple(basic), None
    _check_arrays(advanced, sizes,
                  lambda: layout.layout_array(shape, np.dtype(np.uint8), None)[tuple(basic)].shape)
    adv = tuple(advanced.get(d, slice(None)) for d in range(max(advanced) + 1))
    return (None if keeps_all else tuple(basic)), adv


def _check_arrays(advanced: dict[int, np.ndarray], sizes: dict[int, tuple[int, int]],
                  view_shape: Callable[[], tuple[int, ...]]) -> None:
    """Bounds-check (and wrap) the int arrays of `advanced` in place, as PyTorch's index
    kernel: an index into a dim of size 0 raises unless the broadcast indices are empty
    (`zeros(0, 3)[ids_2x1, empty]` is (2, 0)); otherwise, when the result selects no
    element (an empty index or another dim of the view is 0), indices are never read, so
    out-of-range ones do not raise (`zeros(0, 5)[:, [8]]` is empty).

    sizes: for each out dim of `advanced` holding an int array, (its number among the index
    tensors, the size it indexes); view_shape: the shape `advanced` applies to.
    """
    try:
        for d, (number, size) in sizes.items():
            advanced[d] = checked_array(advanced[d], number, size)
    except IndexError:
        picked = np.broadcast_shapes(*(np.shape(a) for a in advanced.values()))
        if 0 not in picked and any(size == 0 for _, size in sizes.values()):
            raise IndexError("index is out of bounds for dimension with size 0") from None
        if not _selects_nothing(advanced, view_shape()):
            raise
        for d in sizes:
            advanced[d] = np.zeros(np.shape(advanced[d]), dtype=np.int64)


def _selects_nothing(advanced: dict[int, np.ndarray], view_shape: tuple[int, ...]) -> bool:
    """Whether indexing `view_shape` with `advanced` (out dim -> index array) is empty."""
    picked = np.broadcast_shapes(*(np.shape(a) for a in advanced.values()))
    rest = [size for d, size in enumerate(view_shape) if d not in advanced]
    return 0 in picked or 0 in rest


def _simple_basic(shape: tuple[int, ...], index: Any) -> tuple | None:
    """The basic index for the common `x[i]`, `x[a:b]`, `x[i, j]`, `x[:, i]` (ints and
    slices only, at most one per dim), or None for anything else."""
    items = index if type(index) is tuple else (index,)
    if len(items) > len(shape):
        return None
    basic = []
    for dim, item in enumerate(items):
        kind = type(item)
        if kind is int:
            size = shape[dim]
            if not -size <= item < size:
                raise IndexError(f"index {item} is out of bounds for dimension {dim} with size "
                                 f"{size}")
        elif kind is slice:
            item = _check_slice(item)
        else:
            return None
        basic.append(item)
    basic.append(Ellipsis)
    return tuple(basic)


def _check_mask(mask: np.ndarray, shape: tuple[int, ...], dim: int) -> None:
    for j, size in enumerate(mask.shape):
        if size != shape[dim + j]:
            raise IndexError(f"The shape of the mask {list(mask.shape)} at index {j} does not "
                             f"match the shape of the indexed tensor {list(shape)} at index "
                             f"{dim + j}")
