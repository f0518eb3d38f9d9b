"""Fake tensors: the values traced code computes with, each standing for a graph value.

A `FakeTensor` stands for a graph value while tracing: it has the shape, dtype,
requires_grad and layout (strides, storage offset: those of the eager value) of the value
(its `_data` is a read-only zero array over memory that is never allocated, see
jitgrad/eager/layout.py, so shape, dtype and layout checks in jitgrad's own functions work
unchanged) and the graph `node` that produces it; reading its values (`item()`, `bool()`,
`numpy()`) is data-dependent and raises `DataDependentError`, which the translator turns
into a graph break.

How ops on fakes become graph nodes is `OpRecorder` (recorder.py).

Note [Functionalized in-place ops]: graphs are functional (no node writes into another
node's value), so an in-place op on a traced tensor (`p.add_(g)`, `buf.mul_(m)`,
`x.copy_(y)`, `x += 1`) records the out-of-place op (`add`, `mul`, ...) and rebinds the
tensor to the new node: the FakeTensor object stays the same, its `FakeStorage` points at
the new value, so every later read (through any Var, list or dict holding it, or another
source of the same input) sees the write. `.data` and `.detach()` of a traced tensor are
aliases sharing that storage. For a graph input, the trace records the mutation and the
runner writes the final value back into the real tensor after the graph ran (numpy copy
into its storage, version counter advanced by the number of in-place writes, as eager
does), once per call, before any other replayed side effect (jitgrad/trace/runtime/entry.py).
Views made in the trace follow writes to their base, and writes through them reach it
(Note [Functionalized views] in jitgrad/trace/capture/view_writes.py).
Refused, so the instruction runs eagerly at a graph break (or raises eager's error):
- a write through a view eager restricts (an expanded view, an output of split, chunk or
  unbind), through a `.data`/`.detach()` of a view, or into an input whose real tensor
  is a view: `INPLACE_ON_VIEW`;
- a graph input, with grad mode on, that requires grad or is written a value that does
  (eager rebases autograd history there, or raises for a leaf): `INPLACE_NEEDS_AUTOGRAD`;
  under no_grad such an input (an optimizer-style `w.sub_(lr * w.grad)`) is written like
  any other and stays the leaf (see "Writes autograd does not see" below); the runner
  writes the value back into the leaf itself, which keeps requires_grad and is_leaf;
- a tensor the trace reached without a source (a constant from outside): `INPLACE_ON_CONSTANT`;
- an input sharing memory with another input (checked when the trace ends, not guarded
  on later calls): the frame runs eagerly (`INPLACE_ON_ALIASED_INPUT`);
- `x[i] = v` with an index mixing slices and index tensors: `UNSUPPORTED_INDEX` (other
  indices record `index_put`);
- an in-place op changing the shape of a tensor other values see, and `resize_`:
  `INPLACE_SHAPE_CHANGE` (Note [In-place view ops]).
Tensors made inside the graph may be written in place freely, with or without grad.

Writes autograd does not see: a write under no_grad, or through a `.data`/`.detach()`
alias, changes a tensor's values but not its autograd history (eager keeps its grad_fn,
or its leaf-ness). The storage then remembers the node of its last value written with
history (`FakeStorage.history`), and a read with grad mode on, or the tensor reaching
the caller, gives `with_history(history, value)`: the written values, differentiated as
the tensor's history (as eager's `(x * w).sum()` after `with no_grad(): w.sub_(...)`).
A write autograd sees makes the written value the history again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from jitgrad.eager.grad_mode import STATE, set_grad_mode
from jitgrad.eager.ops import declare, inplace
from jitgrad.eager.ops._binary import broadcast_error, shapes_of
from jitgrad.eager.ops.index_parsing import parse_index
from jitgrad.eager.ops.indexing import INDEX_PUT, put, scalar_type_name
from jitgrad.eager.ops.registry import OPS, TensorMeta, apply_op
from jitgrad.eager.ops.shape import expanded_shape
from jitgrad.eager.symbolic_int import sizes as sym_shape
from jitgrad.eager.tensor import Size, Tensor, ViewInfo, normalize_dim
from jitgrad.trace.breaks.unsupported import BreakKind, DataDependentError, Unsupported
from jitgrad.trace.capture import symbolic
from jitgrad.trace.capture.view_writes import regenerated, unwritable_view, views_of, written_base
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

    def copy_(self, src: Any, non_blocking: bool = False) -> FakeTensor:
        """Eager's copy op (a new array; the old value gets a zero gradient, as eager's
        CopyBackwards gives it), functionalized."""
        if not isinstance(src, Tensor):
            return _write(self, _record_fill(self, src), "copy_", check_dtype=False)
        if src._data.shape != self._data.shape:
            try:
                expanded_shape(src._data.shape, self._data.shape)
            except RuntimeError:
                raise broadcast_error("copy_", shapes_of(self, src)) from None
        inplace.check_no_partial_overlap(self, (src,))
        copied = apply_op(inplace.COPY, (self, src), (self._data, src._data))
        return _write(self, copied, "copy_", check_dtype=False)

    def fill_(self, value: Any) -> FakeTensor:
        if isinstance(value, Tensor) and value._data.ndim:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor "
                               f"with {value._data.ndim} dimensions.")
        return _write(self, _record_fill(self, value), "fill_", check_dtype=False)

    def zero_(self) -> FakeTensor:
        return self.fill_(0)

    def __setitem__(self, index: Any, value: Any) -> None:
        """`x[index] = value` as `x = index_put(x, index, value)` (value cast to x's dtype)."""
        basic, advanced = parse_index(self._data.shape, index)
        if basic is not None and advanced is not None:
            raise Unsupported(BreakKind.UNSUPPORTED_INDEX, "`x[i] = v` on a traced tensor with an "
                              "index mixing slices and index tensors",
                              "index in two steps (slices, then index tensors) to keep it in "
                              "the graph")
        index = advanced
        if index is None:
            assert basic is not None, "an index has a basic or an advanced stage"
            inplace.check_no_partial_overlap(self, (value,), self._data[basic])  # as eager
            index = basic
        if isinstance(value, Tensor) and value._data.dtype != self._data.dtype:
            value = value.to(self.dtype)
        written = put(INDEX_PUT, self, index, value, False)
        _write(self, written, "`x[i] = v`", check_dtype=False)

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


def _record_fill(target: FakeTensor, value: Any) -> Tensor:
    """The value of `target` filled with a number or a 0-d tensor (eager's fill op)."""
    operand = value._data if isinstance(value, Tensor) else value
    return apply_op(inplace.FILL, (target, value), (target._data, operand))


def _check_writable(target: FakeTensor, value: Tensor, what: str) -> None:
    """Refuse the writes Note [Functionalized in-place ops] lists (Unsupported)."""
    view = target._view
    alias = target.__dict__.get("alias_of")
    reason = unwritable_view(view) if view is not None else None
    if reason is None and alias is not None and alias[0]._view is not None:
        reason = "an alias (.data/.detach()) of a view"
    if reason is not None:
        raise Unsupported(BreakKind.INPLACE_ON_VIEW, f"in-place {what} on a traced tensor that is "
                          f"{reason}", "use out-of-place ops to keep it in the graph")
    owner = view_base(view) if view is not None else target
    storage = owner.storage
    if storage.outside:
        raise Unsupported(BreakKind.INPLACE_ON_CONSTANT,
                          f"in-place {what} on a tensor the compiled "
                          "function reached without a source (e.g. a default argument)",
                          "pass the tensor as an argument")
    if storage.input is None:
        return
    if STATE.enabled and (storage.input[1]._requires_grad or target._requires_grad or
                          value._requires_grad):
        raise Unsupported(BreakKind.INPLACE_NEEDS_AUTOGRAD, f"in-place {what} on an input of the "
                          "compiled function with grad mode on and a tensor requiring grad",
                          "do optimizer-style updates under jitgrad.no_grad()")
    if storage.input[1]._view is not None:
        raise Unsupported(BreakKind.INPLACE_ON_VIEW,
                          f"in-place {what} on an input that is a view of "
                          "another tensor", "write into its base, or pass a "
                          "clone")


def _write(target: FakeTensor, value: Tensor, what: str, check_dtype: bool = True) -> FakeTensor:
    """`target` now holds `value` (the functional form of an in-place op); returns target.

    A write through a view writes its base; the views of the written base are then
    regenerated (Note [Functionalized views] in jitgrad/trace/capture/view_writes.py).
    check_dtype: refuse results that cannot be cast into target's dtype (arithmetic ops do,
    as in eager; copy_ and fill_ cast anything). Raises RuntimeError for a result whose
    shape is not target's (eager's message), Unsupported for refused writes.
    """
    _check_writable(target, value, what)
    writer = value.node if isinstance(value, FakeTensor) else None  # the op computing it
    if value._data.shape != target._data.shape:
        raise RuntimeError(f"output with shape {list(target._data.shape)} doesn't match the "
                           f"broadcast shape {list(value._data.shape)}")
    if value._data.dtype != target._data.dtype:
        if check_dtype and not inplace.can_cast(value._data.dtype, target._data.dtype):
            raise RuntimeError(
                f"result type {scalar_type_name(value)} can't be cast to the desired output "
                f"type {scalar_type_name(target)}; use the out-of-place op (x = x.op(...)) "
                "or convert x first")
        value = apply_op(OPS["to_dtype"], (value,), (value._data,),
                         {"np_dtype": target._data.dtype})
    base = target
    if target._view is not None:
        base = view_base(target._view)
        value = written_base(target._view, base, value)
    # autograd sees the write unless grad mode is off or it goes through .data/.detach()
    visible = STATE.enabled and base.__dict__.get("alias_of") is None
    bumps = base.__dict__.get("alias_of", (None, ""))[1] != "data"
    views = views_of(_active_recorder().graph, base.storage)
    if bumps:
        _mark_overwritten(base, views, writer)
    _rebind(base.storage, value, visible)
    base.storage.written = True
    if bumps:
        base.storage.bumps += 1
    if visible and value._requires_grad:
        base._requires_grad = True
    for view in views:
        new = regenerated(view)
        _rebind(view.storage, new, visible)
        if visible and new._requires_grad:
            view._requires_grad = True
    return target


def view_base(view: ViewInfo) -> FakeTensor:
    """A traced view's base (a fake tensor, as every tensor a trace makes)."""
    return cast(FakeTensor, view.base)


def _mark_overwritten(base: FakeTensor, views: list[FakeTensor], writer: GraphNode | None) -> None:
    """Before a write that advances `base`'s version counter: the values it and its views
    held until now get `meta["overwritten"] = (base's storage, version they had, writer)`,
    writer being the node of the in-place op's result (it may save the old value: eager
    keeps a copy, Note [Saving the old self]), so a backward that saved one raises eager's
    "modified by an inplace operation" error (Note [Saved values overwritten in the graph]
    in jitgrad/codegen/joint_graphs.py)."""
    storage = base.storage
    for t in (base, *views):
        node = t.storage.node
        if node.op != "placeholder":  # inputs are checked by their own counters at run time
            mark = (storage, storage.bumps, writer)
            node.meta.setdefault("overwritten", mark)
            for user in node.users:  # the value as read with its history is the same value
                if user.target is OPS["with_history"] and user.args[1] is node:
                    user.meta.setdefault("overwritten", mark)


def _rebind(storage: FakeStorage, value: Tensor, visible: bool) -> None:
    """The storage now holds `value`; a write autograd does not see keeps the history
    (Note [Functionalized in-place ops])."""
    if visible:
        storage.history = None
    elif storage.history is None and any(t._requires_grad for t in storage.tensors):
        storage.history = storage.node
    storage.node = value.node if isinstance(value, FakeTensor) else \
        _active_recorder().constant_of(value)


def _functional_method(name: str, out_of_place: str) -> Callable[..., FakeTensor]:
    """`x.<name>(...)` on a traced tensor: `x = x.<out_of_place>(...)`, functionalized."""

    def method(self: FakeTensor, *args: Any, **kwargs: Any) -> Any:
        inplace.check_no_partial_overlap(self, (*args, *kwargs.values()))  # as eager
        value = getattr(self, out_of_place)(*args, **kwargs)
        if value is NotImplemented:  # `x += other` of a type Tensor does not take
            return value
        return _write(self, value, name)

    method.__name__ = method.__qualname__ = name
    return method


def _install_functional_methods() -> None:
    """Every in-place Tensor method with an out-of-place twin (`add_` -> `add`, `__iadd__`
    -> `__add__`, those of declared ops too) becomes a functionalized method of FakeTensor."""
    for name in (*inplace.METHODS, *declare.METHODS):
        twin = f"__{name[3:]}" if name.startswith("__i") else name[:-1]
        if name.endswith("_") and name not in vars(FakeTensor) and hasattr(Tensor, twin):
            setattr(FakeTensor, name, _functional_method(name, twin))


_install_functional_methods()

# in-place ops that change a tensor's shape or storage. The view ones are functionalized
# on a tensor made in the trace that nothing else sees (Note [In-place view ops]); on other
# tensors, and resize_ always, they run eagerly at a graph break
SHAPE_CHANGING_INPLACE = ("squeeze_", "unsqueeze_", "transpose_", "resize_")
_IN_PLACE_VIEWS = {"squeeze_": "squeeze", "unsqueeze_": "unsqueeze", "transpose_": "transpose"}


# Note [In-place view ops]: `h.unsqueeze_(0)` makes `h` its own view in eager: the same
# storage, a new shape, the view op as its grad_fn, and its version bumped (a value saved
# before then raises "modified by an inplace operation" in backward). Traced, the
# out-of-place view op is recorded and the FakeTensor object itself takes its value, shape
# and history, so every Var holding `h` sees the change; the value it had is marked
# overwritten, as any in-place write marks it. That is only eager's meaning when nothing
# else sees h's memory: h is not a view made in the trace, has no views, aliases (`.data`,
# `.detach()`) or write unseen by autograd. A graph input qualifies too (not a leaf that
# requires grad, for which eager raises): the runner replays the op on the caller's
# tensor after the graph, before any write-back into it (the replay bumps its version,
# so the write-back counts the other writes only). Otherwise the op runs at a break.
def _view_in_place(tensor: FakeTensor, name: str, args: tuple, kwargs: dict) -> FakeTensor:
    storage = tensor.storage
    view = getattr(Tensor, _IN_PLACE_VIEWS[name])(tensor, *args, **kwargs)
    node = view.storage.node
    for earlier in [n for n in node.graph.nodes if n.meta.get("val") is tensor]:
        # the values it held keep their own description (FakeTensor.like sets it)
        held = FakeTensor.like(earlier, tensor, tensor._requires_grad)
        if tensor.__dict__.get("sym_shape") is not None:
            held.__dict__["sym_shape"] = tensor.__dict__["sym_shape"]
    _mark_overwritten(tensor, [], node)
    storage.bumps += 1
    if storage.input is not None:  # the caller's tensor changes shape too
        storage.view_ops.append((name, args, kwargs))
    tensor._data = view._data
    tensor._requires_grad = view._requires_grad
    storage.node = node
    node.meta["val"] = tensor
    if view.__dict__.get("sym_shape") is not None:
        tensor.__dict__["sym_shape"] = view.__dict__["sym_shape"]
    else:
        tensor.__dict__.pop("sym_shape", None)
    return tensor


def _only_seen_here(tensor: FakeTensor) -> bool:
    storage = tensor.storage
    if storage.input is not None:
        real = storage.input[1]
        if real._requires_grad and real._grad_fn is None and STATE.enabled:
            return False  # eager raises: a leaf that requires grad
    return (tensor._view is None and not storage.outside
            and storage.history is None and storage.tensors == [tensor]
            and not isinstance(tensor, FakeNumber) and not views_of(storage.node.graph, storage))


def _shape_changing_method(name: str) -> Callable[..., Any]:
    def method(self: FakeTensor, *args: Any, **kwargs: Any) -> Any:
        if name in _IN_PLACE_VIEWS and STATE.recorder is not None and _only_seen_here(self):
            return _view_in_place(self, name, args, kwargs)
        raise Unsupported(BreakKind.INPLACE_SHAPE_CHANGE, f"{name}() changes the shape of a traced "
                          "tensor that other values see (an input, a view, or a tensor with "
                          "views or aliases)", f"use the out-of-place {name[:-1]}() and "
                          "rebind the name to keep it in the graph")

    method.__name__ = method.__qualname__ = name
    return method


for _name in SHAPE_CHANGING_INPLACE:
    setattr(FakeTensor, _name, _shape_changing_method(_name))


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


def _active_recorder() -> OpRecorder:
    recorder = _recorder()
    assert recorder is not None, "fake tensors are written only while a trace records"
    return recorder
