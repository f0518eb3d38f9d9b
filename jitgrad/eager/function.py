"""Custom autograd Functions: `jitgrad.autograd.Function`, as `torch.autograd.Function`.

A subclass defines `forward` and `backward` as static methods; `MyFn.apply(*args)` runs
`forward` with grad mode off and, when an input requires grad, records one backward node
of class `MyFnBackward` (created per subclass). That node is also the `ctx` object the
user's `forward`/`setup_context` and `backward` receive, as in PyTorch, so anything put
on `ctx` in forward is there in backward.

Behaviour follows torch/autograd/function.py and torch/csrc/autograd/custom_function.cpp
(values measured with torch 2.13, research/eager_autograd.md §1 row 18):
- `backward(ctx, *grad_outputs)` gets one Tensor per forward output (None for outputs
  that are not Tensors; zeros for tensor outputs that got no gradient, unless
  `ctx.set_materialize_grads(False)`), and returns one gradient per forward input (None
  allowed; extra trailing Nones are dropped). Count and shape errors are raised by the
  engine (E19a/E19b); a larger broadcastable gradient is summed to the input's shape.
- Backward runs on Tensors. Under `create_graph=True` grad mode is on while it runs,
  so the gradient it computes records history and can be differentiated again.
- Saved tensors: inputs and intermediates are kept as Tensors; a saved *output* is kept
  as its array plus version counter and rebuilt on unpacking with `grad_fn` = this node
  (no reference cycle output -> node -> output; see Note in node.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from jitgrad.eager.grad_mode import STATE, no_grad
from jitgrad.eager.node import ERR_FREED, Node, SavedValues, VersionCounter
from jitgrad.eager.tensor import Tensor, gradient_edge

ERR_DIRTY_LEAF = "a leaf Variable that requires grad has been used in an in-place operation."
ERR_DIRTY_NOT_RETURNED = (
    "Some elements marked as dirty during the forward method were not returned as output. "
    "The inputs that are modified inplace must all be outputs of the Function.")
ERR_ONCE_DIFFERENTIABLE = (
    "trying to differentiate twice a function that was marked with @once_differentiable")


class FunctionCtx:
    """What `forward`/`setup_context` can record for `backward` (PyTorch's FunctionCtx).

    Any other attribute can be set on ctx as well (`ctx.k = 3`).
    """

    _to_save: tuple[Any, ...] = ()
    _dirty: tuple[Tensor, ...] = ()
    _non_differentiable: tuple[Tensor, ...] = ()
    _materialize_grads = True

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Keep tensors (inputs, outputs or intermediates) for `ctx.saved_tensors`.

        Raises TypeError for an argument that is neither a Tensor nor None.
        """
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {i} "
                                f"is of type {type(t).__name__}")
        self._to_save = tensors

    def mark_dirty(self, *tensors: Tensor) -> None:
        """Declare inputs that forward modified in place; they must be returned as outputs."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        """Declare outputs without gradient: they do not require grad, and their gradient
        arrives in backward as zeros (or None without materialization)."""
        self._non_differentiable = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """Whether missing output gradients reach backward as zeros (default) or None."""
        self._materialize_grads = bool(value)


class BackwardCFunction(Node, FunctionCtx):
    """The node (and ctx) of one `Function.apply` call; subclassed as `<Name>Backward`.

    Instances have a `__dict__`, so the user's ctx attributes live on the node.
    """

    _forward_cls: type[Function]

    def __init__(self) -> None:
        super().__init__()
        self.next_edges: tuple = ()
        self.input_metadata: tuple = ()
        self.num_outputs = 1
        self.needs_input_grad: tuple[bool, ...] = ()
        self._output_metadata: tuple = ()  # (shape, numpy dtype) per output, None if no Tensor
        self._output_differentiable: tuple[bool, ...] = ()
        self._saved: SavedValues | None = None
        self._saved_output_nrs: tuple[int | None, ...] = ()
        self._freed = False

    # ----- saved tensors --------------------------------------------------------------
    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        """The tensors given to `save_for_backward`, checked for in-place modification.

        Raises RuntimeError if one was modified in place after it was saved, or if the
        graph was freed by a backward without `retain_graph=True`.
        """
        saved = self._saved
        if saved is None:
            if self._freed:
                raise RuntimeError(ERR_FREED)
            return tuple(self._to_save)  # inside forward/setup_context, nothing packed yet
        saved.check(self, self._modified_output)
        return tuple(self._saved_output(nr, i) if nr is not None else saved.values[i]
                     for i, nr in enumerate(self._saved_output_nrs))

    def _modified_output(self, _: int) -> Tensor:
        """The saved output that `SavedValues.check` reports: the first whose version changed."""
        saved = self._saved
        assert saved is not None, "only called while saved values exist"
        modified = [(i, nr) for i, nr in enumerate(self._saved_output_nrs)
                    if nr is not None and saved.counters[i].changed_since(saved.versions[i])]
        assert modified, "check() reports a modified saved output, so one exists"
        index, output_nr = modified[0]
        return self._saved_output(output_nr, index)

    def _saved_output(self, output_nr: int, index: int) -> Tensor:
        """Rebuild saved value `index` (output `output_nr`) as a Tensor with grad_fn = this node."""
        assert self._saved is not None, "only called while saved values exist"
        if self._output_differentiable[output_nr]:
            out = Tensor._make(self._saved.values[index], True, self, output_nr)
        else:
            out = Tensor._make(self._saved.values[index])
        out._vc = self._saved.counters[index]
        return out

    def _pack_saved(self, raw_outputs: tuple[Any, ...]) -> None:
        """Record `save_for_backward`'s tensors with their current versions (after forward).

        Saved outputs keep only their array, so the node holds no reference to them.
        """
        if not self._to_save:
            return
        values: list[Any] = []
        counters: list[VersionCounter | None] = []
        versions: list[int] = []
        output_nrs: list[int | None] = []
        for t in self._to_save:
            if t is None:
                values.append(None)
                counters.append(None)
                versions.append(0)
                output_nrs.append(None)
                continue
            nr = next((i for i, o in enumerate(raw_outputs) if o is t), None)
            counter = t._version_counter()
            values.append(t._data if nr is not None else t)
            counters.append(counter)
            versions.append(counter.value)
            output_nrs.append(nr)
        self._saved = SavedValues(tuple(values), tuple(counters), tuple(versions))
        self._saved_output_nrs = tuple(output_nrs)
        del self._to_save  # back to the class default: no references to the outputs

    def release_variables(self) -> None:
        if self._saved is not None:
            self._saved = None
            self._freed = True

    # ----- backward -------------------------------------------------------------------
    def apply(self, grad_outputs: list[Any], create_graph: bool) -> tuple[Any, ...]:
        grads = [self._grad_for_output(i, g) for i, g in enumerate(grad_outputs)]
        result = self._forward_cls.backward(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        num_inputs = len(self.next_edges)
        if len(result) > num_inputs and all(g is None for g in result[num_inputs:]):
            result = result[:num_inputs]
        return tuple(self._unwrap_grad(i, g, create_graph) for i, g in enumerate(result))

    def _grad_for_output(self, i: int, g: Any) -> Tensor | None:
        meta = self._output_metadata[i]
        if meta is None:
            return None
        if g is None:
            if not self._materialize_grads:
                return None
            return Tensor._make(np.zeros(meta[0], meta[1]))
        return g if isinstance(g, Tensor) else Tensor._make(g)

    def _unwrap_grad(self, i: int, g: Any, create_graph: bool) -> Any:
        if g is None:
            return None
        if not isinstance(g, Tensor):
            raise TypeError(f"function {self.name()} returned a gradient of type "
                            f"{type(g).__name__} at position {i}; expected a Tensor or None")
        if i < len(self.input_metadata) and self.input_metadata[i] is None:
            raise RuntimeError(
                f"function {self.name()} returned a gradient different than None at position "
                f"{i + 1}, but the corresponding forward input was not a Variable")
        if create_graph:
            return g
        # a view, so the engine copies it before storing it in a leaf's .grad: the array
        # may belong to a tensor the user still holds (e.g. a saved input)
        return g._data.view()


class Function:
    """Base class of custom autograd operations (`torch.autograd.Function`).

    Subclasses define static methods `forward(ctx, *args, **kwargs)` and
    `backward(ctx, *grad_outputs)`, or `forward(*args, **kwargs)` plus
    `setup_context(ctx, inputs, output)`, and are called with `MyFn.apply(*args)`.
    Formula source: whatever the subclass's backward implements.
    """

    _backward_cls: type[BackwardCFunction]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._backward_cls = type(f"{cls.__name__}Backward", (BackwardCFunction,),
                                 {"_forward_cls": cls})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please "
            "use new-style autograd function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD.")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run forward without recording, then wire one `<Name>Backward` node to the outputs.

        Returns forward's result with tensor outputs attached to the node (when an input
        requires grad and grad mode is on). Raises RuntimeError for `mark_dirty` misuse.
        """
        ctx = cls._backward_cls()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        setup_context = getattr(cls, "setup_context", None)
        with no_grad():
            if setup_context is not None:
                output = cls.forward(*args, **kwargs)
                setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        is_tuple = isinstance(output, tuple)
        raw_outputs = output if is_tuple else (output,)
        if not (STATE.enabled and any(ctx.needs_input_grad)):
            return output
        ctx.next_edges = tuple(gradient_edge(a) if isinstance(a, Tensor) else None for a in args)
        ctx.input_metadata = tuple((a._data.shape, a._data.dtype) if isinstance(a, Tensor)
                                   else None for a in args)
        outputs = _wrap_outputs(ctx, args, raw_outputs)
        ctx._pack_saved(raw_outputs)
        return outputs if is_tuple else outputs[0]


