"""Methods about a tensor's memory: `resize_`, the deprecated `resize`, `pin_memory`,
`is_pinned`.

Note [Storage of a numpy-backed tensor]: a jitgrad tensor's storage is the numpy array at
the root of its `.base` chain, and the tensor starts `offset` bytes into it. `resize_`
follows PyTorch: the new shape is laid out contiguously from that offset; while it fits in
the storage the tensor stays a view of it (shrinking and growing back recovers the old
values, as in PyTorch), and when it does not, new memory is allocated holding the old
storage's values first and zeros after them (PyTorch leaves them uninitialized). numpy
cannot grow memory in place, so tensors that shared the old storage keep reading it:
growing a view is refused for that reason, and other tensors that view a grown one (rare:
resize_ is used on fresh buffers) no longer alias it.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from jitgrad.eager.ops.creation import size_of
from jitgrad.eager.tensor import Tensor


def _storage(data: np.ndarray) -> tuple[np.ndarray, int]:
    """(the root array of `data`'s base chain, data's offset into it in bytes)."""
    root = data
    while isinstance(root.base, np.ndarray):
        root = root.base
    offset = data.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return root, offset


def _resized(data: np.ndarray, shape: tuple[int, ...], is_view: bool) -> np.ndarray:
    root, offset = _storage(data)
    itemsize = data.dtype.itemsize
    contiguous = root.flags.c_contiguous or root.flags.f_contiguous
    capacity = (root.nbytes - offset) // itemsize if contiguous else 0
    if math.prod(shape) <= capacity:
        return np.ndarray(shape, data.dtype, buffer=root, offset=offset)
    if is_view:
        raise RuntimeError(f"resize_: jitgrad cannot grow the storage of a view to {list(shape)} "
                           f"(its base would not see the new memory); resize the base, or "
                           f"clone() the view first")
    grown = np.zeros(shape, data.dtype)
    old = (np.ndarray((capacity,), data.dtype, buffer=root, offset=offset) if contiguous
           else data.ravel())
    grown.reshape(-1)[:old.size] = old
    return grown


def resize_(self: Tensor, *sizes: Any) -> Tensor:
    """Give self the shape `sizes` over its storage, growing the storage when needed (see
    Note [Storage of a numpy-backed tensor]); the same shape changes nothing.

    Raises RuntimeError for a tensor that requires grad, a negative size, or growing a view.
    """
    if self._requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    shape = size_of(sizes)
    if shape == self._data.shape:
        return self
    self._data = _resized(self._data, shape, self._view is not None)
    self._bump_version()
    return self


def resize(self: Tensor, *sizes: Any) -> Tensor:
    """Deprecated `Tensor.resize`: a view of self with shape `sizes` and the same number of
    elements (torch's autograd Resize: `self.contiguous().view(sizes)`), with gradient.

    Raises RuntimeError when the element count differs.
    """
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    shape = size_of(sizes)
    if math.prod(shape) != self.numel():
        raise RuntimeError(
            f"requested resize to {'x'.join(map(str, shape))} ({math.prod(shape)} elements in "
            f"total), but the given tensor has a size of {'x'.join(map(str, self.shape))} "
            f"({self.numel()} elements). autograd's resize can only change the shape of a "
            "given tensor, while preserving the number of elements.")
    return self.contiguous().view(shape)


def pin_memory(self: Tensor, device: Any = None) -> Tensor:
    """Raises RuntimeError, as PyTorch does without an accelerator."""
    raise RuntimeError("Cannot access accelerator device when none is available.")


def is_pinned(self: Tensor, device: Any = None) -> bool:
    """False: CPU memory is never pinned without an accelerator."""
    return False


METHODS = {"resize_": resize_, "resize": resize, "pin_memory": pin_memory,
           "is_pinned": is_pinned}
