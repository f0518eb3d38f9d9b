"""Slicing views: narrow, select, diagonal, and the multi-output split/chunk/unbind.

Each result is a view of its input (see jitgrad.eager.views), and each backward writes
the gradient into zeros of the input's shape at the viewed positions. split/chunk/unbind
produce all pieces from one node, like PyTorch's SplitBackward, and mark them as outputs
of a multi-output op: PyTorch forbids modifying those in place while gradients are
needed (research/eager_autograd.md §1 row 9, E9).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jitgrad.eager.ops.creation import int_sizes
from jitgrad.eager.ops.joining import along
from jitgrad.eager.ops.registry import OpDef, apply_op, register
from jitgrad.eager.tensor import Tensor, normalize_dim
from jitgrad.eager.views import make_view, view_op


def _narrow_forward(x: np.ndarray, dim: int, start: int, length: int) -> np.ndarray:
    return x[along(dim, slice(start, start + length))]


def _narrow_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    p = ctx.params
    index = along(p["dim"], slice(p["start"], p["start"] + p["length"]))
    return (xp.index_add_into(ctx.input_metadata[0][0], index, g),)


def _select_forward(x: np.ndarray, dim: int, index: int) -> np.ndarray:
    return x[along(dim, index)]


def _select_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    index = along(ctx.params["dim"], ctx.params["index"])
    return (xp.index_add_into(ctx.input_metadata[0][0], index, g),)


def _diagonal_forward(x: np.ndarray, offset: int, dim1: int, dim2: int) -> np.ndarray:
    out = np.diagonal(x, offset, dim1, dim2)
    if x.flags.writeable:
        out.flags.writeable = True  # numpy still marks diagonals read-only; PyTorch's are views
    return out


def _diagonal_index(shape: tuple[int, ...], offset: int, dim1: int, dim2: int) -> tuple:
    """The advanced index (row and column arrays) of a diagonal's elements."""
    n = _diagonal_length(shape, offset, dim1, dim2)
    rows = np.arange(n) + max(-offset, 0)
    cols = np.arange(n) + max(offset, 0)
    index: list[slice | np.ndarray] = [slice(None)] * len(shape)
    index[dim1], index[dim2] = rows, cols
    return tuple(index)


def _diagonal_length(shape: tuple[int, ...], offset: int, dim1: int, dim2: int) -> int:
    if offset >= 0:
        return max(min(shape[dim1], shape[dim2] - offset), 0)
    return max(min(shape[dim1] + offset, shape[dim2]), 0)


def _diagonal_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    shape = ctx.input_metadata[0][0]
    p = ctx.params
    dim1, dim2 = p["dim1"], p["dim2"]
    index = _diagonal_index(shape, p["offset"], dim1, dim2)
    # numpy puts the indexed dim in place when dim1, dim2 are adjacent, else first;
    # np.diagonal puts it last
    target = min(dim1, dim2) if abs(dim1 - dim2) == 1 else 0
    ndim = len(shape) - 1
    order = list(range(ndim - 1))
    order.insert(target, ndim - 1)
    return (xp.index_add_into(shape, index, xp.permute(g, tuple(order))),)


def _split_forward(x: np.ndarray, dim: int, sizes: tuple[int, ...]) -> tuple:
    starts = np.cumsum((0,) + sizes[:-1])
    return tuple(x[along(dim, slice(int(s), int(s) + n))]
                 for s, n in zip(starts, sizes, strict=True))


def _split_backward(xp: Any, ctx: Any, grads: list[Any]) -> tuple:
    shape = ctx.input_metadata[0][0]
    dim, sizes = ctx.params["dim"], ctx.params["sizes"]
    like = next(g for g in grads if g is not None)
    pieces = [g if g is not None else xp.zeros(shape[:dim] + (n,) + shape[dim + 1:], like)
              for g, n in zip(grads, sizes, strict=True)]
    return (xp.cat(pieces, dim),)


def _unbind_forward(x: np.ndarray, dim: int) -> tuple:
    return tuple(x[along(dim, i)] for i in range(x.shape[dim]))


def _unbind_backward(xp: Any, ctx: Any, grads: list[Any]) -> tuple:
    shape = ctx.input_metadata[0][0]
    dim = ctx.params["dim"]
    piece_shape = shape[:dim] + (1,) + shape[dim + 1:]
    like = next(g for g in grads if g is not None)
    pieces = [xp.reshape(g, piece_shape) if g is not None else xp.zeros(piece_shape, like)
              for g in grads]
    return (xp.cat(pieces, dim),)


def _diag_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    n = ctx.input_metadata[0][0][0]
    offset = ctx.params["diagonal"]
    return (xp.getitem(g, _diagonal_index((n + abs(offset),) * 2, offset, 0, 1)),)


NARROW = register("narrow", _narrow_forward, _narrow_backward,
                  source="zeros with g written into the slice")
SELECT = register("select", _select_forward, _select_backward,
                  source="zeros with g written into the selected index")
DIAGONAL = register("diagonal", _diagonal_forward, _diagonal_backward,
                    source="zeros with g written onto the diagonal")
SPLIT = register("split", _split_forward, _split_backward, num_outputs=None,
                 source="concatenate the pieces' grads (zeros for unused pieces)")
SPLIT_WITH_SIZES = register("split_with_sizes", _split_forward, _split_backward, num_outputs=None,
                            source="concatenate the pieces' grads (zeros for unused pieces)")
DIAG = register("diag", lambda v, diagonal: np.diag(v, diagonal), _diag_backward,
                source="the gradient's diagonal")
UNBIND = register("unbind", _unbind_forward, _unbind_backward, num_outputs=None,
                  source="stack the pieces' grads (zeros for unused pieces)")


