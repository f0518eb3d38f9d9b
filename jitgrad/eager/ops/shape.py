"""Shape and view ops: reshape/view, permute/transpose, expand, squeeze/unsqueeze,
flatten/unflatten, clone/contiguous; the public home of the shape-op family.

View ops return tensors sharing storage and version counter with their input (see
jitgrad.eager.views); `reshape` (and so `flatten`) is a view when numpy can express it as
one and a copy otherwise, exactly numpy's rule (and PyTorch's). The slicing views
(narrow, select, diagonal, split/chunk/unbind) live in `slicing.py` and the copying
rearrangements (cat, stack, repeat, flip, roll, tril/triu, repeat_interleave) in
`joining.py`; both are re-exported here (functions and Tensor methods).
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Literal

import numpy as np

from jitgrad.eager.ops import joining, slicing
from jitgrad.eager.ops._binary import broadcast_error
from jitgrad.eager.ops.creation import int_sizes, view_as_dtype
from jitgrad.eager.ops.joining import (  # noqa: F401  (re-exported, see __all__)
    atleast_1d,
    atleast_2d,
    atleast_3d,
    cat,
    column_stack,
    concat,
    concatenate,
    dstack,
    flip,
    fliplr,
    flipud,
    hstack,
    repeat_interleave,
    roll,
    stack,
    tile,
    tril,
    triu,
    vstack,
)
from jitgrad.eager.ops.registry import ANY_KIND, apply_op, register
from jitgrad.eager.ops.slicing import (  # noqa: F401  (re-exported, see __all__)
    chunk,
    diag,
    diagonal,
    narrow,
    select,
    split,
    unbind,
)
from jitgrad.eager.symbolic_int import sizes
from jitgrad.eager.tensor import Tensor, normalize_dim
from jitgrad.eager.views import view_op


def _shape_arg(shape: tuple, argument: str = "size") -> tuple:
    """Accept `f(2, 3)`, `f((2, 3))` and `f([2, 3])` like PyTorch. Raises TypeError for
    non-integer entries (see creation.int_sizes)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return int_sizes(shape, argument)


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


# ----- registered view ops ---------------------------------------------------------------

def _reshape_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (xp.reshape(g, ctx.input_metadata[0][0]),)


def _permute_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (xp.permute(g, tuple(np.argsort(ctx.params["dims"]))),)


def _expand_forward(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    lead = len(shape) - x.ndim
    if shape[lead:] == x.shape and all(s == 1 for s in shape[:lead]):
        return x.reshape(shape)  # nothing repeats: a writable view, so in-place ops work
    return np.broadcast_to(x, shape)


def _expand_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (g,)  # the engine sums the broadcast gradient down to the input's shape


def _clone_forward(x: np.ndarray, order: Literal["K", "C"]) -> np.ndarray:
    return np.array(x, order=order, copy=True)


def _identity_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (g,)


RESHAPE = register("reshape", lambda x, shape: np.reshape(x, shape), _reshape_backward,
                   source="reshape moves no values")
PERMUTE = register("permute", lambda x, dims: np.transpose(x, dims), _permute_backward,
                   source="inverse permutation")
EXPAND = register("expand", _expand_forward, _expand_backward, source="sum over broadcast dims")
CLONE = register("clone", _clone_forward, _identity_backward, source="identity", elementwise=True)
# the stop-gradient of `Tensor.detach()` / `.data` in compiled graphs: the same values, no
# derivative (eager's detach makes a Tensor without history and needs no op)
DETACH = register("detach", lambda x: x, None, source="stop-gradient: no derivative",
                  scalar=lambda s, x: x, scalar_kinds=ANY_KIND)  # the value unchanged


def _with_history_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (g, None)


# in compiled graphs, a tensor with autograd history read after an in-place write that
# autograd does not see (under no_grad, or through `.data`/`.detach()`): the written value,
# differentiated as the tensor it was written into (eager writes into that tensor, whose
# grad_fn, or leaf-ness, stays; see Note [Functionalized in-place ops] in
# jitgrad/trace/capture/functionalize.py). Eager code never records it.
WITH_HISTORY = register("with_history", lambda history, value: value, _with_history_backward,
                        source="the value written unseen by autograd stands for the tensor "
                        "written: the gradient goes to its history, none to the value")


# ----- reshape family ----------------------------------------------------------------

def reshape(input: Tensor, *shape: Any) -> Tensor:
    """Same data with a new shape (one dim may be -1): a view when strides allow, else a copy."""
    data = input._data
    target = infer_shape(_shape_arg(shape), input.numel(), data.shape)
    params = {"shape": target}
    if not data.flags.c_contiguous and not _viewable(data, target):
        return apply_op(RESHAPE, (input,), (np.ascontiguousarray(data),), params)
    return view_op(input, RESHAPE, params)


def _viewable(data: np.ndarray, shape: tuple[int, ...]) -> bool:
    """Whether numpy can reshape `data` without copying (always so when C-contiguous)."""
    try:
        np.reshape(data, shape, copy=False)
    except ValueError:
        return False
    return True


def view(input: Tensor, *shape: Any) -> Tensor:
    """A view with a new shape. Raises RuntimeError when the strides make that impossible."""
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int)):
        return view_as_dtype(input, shape[0])
    data = input._data
    target = infer_shape(_shape_arg(shape), input.numel(), data.shape)
    if not data.flags.c_contiguous and not _viewable(data, target):
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
    return view_op(input, RESHAPE, {"shape": target})


