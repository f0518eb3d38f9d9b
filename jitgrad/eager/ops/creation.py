"""Creating tensors: from data, filled, ranges, random; dtype conversion.

Dtypes follow PyTorch (research/eager_autograd.md §2.1): Python floats give float32,
ints int64, bools bool; numpy arrays keep their dtype (float64 stays float64).
Random numbers come from numpy's PCG64 through `Generator`; jitgrad does not try to
reproduce PyTorch's random stream, so seeded runs are reproducible within jitgrad only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jitgrad.eager import dtypes
from jitgrad.eager.ops.registry import apply_op, register
from jitgrad.eager.tensor import Tensor

ERR_INT_REQUIRES_GRAD = ("Only Tensors of floating point and complex dtype can require "
                         "gradients (got {dtype}); create a float tensor, e.g. dtype=jitgrad.float32")


def _array_from_data(data: Any, dtype: Any) -> np.ndarray:
    """A fresh numpy array holding `data`, with PyTorch's dtype inference."""
    if isinstance(data, Tensor):
        array = np.array(data._data, copy=True)
    elif isinstance(data, np.ndarray):
        array = np.array(data, copy=True)
        if dtype is None:
            dtypes.from_numpy_dtype(array.dtype)  # raises for unsupported numpy dtypes
    else:
        if isinstance(data, (list, tuple)):
            data = _unwrap_nested(data)
        array = np.array(data)
        if array.dtype == object:
            raise TypeError(f"Could not infer dtype of {type(data).__name__}: jitgrad.tensor "
                            "takes numbers, nested lists of numbers, numpy arrays or Tensors")
        if dtype is None:
            kind = array.dtype.kind
            if kind == "f" and not isinstance(data, np.generic):
                array = array.astype(dtypes.get_default_dtype().np)
            elif kind in "iu" and not isinstance(data, np.generic):
                array = array.astype(np.int64)
            elif kind == "U" or kind == "S":
                raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    if dtype is not None:
        d = dtypes.to_dtype(dtype)
        dtypes.check_supported(d, "tensor")
        array = array.astype(d.np, copy=False)
    return array


def _unwrap_nested(data: Any) -> Any:
    if isinstance(data, Tensor):
        return data._data
    if isinstance(data, (list, tuple)):
        return [_unwrap_nested(x) for x in data]
    return data


def _finish(array: np.ndarray, requires_grad: bool) -> Tensor:
    if requires_grad and array.dtype.kind != "f":
        raise RuntimeError(ERR_INT_REQUIRES_GRAD.format(dtype=dtypes.from_numpy_dtype(array.dtype)))
    return Tensor._make(array, bool(requires_grad))


def tensor(data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False,
           pin_memory: bool = False) -> Tensor:
    """A new leaf tensor holding a copy of `data` (numbers, nested lists, arrays, Tensors).

    Raises RuntimeError for `requires_grad=True` on a non-float dtype.
    """
    return _finish(_array_from_data(data, dtype), requires_grad)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """`data` as a tensor, sharing memory with a numpy array or Tensor when the dtype matches."""
    if isinstance(data, Tensor) and (dtype is None or dtypes.to_dtype(dtype).np == data._data.dtype):
        return data
    if isinstance(data, np.ndarray) and (dtype is None or dtypes.to_dtype(dtype).np == data.dtype):
        return from_numpy(data)
    return tensor(data, dtype=dtype)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with a numpy array (dtype kept)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    dtypes.from_numpy_dtype(array.dtype)
    return Tensor._make(array)


def legacy_tensor_constructor(cls: type, *args: Any, **kwargs: Any) -> Tensor:
    """`jitgrad.Tensor(data)` or `jitgrad.Tensor(2, 3)` (uninitialized float32), as PyTorch's."""
    if len(args) == 1 and not isinstance(args[0], int):
        t = tensor(args[0], dtype=dtypes.get_default_dtype())
    else:
        t = empty(*args)
    out = object.__new__(cls)
    for slot in Tensor.__slots__:
        if slot not in ("__weakref__", "__dict__"):
            setattr(out, slot, getattr(t, slot))
    return out


def rebuild_tensor(array: np.ndarray, requires_grad: bool, cls: type = Tensor) -> Tensor:
    """Unpickling helper: a leaf tensor of class `cls` holding `array`."""
    t = cls._make(array, requires_grad)  # type: ignore[attr-defined]
    return t


def _size(size: Sequence[Any]) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return tuple(int(s) for s in size)


def _factory_dtype(dtype: Any, default: dtypes.dtype | None = None) -> np.dtype:
    d = dtypes.to_dtype(dtype) if dtype is not None else (default or dtypes.get_default_dtype())
    dtypes.check_supported(d, "factory")
    return d.np


