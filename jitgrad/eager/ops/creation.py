"""Creating tensors: from data, filled, ranges; dtype and device conversion.

Dtypes follow PyTorch (research/eager_autograd.md §2.0-§2.1): Python floats give the
default float dtype (float32), ints int64, bools bool; numpy arrays, numpy scalars and
tensors keep their dtype, and the elements of a nested list are promoted together
(`[tensor(1., dtype=float64), 2.0]` is float64, `[tensor(1, dtype=int32), 2]` int64).
`tensor()` copies, `from_numpy()`/`as_tensor()` share memory. jitgrad computes on the
CPU only: `device=` accepts "cpu"; CUDA requests raise RuntimeError.
Random factories live in `random.py`.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, SupportsIndex, cast

import numpy as np

from jitgrad.eager import dtypes, layout
from jitgrad.eager.devices import device
from jitgrad.eager.dtypes import scalar_as
from jitgrad.eager.node import tensor_type_name
from jitgrad.eager.ops.registry import ANY_KIND, apply_op, register
from jitgrad.eager.symbolic_int import any_symbolic
from jitgrad.eager.tensor import Size, Tensor

if TYPE_CHECKING:
    from jitgrad.eager.legacy_types import LegacyTensorType

ERR_INT_REQUIRES_GRAD = ("Only Tensors of floating point and complex dtype can require "
                         "gradients (got {dtype}); create a float tensor, e.g. "
                         "dtype=jitgrad.float32")
WARN_COPY_CONSTRUCT = (
    "To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() "
    "or sourceTensor.detach().clone().requires_grad_(True), rather than "
    "jitgrad.tensor(sourceTensor).")


def check_device(requested: Any) -> None:
    """Accept None or a CPU device. Raises RuntimeError for any other device."""
    if requested is None or requested is device or requested == "cpu":
        return
    kind = device(requested).type if isinstance(requested, (str, device)) else requested
    if kind != "cpu":
        raise RuntimeError(f"jitgrad runs on the CPU only: device {str(requested)!r} is not "
                           "available (jitgrad.cuda.is_available() is False); use device='cpu'")


def finish(array: np.ndarray, requires_grad: bool) -> Tensor:
    """A leaf tensor around `array`. Raises RuntimeError for requires_grad on a non-float dtype."""
    if requires_grad and array.dtype.kind != "f":
        raise RuntimeError(ERR_INT_REQUIRES_GRAD.format(dtype=dtypes.from_numpy_dtype(array.dtype)))
    return Tensor._make(array, bool(requires_grad))


def int_sizes(values: Sequence[Any], argument: str = "size") -> tuple[int, ...]:
    """`values` as Python ints: ints, numpy integers and one-element integer tensors.

    Raises TypeError, as PyTorch does, for floats (`zeros(n / 2)`), bools and float
    tensors, instead of truncating them.
    """
    try:
        if bool not in map(type, values):
            # an int subclass stays itself: the compiler's symbolic sizes ride through
            return tuple(v if isinstance(v, int) else operator.index(v) for v in values)
    except TypeError:
        pass
    pos, bad = next((i, v) for i, v in enumerate(values)
                    if type(v) is bool or not _is_index(v))
    raise TypeError(f"argument '{argument}' must be tuple of ints, but found element of type "
                    f"{type(bad).__name__} at pos {pos} (got {tuple(values)}); compute sizes "
                    f"with integers, e.g. n // 2 or int(x)")


def _is_index(value: Any) -> bool:
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def size_of(size: Sequence[Any], keyword: Any = None, factory: str = "") -> tuple[int, ...]:
    """A shape from varargs `(2, 3)` or one sequence `((2, 3),)`, or (`keyword`) the
    `size=(2, 3)` a factory was called with, as PyTorch's *size factories take it too.

    Raises RuntimeError on negative sizes, TypeError on non-integer ones (see int_sizes)
    and on a size given both ways.
    """
    if keyword is not None:
        if size:
            raise TypeError(f"{factory}() received an invalid combination of arguments: the "
                            "size given both positionally and as size=")
        size = (keyword,)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    shape = int_sizes(size)
    for s in shape:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: "
                               f"{list(shape)}")
    return shape


# ----- from data -----------------------------------------------------------------------

def _element_dtype(data: list | tuple) -> tuple[dtypes.dtype | None, bool]:
    """PyTorch's dtype for the elements of a nested sequence, and whether Tensors occur.

    Each element contributes a dtype (Python float: default float, int: int64, bool: bool,
    numpy scalar/array or Tensor: its own) and they are promoted together (not weakly).
    """
    result: dtypes.dtype | None = None
    has_tensors = False
    stack: list[Any] = [data]
    while stack:
        seq = stack.pop()
        for kind in set(map(type, seq)):
            if issubclass(kind, (list, tuple)):
                stack.extend(x for x in seq if type(x) is kind)
                continue
            if issubclass(kind, (Tensor, np.ndarray)):
                has_tensors = has_tensors or issubclass(kind, Tensor)
                found = [_leaf_dtype(x) for x in seq if type(x) is kind]
            elif issubclass(kind, np.generic):
                found = [dtypes.from_numpy_dtype(np.dtype(kind))]
            elif kind is bool or kind is int or kind is float:
                found = [dtypes.python_scalar_dtype(kind())]
            else:
                continue  # left to numpy, which raises for strings and None
            for d in found:
                result = d if result is None else dtypes.promote_types(result, d)
    return result, has_tensors


def _leaf_dtype(x: Tensor | np.ndarray) -> dtypes.dtype:
    array = x._data if isinstance(x, Tensor) else x
    if isinstance(x, Tensor) and array.size != 1:
        raise ValueError(f"only one element tensors can be converted to Python scalars "
                         f"(a tensor of shape {list(array.shape)} inside a list); use "
                         "jitgrad.stack to combine tensors")
    return dtypes.from_numpy_dtype(array.dtype)


def _unwrap_tensors(data: Any) -> Any:
    """Tensors inside a list are scalars to PyTorch: [tensor([1.]), tensor([2.])] has shape (2,)
    (one-element size already checked by _leaf_dtype); numpy arrays keep their shape."""
    if isinstance(data, Tensor):
        return data._data.reshape(())
    if isinstance(data, (list, tuple)):
        return [_unwrap_tensors(x) for x in data]
    return data


def _array_from_sequence(data: list | tuple) -> tuple[np.ndarray, dtypes.dtype | None]:
    inferred, has_tensors = _element_dtype(data)
    try:
        array = np.array(_unwrap_tensors(data) if has_tensors else data)
    except ValueError as err:
        raise ValueError(f"expected a rectangular nested sequence (all rows of equal length) "
                         f"to build a tensor ({err})") from None
    return array, inferred


def _array_from_data(data: Any, dtype: Any) -> np.ndarray:
    """A fresh numpy array holding `data`, with PyTorch's dtype inference."""
    inferred: dtypes.dtype | None = None
    if isinstance(data, Tensor):
        warnings.warn(WARN_COPY_CONSTRUCT, UserWarning, stacklevel=3)
        array = np.array(data._data, copy=True, subok=True)  # keeps a compiler's fake data
    elif isinstance(data, np.ndarray):
        array = np.array(data, copy=True)
        dtypes.check_supported(dtypes.from_numpy_dtype(array.dtype), "tensor")
    elif isinstance(data, (list, tuple)):
        array, inferred = _array_from_sequence(data)
    elif isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        data = list(data)  # a deque, a range: any sequence, as PyTorch takes them
        array, inferred = _array_from_sequence(data)
    elif isinstance(data, np.generic):  # before Python numbers: np.float64 is a float
        array = np.array(data)
    elif isinstance(data, (bool, int, float)):
        array = np.array(data)
        inferred = dtypes.python_scalar_dtype(data)
    elif data is None:
        raise RuntimeError("Could not infer dtype of NoneType: jitgrad.tensor takes numbers, "
                           "nested lists of numbers, numpy arrays or Tensors")
    else:
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    if array.dtype.kind in "US":
        raise TypeError("new(): invalid data type 'str'")
    if array.dtype.kind in "OV":
        raise RuntimeError("Could not infer dtype: jitgrad.tensor takes numbers, nested lists "
                           "of numbers, numpy arrays or Tensors")
    if inferred is None and array.dtype.kind == "f" and isinstance(data, (list, tuple)):
        inferred = dtypes.get_default_dtype()  # no numbers at all (`[]`): PyTorch's float
    target = dtypes.to_dtype(dtype) if dtype is not None else inferred
    if target is not None:
        dtypes.check_supported(target, "tensor")
        array = array.astype(target.np, copy=False)
    return array


