"""PyTorch's legacy tensor types: `torch.FloatTensor`, `torch.LongTensor`, ... and
`torch.autograd.Variable`, which old tutorials still use everywhere.

A legacy type is not a Tensor subclass (as in PyTorch): it is a constructor with a dtype.
`FloatTensor(2, 3)` or `FloatTensor(Size)` makes an uninitialized tensor of that shape,
`LongTensor([1.7, 2])` converts data (truncating, as a cast does), `FloatTensor()` is empty;
`isinstance(t, FloatTensor)` asks whether t is a float32 CPU tensor, and
`t.type(LongTensor)` converts. The `torch.cuda` types exist so that code naming them imports;
constructing one raises TypeError, as PyTorch without CUDA does.

`Variable(t, requires_grad=False)` returns a tensor sharing t's data, detached from t's
graph, with the requested requires_grad (PyTorch >= 0.4); `isinstance(t, Variable)` holds
for every tensor.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from jitgrad.eager import dtypes
from jitgrad.eager.ops.creation import empty, tensor
from jitgrad.eager.tensor import Size, Tensor

_CPU_ONLY = "jitgrad runs on the CPU only (jitgrad.cuda.is_available() is False)"


class LegacyTensorType(type):
    """The type of `torch.FloatTensor` and its siblings (PyTorch's `torch.tensortype`)."""

    dtype: dtypes.dtype
    is_cuda: bool

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, Tensor) and not cls.is_cuda and obj.dtype == cls.dtype

    def __call__(cls, *args: Any, **kwargs: Any) -> Tensor:
        if cls.is_cuda:
            raise TypeError(f"type {cls.__qualname__} not available: {_CPU_ONLY}")
        if len(args) == 1 and isinstance(args[0], Tensor):
            if args[0].dtype != cls.dtype:
                raise TypeError(f"{cls.__qualname__}(tensor): expected a tensor of dtype "
                                f"{cls.dtype}, got {args[0].dtype}; use tensor.type("
                                f"{cls.__qualname__}) to convert")
            return args[0]
        if len(args) == 1 and not isinstance(args[0], (int, np.integer, Size)):
            return tensor(args[0], dtype=cls.dtype)
        return (empty(*args) if args else empty(0)).to(cls.dtype)

    def __repr__(cls) -> str:
        return f"<class '{cls.__qualname__}'>"


def _legacy_type(module: str, name: str, dtype: dtypes.dtype, is_cuda: bool) -> type:
    cls = LegacyTensorType(name, (), {"dtype": dtype, "is_cuda": is_cuda,
                                      "__module__": module})
    cls.__qualname__ = f"{module}.{name}"
    return cls


LEGACY_DTYPES = {"FloatTensor": dtypes.float32, "DoubleTensor": dtypes.float64,
                 "HalfTensor": dtypes.float16, "LongTensor": dtypes.int64,
                 "IntTensor": dtypes.int32, "ShortTensor": dtypes.int16,
                 "CharTensor": dtypes.int8, "ByteTensor": dtypes.uint8,
                 "BoolTensor": dtypes.bool_}
CPU_TYPES = {name: _legacy_type("jitgrad", name, d, False) for name, d in LEGACY_DTYPES.items()}
CUDA_TYPES = {name: _legacy_type("jitgrad.cuda", name, d, True)
              for name, d in LEGACY_DTYPES.items()}


class _VariableMeta(type):
    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, Tensor)


class Variable(metaclass=_VariableMeta):
    """`Variable(t, requires_grad=False)`: t's data, detached, with that requires_grad."""

    def __new__(cls, data: Any, requires_grad: bool = False, volatile: Any = None) -> Any:
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if volatile is not None:
            warnings.warn("volatile was removed and now has no effect; use "
                          "`with jitgrad.no_grad():` instead", UserWarning, stacklevel=2)
        return data.detach().requires_grad_(requires_grad)


globals().update(CPU_TYPES)  # jitgrad.FloatTensor, ... (torch has no torch.Variable)
__all__ = list(CPU_TYPES)