def zeros(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros (default float32)."""
    return _finish(np.zeros(_size(size), _factory_dtype(dtype)), requires_grad)


def ones(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones (default float32)."""
    return _finish(np.ones(_size(size), _factory_dtype(dtype)), requires_grad)


def empty(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """An uninitialized tensor (default float32)."""
    return _finish(np.empty(_size(size), _factory_dtype(dtype)), requires_grad)


def full(size: Sequence[int], fill_value: Any, *, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """A tensor filled with `fill_value`; the dtype follows the value (float32, int64, bool)."""
    default = dtypes.python_scalar_dtype(fill_value) if not isinstance(fill_value, Tensor) else None
    return _finish(np.full(_size((size,)), fill_value, _factory_dtype(dtype, default)), requires_grad)


def _like(input: Tensor, dtype: Any) -> np.dtype:
    return dtypes.to_dtype(dtype).np if dtype is not None else input._data.dtype


def zeros_like(input: Tensor, *, dtype: Any = None, device: Any = None,
               requires_grad: bool = False) -> Tensor:
    return _finish(np.zeros(input._data.shape, _like(input, dtype)), requires_grad)


def ones_like(input: Tensor, *, dtype: Any = None, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    return _finish(np.ones(input._data.shape, _like(input, dtype)), requires_grad)


def empty_like(input: Tensor, *, dtype: Any = None, device: Any = None,
               requires_grad: bool = False) -> Tensor:
    return _finish(np.empty(input._data.shape, _like(input, dtype)), requires_grad)


def full_like(input: Tensor, fill_value: Any, *, dtype: Any = None, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    return _finish(np.full(input._data.shape, fill_value, _like(input, dtype)), requires_grad)


def arange(start: Any, end: Any = None, step: Any = 1, *, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """Values from start (inclusive) to end (exclusive): int64 for ints, float32 otherwise."""
    if end is None:
        start, end = 0, start
    values = [float(v) if isinstance(v, Tensor) and v.is_floating_point() else v
              for v in (start, end, step)]
    values = [v.item() if isinstance(v, Tensor) else v for v in values]
    if step == 0:
        raise RuntimeError("arange: step must be nonzero")
    is_int = all(isinstance(v, (int, np.integer)) for v in values)
    default = dtypes.int64 if is_int else dtypes.get_default_dtype()
    array = np.arange(*values, dtype=np.float64 if not is_int else np.int64)
    return _finish(array.astype(_factory_dtype(dtype, default)), requires_grad)


def linspace(start: float, end: float, steps: int, *, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """`steps` evenly spaced values from start to end inclusive."""
    return _finish(np.linspace(start, end, int(steps)).astype(_factory_dtype(dtype)), requires_grad)


def eye(n: int, m: int | None = None, *, dtype: Any = None, device: Any = None,
        requires_grad: bool = False) -> Tensor:
    """The n x m identity matrix."""
    return _finish(np.eye(n, m, dtype=_factory_dtype(dtype)), requires_grad)


# ----- dtype conversion (differentiable between float dtypes) -------------------------

def _to_dtype_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (g,)  # the engine casts the gradient back to the input's dtype


TO_DTYPE = register("to_dtype", lambda x, np_dtype: x.astype(np_dtype), _to_dtype_backward,
                    source="identity on values; the engine casts the gradient back")


def to_dtype(input: Tensor, dtype: Any, copy: bool = False) -> Tensor:
    """Cast to `dtype`; returns `input` itself when nothing changes (unless copy)."""
    d = dtypes.to_dtype(dtype)
    dtypes.check_supported(d, "to")
    if d.np == input._data.dtype and not copy:
        return input
    out = apply_op(TO_DTYPE, (input,), (input._data,), {"np_dtype": d.np})
    if d.np.kind != "f" and out._grad_fn is not None:
        out._grad_fn, out._requires_grad = None, False
    return out


def view_as_dtype(input: Tensor, dtype: Any) -> Tensor:
    """Reinterpret the bytes as another dtype of the same size (no autograd)."""
    d = dtypes.to_dtype(dtype)
    if d.itemsize != input._data.itemsize:
        raise RuntimeError(f"view(dtype): {input.dtype} and {d} differ in element size")
    return Tensor._make(input._data.view(d.np))


__all__ = ["tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "zeros_like",
           "ones_like", "empty_like", "full_like", "arange", "linspace", "eye"]


def _to(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """`t.to(dtype)`, `t.to("cpu")`, `t.to(other)`, `t.to(device, dtype)`."""
    dtype = kwargs.get("dtype")
    copy = kwargs.get("copy", False)
    for a in args:
        if isinstance(a, Tensor):
            dtype = a.dtype
        elif isinstance(a, (dtypes.dtype, type)) or (isinstance(a, str) and a in dtypes.ALIASES):
            dtype = a
        elif isinstance(a, np.dtype):
            dtype = a
    return to_dtype(self, dtype, copy) if dtype is not None else self


METHODS = {
    "to": _to,
    "type": lambda self, dtype=None: self.dtype if dtype is None else to_dtype(self, dtype),
    "type_as": lambda self, other: to_dtype(self, other.dtype),
    "float": lambda self: to_dtype(self, dtypes.float32),
    "double": lambda self: to_dtype(self, dtypes.float64),
    "half": lambda self: to_dtype(self, dtypes.float16),
    "long": lambda self: to_dtype(self, dtypes.int64),
    "int": lambda self: to_dtype(self, dtypes.int32),
    "short": lambda self: to_dtype(self, dtypes.int16),
    "bool": lambda self: to_dtype(self, dtypes.bool_),
    "byte": lambda self: to_dtype(self, dtypes.uint8),
    "cpu": lambda self: self,
    "new_zeros": lambda self, *size, dtype=None, **kw: zeros(*size, dtype=dtype or self.dtype),
    "new_ones": lambda self, *size, dtype=None, **kw: ones(*size, dtype=dtype or self.dtype),
    "new_empty": lambda self, *size, dtype=None, **kw: empty(*size, dtype=dtype or self.dtype),
    "new_full": lambda self, size, value, dtype=None, **kw: full(size, value,
                                                                dtype=dtype or self.dtype),
    "new_tensor": lambda self, data, dtype=None, **kw: tensor(data, dtype=dtype or self.dtype),
}