def tensor(data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False,
           pin_memory: bool = False) -> Tensor:
    """A new leaf tensor holding a copy of `data` (numbers, nested lists, arrays, Tensors).

    Dtype: `dtype` if given, else inferred as PyTorch does (see module docstring).
    Raises RuntimeError for `requires_grad=True` on a non-float dtype or a CUDA device,
    TypeError for strings and other non-numeric data, ValueError for ragged lists.
    """
    check_device(device)
    return finish(_array_from_data(data, dtype), requires_grad)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """`data` as a tensor, sharing memory with a numpy array or Tensor when the dtype matches."""
    check_device(device)
    if isinstance(data, Tensor):
        return data if dtype is None else to_dtype(data, dtype)
    if isinstance(data, np.ndarray) and (dtype is None or dtypes.to_dtype(dtype).np == data.dtype):
        return from_numpy(data)
    return tensor(data, dtype=dtype)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with a numpy array (dtype kept). Raises TypeError otherwise."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    dtypes.check_supported(dtypes.from_numpy_dtype(array.dtype), "from_numpy")
    return Tensor._make(array)


def legacy_tensor_constructor(cls: type[Tensor], *args: Any, **kwargs: Any) -> Tensor:
    """`jitgrad.Tensor(data)` or `jitgrad.Tensor(2, 3)` (uninitialized float32), as PyTorch's.

    A `jitgrad.Size` argument is a shape; `jitgrad.Tensor()` is empty with shape (0,).
    Raises TypeError for a lone float (`Tensor(2.0)` is not a size, nor data).
    """
    if not args:
        t = empty(0)
    elif len(args) == 1 and not isinstance(args[0], (int, np.integer, Size)):
        if isinstance(args[0], (float, np.floating)):
            raise TypeError(f"new(): data must be a sequence (got {type(args[0]).__name__}); "
                            f"for a 0-d tensor use jitgrad.tensor({args[0]!r})")
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


