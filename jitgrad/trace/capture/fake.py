"""Fake tensors: the values traced code computes with, each standing for a graph value.

A `FakeTensor` stands for a graph value while tracing: it has the shape, dtype,
requires_grad and layout (strides, storage offset: those of the eager value) of the value
(its `_data` is a read-only zero array over memory that is never allocated, see
jitgrad/eager/layout.py, so shape, dtype and layout checks in jitgrad's own functions work
unchanged) and the graph `node` that produces it; reading its values (`item()`, `bool()`,
`numpy()`) is data-dependent and raises `DataDependentError`, which the translator turns
into a graph break.

How ops on fakes become graph nodes is `OpRecorder` (recorder.py).

How in-place ops on fakes are recorded is Note [Functionalized in-place ops] in
functionalize.py, which gives FakeTensor its in-place methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np

from jitgrad.eager.grad_mode import STATE, set_grad_mode
from jitgrad.eager.ops.registry import OPS, TensorMeta
from jitgrad.eager.symbolic_int import sizes as sym_shape
from jitgrad.eager.tensor import Size, Tensor, normalize_dim
from jitgrad.trace.breaks.unsupported import BreakKind, DataDependentError, Unsupported
from jitgrad.trace.capture import symbolic
from jitgrad.trace.ir.graph import Graph
from jitgrad.trace.ir.graph import Node as GraphNode

if TYPE_CHECKING:
    from jitgrad.trace.capture.recorder import OpRecorder


class FakeArray(np.ndarray):
    """The data of a FakeTensor: a read-only zero array with the right shape, dtype and
    layout (jitgrad.eager.layout.layout_array). Numpy results computed from it stay
    FakeArrays, and turning one into a Python value raises DataDependentError, so an entry
    function that reads values of a traced tensor (instead of passing it to an op) cannot
    bake trace-time zeros into a graph: the recorder refuses FakeArray constants and params
    (see `values_known` in eager)."""

    _jitgrad_fake = True

    def __bool__(self) -> bool:
        raise DataDependentError("bool() of a traced tensor's values")

    def __int__(self) -> int:
        raise DataDependentError("int() of a traced tensor's values")

    def __float__(self) -> float:
        raise DataDependentError("float() of a traced tensor's values")

    def __index__(self) -> int:
        raise DataDependentError("a traced tensor's value used as an index")

    def item(self, *args: Any) -> Any:
        raise DataDependentError("a traced tensor's value read with .item()")

    def tolist(self) -> Any:
        raise DataDependentError("a traced tensor's values read with .tolist()")

    def nonzero(self) -> Any:
        raise DataDependentError("the nonzero positions of a traced tensor")

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func in _VALUE_SHAPED:
            raise DataDependentError(f"np.{func.__name__} of a traced tensor's values")
        return super().__array_function__(func, types, args, kwargs)


# numpy functions whose output shape depends on the values of their input
_VALUE_SHAPED = {np.nonzero, np.argwhere, np.flatnonzero, np.unique, np.extract, np.compress}


def fake_array(meta: TensorMeta) -> FakeArray:
    """Zeros with `meta`'s shape, dtype, strides and storage offset, holding no memory."""
    return meta.zeros().view(FakeArray)


def contains_fake_array(value: Any) -> bool:
    if isinstance(value, FakeArray):
        return True
    if isinstance(value, (tuple, list)):
        return any(contains_fake_array(v) for v in value)
    if isinstance(value, dict):
        return any(contains_fake_array(v) for v in value.values())
    return False


class FakeStorage:
    """The value a traced tensor and its aliases hold: the graph node computing it now.

    input: (source, real tensor) when the tensor is a graph input, else None;
    outside: a constant tensor the trace reached without a source (not writable);
    written: whether an in-place op wrote it; bumps: how many of those writes advance its
    version counter (not writes through `.data`, which has its own counter, as in eager);
    tensors: the FakeTensors sharing it (the tensor and its `.data`/`.detach()` aliases);
    history: the node of the last value with autograd history, after a write autograd did
    not see. See Note [Functionalized in-place ops].
    """

    __slots__ = ("node", "input", "outside", "written", "bumps", "tensors", "history",
                 "view_ops")

    def __init__(self, node: GraphNode) -> None:
        self.node = node
        self.history: GraphNode | None = None
        self.input: tuple[Any, Tensor] | None = None
        self.outside = False
        self.written = False
        self.bumps = 0
        self.tensors: list[FakeTensor] = []
        # an input's in-place view ops (name, args, kwargs), replayed on it after the graph
        self.view_ops: list[tuple[str, tuple, dict]] = []

    def input_tensor(self) -> Tensor:
        """The real tensor of a graph input's storage."""
        assert self.input is not None, "only a graph input's storage has a real tensor"
        return self.input[1]


