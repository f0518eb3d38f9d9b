"""How an op is defined once, and how every op runs (`apply_op`).

Each op is one `OpDef`: its name, a numpy forward, a backward formula, what the backward
reads (`saves`), and the source of the formula. Registering it creates the autograd node
class `<Name>Backward`. Trace and codegen keep their own tables keyed by the OpDef
(see DESIGN.md), never a switch over names.

Backward contract, shared by eager autograd, `create_graph` and the compiler:
    backward(xp, ctx, g, *saved) -> tuple with one gradient (or None) per input
- `xp` is an array namespace (`jitgrad.eager.xp`): numpy arrays by default, jitgrad
  Tensors under `create_graph=True`, graph values when the compiler traces a backward.
  Formulas use Python operators and `xp.*` only, so they run on all three.
- `g` is the gradient of the output (a list, one per output, for multi-output ops).
- `saved` are the values named in `saves` (input names or "out"), unpacked in that
  order (a Python scalar operand arrives as itself). A value listed in `saved_for`
  is saved only when the named input needs a gradient (as PyTorch's mul saves `other`
  only for `self`'s gradient), and arrives as None otherwise.
- `ctx` is the node: `ctx.params` (the op's non-tensor arguments), `ctx.needs_input_grad`,
  `ctx.input_metadata[i]` = (shape, numpy dtype) of input i.
- A formula may return a gradient with a broadcast shape; the engine sums it to the
  input's shape (research/eager_autograd.md §0.2) and casts it to the input's dtype.
- Nothing computed in the numpy forward is saved: a backward is a pure function of
  params, saved inputs/outputs and g, so the compiler can trace it.

Note [Recording ops while tracing]: `apply_op` is the single point every op passes
through. While `jitgrad.trace` traces a function it installs `STATE.recorder` (thread
local); `apply_op` then hands the call to it instead of running the numpy forward, and
the recorder adds a graph node whose target is the OpDef. The public functions
(argument checks, dtype promotion, dim normalization) run unchanged on fake tensors, so
a traced graph holds exactly the ops eager mode would run.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import numpy as np

from jitgrad.eager import layout
from jitgrad.eager import xp as xp_namespaces
from jitgrad.eager.grad_mode import STATE
from jitgrad.eager.node import ERR_FREED, Node, SavedValues, VersionCounter
from jitgrad.eager.tensor import Tensor, gradient_edge

_NO_PARAMS: dict[str, Any] = {}
ANY_KIND = "biuf"  # `scalar_kinds` of a scalar form that lowers in every kernel dtype

OPS: dict[str, OpDef] = {}


class OpDef:
    """One op: forward on numpy arrays, backward formula, saved values, formula source.

    name:     the functional name (`"mul"`), also the graph IR's call_function target.
    forward:  `(arrays_or_scalars..., **params) -> ndarray` (tuple for multi-output ops).
    inputs:   names of the tensor operands (forward's positional parameters).
    backward: see the module docstring; None for ops without a derivative (argmax, eq).
    saves:    names among forward's positional parameters, or "out".
    saved_for: {saved name: input name}: save it only when that input needs a gradient.
    num_outputs: outputs of the forward; None when it varies per call (split, unbind).
    source:   where the derivative comes from (textbook rule or paper).
    meta:     the shape/dtype rule, `(TensorMeta or scalar per input, **params) ->
              TensorMeta` (a tuple for multi-output ops); by default inferred by running
              the forward on zero-stride arrays (see `infer_meta`).
    impure:   the forward has an effect besides its result (a random op draws from the
              default generator): a graph keeps it even unused and never fuses it, so it
              draws at run time, in eager's order.
    scalar:   the codegen-neutral scalar form of a pointwise op, `(s, *operands, **params)
              -> expression`, lowered by codegen for compute dtypes of a kind in
              `scalar_kinds` (see Note [Declaring an op once] in declare.py); None if none.
    elementwise: the result is laid out as an elementwise op's (TensorIterator's rule over
              its operands, Note [Result layouts]); otherwise a fresh result is C-contiguous.
              Default: whether the op has a scalar form.
    own_layout: the forward itself returns PyTorch's layout (advanced indexing, whose rule
              reads the index arrays among its params); the layout step keeps it.
    """

    __slots__ = ("name", "forward", "backward", "saves", "save_index", "save_plan",
                 "input_names", "source", "node_class", "num_outputs", "differentiable", "meta",
                 "impure", "scalar", "scalar_kinds", "elementwise", "own_layout")

    def __init__(self, name: str, forward: Callable, backward: Callable | None,
                 saves: tuple[str, ...] = (), source: str = "", num_outputs: int | None = 1,
                 node_name: str | None = None, inputs: tuple[str, ...] | None = None,
                 meta: Callable | None = None, saved_for: dict[str, str] | None = None,
                 impure: bool = False, scalar: Callable | None = None,
                 scalar_kinds: str = "f", elementwise: bool | None = None,
                 own_layout: bool = False) -> None:
        self.name = name
        self.own_layout = own_layout
        self.elementwise = scalar is not None if elementwise is None else elementwise
        self.impure = impure
        self.scalar = scalar
        self.scalar_kinds = scalar_kinds
        self.meta = meta
        self.forward = forward
        self.backward = backward
        self.saves = saves
        self.source = source
        self.num_outputs = num_outputs
        self.differentiable = backward is not None
        if inputs is None:  # a ufunc forward has no parameter names: pass `inputs=`
            params = inspect.signature(forward).parameters.values()
            inputs = tuple(p.name for p in params
                           if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        self.input_names = inputs
        for s in saves:
            assert s == "out" or s in self.input_names, f"{name}: saves unknown value {s!r}"
        # -1 stands for the output; others index the forward's positional inputs
        self.save_index = tuple(-1 if s == "out" else self.input_names.index(s) for s in saves)
        saved_for = saved_for or {}
        # per saved value: the input whose gradient needs it, or -1 (always saved)
        conditions = tuple(self.input_names.index(saved_for[s]) if s in saved_for else -1
                           for s in saves)
        self.save_plan = tuple(zip(self.save_index, conditions, strict=True))
        title = node_name or "".join(part.capitalize() for part in name.split("_"))
        namespace: dict[str, Any] = {"__slots__": (), "op": self}
        if num_outputs is None:
            namespace["__slots__"] = ("num_outputs",)  # set per node by apply_op
        else:
            namespace["num_outputs"] = num_outputs
        self.node_class = type(f"{title}Backward", (OpNode,), namespace)

    def infer_meta(self, inputs: tuple, params: dict[str, Any]) -> Any:
        """Output shape, dtype and layout for inputs described by `TensorMeta`s (scalars as is).

        Note [Shape/dtype rules]: an op's explicit `meta` rule wins (its outputs are
        C-contiguous unless it says otherwise); otherwise the numpy forward runs on
        read-only zero-stride arrays of the input shapes (ones for floats, so log/div stay
        finite; zeros otherwise, a valid index anywhere), which allocates nothing per
        input and gives numpy's (and so the op's) exact output shape and dtype. Where the
        layout of the result may differ from that run's (an input is not C-contiguous: run
        instead; the result is a view of an input: run again), the forward runs on zero
        arrays of the inputs' own layouts (jitgrad.eager.layout), so the strides and
        storage offset are those of an eager call. Ops whose forward is costly on such
        inputs (matmul) or whose output shape depends on values (nonzero) define `meta`.
        """
        if self.meta is not None:
            return self.meta(*inputs, **params)
        if any(isinstance(x, TensorMeta) and not x.is_contiguous() for x in inputs):
            outs = self._forward_on_layouts(inputs, params)  # Note [Result layouts] too
        else:
            arrays = tuple(np.broadcast_to(_META_FILL[x.dtype.kind == "f"](x.dtype), x.shape)
                           if isinstance(x, TensorMeta) else x for x in inputs)
            outs = self._outputs(self.forward(*arrays, **params))
            if any(isinstance(a, np.ndarray) and (np.may_share_memory(o, a) or not o.size)
                   for o in outs for a in arrays) or not _all_c_contiguous(outs, ()):
                # a view (its strides are the input's; an empty one shares no memory to
                # tell) or a result to lay out
                outs = self._forward_on_layouts(inputs, params)
        metas = tuple(TensorMeta.of(o) for o in outs)
        return metas[0] if self.num_outputs == 1 else metas

    def _forward_on_layouts(self, inputs: tuple, params: dict[str, Any]) -> tuple:
        arrays = tuple(x.zeros() if isinstance(x, TensorMeta) else x for x in inputs)
        with np.errstate(all="ignore"):  # zeros: log(0), 0/0 are fine here
            outs = self._outputs(self.forward(*arrays, **params))
        if _all_c_contiguous(outs, arrays):  # as apply_op: the forward's own layout
            return outs
        return tuple(result_layout(self, arrays, params, o) for o in outs)

    def _outputs(self, out: Any) -> tuple:
        return (out,) if self.num_outputs == 1 else tuple(out)

    def __call__(self, *inputs: Any, **params: Any) -> Any:
        """Apply the op eagerly: `apply_op(self, inputs, arrays, params)` with each Tensor's data.

        inputs: Tensors or Python scalars, one per forward input (scalars reach the
        forward as they are, tensor data without a cast); params: the op's non-tensor
        arguments. Records autograd history as any op call does. Generated graph code
        (`jitgrad.trace` GraphModules) calls ops this way.
        """
        arrays = tuple([x._data if isinstance(x, Tensor) else x for x in inputs])
        return apply_op(self, inputs, arrays, params)

    def __repr__(self) -> str:
        return f"OpDef({self.name})"


_META_FILL = {True: lambda dtype: np.ones((), dtype), False: lambda dtype: np.zeros((), dtype)}


class TensorMeta(NamedTuple):
    """What the shape/dtype rule of an op sees of a tensor: its shape, numpy dtype and
    layout (strides in elements, None for C order; storage offset in elements)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    strides: tuple[int, ...] | None = None
    offset: int = 0

    @classmethod
    def of(cls, array: np.ndarray) -> TensorMeta:
        """The metadata of an array, its layout included (C-order strides as None)."""
        strides = layout.element_strides(array)
        return cls(array.shape, array.dtype,
                   None if strides == layout.contiguous_strides(array.shape) else strides,
                   layout.storage_offset(array))

    def is_contiguous(self) -> bool:
        return self.strides is None or self.strides == layout.contiguous_strides(self.shape)

    def zeros(self) -> np.ndarray:
        """A read-only zero array with this metadata (jitgrad.eager.layout)."""
        return layout.layout_array(self.shape, self.dtype, self.strides, self.offset)


