"""Memory layout of tensor data: strides in elements, storage offset, and arrays that have
a given layout without holding data.

A Tensor's storage is the numpy array at the root of its data's `.base` chain (views share
it); its storage offset is how many elements its first element lies past the storage's
first one, as `torch.Tensor.storage_offset()`.

`layout_array` gives a read-only array of any shape, dtype, strides and storage offset
whose memory is one shared anonymous mapping that is never written: reading it maps the
kernel's zero page, so a shape of any size costs address space, not memory. The compiler's
fake tensors are such arrays, and shape/dtype rules run forwards on them, so the layout of
what numpy returns (a view's strides and offset, the order of a pointwise result) is the
layout an eager call produces (see Note [Shape/dtype rules] in ops/registry.py).

What layout a result gets is PyTorch's, not numpy's (Note [Result layouts] in
ops/registry.py): `iterator_strides` is TensorIterator's stride-order rule for elementwise
results, `index_strides` that rule as advanced indexing applies it, `preserved_strides`
torch.preserve_format's for `*_like`, and `with_strides` lays an array out so.
"""

from __future__ import annotations

import mmap

import numpy as np

_MIN_MAPPING_BYTES = 1 << 20


class _ZeroMemory:
    """One read-only uint8 array over an anonymous mapping, replaced by a larger one when
    an array needs more (arrays made earlier keep theirs alive)."""

    def __init__(self) -> None:
        self.bytes = self._map(_MIN_MAPPING_BYTES)

    @staticmethod
    def _map(nbytes: int) -> np.ndarray:
        buffer = np.frombuffer(mmap.mmap(-1, nbytes), dtype=np.uint8)
        buffer.flags.writeable = False
        return buffer

    def at_least(self, nbytes: int) -> np.ndarray:
        if nbytes > self.bytes.size:
            self.bytes = self._map(max(nbytes, 2 * self.bytes.size))
        return self.bytes


