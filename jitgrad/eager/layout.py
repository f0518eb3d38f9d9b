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