def register(name: str, forward: Callable, backward: Callable | None = None, *,
             saves: tuple[str, ...] = (), source: str = "", num_outputs: int | None = 1,
             node_name: str | None = None, inputs: tuple[str, ...] | None = None,
             meta: Callable | None = None, saved_for: dict[str, str] | None = None,
             impure: bool = False, scalar: Callable | None = None,
             scalar_kinds: str = "f", elementwise: bool | None = None,
             own_layout: bool = False) -> OpDef:
    """Define an op once and add it to `OPS`. Raises AssertionError on a duplicate name.

    inputs: names of the forward's tensor operands, needed when `forward` is a numpy
    ufunc (default: the forward's positional parameter names).
    meta: the op's shape/dtype rule when the default inference does not fit (see
    `OpDef.infer_meta`).
    scalar, scalar_kinds: a pointwise op's scalar form for codegen (see `OpDef`).
    elementwise, own_layout: its result's layout rule (see `OpDef`).
    """
    assert name not in OPS, f"op {name!r} is defined twice"
    op = OpDef(name, forward, backward, saves, source, num_outputs, node_name, inputs, meta,
               saved_for, impure, scalar, scalar_kinds, elementwise, own_layout)
    OPS[name] = op
    return op


# Note [Selecting backwards]: PyTorch computes the gradient of these ops with a
# differentiable op of (grad, saved input) whose derivative in the saved input is zero
# (threshold_backward, hardtanh_backward, leaky_relu_backward). Under
# create_graph their gradient is thus connected to the saved value even when nothing else
# is: a second derivative is zeros, not "does not require grad". Ours select with a mask,
# which connects nothing, so `_linked` adds that zero-derivative edge (eager only).
SELECTING_BACKWARDS = frozenset({"relu", "threshold", "hardtanh", "leaky_relu"})


