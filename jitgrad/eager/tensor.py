"""The eager `Tensor`: a numpy array plus autograd state, with PyTorch's semantics.

A Tensor owns `_data` (a numpy array, possibly a view of another tensor's array) and
the autograd fields PyTorch has: `requires_grad`, `grad_fn` (a `Node`, None for
leaves), `grad`, `_version` (a counter shared with views and detach()es), `_base`
(the tensor a view looks into). Ops live in `jitgrad.eager.ops`; `tensor_methods`
attaches them as methods and operators, and with them the methods whose bodies need a
later layer (Note [Eager layers] in tensor_methods.py): the legacy constructor
`Tensor(data)` and `__reduce_ex__` (ops/creation.py), `backward` (engine.py), `__repr__`
(printing.py) and the rebuild of a stale view's grad_fn (views.py).

Note [Hot path]: op results are built by `Tensor._make`, which sets slots directly;
the version counter is created lazily (only views, saved tensors and in-place targets
need one), because per-op overhead at 8 elements is what users of small models feel.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Self

import numpy as np

from jitgrad.eager import dtypes, layout
from jitgrad.eager.devices import CPU, DeviceFlag, device
from jitgrad.eager.grad_mode import STATE
from jitgrad.eager.node import (
    AccumulateGrad,
    Edge,
    Node,
    RemovableHandle,
    VersionCounter,
    add_hook,
    new_edge,
)
from jitgrad.eager.tensor_declarations import TensorMethods

WARN_NON_LEAF_GRAD = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
    "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. "
    "If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor "
    "instead.")


class Size(tuple):
    """A tensor's shape: a tuple of ints that prints as `jitgrad.Size([2, 3])`."""

    def __repr__(self) -> str:
        return f"jitgrad.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


class ViewInfo:
    """How a view tensor relates to its base (PyTorch's ViewInfo + CreationMeta).

    base:     the root tensor whose storage the view reads (never itself a view).
    replay:   `(view_fn, args)` steps that turn the base's array (or any array/Tensor of
              the base's shape, e.g. a gradient) into the view, applied in order.
    creation: "default", "no_grad" (made with grad mode off) or the name of a
              multi-output op ("Split", "Unbind", "Chunk") whose outputs may not be
              modified in place.
    version:  the shared version at which the view's grad_fn was last (re)built.
    """

    __slots__ = ("base", "replay", "creation", "version")

    def __init__(self, base: Tensor, replay: tuple, creation: str, version: int) -> None:
        self.base = base
        self.replay = replay
        self.creation = creation
        self.version = version