def view_as(input: Tensor, other: Tensor) -> Tensor:
    """`input.view(other.shape)`."""
    return view(input, sizes(other))


def reshape_as(input: Tensor, other: Tensor) -> Tensor:
    """`input.reshape(other.shape)`."""
    return reshape(input, sizes(other))


def ravel(input: Tensor) -> Tensor:
    """A 1-D view when the data is contiguous, else a 1-D copy."""
    return reshape(input, -1)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims start_dim..end_dim into one (a 0-d tensor becomes 1-D); view when possible.

    Raises RuntimeError when start_dim comes after end_dim.
    """
    shape = tuple(sizes(input))
    if not shape:
        return reshape(input, 1)
    start, end = normalize_dim(start_dim, len(shape)), normalize_dim(end_dim, len(shape))
    if start > end:
        raise RuntimeError(f"flatten() has invalid args: start_dim cannot come after end_dim "
                           f"(got start_dim={start_dim}, end_dim={end_dim} for {len(shape)} dims)")
    if start == end:
        return view_op(input, RESHAPE, {"shape": shape})
    merged = math.prod(shape[start:end + 1])  # (a symbolic size stays symbolic)
    return reshape(input, shape[:start] + (merged,) + shape[end + 1:])


def unflatten(input: Tensor, dim: int, sizes_arg: Any) -> Tensor:
    """Split dim `dim` into `sizes` (one may be -1).

    Raises RuntimeError when the sizes do not multiply up to the dim's size.
    """
    shape = tuple(sizes(input))
    d = normalize_dim(dim, len(shape))
    parts = int_sizes(tuple(sizes_arg), "sizes")
    try:
        parts = infer_shape(parts, shape[d], (shape[d],))
    except RuntimeError:
        raise RuntimeError(f"unflatten: Provided sizes {list(parts)} don't multiply up to the size "
                           f"of dim {dim} ({shape[d]}) in the input tensor") from None
    return reshape(input, shape[:d] + parts + shape[d + 1:])


def squeeze(input: Tensor, dim: Any = None) -> Tensor:
    """Drop size-1 dims (all, one, or a tuple); naming a dim of another size is a no-op. A view."""
    shape = tuple(sizes(input))
    if dim is None:
        dims = {i for i, s in enumerate(shape) if s == 1}
    else:
        dims = {normalize_dim(int(d), len(shape)) for d in (dim if isinstance(dim, (tuple, list))
                                                              else (dim,))}
    target = tuple(s for i, s in enumerate(shape) if not (i in dims and s == 1))
    return view_op(input, RESHAPE, {"shape": target})


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """Insert a size-1 dim at `dim` (negative dims count from ndim + 1). A view."""
    shape = tuple(sizes(input))
    d = normalize_dim(dim, len(shape) + 1)
    return view_op(input, RESHAPE, {"shape": shape[:d] + (1,) + shape[d:]})


# ----- permute family ----------------------------------------------------------------

def permute(input: Tensor, *dims: Any) -> Tensor:
    """Reorder dims (a view). Raises RuntimeError unless `dims` is a permutation."""
    ndim = input._data.ndim
    dims = tuple(normalize_dim(d, ndim) for d in _shape_arg(dims, "dims"))
    if sorted(dims) != list(range(ndim)):
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {ndim} is not equal to len(dims) = {len(dims)}"
                           if len(dims) != ndim else "permute(): duplicate dims are not allowed "
                           f"(got dims {list(dims)})")
    return view_op(input, PERMUTE, {"dims": dims})


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two dims (a view)."""
    ndim = input._data.ndim
    dims = list(range(ndim))
    a, b = normalize_dim(dim0, ndim), normalize_dim(dim1, ndim)
    if ndim:
        dims[a], dims[b] = dims[b], dims[a]
    return view_op(input, PERMUTE, {"dims": tuple(dims)})