def _reduce_ex(self: Tensor, protocol: SupportsIndex) -> Any:
    """Pickle a tensor as its array, requires_grad and class (for rebuild_tensor)."""
    return rebuild_tensor, (np.array(self._data), self._requires_grad, type(self))


def is_tensor(obj: Any) -> bool:
    """True for jitgrad Tensors (and subclasses such as Parameter)."""
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> int:
    """The number of elements of `input`."""
    return input._data.size


def is_floating_point(input: Tensor) -> bool:
    """True if `input` has a floating dtype. Raises TypeError for a non-tensor, as PyTorch."""
    if not isinstance(input, Tensor):
        raise TypeError(f"is_floating_point(): argument 'input' (position 1) must be Tensor, "
                        f"not {type(input).__name__}")
    return input._data.dtype.kind == "f"


# ----- filled -----------------------------------------------------------------------------

def _factory_dtype(dtype: Any, default: dtypes.dtype | None = None) -> np.dtype:
    d = dtypes.to_dtype(dtype) if dtype is not None else (default or dtypes.get_default_dtype())
    return dtypes.numpy_dtype(d, "factory")


# Creation from sizes the compiler traces as symbols (jitgrad/eager/symbolic_int.py): an
# op node instead of a constant, so the graph stays generic in the sizes
FULL = register("full", lambda shape, value, np_dtype: np.full(shape, value, np_dtype),
                inputs=(), elementwise=False)
ARANGE = register("arange", lambda start, end, step, np_dtype: np.arange(
    start, end, step, dtype=np.int64).astype(np_dtype, copy=False), inputs=(),
    elementwise=False)


def _filled(shape: tuple[int, ...], value: Any, np_dtype: Any, requires_grad: bool,
            make: Any) -> Tensor:
    """`make(shape, dtype)` as a leaf, or the FULL op when a size is symbolic."""
    if any_symbolic(shape) and not requires_grad:
        return apply_op(FULL, (), (), {"shape": shape, "value": value,
                                       "np_dtype": np.dtype(np_dtype)})
    return finish(make(shape, np_dtype), requires_grad)


def zeros(*sizes: Any, size: Any = None, dtype: Any = None, device: Any = None,
          requires_grad: bool = False) -> Tensor:
    """A tensor of zeros of the given size (varargs or one tuple); default float32."""
    check_device(device)
    return _filled(size_of(sizes, size, "zeros"), 0, _factory_dtype(dtype), requires_grad,
                   np.zeros)