def _wrap_outputs(ctx: BackwardCFunction, args: tuple[Any, ...],
                  raw_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """Attach the tensor outputs to `ctx` (PyTorch's `_wrap_outputs`)."""
    dirty = {id(t) for t in ctx._dirty}
    non_differentiable = {id(t) for t in ctx._non_differentiable}
    input_ids = {id(a) for a in args if isinstance(a, Tensor)}
    returned = {id(o) for o in raw_outputs}
    if any(key not in returned for key in dirty):
        raise RuntimeError(ERR_DIRTY_NOT_RETURNED)
    ctx.num_outputs = len(raw_outputs)
    metadata: list[tuple[tuple[int, ...], np.dtype] | None] = []
    differentiable_outputs = []
    outputs = []
    for nr, out in enumerate(raw_outputs):
        if not isinstance(out, Tensor):
            metadata.append(None)
            differentiable_outputs.append(False)
            outputs.append(out)
            continue
        metadata.append((out._data.shape, out._data.dtype))
        key = id(out)
        differentiable = key not in non_differentiable and out._data.dtype.kind == "f"
        differentiable_outputs.append(differentiable)
        if key in dirty:
            outputs.append(_rebase_dirty(ctx, out, nr, differentiable))
        elif not differentiable:
            outputs.append(_alias(out) if out._requires_grad else out)
        elif key in input_ids or out._requires_grad or out._grad_fn is not None:
            alias = _alias(out)  # an input returned as is: a new tensor sharing its storage
            alias._requires_grad, alias._grad_fn, alias._output_nr = True, ctx, nr
            outputs.append(alias)
        else:
            out._requires_grad, out._grad_fn, out._output_nr = True, ctx, nr
            outputs.append(out)
    ctx._output_metadata = tuple(metadata)
    ctx._output_differentiable = tuple(differentiable_outputs)
    return tuple(outputs)


def _alias(t: Tensor) -> Tensor:
    """A tensor that shares `t`'s storage and version counter, without autograd history."""
    alias = Tensor._make(t._data)
    alias._vc = t._version_counter()
    return alias


def _rebase_dirty(ctx: BackwardCFunction, t: Tensor, nr: int, differentiable: bool) -> Tensor:
    """An input modified in place by forward: its history continues from `ctx`."""
    if t._grad_fn is None and t._requires_grad:
        raise RuntimeError(ERR_DIRTY_LEAF)
    if t._view is not None:
        raise RuntimeError(
            f"{ctx.name()}: an input marked dirty with ctx.mark_dirty is a view of another "
            "tensor; jitgrad cannot rebase the history of a view from a custom Function. "
            "Clone the input before passing it, or modify the base tensor instead.")
    if differentiable:
        t._requires_grad, t._grad_fn, t._output_nr = True, ctx, nr
    return t


def once_differentiable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a `backward` that cannot itself be differentiated.

    It runs with grad mode off; if a gradient would have to flow through its results
    (create_graph with grad-requiring inputs), that later backward raises RuntimeError.
    """

    @functools.wraps(fn)
    def wrapper(ctx: Any, *args: Any) -> Any:
        with no_grad():
            outputs = fn(ctx, *args)
        if not STATE.enabled:
            return outputs
        requiring = [a for a in args if isinstance(a, Tensor) and a._requires_grad]
        if not requiring:
            return outputs
        node = DelayedError(requiring)
        is_tuple = isinstance(outputs, tuple)
        wrapped = tuple(_attach(o, node) for o in (outputs if is_tuple else (outputs,)))
        return wrapped if is_tuple else wrapped[0]

    return wrapper


def _attach(t: Any, node: Node) -> Any:
    if not isinstance(t, Tensor) or t._data.dtype.kind != "f":
        return t
    out = Tensor._make(t._data, True, node)
    out._vc = t._vc if t._vc is not None else VersionCounter()
    return out


class DelayedError(Node):
    """Node of a `@once_differentiable` backward's results: differentiating them raises."""

    __slots__ = ()

    def __init__(self, inputs: list[Tensor]) -> None:
        super().__init__()
        self.next_edges = tuple(gradient_edge(t) for t in inputs)
        self.input_metadata = tuple((t._data.shape, t._data.dtype) for t in inputs)

    def apply(self, grad_outputs: list[Any], create_graph: bool) -> tuple[Any, ...]:
        raise RuntimeError(ERR_ONCE_DIFFERENTIABLE)


__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "once_differentiable"]