swapaxes = swapdims = transpose


def t(input: Tensor) -> Tensor:
    """Transpose a 2-D tensor; 0-D and 1-D tensors come back as they are (as views).

    Raises RuntimeError for more than 2 dims (use transpose or mT).
    """
    ndim = input._data.ndim
    if ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {ndim}D; "
                           "use transpose(dim0, dim1) or .mT for batches of matrices")
    return view_op(input, PERMUTE, {"dims": tuple(range(ndim))[::-1]})


def _numpy_t(input: Tensor) -> Tensor:
    ndim = input._data.ndim
    if ndim == 0:
        warnings.warn("Tensor.T is deprecated on 0-D tensors. This function is the identity in "
                      "these cases.", UserWarning, stacklevel=2)
    elif ndim != 2:
        warnings.warn("The use of `x.T` on tensors of dimension other than 2 to reverse their "
                      "shape is deprecated and it will throw an error in a future release. "
                      "Consider `x.mT` to transpose batches of matrices or "
                      "`x.permute(*torch.arange(x.ndim - 1, -1, -1))` to reverse the dimensions "
                      "of a tensor.", UserWarning, stacklevel=2)
    return view_op(input, PERMUTE, {"dims": tuple(range(ndim))[::-1]})


def matrix_transpose(input: Tensor, attribute: str = "mT") -> Tensor:
    """`x.mT` (and, for real dtypes, `x.mH`): the last two dims swapped. Raises
    RuntimeError below 2 dims, naming `attribute`."""
    ndim = input._data.ndim
    if ndim < 2:
        raise RuntimeError(f"tensor.{attribute} is only supported on matrices or batches of "
                           f"matrices. Got {ndim}-D tensor.")
    return transpose(input, -2, -1)


def movedim(input: Tensor, source: Any, destination: Any) -> Tensor:
    """Move dims `source` to positions `destination` (ints or sequences); others keep order."""
    ndim = input._data.ndim
    src = tuple(source) if isinstance(source, (tuple, list)) else (source,)
    dst = tuple(destination) if isinstance(destination, (tuple, list)) else (destination,)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} "
                           f"dims) should contain the same number of dims as destination "
                           f"({list(dst)} dims)")
    src = tuple(normalize_dim(int(d), ndim) for d in src)
    dst = tuple(normalize_dim(int(d), ndim) for d in dst)
    for name, dims in (("source", src), ("destination", dst)):
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({list(dims)})")
    rest = iter(d for d in range(ndim) if d not in src)
    placed = dict(zip(dst, src, strict=True))
    order = tuple(placed[i] if i in placed else next(rest) for i in range(ndim))
    return view_op(input, PERMUTE, {"dims": order})


moveaxis = movedim


# ----- expand family -----------------------------------------------------------------

