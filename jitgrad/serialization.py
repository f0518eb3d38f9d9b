"""`save` and `load` (torch.save / torch.load): checkpoints of tensors, state dicts, numbers.

The file is a pickle, not PyTorch's zip archive: jitgrad reads what jitgrad wrote. Tensors
are stored as their numpy arrays plus `requires_grad` and their class (Parameter stays
Parameter); views are saved as independent copies.

`load(weights_only=True)`, the default as in torch >= 2.6, unpickles only Python
containers and scalars, jitgrad tensors, dtypes, Size and device, numpy arrays, and the
globals registered with `add_safe_globals` (or allowed inside a `with safe_globals([...])`
block); any other global raises
pickle.UnpicklingError naming it (a checkpoint from an untrusted source cannot run code).
"""

from __future__ import annotations

import collections
import os
import pickle
from typing import IO, Any

import numpy as np
from numpy._core import multiarray

from jitgrad.eager import dtypes
from jitgrad.eager.devices import device
from jitgrad.eager.ops.creation import check_device, rebuild_tensor
from jitgrad.eager.tensor import Size, Tensor

FileLike = str | os.PathLike | IO[bytes]

# (module, name) pairs that weights_only unpickling resolves, besides Tensor subclasses
_SAFE_GLOBALS: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("numpy._core.multiarray", "_reconstruct"): multiarray._reconstruct,
    ("numpy._core.multiarray", "scalar"): multiarray.scalar,
    ("jitgrad.eager.ops.creation", "rebuild_tensor"): rebuild_tensor,
    ("jitgrad.eager.tensor", "Size"): Size,
    ("jitgrad.eager.tensor", "device"): device,
}
_SAFE_GLOBALS.update({("jitgrad.eager.dtypes", d.name): d for d in dtypes.ALL_DTYPES})


def add_safe_globals(safe_globals: list[Any]) -> None:
    """Allow these classes/functions in `load(weights_only=True)` (e.g. a config dataclass)."""
    for obj in safe_globals:
        _SAFE_GLOBALS[(obj.__module__, obj.__qualname__)] = obj


class safe_globals:  # noqa: N801 - torch's name for this context manager
    """`with safe_globals([cls, ...]):` allows these globals in `load(weights_only=True)` inside
    the block only (torch.serialization.safe_globals), e.g. to load a pickled model."""

    def __init__(self, safe_globals: list[Any]) -> None:
        self._globals = list(safe_globals)
        self._saved: list[dict[tuple[str, str], Any]] = []

    def __enter__(self) -> None:
        self._saved.append(dict(_SAFE_GLOBALS))
        add_safe_globals(self._globals)

    def __exit__(self, *exc: object) -> None:
        _SAFE_GLOBALS.clear()
        _SAFE_GLOBALS.update(self._saved.pop())


class _WeightsUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE_GLOBALS:
            return _SAFE_GLOBALS[(module, name)]
        if module.startswith("jitgrad."):
            obj = super().find_class(module, name)
            if isinstance(obj, type) and issubclass(obj, Tensor):
                return obj
        raise pickle.UnpicklingError(
            f"Weights only load failed: unsupported global {module}.{name} is not an allowed "
            f"global by default. If you trust the file, load it with weights_only=False, or "
            f"allow the global with jitgrad.serialization.add_safe_globals([{name}])")


def save(obj: Any, f: FileLike, pickle_protocol: int = pickle.DEFAULT_PROTOCOL) -> None:
    """Write `obj` (a state dict, a checkpoint dict, a tensor, ...) to a path or binary file."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as file:
            pickle.dump(obj, file, protocol=pickle_protocol)
    else:
        pickle.dump(obj, f, protocol=pickle_protocol)


def load(f: FileLike, map_location: Any = None, *, weights_only: bool = True) -> Any:
    """Read an object written by `save` from a path or binary file.

    map_location: accepted for torch compatibility; a device (or its name) must be the CPU,
    dicts and callables are ignored (every tensor is on the CPU).
    Raises pickle.UnpicklingError when weights_only and the file needs other globals.
    """
    if isinstance(map_location, (str, device)):
        check_device(map_location)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as file:
            return _unpickle(file, weights_only)
    return _unpickle(f, weights_only)


def _unpickle(file: IO[bytes], weights_only: bool) -> Any:
    if not weights_only:
        return pickle.load(file)
    return _WeightsUnpickler(file).load()


__all__ = ["save", "load", "add_safe_globals", "safe_globals"]