def _linked(xp: Any, grad: Any, saved: Any) -> Any:
    """`grad`, graph-connected to `saved` with a zero derivative (Note [Selecting
    backwards]): where(False, saved, grad) has grad's values and sends saved nothing."""
    if not isinstance(grad, Tensor) or grad._requires_grad or not getattr(
            saved, "_requires_grad", False):
        return grad
    never = Tensor._make(np.zeros(saved._data.shape, dtype=np.bool_))
    return xp.where(never, saved, grad)


class OpNode(Node):
    """Backward node of a registered op (subclassed per op as `<Name>Backward`)."""

    __slots__ = ("params", "saved")
    op: OpDef
    params: dict[str, Any]
    saved: SavedValues | None  # None once released

    @property
    def needs_input_grad(self) -> tuple[bool, ...]:
        return tuple([e is not None for e in self.next_edges])

    def apply(self, grad_outputs: list[Any], create_graph: bool) -> tuple[Any, ...]:
        op = self.op
        xp = xp_namespaces.TENSOR if create_graph else xp_namespaces.NUMPY
        saved = self.unpack_saved(create_graph) if op.saves else ()
        g = grad_outputs[0] if op.num_outputs == 1 else grad_outputs
        # a node exists only for a differentiable op, whose backward is set
        grads = cast("Callable[..., tuple[Any, ...]]", op.backward)(xp, self, g, *saved)
        if create_graph and op.name in SELECTING_BACKWARDS:
            grads = tuple(_linked(xp, grad, saved[0]) for grad in grads)
        return grads

    def unpack_saved(self, as_tensors: bool) -> tuple[Any, ...]:
        saved = self.saved
        if saved is None:
            raise RuntimeError(ERR_FREED)
        saved.check(self, self._output_tensor)
        if as_tensors:
            # the saved output is found by its slot, not its type: a 0-d result is a numpy
            # scalar, and it must come back graph-connected (double backward through exp)
            return tuple([self._output_tensor(0) if i == -1 else v
                          for i, v in zip(self.op.save_index, saved.values, strict=True)])
        return tuple([v._data if isinstance(v, Tensor) else v for v in saved.values])

    def _output_tensor(self, output_nr: int) -> Any:
        """The saved output as a Tensor whose grad_fn is this node (as PyTorch rebuilds it)."""
        saved = cast(SavedValues, self.saved)  # only unpack_saved calls it, after its check
        index = self.op.save_index.index(-1)
        out = Tensor._make(saved.values[index], True, self, output_nr)
        out._vc = saved.counters[index]
        return out

    def release_variables(self) -> None:
        self.saved = None

    def __getattr__(self, name: str) -> Any:
        # PyTorch exposes saved values as grad_fn._saved_<name>
        if name.startswith("_saved_"):
            key = name[len("_saved_"):]
            key = "out" if key == "result" else key
            if key in self.op.saves:
                return self.unpack_saved(True)[self.op.saves.index(key)]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