class Tensor(TensorMethods):
    """A multi-dimensional array with autograd, following `torch.Tensor`.

    Created by factories (`jitgrad.tensor`, `zeros`, `randn`, ...) or by ops, not by
    calling the class. Shapes are `Size` tuples; dtypes are `jitgrad.float32` etc.
    """

    __slots__ = ("_data", "_requires_grad", "_grad_fn", "_grad", "_vc", "_output_nr",
                 "_view", "_grad_accumulator", "_hooks", "_post_acc_hooks", "_retains_grad",
                 "__weakref__", "__dict__")
    _data: np.ndarray
    _requires_grad: bool
    _grad_fn: Node | None
    _grad: Tensor | None
    _vc: VersionCounter | None  # made on first use (Note [Hot path])
    _output_nr: int
    _view: ViewInfo | None
    _grad_accumulator: weakref.ref[AccumulateGrad] | None
    _hooks: dict[int, Callable[..., Any]] | None
    _post_acc_hooks: dict[int, Callable[..., Any]] | None
    _retains_grad: bool

    __array_priority__ = 1000  # numpy defers `ndarray * Tensor` to Tensor.__rmul__
    # True only for the compiler's 0-d stand-ins of Python numbers (trace.fake.FakeNumber),
    # which type promotion treats as weak scalars
    _weak_scalar = False

    @classmethod
    def _make(cls, data: np.ndarray, requires_grad: bool = False, grad_fn: Node | None = None,
              output_nr: int = 0) -> Self:
        """Wrap an array (no copy). See Note [Hot path]."""
        t = object.__new__(cls)
        t._data = data
        t._requires_grad = requires_grad
        t._grad_fn = grad_fn
        t._grad = None
        t._vc = None
        t._output_nr = output_nr
        t._view = None
        t._grad_accumulator = None
        t._hooks = None
        t._post_acc_hooks = None
        t._retains_grad = False
        return t

    # ----- metadata -------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return Size(self._data.shape)

    def size(self, dim: int | None = None) -> Any:
        """The shape, or the size of one dimension (negative dims count from the end)."""
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[normalize_dim(dim, self._data.ndim)]

    @property
    def dtype(self) -> dtypes.dtype:
        return dtypes.from_numpy_dtype(self._data.dtype)

    @property
    def device(self) -> device:
        return CPU

    # torch.Tensor's device and layout flags: every jitgrad tensor is a dense CPU tensor
    is_cpu = DeviceFlag(True)
    is_cuda, is_xpu, is_mps, is_meta, is_ipu, is_vulkan, is_mtia, is_maia = (
        DeviceFlag(False) for _ in range(8))
    is_sparse, is_sparse_csr, is_quantized, is_nested, is_mkldnn = (
        DeviceFlag(False) for _ in range(5))

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def ndimension(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return self._data.size

    nelement = numel

    def element_size(self) -> int:
        return self._data.itemsize

    @property
    def itemsize(self) -> int:
        return self._data.itemsize

    @property
    def nbytes(self) -> int:
        return self._data.nbytes

    def stride(self, dim: int | None = None) -> Any:
        """Strides in elements (PyTorch's convention), not bytes."""
        strides = layout.element_strides(self._data)
        return strides if dim is None else strides[normalize_dim(dim, self._data.ndim)]

    def storage_offset(self) -> int:
        """Elements between the start of the storage this tensor views and its first element."""
        return layout.storage_offset(self._data)

    def is_contiguous(self, memory_format: object = None) -> bool:
        return bool(self._data.flags.c_contiguous)

    def is_floating_point(self) -> bool:
        return self._data.dtype.kind == "f"

    def is_complex(self) -> bool:
        return False

    @property
    def name(self) -> None:
        """None, read-only (torch's TensorBase.name, which named-tensor code probes)."""
        return None

    def data_ptr(self) -> int:
        return int(self._data.__array_interface__["data"][0])

    # ----- autograd state -------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        if self._view is not None:
            self.grad_fn  # noqa: B018 - a view whose base was written since: rebuild history
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> Self:
        """Set requires_grad on a leaf in place. Raises RuntimeError on a non-leaf or int tensor."""
        if self.grad_fn is not None:
            if not requires_grad:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to "
                    "use a computed variable in a subgraph that doesn't require differentiation "
                    "use var_no_grad = var.detach().")
            return self
        if requires_grad and self._data.dtype.kind != "f":
            raise RuntimeError(
                f"only Tensors of floating point dtype can require gradients (got {self.dtype}); "
                "convert first, e.g. t.float().requires_grad_()")
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def grad_fn(self) -> Node | None:
        view = self._view
        if view is not None and self._vc is not None and view.version != self._vc.value:
            self._refresh_view_grad_fn()
        return self._grad_fn

    @property
    def grad(self) -> Tensor | None:
        if self._grad_fn is not None and not self._retains_grad:
            warnings.warn(WARN_NON_LEAF_GRAD, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got "
                                f"grad of type {type(value).__name__}")
            if value._data.shape != self._data.shape:
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor "
                    f"of size '{list(self.shape)}'. Please ensure that the gradient and the "
                    "tensor are the same size")
            if value._data.dtype != self._data.dtype:
                raise RuntimeError(
                    f"attempting to assign a gradient with dtype '{value.dtype.name}' to a "
                    f"tensor with dtype '{self.dtype.name}'. The gradient must match the "
                    "tensor's dtype")
        self._grad = value

    @grad.deleter
    def grad(self) -> None:
        self._grad = None

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    @property
    def output_nr(self) -> int:
        return self._output_nr

    @property
    def _version(self) -> int:
        return 0 if self._vc is None else self._vc.value

    def _version_counter(self) -> VersionCounter:
        if self._vc is None:
            self._vc = VersionCounter()
        return self._vc

    def _bump_version(self) -> None:
        """Record an in-place write to this tensor's storage (shared with its views)."""
        self._version_counter().value += 1

    @property
    def _base(self) -> Tensor | None:
        return None if self._view is None else self._view.base

    def _is_view(self) -> bool:
        return self._view is not None

    @property
    def data(self) -> Tensor:
        """A tensor sharing storage (not the version counter) that does not require grad."""
        return Tensor._make(self._data)

    @data.setter
    def data(self, value: Tensor) -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"Tensor.data must be a Tensor, got {type(value).__name__}")
        self._data = value._data

    def retain_grad(self) -> None:
        """Populate `.grad` of this non-leaf after backward (a no-op on leaves)."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        fn = self.grad_fn
        if fn is None or self._retains_grad:
            return
        ref = weakref.ref(self)

        def store(grad: Tensor) -> None:
            t = ref()
            if t is None:
                return
            if t._grad is None:
                t._grad = Tensor._make(np.array(grad._data), grad._requires_grad, grad._grad_fn)
            else:
                t._grad = t._grad + grad
        fn._hooks().retains_grad[self._output_nr] = store
        self._retains_grad = True

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
        """Call `hook(grad)` when this tensor's gradient is computed; a Tensor return replaces it.

        Raises RuntimeError on a tensor that does not require grad.
        """
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        fn = self.grad_fn
        if fn is None:
            if self._hooks is None:
                self._hooks = {}
            return add_hook(self._hooks, hook)
        table = fn._hooks().tensor_pre_hooks.setdefault(self._output_nr, {})
        return add_hook(table, hook)

    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], None]) -> RemovableHandle:
        """Call `hook(tensor)` after `.grad` of this leaf is updated by a backward."""
        if self.grad_fn is not None:
            raise RuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors")
        if self._post_acc_hooks is None:
            self._post_acc_hooks = {}
        return add_hook(self._post_acc_hooks, hook)

    def detach(self) -> Tensor:
        """A new leaf sharing storage and version counter, cut from the graph."""
        t = Tensor._make(self._data)
        t._vc = self._version_counter()
        return t

    def detach_(self) -> Tensor:
        """Make this tensor a leaf that does not require grad. Raises on views."""
        if self._view is not None:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self._grad_fn = None
        self._requires_grad = False
        return self

    # ----- leaving the tensor world ---------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The underlying array (shared memory). Raises RuntimeError if it requires grad."""
        if self._requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        return self._data

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number."""
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar; "
                "use .tolist() for all values, or index one element first (t[0].item())")
        return self._data.reshape(()).item()

    def tolist(self) -> Any:
        return self._data.tolist()

    def _scalar_for_conversion(self, what: str) -> Any:
        if self._data.size != 1:
            raise ValueError(f"only one element tensors can be converted to Python scalars "
                             f"(got shape {list(self.shape)} in {what}())")
        return self._data.reshape(()).item()

    def __float__(self) -> float:
        return float(self._scalar_for_conversion("float"))

    def __int__(self) -> int:
        return int(self._scalar_for_conversion("int"))

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self._data.reshape(()).item())

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous "
                               f"(shape {list(self.shape)}); use .any() or .all()")
        return bool(self._data.reshape(()).item())

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    def __hash__(self) -> int:
        return id(self)

    def __format__(self, spec: str) -> str:
        if self._data.ndim == 0:
            return format(self._data.item(), spec)
        return format(repr(self), spec)


def reset_grads(tensors: Iterable[Tensor], set_to_none: bool = True) -> None:
    """Clear `.grad` of each tensor: to None, or zeroed in place (cut from any graph),
    as `Module.zero_grad` and `Optimizer.zero_grad` do."""
    for t in tensors:
        grad = t._grad
        if grad is None:
            continue
        if set_to_none:
            t._grad = None
            continue
        if grad._grad_fn is not None:
            grad.detach_()
        else:
            grad.requires_grad_(False)
        grad._data[...] = 0
        grad._bump_version()


def values_known(array: np.ndarray) -> bool:
    """False for the data of a compiler's fake tensor (shape and dtype only).

    Entry functions validate values (e.g. class ids in range) only when they are known;
    while tracing they are not, and reading them would bake trace-time zeros into a graph.
    """
    return not getattr(array, "_jitgrad_fake", False)


def normalize_dim(dim: int, ndim: int) -> int:
    """Map a possibly negative dim into [0, ndim). Raises IndexError when out of range."""
    rank = max(ndim, 1)  # 0-d tensors accept dim 0 and -1, as in PyTorch
    if not -rank <= dim < rank:
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-rank}, {rank - 1}], but got {dim})")
    return dim + rank if dim < 0 else dim


def gradient_edge(t: Tensor) -> Edge | None:
    """The Edge a gradient for `t` flows into: its grad_fn, or its leaf's AccumulateGrad."""
    fn = t._grad_fn
    if t._view is not None:
        fn = t.grad_fn
    if fn is not None:
        return new_edge(fn, t._output_nr)
    if t._requires_grad:
        return new_edge(grad_accumulator(t), 0)
    return None


def grad_accumulator(t: Tensor) -> AccumulateGrad:
    """The leaf's AccumulateGrad node, created on first use and held weakly by the leaf."""
    ref = t._grad_accumulator
    acc = None if ref is None else ref()
    if acc is None:
        acc = AccumulateGrad(t)
        t._grad_accumulator = weakref.ref(acc)
    return acc


__all__ = ["Tensor", "Size", "ViewInfo", "gradient_edge", "STATE"]
