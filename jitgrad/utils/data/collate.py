"""Turning a list of samples into a batch (torch.utils.data.default_collate / default_convert).

The rules are PyTorch's: tensors are stacked along a new first dim; numpy arrays and
numpy scalars become tensors and are stacked; Python floats become float64, ints int64,
bools bool; strings stay a list; dicts, namedtuples, tuples and lists are collated field
by field (a tuple of fields comes back as a list, as in PyTorch).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jitgrad.eager.ops.creation import tensor
from jitgrad.eager.ops.joining import stack
from jitgrad.eager.tensor import Tensor

ERR_COLLATE = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
               "lists; found {}")


def _stack_tensors(batch: Sequence[Tensor]) -> Tensor:
    if any(t._requires_grad for t in batch):
        return stack(list(batch))  # keeps the autograd graph
    return Tensor._make(np.stack([t._data for t in batch]))


def default_collate(batch: Sequence[Any]) -> Any:
    """Collate a list of samples into one batch; see the module docstring.

    Raises RuntimeError when sequence samples differ in length, TypeError for a sample
    type it cannot collate.
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return _stack_tensors(batch)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "USO":
            raise TypeError(ERR_COLLATE.format(elem.dtype))
        return Tensor._make(np.stack(batch))
    if isinstance(elem, np.generic):
        return tensor(np.array(batch))
    if isinstance(elem, float):
        return tensor(batch, dtype=np.float64)
    if isinstance(elem, int):  # also bool, which gives a bool tensor
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, Mapping):
        return {key: default_collate([sample[key] for sample in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(list(field)) for field in zip(*batch, strict=True)))
    if isinstance(elem, Sequence):
        if any(len(sample) != len(elem) for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(list(field)) for field in zip(*batch, strict=True)]
    raise TypeError(ERR_COLLATE.format(type(elem)))


def default_convert(data: Any) -> Any:
    """Convert numpy arrays (recursively inside dicts and sequences) to tensors, no batching."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "USO":
        return Tensor._make(data)
    if isinstance(data, Mapping):
        return {key: default_convert(value) for key, value in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        return [default_convert(d) for d in data]
    return data


__all__ = ["default_collate", "default_convert"]