def _multi_view(x: Tensor, op: OpDef, params: dict[str, Any], step_op: OpDef,
                step_params: list[dict[str, Any]]) -> tuple[Tensor, ...]:
    """Outputs of split/unbind: one node, each output a view replayed by `step_op`, marked
    as made by a multi-output op (PyTorch forbids modifying those in place)."""
    outs = apply_op(op, (x,), (x._data,), params)
    creation = op.node_class.__name__.removesuffix("Backward")  # "Split", "Unbind", ...
    for i, (out, p) in enumerate(zip(outs, step_params, strict=True)):
        out._output_nr = i  # also without a node: PyTorch's E9 names the output's number
        make_view(x, out, step_op, p, creation)
    return outs


def narrow(input: Tensor, dim: int, start: Any, length: int) -> Tensor:
    """Elements start..start+length of dim `dim` (a view; negative start counts from the end).

    Raises IndexError for a start out of range, RuntimeError when the slice runs past the end.
    """
    shape = input._data.shape
    if not shape:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = normalize_dim(dim, len(shape))
    size = shape[d]
    start, length = int(start), int(length)
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], "
                         f"but got {start})")
    if start < 0:
        start += size
    if length < 0:
        raise RuntimeError(f"narrow(): length must be non-negative (got {length}).")
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return view_op(input, NARROW, {"dim": d, "start": start, "length": length})


def select(input: Tensor, dim: int, index: int) -> Tensor:
    """The slice at `index` of dim `dim`, with that dim removed (a view).

    Raises IndexError when `index` is out of range.
    """
    shape = input._data.shape
    if not shape:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = normalize_dim(dim, len(shape))
    i = int(index)
    if not -shape[d] <= i < shape[d]:
        raise IndexError(f"select(): index {i} out of range for tensor of size {list(shape)} at "
                         f"dimension {dim}")
    return view_op(input, SELECT, {"dim": d, "index": i + shape[d] if i < 0 else i})


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of dims dim1, dim2 as the last dim (a view); offset > 0 above the main one.

    Raises RuntimeError when dim1 and dim2 are the same dim.
    """
    ndim = input._data.ndim
    d1, d2 = normalize_dim(dim1, ndim), normalize_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return view_op(input, DIAGONAL, {"offset": int(offset), "dim1": d1, "dim2": d2})


def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """1-D input: the square matrix with it on the `diagonal`-th diagonal; 2-D input: a copy
    of that diagonal. Raises RuntimeError for other ranks."""
    ndim = input._data.ndim
    if ndim == 1:
        return apply_op(DIAG, (input,), (input._data,), {"diagonal": int(diagonal)})
    if ndim == 2:
        return view_op(input, DIAGONAL, {"offset": int(diagonal), "dim1": 0, "dim2": 1}).clone()
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {ndim}D")


def split(tensor: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Views of consecutive pieces along `dim`: of size `split_size_or_sections` (the last
    may be smaller) or of the listed sizes. The pieces may not be modified in place while
    they need gradients.

    Raises RuntimeError when listed sizes do not add up to the dim's size.
    """
    shape = tensor._data.shape
    if not shape:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = normalize_dim(dim, len(shape))
    size = shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = int_sizes(split_size_or_sections, "split_sizes")
        if any(s < 0 for s in sizes):
            raise RuntimeError(f"split_with_sizes expects split_sizes have only non-negative "
                               f"entries, but got split_sizes={list(sizes)}")
        if sum(sizes) != size:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} "
                               f"(input tensor's size at dimension {d}), but got "
                               f"split_sizes={list(sizes)}")
        return _split(tensor, d, sizes, SPLIT_WITH_SIZES)
    (step,) = int_sizes((split_size_or_sections,), "split_size")
    if step < 0 or (step == 0 and size != 0):
        raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension "
                           f"size of {size}" if step == 0 else
                           f"split expects split_size be non-negative, but got split_size={step}")
    count = max((size + step - 1) // step, 1) if step else 1
    sizes = tuple(min(step, size - i * step) for i in range(count))
    return _split(tensor, d, sizes, SPLIT)


def _split(x: Tensor, dim: int, sizes: tuple[int, ...], op: OpDef) -> tuple[Tensor, ...]:
    starts = np.cumsum((0,) + sizes[:-1])
    steps = [{"dim": dim, "start": int(s), "length": n} for s, n in zip(starts, sizes, strict=True)]
    return _multi_view(x, op, {"dim": dim, "sizes": sizes}, NARROW, steps)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """Split into pieces of ceil(size / chunks) along `dim`; may return fewer than `chunks`.

    Raises RuntimeError for chunks < 1 or a 0-d input.
    """
    shape = input._data.shape
    if not shape:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = normalize_dim(dim, len(shape))
    size = shape[d]
    if size == 0:  # PyTorch: `chunks` empty pieces
        return _split(input, d, (0,) * chunks, SPLIT_WITH_SIZES)
    return split(input, (size + chunks - 1) // chunks, d)


def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices along `dim`, each without that dim (views that may not be modified in place
    while they need gradients)."""
    shape = input._data.shape
    if not shape:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = normalize_dim(dim, len(shape))
    if shape[d] == 0:
        return ()
    steps = [{"dim": d, "index": i} for i in range(shape[d])]
    return _multi_view(input, UNBIND, {"dim": d}, SELECT, steps)


__all__ = ["narrow", "select", "diagonal", "diag", "split", "chunk", "unbind"]

METHODS = {"narrow": narrow, "select": select, "diagonal": diagonal, "diag": diag, "split": split,
           "chunk": chunk, "unbind": unbind}