def expanded_shape(shape: tuple[int, ...], sizes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape `expand(*sizes)` gives a tensor of `shape` (-1 keeps a size).

    Raises RuntimeError with PyTorch's message when a non-singleton size differs.
    """
    lead = len(sizes) - len(shape)
    if lead < 0:
        raise RuntimeError(f"expand({list(shape)}, size={list(sizes)}): the number of sizes "
                           f"provided ({len(sizes)}) must be greater "
                           f"or equal to the number of dimensions in the tensor ({len(shape)})")
    target = []
    for i, s in enumerate(sizes):
        current = shape[i - lead] if i >= lead else None
        if s == -1:
            if current is None:
                raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a "
                                   f"leading, non-existing dimension {i}")
            s = current
        elif current is not None and current != 1 and current != s:
            raise RuntimeError(
                f"The expanded size of the tensor ({s}) must match the existing size ({current}) "
                f"at non-singleton dimension {i}.  Target sizes: {list(sizes)}.  "
                f"Tensor sizes: {list(shape)}")
        target.append(s)
    return tuple(target)


def expand(input: Tensor, *shape: Any) -> Tensor:
    """Broadcast to `sizes` without copying (-1 keeps a dim). New leading dims are allowed."""
    target = expanded_shape(tuple(sizes(input)), _shape_arg(shape))
    return view_op(input, EXPAND, {"shape": target})


def expand_as(input: Tensor, other: Tensor) -> Tensor:
    """`input.expand(other.shape)`."""
    return expand(input, sizes(other))


def broadcast_to(input: Tensor, size: Any) -> Tensor:
    """`input.expand(size)`."""
    return expand(input, tuple(size))


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """Expand every tensor to their common broadcast shape (views).

    Raises RuntimeError naming the shapes when they do not broadcast.
    """
    shape: tuple[int, ...] = ()
    for t in tensors:
        try:
            shape = np.broadcast_shapes(shape, t._data.shape)
        except ValueError:
            raise broadcast_error("broadcast_tensors", [shape, t._data.shape]) from None
    return tuple(expand(t, shape) for t in tensors)


def meshgrid(*tensors: Any, indexing: str | None = None) -> tuple[Tensor, ...]:
    """Coordinate grids of 0-d/1-D tensors, as expanded views (one per input).

    indexing: "ij" (output dim i follows input i) or "xy" (first two dims swapped);
    without it PyTorch warns and uses "ij". Raises RuntimeError for inputs above 1-D.
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the "
                      "indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                           f"received: {indexing}")
    for t in tensors:
        if t._data.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but "
                               f"got a tensor of shape {list(t._data.shape)}")
    sizes = [t._data.size for t in tensors]
    swap = indexing == "xy" and len(tensors) >= 2
    if swap:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    grids = []
    for i, t in enumerate(tensors):
        dim = {0: 1, 1: 0}.get(i, i) if swap else i
        shape = [1] * len(tensors)
        shape[dim] = -1
        grids.append(expand(reshape(t, *shape), *sizes))
    return tuple(grids)


# ----- copies ------------------------------------------------------------------------

def clone(input: Tensor, *, memory_format: Any = None) -> Tensor:
    """A copy with its own storage (same strides order), differentiable (identity gradient)."""
    return apply_op(CLONE, (input,), (input._data,), {"order": "K"})


def contiguous(input: Tensor, memory_format: Any = None) -> Tensor:
    """`input` itself when already C-contiguous, else a C-contiguous copy."""
    if input._data.flags.c_contiguous:
        return input
    return apply_op(CLONE, (input,), (input._data,), {"order": "C"})


__all__ = ["reshape", "permute", "transpose", "swapaxes", "swapdims", "t", "squeeze", "unsqueeze",
           "flatten", "unflatten", "ravel", "movedim", "moveaxis", "broadcast_to",
           "broadcast_tensors", "meshgrid", "clone", *slicing.__all__, *joining.__all__]

METHODS = {
    "reshape": reshape, "view": view, "view_as": view_as, "reshape_as": reshape_as,
    "ravel": ravel, "flatten": flatten, "unflatten": unflatten, "squeeze": squeeze,
    "unsqueeze": unsqueeze, "permute": permute, "transpose": transpose, "swapaxes": swapaxes,
    "swapdims": swapdims, "t": t, "T": property(_numpy_t), "mT": property(matrix_transpose),
    "movedim": movedim, "moveaxis": moveaxis, "expand": expand, "expand_as": expand_as,
    "broadcast_to": broadcast_to, "clone": clone, "contiguous": contiguous,
    **slicing.METHODS, **joining.METHODS,
}
