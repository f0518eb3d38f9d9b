"""In-place ops on fake tensors, functionalized: each write records an out-of-place op.

`install()` gives FakeTensor (fake.py) these in-place methods; the capture package calls
it once, when it is first imported (jitgrad/trace/capture/__init__.py).

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
from typing import Any, cast

from jitgrad.eager.grad_mode import STATE
from jitgrad.eager.ops import declare, inplace
from jitgrad.eager.ops._binary import broadcast_error, shapes_of
from jitgrad.eager.ops.index_parsing import parse_index
from jitgrad.eager.ops.indexing import INDEX_PUT, put, scalar_type_name
from jitgrad.eager.ops.registry import OPS, apply_op
from jitgrad.eager.ops.shape import expanded_shape
from jitgrad.eager.tensor import Tensor, ViewInfo
from jitgrad.trace.breaks.unsupported import BreakKind, Unsupported
from jitgrad.trace.capture.fake import FakeNumber, FakeStorage, FakeTensor, active_recorder
from jitgrad.trace.capture.view_writes import regenerated, unwritable_view, views_of, written_base
from jitgrad.trace.ir.graph import Node as GraphNode


def _copy_(self: FakeTensor, src: Any, non_blocking: bool = False) -> FakeTensor:
    """Eager's copy op (a new array; the old value gets a zero gradient, as eager's
    CopyBackwards gives it), functionalized."""
    if not isinstance(src, Tensor):
        return write(self, _record_fill(self, src), "copy_", check_dtype=False)
    if src._data.shape != self._data.shape:
        try:
            expanded_shape(src._data.shape, self._data.shape)
        except RuntimeError:
            raise broadcast_error("copy_", shapes_of(self, src)) from None
    inplace.check_no_partial_overlap(self, (src,))
    copied = apply_op(inplace.COPY, (self, src), (self._data, src._data))
    return write(self, copied, "copy_", check_dtype=False)


def _fill_(self: FakeTensor, value: Any) -> FakeTensor:
    if isinstance(value, Tensor) and value._data.ndim:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor "
                           f"with {value._data.ndim} dimensions.")
    return write(self, _record_fill(self, value), "fill_", check_dtype=False)


def _zero_(self: FakeTensor) -> FakeTensor:
    return _fill_(self, 0)


def _setitem(self: FakeTensor, index: Any, value: Any) -> None:
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
    write(self, written, "`x[i] = v`", check_dtype=False)


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


def write(target: FakeTensor, value: Tensor, what: str, check_dtype: bool = True) -> FakeTensor:
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
    views = views_of(active_recorder().graph, base.storage)
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
        active_recorder().constant_of(value)


def _functional_method(name: str, out_of_place: str) -> Callable[..., FakeTensor]:
    """`x.<name>(...)` on a traced tensor: `x = x.<out_of_place>(...)`, functionalized."""

    def method(self: FakeTensor, *args: Any, **kwargs: Any) -> Any:
        inplace.check_no_partial_overlap(self, (*args, *kwargs.values()))  # as eager
        value = getattr(self, out_of_place)(*args, **kwargs)
        if value is NotImplemented:  # `x += other` of a type Tensor does not take
            return value
        return write(self, value, name)

    method.__name__ = method.__qualname__ = name
    return method


def _install_functional_methods() -> None:
    """Every in-place Tensor method with an out-of-place twin (`add_` -> `add`, `__iadd__`
    -> `__add__`, those of declared ops too) becomes a functionalized method of FakeTensor."""
    for name in (*inplace.METHODS, *declare.METHODS):
        twin = f"__{name[3:]}" if name.startswith("__i") else name[:-1]
        if name.endswith("_") and name not in vars(FakeTensor) and hasattr(Tensor, twin):
            setattr(FakeTensor, name, _functional_method(name, twin))


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


def install() -> None:
    """FakeTensor's in-place methods: copy_, fill_, zero_ and `x[i] = v`, every in-place
    op with an out-of-place twin (`_install_functional_methods`), and the shape-changing
    ones (Note [In-place view ops])."""
    for name, method in (("copy_", _copy_), ("fill_", _fill_), ("zero_", _zero_),
                         ("__setitem__", _setitem)):
        setattr(FakeTensor, name, method)
    _install_functional_methods()
    for name in SHAPE_CHANGING_INPLACE:
        setattr(FakeTensor, name, _shape_changing_method(name))