class FakeTensor(Tensor):
    """A traced graph value: metadata of a Tensor without data. See the module docstring."""

    __slots__ = ()
    # read by code written for both eager and traced tensors (jitgrad.optim's update picks
    # numpy arrays or tensor ops with it), like `_jitgrad_fake` on FakeArray
    _jitgrad_fake = True

    @classmethod
    def of(cls, node: GraphNode, shape: tuple[int, ...], np_dtype: np.dtype,
           requires_grad: bool, strides: tuple[int, ...] | None = None,
           offset: int = 0) -> FakeTensor:
        """The value of `node`: strides in elements (None: C order), as eager's would be."""
        t = cls._make(fake_array(TensorMeta(shape, np_dtype, strides, offset)), requires_grad)
        storage = FakeStorage(node)
        storage.tensors.append(t)
        t.__dict__["storage"] = storage
        node.meta["val"] = t
        return t

    @classmethod
    def like(cls, node: GraphNode, tensor: Tensor, requires_grad: bool) -> FakeTensor:
        """The value of `node`, with the shape, dtype and layout of `tensor`."""
        meta = TensorMeta.of(tensor._data)
        return cls.of(node, meta.shape, meta.dtype, requires_grad, meta.strides, meta.offset)

    @property
    def node(self) -> GraphNode:
        """The graph node of this tensor's current value. For a `.detach()`/`.data` alias of
        a tensor that requires grad, read with grad mode on, a `detach` node of it (a
        stop-gradient, made once per value), so graph ops reading the alias give it no
        gradient, as in eager."""
        storage = self.__dict__["storage"]
        alias = self.__dict__.get("alias_of")
        recorder = _recorder()
        if alias is None and storage.history is not None and STATE.enabled and \
                recorder is not None:
            return self.output_node()
        if alias is None or not (STATE.enabled and alias[0]._requires_grad) or \
                recorder is None:
            return storage.node
        cached = self.__dict__.get("detached")
        if cached is None or cached[0] is not storage.node:
            detached = recorder._node(OPS["detach"], (storage.node,), {})
            detached.meta["val"] = self
            cached = self.__dict__["detached"] = (storage.node, detached)
        return cached[1]

    def output_node(self) -> GraphNode:
        """The node giving this tensor to the caller (or to ops read with grad on): its
        value, with its history after a write autograd did not see (`with_history`, made
        once per value, also after the trace ended). See Note [Functionalized in-place ops]."""
        storage = self.storage
        if storage.history is None or self.__dict__.get("alias_of") is not None:
            return storage.node
        cached = self.__dict__.get("with_history")
        if cached is None or cached[0] is not storage.node:
            args = (storage.history, storage.node)
            recorder = _recorder()
            node = recorder._node(OPS["with_history"], args, {}) if recorder is not None \
                else _with_history_at_end(storage.node.graph, args)
            node.meta["val"] = self
            cached = self.__dict__["with_history"] = (storage.node, node)
        return cached[1]

    @property
    def storage(self) -> FakeStorage:
        return self.__dict__["storage"]

    def _alias(self, kind: str) -> FakeTensor:
        """A tensor sharing this one's storage that does not require grad (`.data`, `.detach()`)."""
        t = FakeTensor._make(self._data, False)
        t.__dict__["storage"] = self.storage
        t.__dict__["alias_of"] = (self, kind)
        if self.__dict__.get("sym_shape") is not None:  # its sizes are the same symbols
            t.__dict__["sym_shape"] = self.__dict__["sym_shape"]
        self.storage.tensors.append(t)
        return t

    def detach(self) -> FakeTensor:
        return self._alias("detach")

    def requires_grad_(self, requires_grad: bool = True) -> FakeTensor:
        """Making a traced leaf require grad (or stop) is a graph break: the graph's outputs
        carry no such leaves, so the call runs on the real tensor (new-user report:
        `a.detach().requires_grad_()` came out not requiring grad)."""
        if self.grad_fn is None and bool(requires_grad) != self._requires_grad and \
                self._data.dtype.kind == "f":
            raise Unsupported(BreakKind.UNSUPPORTED_CALL,
                              "requires_grad_() changes whether a traced "
                              "tensor is a leaf requiring grad", "call it outside the "
                              "compiled function")
        return super().requires_grad_(requires_grad)

    @property
    def data(self) -> FakeTensor:
        return self._alias("data")

    @data.setter
    def data(self, value: Tensor) -> None:
        raise Unsupported(BreakKind.SIDE_EFFECT, "`tensor.data = ...` on a traced tensor",
                          "assign .data outside the compiled function")

    def detach_(self) -> FakeTensor:
        raise Unsupported(BreakKind.AUTOGRAD_CALL, "Tensor.detach_() on a traced tensor",
                          "call it outside the compiled function")

    # sizes as the user's code reads them: SymInts for symbolic dims (Note [Symbolic sizes])
    @property
    def shape(self) -> Size:
        return Size(sym_shape(self))

    def size(self, dim: int | None = None) -> Any:
        if dim is None:
            return Size(sym_shape(self))
        return sym_shape(self)[normalize_dim(dim, self._data.ndim)]

    def numel(self) -> Any:
        n = 1
        for size in sym_shape(self):
            n = n * size
        return n

    nelement = numel

    def stride(self, dim: int | None = None) -> Any:
        """Strides in elements: products of the sizes of the faster dims when this tensor is
        dense in some dim order (SymInts where those sizes are symbolic: C order, `x.t()`);
        other layouts of a symbolic tensor specialize its sizes (Note [Symbolic sizes])."""
        strides = super().stride()
        sym = self.__dict__.get("sym_shape")
        if sym is not None:
            products: list[Any] = [0] * len(sym)
            step: Any = 1
            for d in sorted(range(len(sym)), key=lambda d: (strides[d], -d)):
                products[d] = step
                step = step * sym[d]
            if tuple(int.__int__(p) for p in products) == strides:
                strides = tuple(products)
            else:
                for size in sym:
                    symbolic.specialize(size)
        return strides if dim is None else strides[normalize_dim(dim, self._data.ndim)]

    def storage_offset(self) -> int:
        for size in self.__dict__.get("sym_shape") or ():  # (depends on the sizes)
            symbolic.specialize(size)
        return super().storage_offset()

    def item(self) -> Any:
        raise DataDependentError("Tensor.item()")

    def tolist(self) -> Any:
        raise DataDependentError("Tensor.tolist()")

    def numpy(self, *, force: bool = False) -> np.ndarray:
        raise DataDependentError("Tensor.numpy()")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise DataDependentError("numpy conversion of a tensor")

    def __bool__(self) -> bool:
        raise DataDependentError("bool(tensor)")

    def __float__(self) -> float:
        raise DataDependentError("float(tensor)")

    def __int__(self) -> int:
        raise DataDependentError("int(tensor)")

    def __index__(self) -> int:
        raise DataDependentError("a tensor used as an index")

    def backward(self, *args: Any, **kwargs: Any) -> None:
        raise Unsupported(BreakKind.AUTOGRAD_CALL, "Tensor.backward() inside a compiled function",
                          "call it outside the compiled function")

    def register_hook(self, hook: Any) -> Any:
        raise Unsupported(BreakKind.AUTOGRAD_CALL, "Tensor.register_hook() on a traced tensor",
                          "call it outside the compiled function")

    def retain_grad(self) -> None:
        raise Unsupported(BreakKind.AUTOGRAD_CALL, "Tensor.retain_grad() on a traced tensor",
                          "call it outside the compiled function")

    def __repr__(self) -> str:
        return f"FakeTensor({list(self.shape)}, {self.dtype}, node=%{self.node.name})"