def apply_op(op: OpDef, inputs: tuple, arrays: tuple, params: dict[str, Any] = _NO_PARAMS) -> Any:
    """Run `op` forward on `arrays` and record a backward node when a gradient is needed.

    inputs: the user's operands (Tensors, or Python scalars), one per forward input;
    arrays: what the forward receives for them (tensor data, possibly cast to the result
    dtype). Returns a Tensor (a tuple of Tensors for multi-output ops).
    See Note [Hot path] in tensor.py: this function runs once per op.
    """
    if STATE.recorder is not None:
        return STATE.recorder(op, inputs, arrays, params)
    out = op.forward(*arrays, **params) if params else op.forward(*arrays)
    if not _all_c_contiguous(out, arrays):
        out = result_layout(op, arrays, params, out)
    record = False
    if STATE.enabled and op.differentiable:
        for x in inputs:
            if isinstance(x, Tensor) and (x._requires_grad or x._view is not None
                                          and x.requires_grad):  # a view's, refreshed
                record = True
                break
    if not record:
        if op.num_outputs == 1:
            return Tensor._make(out)
        return tuple(Tensor._make(o) for o in out)
    node = op.node_class()
    node.params = params
    if len(inputs) == 1:  # unary ops: no loop (see Note [Hot path])
        data = inputs[0]._data
        node.next_edges = (gradient_edge(inputs[0]),)
        node.input_metadata = ((data.shape, data.dtype),)
    else:
        edges = []
        metadata: list[tuple[tuple[int, ...], np.dtype] | None] = []
        for x in inputs:
            if isinstance(x, Tensor):
                edges.append(gradient_edge(x))
                data = x._data
                metadata.append((data.shape, data.dtype))
            else:
                edges.append(None)
                metadata.append(None)
        node.next_edges = tuple(edges)
        node.input_metadata = tuple(metadata)
    if op.num_outputs == 1:
        result = Tensor._make(out, out.dtype.kind == "f", node)
        if op.save_index == _ONLY_OUTPUT:
            counter = result._vc = VersionCounter()
            node.saved = SavedValues((out,), (counter,), (0,))
        elif op.save_index:
            node.saved = _save(op, node.next_edges, inputs, out, result)
        else:
            node.saved = None
        return result
    results = tuple(Tensor._make(o, o.dtype.kind == "f", node, i) for i, o in enumerate(out))
    if op.num_outputs is None:
        node.num_outputs = len(results)
    node.saved = _save(op, node.next_edges, inputs, out, results[0]) if op.save_index else None
    return results