_ZEROS = _ZeroMemory()


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """C-order strides in elements (PyTorch's for a fresh tensor)."""
    strides = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def element_strides(array: np.ndarray) -> tuple[int, ...]:
    return tuple(s // array.itemsize for s in array.strides)


def storage_offset(array: np.ndarray) -> int:
    """Elements between the first element of `array`'s storage (root base) and its own."""
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    delta = array.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return delta // array.itemsize


def layout_array(shape: tuple[int, ...], np_dtype: np.dtype, strides: tuple[int, ...] | None,
                 offset: int = 0) -> np.ndarray:
    """A read-only zero array with this shape, dtype, strides (elements; None: C order) and
    storage offset, over shared zero memory (see the module docstring)."""
    np_dtype = np.dtype(np_dtype)
    strides = contiguous_strides(shape) if strides is None else strides
    itemsize = np_dtype.itemsize
    low = high = offset * itemsize
    if all(shape):
        for size, stride in zip(shape, strides, strict=True):
            span = (size - 1) * stride * itemsize
            low, high = (low + span, high) if span < 0 else (low, high + span)
        high += itemsize
    start = -min(low, 0)  # negative strides reach before the first element
    memory = _ZEROS.at_least(start + high)
    return np.ndarray(shape, np_dtype, buffer=memory, offset=start + offset * itemsize,
                      strides=tuple(s * itemsize for s in strides))


def iterator_strides(shape: tuple[int, ...], operands: list[np.ndarray]) -> tuple[int, ...]:
    """Element strides of the result of an elementwise op on `operands` (broadcast to
    `shape`), as PyTorch's TensorIterator lays it out (TensorIteratorBase::reorder_dimensions):
    the dims are sorted by the operands' strides, the first operand deciding and the next
    one breaking its ties (equal strides: the smaller dim first); a broadcast dim (stride 0)
    has no say. The result is dense in that order: `x.t() * y` is strided like `x.t()`.
    """
    return _dense_in_order(shape, [_broadcast_strides(a, shape) for a in operands])


def index_strides(src: np.ndarray, index: tuple, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of `src[index]` (`shape`), where `index` holds integer arrays and
    full slices (the advanced stage of Note [Basic then advanced] in ops/indexing.py), as
    PyTorch lays out an advanced-indexing result: TensorIterator's rule over `src`
    restrided (the indexed dims replaced by the index arrays' broadcast shape at stride 0;
    moved to the front first when the arrays are separated by a slice, as numpy places
    them) and each index array, broadcast to that shape, at stride 0 elsewhere
    (TensorAdvancedIndexing's `restride_src`/`reshape_indexer`). So `c.t()[ids]` follows
    `c.t()` in the dims it keeps: measured on torch 2.13. Any other index (a backward
    formula's slices or masks) gives a C-contiguous copy."""
    if type(index) is not tuple:
        index = (index,)
    if not any(type(item) is np.ndarray for item in index) or not all(
            item == _FULL if type(item) is slice else
            type(item) is np.ndarray and item.dtype.kind in "iu" for item in index):
        return contiguous_strides(shape)
    positions = [d for d, item in enumerate(index) if isinstance(item, np.ndarray)]
    arrays = [index[d] for d in positions]
    indexed = np.broadcast_shapes(*(a.shape for a in arrays))
    own = element_strides(src)
    if positions == list(range(positions[0], positions[-1] + 1)):
        before, after = own[:positions[0]], own[positions[-1] + 1:]
    else:
        before, after = (), tuple(own[d] for d in range(src.ndim) if d not in positions)
    operands = [before + (0,) * len(indexed) + after]
    for a in arrays:  # expanded to the indexed shape, then viewed with 1s around it
        expanded = _expanded_strides(a.shape, element_strides(a), indexed)
        viewed = (1,) * len(before) + indexed + (1,) * len(after)
        operands.append(_broadcast(_view_strides(indexed, expanded, viewed), viewed, shape))
    return _dense_in_order(shape, operands)


_FULL = slice(None)


def _broadcast(strides: tuple[int, ...], own: tuple[int, ...], shape: tuple[int, ...]
               ) -> tuple[int, ...]:
    """`strides` of an operand of shape `own` as TensorIterator sees it in `shape`: a
    broadcast dim (size 1 in `own` only) has stride 0; a size-1 dim keeps its stride."""
    return tuple(0 if size == 1 and out != 1 else stride
                 for stride, size, out in zip(strides, own, shape, strict=True))


def _expanded_strides(own: tuple[int, ...], strides: tuple[int, ...], shape: tuple[int, ...]
                      ) -> tuple[int, ...]:
    """The strides `expand(shape)` gives (c10's inferExpandGeometry): a broadcast dim gets
    0; a new leading dim of size 1 the span of the dim after it."""
    out = [0] * len(shape)
    lead = len(shape) - len(own)
    for i in range(len(shape) - 1, -1, -1):
        size = own[i - lead] if i >= lead else 1
        if i >= lead:
            stride = strides[i - lead]
        else:
            stride = shape[i + 1] * out[i + 1] if i + 1 < len(shape) else 1
        out[i] = 0 if size != shape[i] else stride
    return tuple(out)


def _view_strides(own: tuple[int, ...], strides: tuple[int, ...], shape: tuple[int, ...]
                  ) -> tuple[int, ...]:
    """The strides `view(shape)` gives a tensor of shape `own` and `strides` that is
    viewable so (ATen's computeStride): each run of dims that steps as one block is
    spread over the new dims of the same element count, size-1 dims included."""
    if not own:
        return (1,) * len(shape)
    if 0 in own:
        return contiguous_strides(shape)
    out = [0] * len(shape)
    view_d = len(shape) - 1
    base = strides[-1]
    own_numel = view_numel = 1
    for d in range(len(own) - 1, -1, -1):
        own_numel *= own[d]
        if d == 0 or (own[d - 1] != 1 and strides[d - 1] != own_numel * base):
            while view_d >= 0 and (view_numel < own_numel or shape[view_d] == 1):
                out[view_d] = view_numel * base
                view_numel *= shape[view_d]
                view_d -= 1
            if d > 0:
                base = strides[d - 1]
                own_numel = view_numel = 1
    return tuple(out)


def _dense_in_order(shape: tuple[int, ...], strides: list[tuple[int, ...]]) -> tuple[int, ...]:
    """Dense strides for `shape`, its dims ordered by the operands' `strides` (broadcast to
    `shape`) with TensorIterator's insertion sort (see `iterator_strides`)."""
    ndim = len(shape)
    perm = list(range(ndim - 1, -1, -1))  # perm[0] is the fastest-moving dim
    for i in range(1, ndim):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            order = _dim_order(shape, strides, perm[dim0], perm[dim1])
            if order > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif order < 0:
                break
    out = [0] * ndim
    step = 1
    for d in perm:
        out[d] = step
        step *= max(shape[d], 1)
    return tuple(out)


def _broadcast_strides(array: np.ndarray, shape: tuple[int, ...]) -> tuple[int, ...]:
    lead = len(shape) - array.ndim
    return (0,) * lead + _broadcast(element_strides(array), array.shape, shape[lead:])


def _dim_order(shape: tuple[int, ...], strides: list[tuple[int, ...]], dim0: int,
               dim1: int) -> int:
    """1 if dim0 should move after dim1 (be slower), -1 if before, 0 if no operand says."""
    for s in strides:
        s0, s1 = s[dim0], s[dim1]
        if s0 == 0 or s1 == 0:
            continue
        if s0 != s1:
            return -1 if s0 < s1 else 1
        if shape[dim0] > shape[dim1]:
            return 1
    return 0


def with_strides(array: np.ndarray, strides: tuple[int, ...]) -> np.ndarray:
    """`array`'s values in a new array with these element strides (dense in some order)."""
    if element_strides(array) == strides:
        return array
    order = sorted(range(array.ndim), key=lambda d: -strides[d])  # slowest dim first
    out = np.empty([array.shape[d] for d in order], dtype=array.dtype)
    out = out.transpose(np.argsort(order))
    out[...] = array
    if element_strides(out) != strides:  # a size-1 dim's stride: any value, never stepped
        out = np.lib.stride_tricks.as_strided(out, strides=[s * out.itemsize for s in strides])
    return out


def non_overlapping_and_dense(array: np.ndarray) -> bool:
    """Whether the elements fill one block of memory exactly, in some order of the dims
    (PyTorch's is_non_overlapping_and_dense; size-1 dims do not count)."""
    expected = 1
    for stride, size in sorted((st, sz) for st, sz in zip(element_strides(array), array.shape,
                                                             strict=True) if sz != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def preserved_strides(array: np.ndarray) -> tuple[int, ...]:
    """Element strides of a new tensor made like `array` (torch.preserve_format: `*_like`,
    `clone`): array's own when they are non-overlapping and dense, else dense in the order
    of its strides."""
    if non_overlapping_and_dense(array):
        return element_strides(array)
    return iterator_strides(array.shape, [array])
