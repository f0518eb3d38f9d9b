"""PyTorch's legacy tensor types: `torch.FloatTensor`, `torch.LongTensor`, ... and
`torch.autograd.Variable`, which old tutorials still use everywhere.

A legacy type is not a Tensor subclass (as in PyTorch): it is a constructor with a dtype.
`FloatTensor(2, 3)` or `FloatTensor(Size)` makes an uninitialized tensor of that shape,
`LongTensor([1.7, 2])` converts data (truncating, as a cast does), `FloatTensor()` is empty;
`isinstance(t, FloatTensor)` asks whether t is a float32 CPU tensor, and
`t.type(LongTensor)` converts. The `torch.cuda` types exist so that code naming them imports;
constructing one raises TypeError, as PyTorch without CUDA does.

`t.new(...)` is the legacy constructor on a tensor: t's dtype, and the same forms as the
types (`new(2, 3)`, `new(Size)`, `new(data)`, `new()`); `new(u)` of a tensor u of t's dtype
is an alias of u (a view keeping u's history, as torch's AliasBackward). It takes only a
`device=` keyword. `set_default_tensor_type(FloatTensor or "torch.DoubleTensor")` sets the
default float dtype (deprecated in PyTorch 2.1 and warned about, as there).

`Variable(t, requires_grad=False)` returns a tensor sharing t's data, detached from t's
graph, with the requested requires_grad (PyTorch >= 0.4); `isinstance(t, Variable)` holds
for every tensor.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from jitgrad.eager import dtypes
from jitgrad.eager.ops.creation import check_device, empty, tensor
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


def new(self: Tensor, *args: Any, device: Any = None) -> Tensor:
    """`Tensor.new`: a tensor of self's dtype from sizes (uninitialized), data, or nothing.

    Raises TypeError for a tensor of another dtype, a Python scalar as data, or keywords
    other than `device`; RuntimeError for a negative size.
    """
    check_device(device)
    if len(args) == 1 and isinstance(args[0], Tensor):
        data = args[0]
        if data.dtype != self.dtype:
            raise TypeError(f"new(): expected a tensor of dtype {self.dtype} (that of self), got "
                            f"{data.dtype}")
        return data.view_as(data)
    if len(args) == 1 and isinstance(args[0], (float, complex, bool)):
        raise TypeError(f"new(): data must be a sequence (got {type(args[0]).__name__})")
    if len(args) == 1 and not isinstance(args[0], (int, np.integer, Size)):
        return tensor(args[0], dtype=self.dtype)
    return empty(*args, dtype=self.dtype) if args else empty(0, dtype=self.dtype)


def _default_type_named(name: str) -> type:
    module, _, leaf = name.rpartition(".")
    if module in ("torch.cuda", "jitgrad.cuda"):
        raise TypeError(f"type torch.cuda.{leaf} not available: {_CPU_ONLY}")
    if module not in ("torch", "jitgrad"):
        raise ModuleNotFoundError(f"No module named {name!r}")
    if leaf not in CPU_TYPES:
        raise AttributeError(f"module {module!r} has no attribute {leaf!r}")
    return CPU_TYPES[leaf]


def set_default_tensor_type(t: type | str) -> None:
    """Make `t` (a legacy type or its name, "torch.DoubleTensor") the default: its dtype
    becomes the default float dtype.

    Raises TypeError for a CUDA type or a non-floating type (AttributeError /
    ModuleNotFoundError for a name that is no such type, as PyTorch's import does).
    """
    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.",
                  UserWarning, stacklevel=2)
    legacy = _default_type_named(t) if isinstance(t, str) else t
    if not isinstance(legacy, LegacyTensorType):
        raise TypeError("invalid type object: only floating-point types are supported as the "
                        "default type")
    if legacy.is_cuda:
        raise TypeError(f"type {legacy.__qualname__} not available: {_CPU_ONLY}")
    if not legacy.dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    dtypes.set_default_dtype(legacy.dtype)


globals().update(CPU_TYPES)  # jitgrad.FloatTensor, ... (torch has no torch.Variable)
__all__ = [*CPU_TYPES, "set_default_tensor_type"]

METHODS = {"new": new}