def _with_history_at_end(graph: Graph, args: tuple) -> GraphNode:
    """A `with_history` node added after the trace (for the caller), which runs in the
    graph's entry mode: grad mode on around it, since the tensor has its history whatever
    mode the caller is in (as a tensor made in an `enable_grad()` block keeps it)."""
    if STATE.enabled:
        return graph.call_function(OPS["with_history"], args)
    graph.call_function(set_grad_mode, (True,))
    node = graph.call_function(OPS["with_history"], args)
    graph.call_function(set_grad_mode, (False,))
    return node


class FakeNumber(FakeTensor):
    """A Python number that became a graph input after its value changed (DESIGN.md: numbers
    specialize once, then are unspecialized). A 0-d float64/int64/bool tensor at run time,
    promoted as a weak Python scalar, so results keep eager's dtypes and values."""

    __slots__ = ()
    _weak_scalar = True


def number_tensor(value: int | float | bool) -> Tensor:
    """The 0-d tensor a FakeNumber placeholder receives for a Python number."""
    return Tensor._make(np.asarray(value, dtype=_NUMBER_DTYPES[type(value)]))


_NUMBER_DTYPES = {bool: np.bool_, int: np.int64, float: np.float64}


def _recorder() -> OpRecorder | None:
    """The recorder of the trace in progress (None outside one, and in `run_eagerly`)."""
    return cast("OpRecorder | None", STATE.recorder)


def active_recorder() -> OpRecorder:
    """The recorder of the trace in progress, which must exist (a write records an op)."""
    recorder = _recorder()
    assert recorder is not None, "fake tensors are written only while a trace records"
    return recorder