def ones(*sizes: Any, size: Any = None, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """A tensor of ones of the given size (varargs or one tuple); default float32."""
    check_device(device)
    return _filled(size_of(sizes, size, "ones"), 1, _factory_dtype(dtype), requires_grad,
                   np.ones)


def empty(*sizes: Any, size: Any = None, dtype: Any = None, device: Any = None,
          requires_grad: bool = False) -> Tensor:
    """An uninitialized tensor of the given size (varargs or one tuple); default float32.
    (Traced with a symbolic size, it is zeros.)"""
    check_device(device)
    return _filled(size_of(sizes, size, "empty"), 0, _factory_dtype(dtype), requires_grad,
                   np.empty)


def full(size: Sequence[int], fill_value: Any, *, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """A tensor filled with `fill_value`; the dtype follows the value (float32, int64, bool)."""
    check_device(device)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    np_dtype = _factory_dtype(dtype, dtypes.python_scalar_dtype(fill_value))
    value = scalar_as(fill_value, np.dtype(np_dtype))
    return _filled(size_of((size,)), value, np_dtype, requires_grad,
                   lambda shape, dt: np.full(shape, value, dt))


def _like(input: Tensor, dtype: Any, device: Any) -> np.dtype:
    check_device(device)
    if dtype is None:
        return input._data.dtype
    return dtypes.numpy_dtype(dtypes.to_dtype(dtype), "factory")


def like_layout(array: np.ndarray, input: Tensor) -> np.ndarray:
    """`array` (input's shape) laid out like `input`, as PyTorch's `*_like` functions
    (torch.preserve_format, jitgrad.eager.layout.preserved_strides)."""
    data = input._data
    if not isinstance(data, np.ndarray) or data.flags.c_contiguous:
        return array
    return layout.with_strides(array, layout.preserved_strides(data))


def zeros_like(input: Tensor, *, dtype: Any = None, device: Any = None,
               requires_grad: bool = False) -> Tensor:
    """Zeros with the shape, (default) dtype and layout of `input`."""
    return finish(like_layout(np.zeros(input._data.shape, _like(input, dtype, device)), input),
                  requires_grad)


def ones_like(input: Tensor, *, dtype: Any = None, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    """Ones with the shape, (default) dtype and layout of `input`."""
    return finish(like_layout(np.ones(input._data.shape, _like(input, dtype, device)), input),
                  requires_grad)


def empty_like(input: Tensor, *, dtype: Any = None, device: Any = None,
               requires_grad: bool = False) -> Tensor:
    """Uninitialized, with the shape, (default) dtype and layout of `input`."""
    return finish(like_layout(np.empty(input._data.shape, _like(input, dtype, device)), input),
                  requires_grad)


def full_like(input: Tensor, fill_value: Any, *, dtype: Any = None, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    """`fill_value` everywhere, with the shape, (default) dtype and layout of `input`."""
    return finish(like_layout(np.full(input._data.shape, fill_value,
                                      _like(input, dtype, device)), input), requires_grad)


# ----- ranges ---------------------------------------------------------------------------

def _number(v: Any) -> Any:
    return v.item() if isinstance(v, Tensor) else v


def arange(start: Any, end: Any = None, step: Any = 1, *, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """Values from start (inclusive) to end (exclusive) by step.

    Dtype: int64 when start, end and step are all integers, else the default float dtype.
    Count: ceil((end - start) / step), so `arange(0, 1, 0.1)` has 10 elements. With an
    integer `dtype`, the bounds are truncated to integers first (as PyTorch).
    Raises RuntimeError for step 0 or a step whose sign does not lead from start to end.
    """
    check_device(device)
    if end is None:
        start, end = 0, start
    values = [_number(v) for v in (start, end, step)]
    is_int = all(isinstance(v, (int, np.integer)) for v in values)
    np_dtype = _factory_dtype(dtype, dtypes.int64 if is_int else dtypes.get_default_dtype())
    integral = np_dtype.kind in "iub"
    symbolic = any_symbolic(values) and is_int and not requires_grad
    if not symbolic:  # (a symbolic size stays itself: ARANGE records it)
        values = [int(v) if integral else float(v) for v in values]
    first, last, step = values
    if step == 0:
        raise RuntimeError("arange: step must be nonzero")
    if (last - first) * step < 0:
        raise RuntimeError(f"arange: upper bound and lower bound inconsistent with step sign "
                           f"(start={first}, end={last}, step={step})")
    if symbolic:
        return apply_op(ARANGE, (), (), {"start": first, "end": last, "step": step,
                                         "np_dtype": np.dtype(np_dtype)})
    array = np.arange(first, last, step, dtype=np.int64 if integral else np.float64)
    return finish(array.astype(np_dtype, copy=False), requires_grad)


def inclusive_range(start: Any, end: Any, step: Any = 1, *, dtype: Any = None,
                    device: Any = None, requires_grad: bool = False) -> Tensor:
    """Deprecated `torch.range`: start + i * step for i = 0 .. floor((end - start) / step),
    end included; the default float dtype unless `dtype` is given (also for int bounds).

    Raises RuntimeError for step 0 or a step whose sign does not lead from start to end.
    """
    warnings.warn("torch.range is deprecated and will be removed in a future release because "
                  "its behavior is inconsistent with Python's range builtin. Instead, use "
                  "torch.arange, which produces values in [start, end).", UserWarning,
                  stacklevel=2)
    check_device(device)
    np_dtype = _factory_dtype(dtype, dtypes.get_default_dtype())
    integral = np_dtype.kind in "iub"
    first, last, step = (int(v) if integral else float(v)
                         for v in (_number(start), _number(end), _number(step)))
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (last - first) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    count = int(math.floor((last - first) / step)) + 1
    array = np.arange(count, dtype=np.int64 if integral else np.float64) * step + first
    return finish(array.astype(np_dtype, copy=False), requires_grad)


def linspace(start: Any, end: Any, steps: int, *, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """`steps` evenly spaced values from start to end inclusive (default float32).

    Computed as PyTorch does, in the result dtype: the first half as start + i * step, the
    second half as end - (steps - 1 - i) * step, step = (end - start) / (steps - 1);
    integer dtypes compute in float64 and truncate. Raises RuntimeError for steps < 0.
    """
    check_device(device)
    if steps < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative (got {steps})")
    np_dtype = _factory_dtype(dtype)
    compute = np_dtype if np_dtype.kind == "f" else np.dtype(np.float64)
    cast = compute.type if np_dtype.kind == "f" else (lambda v: float(int(v)))
    first, last = compute.type(cast(_number(start))), compute.type(cast(_number(end)))
    index = np.arange(steps).astype(compute)
    if steps == 1:
        values = np.full(1, first, compute)
    else:
        step = (last - first) / compute.type(steps - 1)
        values = np.where(np.arange(steps) < steps // 2, first + step * index,
                          last - step * (compute.type(steps - 1) - index))
    return finish(values.astype(np_dtype), requires_grad)


def eye(n: int, m: int | None = None, *, dtype: Any = None, device: Any = None,
        requires_grad: bool = False) -> Tensor:
    """The n x m identity matrix (m defaults to n). Raises RuntimeError for negative sizes."""
    check_device(device)
    for name, v in (("n", n), ("m", m)):
        if v is not None and v < 0:
            raise RuntimeError(f"eye: {name} must be greater or equal to 0, got {v}")
    return finish(np.eye(n, m, dtype=_factory_dtype(dtype)), requires_grad)


# ----- dtype conversion (differentiable between float dtypes) -------------------------

def _to_dtype_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (g,)  # the engine casts the gradient back to the input's dtype


def _to_dtype_scalar(s: Any, x: Any, np_dtype: Any) -> Any:
    # the kernel's cast to the output dtype converts; bool needs a comparison
    return (x != 0) if np.dtype(np_dtype).kind == "b" else x


TO_DTYPE = register("to_dtype", lambda x, np_dtype: x.astype(np_dtype), _to_dtype_backward,
                    source="identity on values; the engine casts the gradient back",
                    scalar=_to_dtype_scalar, scalar_kinds=ANY_KIND)


def to_dtype(input: Tensor, dtype: Any, copy: bool = False) -> Tensor:
    """Cast to `dtype`; returns `input` itself when nothing changes (unless copy)."""
    np_dtype = dtypes.numpy_dtype(dtypes.to_dtype(dtype), "to")
    if np_dtype == input._data.dtype and not copy:
        return input
    out = apply_op(TO_DTYPE, (input,), (input._data,), {"np_dtype": np_dtype})
    if np_dtype.kind != "f" and out._grad_fn is not None:
        out._grad_fn, out._requires_grad = None, False
    return out


def view_as_dtype(input: Tensor, dtype: Any) -> Tensor:
    """Reinterpret the bytes as another dtype of the same size (no autograd)."""
    d = dtypes.to_dtype(dtype)
    if d.itemsize != input._data.itemsize:
        raise RuntimeError(f"view(dtype): {input.dtype} and {d} differ in element size")
    return Tensor._make(input._data.view(dtypes.numpy_dtype(d, "view")))


def _is_dtype_like(a: Any) -> bool:
    return isinstance(a, (dtypes.dtype, np.dtype)) or (isinstance(a, str) and a in dtypes.ALIASES) \
        or (isinstance(a, type) and (a in (float, int, bool) or issubclass(a, np.generic)))


def _to(self: Tensor, *args: Any, dtype: Any = None, device: Any = None,
        non_blocking: bool = False, copy: bool = False) -> Tensor:
    """`t.to(dtype)`, `t.to("cpu")`, `t.to(other)`, `t.to(device, dtype)`, keyword forms.

    Returns self when nothing changes (unless copy=True). Raises RuntimeError for a
    non-CPU device.
    """
    for a in args:
        if isinstance(a, Tensor):
            dtype = a.dtype
        elif _is_dtype_like(a):
            dtype = a
        else:
            check_device(a)
    check_device(device)
    if dtype is None:
        return to_dtype(self, self.dtype, copy=True) if copy else self
    return to_dtype(self, dtype, copy)


_LEGACY_TYPES = {"FloatTensor": dtypes.float32, "DoubleTensor": dtypes.float64,
                 "HalfTensor": dtypes.float16, "LongTensor": dtypes.int64,
                 "IntTensor": dtypes.int32, "ShortTensor": dtypes.int16,
                 "CharTensor": dtypes.int8, "ByteTensor": dtypes.uint8, "BoolTensor": dtypes.bool_}


def _type(self: Tensor, dtype: Any = None, non_blocking: bool = False) -> Any:
    """`t.type()` names the type (`'jitgrad.FloatTensor'`); `t.type(dtype or name)` converts.

    Raises RuntimeError for CUDA type names, ValueError for unknown names.
    """
    if dtype is None:
        return tensor_type_name(self)
    if isinstance(dtype, type) and isinstance(getattr(dtype, "dtype", None), dtypes.dtype):
        legacy = cast("LegacyTensorType", dtype)  # such as jitgrad.LongTensor
        if legacy.is_cuda:
            check_device("cuda")
        dtype = legacy.dtype
    elif isinstance(dtype, str) and dtype not in dtypes.ALIASES:
        module, _, name = dtype.rpartition(".")
        if module.endswith("cuda"):
            check_device("cuda")
        if module not in ("torch", "jitgrad") or name not in _LEGACY_TYPES:
            raise ValueError(f"invalid type: '{dtype}' (expected e.g. 'jitgrad.FloatTensor' "
                             "or a dtype such as jitgrad.float32)")
        dtype = _LEGACY_TYPES[name]
    return to_dtype(self, dtype)


def _cuda(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """Raises RuntimeError: jitgrad has no CUDA backend."""
    check_device("cuda")
    return self


__all__ = ["tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "zeros_like",
           "ones_like", "empty_like", "full_like", "arange", "linspace", "eye", "is_tensor",
           "numel", "is_floating_point"]


METHODS = {
    "__new__": staticmethod(legacy_tensor_constructor),  # `jitgrad.Tensor(data)`
    "__reduce_ex__": _reduce_ex,
    "to": _to,
    "type": _type,
    "type_as": lambda self, other: to_dtype(self, other.dtype),
    "float": lambda self: to_dtype(self, dtypes.float32),
    "double": lambda self: to_dtype(self, dtypes.float64),
    "half": lambda self: to_dtype(self, dtypes.float16),
    "long": lambda self: to_dtype(self, dtypes.int64),
    "int": lambda self: to_dtype(self, dtypes.int32),
    "short": lambda self: to_dtype(self, dtypes.int16),
    "bool": lambda self: to_dtype(self, dtypes.bool_),
    "byte": lambda self: to_dtype(self, dtypes.uint8),
    "char": lambda self: to_dtype(self, dtypes.int8),
    "cpu": lambda self: self,
    "cuda": _cuda,
    "new_zeros": lambda self, *size, dtype=None, **kw: zeros(*size, dtype=dtype or self.dtype,
                                                             **kw),
    "new_ones": lambda self, *size, dtype=None, **kw: ones(*size, dtype=dtype or self.dtype, **kw),
    "new_empty": lambda self, *size, dtype=None, **kw: empty(*size, dtype=dtype or self.dtype,
                                                             **kw),
    "new_full": lambda self, size, value, dtype=None, **kw: full(size, value,
                                                                dtype=dtype or self.dtype, **kw),
    "new_tensor": lambda self, data, dtype=None, **kw: tensor(data, dtype=dtype or self.dtype,
                                                              **kw),
}