_ONLY_OUTPUT = (-1,)

# Note [Result layouts]: the strides of an op's result are PyTorch's, not numpy's
# (`result_layout`), since programs branch on `is_contiguous()` and `view` refuses what
# torch's would refuse. Measured on torch 2.13:
# - a view keeps its own strides;
# - the result of an elementwise op (`OpDef.elementwise`: pointwise ops, where, clamp,
#   lerp, sort, flip, clone, casts) is laid out by TensorIterator's rule
#   (layout.iterator_strides): `x.t() * y` is strided like `x.t()`;
# - advanced indexing (`x[ids]`) applies that rule to the source restrided by the index
#   and to the index arrays (layout.index_strides): its forward lays out its own result
#   (`OpDef.own_layout`), since the rule reads the index arrays among the params;
# - every other result (reductions, matmul, gather, index_select, softmax, cat, a
#   clone asking for C order) is C-contiguous, whatever numpy chose: a square matmul of
#   transposed operands is not transposed, though its shape is theirs.
# When every operand and the result are C-contiguous (nearly always) nothing is checked.


def _all_c_contiguous(out: Any, arrays: tuple) -> bool:
    """Whether `out` and the arrays are C-contiguous (0-d and 1-d results always count)."""
    if type(out) is not np.ndarray:
        return type(out) is not tuple or all(_all_c_contiguous(o, arrays) for o in out)
    if out.ndim < 2:
        return True  # a fresh 0-d/1-d result has one layout
    if not out.flags.c_contiguous:
        return False
    for a in arrays:
        if type(a) is np.ndarray and a.ndim > 1 and not a.flags.c_contiguous:
            return False
    return True


def result_layout(op: OpDef, arrays: tuple, params: dict[str, Any], out: Any) -> Any:
    """`out` (one forward result, or a tuple) with PyTorch's layout for `op` on `arrays`:
    see Note [Result layouts]. Returns `out` itself when its layout already is."""
    if type(out) is tuple:
        return tuple(result_layout(op, arrays, params, o) for o in out)
    if not isinstance(out, np.ndarray) or out.ndim < 2:
        return out
    operands = [a for a in arrays if isinstance(a, np.ndarray)]
    if op.own_layout or any(np.may_share_memory(out, a) for a in operands):
        return out  # laid out by the forward, or a view
    if op.elementwise and params.get("order") != "C":
        return layout.with_strides(out, layout.iterator_strides(out.shape, operands))
    return layout.with_strides(out, layout.contiguous_strides(out.shape))


@functools.cache
def laid_out_forward(op: OpDef) -> Callable[..., Any]:
    """`op`'s forward followed by apply_op's layout step (Note [Result layouts]): for code
    that runs forwards on raw arrays (a compiled graph's program) where an operand or the
    result is not C-contiguous, so the result has eager's strides, not numpy's."""
    forward = op.forward

    def laid_out(*arrays: Any, **params: Any) -> Any:
        out = forward(*arrays, **params)
        if not _all_c_contiguous(out, arrays):
            out = result_layout(op, arrays, params, out)
        return out

    laid_out.__name__ = laid_out.__qualname__ = f"{op.name}_laid_out"
    return laid_out


def _save(op: OpDef, edges: tuple, inputs: tuple, out: Any, result: Tensor) -> SavedValues:
    """Snapshot what the backward reads. Saved input Tensors are held with their version
    (their counter is read at unpack); the output array gets the output's counter, since
    the output Tensor itself is not held (it would make a reference cycle)."""
    values = []
    counters: list[VersionCounter | None] = []
    versions = []
    for i, condition in op.save_plan:
        if i == -1:
            counter = result._vc
            if counter is None:
                counter = result._vc = VersionCounter()
            values.append(out)
            counters.append(counter)
            versions.append(counter.value)
            continue
        value = inputs[i]
        if condition >= 0 and edges[condition] is None:
            value = None  # only another input's gradient needs it, and none is wanted
        values.append(value)
        counters.append(None)
        vc = getattr(value, "_vc", None)
        versions.append(0 if vc is None else vc.value)
    return SavedValues(values, counters, versions)
