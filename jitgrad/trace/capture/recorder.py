"""The op recorder: how ops on fake tensors become nodes of a Graph.

`OpRecorder` is installed as `STATE.recorder` while a function is traced (see Note
[Recording ops while tracing] in jitgrad/eager/ops/registry.py): every `apply_op` then
becomes a `call_function` node targeting the OpDef, with the op's params as kwargs. Dtype
casts that an op's entry function applied to an input's array become explicit
`to_dtype` nodes, so the graph computes exactly what eager mode computes.

A new value's symbolic sizes are inferred here too (`_infer_sym_shapes`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from jitgrad.eager.grad_mode import STATE
from jitgrad.eager.ops.registry import OPS, OpDef, TensorMeta, apply_op
from jitgrad.eager.symbolic_int import sizes as sym_shape
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.breaks.unsupported import BreakKind, Unsupported
from jitgrad.trace.capture import symbolic
from jitgrad.trace.capture.fake import FakeArray, FakeNumber, FakeTensor, contains_fake_array
from jitgrad.trace.ir.graph import Graph
from jitgrad.trace.ir.graph import Node as GraphNode


def _infer_sym_shapes(op: OpDef, outs: Any, inputs: tuple, arrays: tuple,
                      params: dict[str, Any]) -> None:
    """Give an op's results SymInts at the sizes that follow the op's symbolic inputs.

    The op's shape rule runs again at *probe* sizes (each symbol a little larger than its
    hint): a result size that stays put is static; one that moves is the candidate
    expression (an input size, a SymInt argument, a product of a run of input sizes, or
    one of those plus a constant, or a strided slice's `ceil((size - start) / step)`) that
    takes the same value at both the hints and the probe. A size that stays put is checked
    by every specialization, which compares each node's shape with these predictions
    (jitgrad.trace.runtime.specialize); one that moved and is unexplained makes the trace `opaque`
    (it is compiled at exact sizes): it may reach the caller through no node at all (the
    shape of a view handed to a resume function, campaign seed 1031053)."""
    env = symbolic.ShapeEnv.active()
    sym_inputs = [x for x in inputs if isinstance(x, Tensor) and
                  x.__dict__.get("sym_shape") is not None]
    if env is None or not (sym_inputs or symbolic.contains_symint((inputs, params))):
        return
    # two probes: a size can stay put for one step of its symbols (ceil(n / 2) at n = 7, 8)
    probes = [[h + 1 + k for k, h in enumerate(env.hints)],
              [h + 3 + 2 * k for k, h in enumerate(env.hints)]]
    probed = []
    for probe in probes:
        metas = tuple(TensorMeta(tuple(symbolic.substitute(sym_shape(x), probe)), a.dtype)
                      if isinstance(x, Tensor) else symbolic.substitute(x, probe)
                      for x, a in zip(inputs, arrays, strict=True))
        try:
            meta = op.infer_meta(metas, symbolic.substitute(params, probe))
        except Exception:  # noqa: BLE001 - the op relies on a size equal to a constant
            return
        probed.append((meta,) if isinstance(meta, TensorMeta) else tuple(meta))
    candidates = [e for e in _candidate_exprs(inputs, params) if type(e) is not int]
    for i, out in enumerate(outs):
        sym = []
        for d, hint in enumerate(out._data.shape):
            moved = [p[i].shape[d] for p in probed]
            static = moved == [hint, hint]
            expr = None if static else _explain(hint, moved, candidates, env, probes)
            env.opaque |= expr is None and not static
            sym.append(hint if expr is None else symbolic.SymInt(hint, expr))
        if any(isinstance(n, symbolic.SymInt) for n in sym):
            out.__dict__["sym_shape"] = tuple(sym)


def _candidate_exprs(inputs: tuple, params: dict[str, Any]) -> list:
    exprs = []
    for x in inputs:
        if isinstance(x, symbolic.SymInt):
            exprs.append(x.expr)
        if not isinstance(x, Tensor):
            continue
        sizes = sym_shape(x)
        for i in range(len(sizes)):
            product = sizes[i]
            for j in range(i, len(sizes)):
                product = product if j == i else product * sizes[j]
                if isinstance(product, symbolic.SymInt):
                    exprs.append(product.expr)
    exprs += [v.expr for v in _flat(params) if isinstance(v, symbolic.SymInt)]
    steps = [(v.start or 0, v.step) for v in _flat_slices(params)
             if isinstance(v.step, int) and v.step > 1 and isinstance(v.start or 0, int)
             and (v.start or 0) >= 0]
    exprs += [("//", ("+", e, step - 1 - start), step) for start, step in steps for e in exprs]
    return list(dict.fromkeys(exprs))


def _flat_slices(value: Any) -> list[slice]:
    if isinstance(value, slice):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _flat_slices(v)]
    if isinstance(value, (tuple, list)):
        return [s for v in value for s in _flat_slices(v)]
    return []


def _explain(hint: int, moved: list[int], candidates: list, env: symbolic.ShapeEnv,
             probes: list[list[int]]) -> Any:
    """The candidate (or candidate plus a constant) worth `hint` at the hints and `moved`
    at the probes; None if none is."""
    for expr in candidates:
        at_hint = symbolic.evaluate(expr, env.hints.__getitem__)
        if all(symbolic.evaluate(expr, probe.__getitem__) - at_hint == m - hint
               for probe, m in zip(probes, moved, strict=True)):
            shift = hint - at_hint
            return expr if shift == 0 else ("+", expr, shift) if shift > 0 else \
                ("-", expr, -shift)
    return None


def _flat(value: Any) -> list:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _flat(v)]
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _flat(v)]
    if isinstance(value, slice):
        return [value.start, value.stop, value.step]
    return [value]


class OpRecorder:
    """Turns `apply_op` calls into graph nodes while tracing (callable as `STATE.recorder`).

    constant_of: how a real Tensor reached by an op becomes a graph value (the translator
    lifts tensors it read from the user's frame as placeholders itself; tensors created
    inside traced code are constants).
    location: the SourceLocation of the user's instruction being traced, stamped on nodes.
    """

    def __init__(self, graph: Graph, constant_of: Callable[[Tensor], GraphNode]) -> None:
        self.graph = graph
        self.constant_of = constant_of
        self.location: Any = None

    def __call__(self, op: OpDef, inputs: tuple, arrays: tuple, params: dict[str, Any]) -> Any:
        if not op.impure and not any(isinstance(x, FakeTensor) for x in inputs) and not \
                contains_fake_array((arrays, params)) and not symbolic.contains_symint(params):
            return run_eagerly(apply_op, op, inputs, arrays, params)  # a constant of the graph
        if contains_fake_array(params):
            raise Unsupported(BreakKind.DATA_DEPENDENT_OP,
                              f"{op.name}: its arguments were computed "
                              "from a traced tensor's values (e.g. a tensor index or mask)",
                              "compute it outside the compiled function")
        args = tuple(self._arg(op, x, a) for x, a in zip(inputs, arrays, strict=True))
        metas = tuple(TensorMeta.of(a) if isinstance(a, np.ndarray) else symbolic.hinted(a)
                      for a in arrays)
        out_meta = op.infer_meta(metas, symbolic.hinted(params))
        requires_grad = STATE.enabled and op.differentiable and any(
            isinstance(x, Tensor) and x._requires_grad for x in inputs)
        node = self._node(op, args, dict(params))
        if isinstance(out_meta, TensorMeta):
            # arithmetic on stand-ins of Python numbers gives a Python number again
            tensors = [x for x in inputs if isinstance(x, Tensor)]
            numbers = tensors and all(isinstance(x, FakeNumber) for x in tensors)
            cls = FakeNumber if numbers else FakeTensor
            out = cls.of(node, out_meta.shape, out_meta.dtype,
                         requires_grad and out_meta.dtype.kind == "f", out_meta.strides,
                         out_meta.offset)
            _infer_sym_shapes(op, (out,), inputs, arrays, params)
            return out
        outs = []
        for i, meta in enumerate(out_meta):
            item = self._node(operator.getitem, (node, i), {})
            outs.append(FakeTensor.of(item, meta.shape, meta.dtype,
                                      requires_grad and meta.dtype.kind == "f", meta.strides,
                                      meta.offset))
        node.meta["val"] = tuple(outs)
        _infer_sym_shapes(op, outs, inputs, arrays, params)
        return tuple(outs)

    def _node(self, target: Any, args: tuple, kwargs: dict[str, Any]) -> GraphNode:
        node = self.graph.call_function(target, args, kwargs)
        if self.location is not None:
            node.meta["source"] = self.location
        return node

    def _arg(self, op: OpDef, x: Any, array: Any) -> Any:
        if not isinstance(x, Tensor):
            if isinstance(array, np.ndarray):  # the entry made an array from a number
                return self.constant_of(Tensor._make(array))
            if isinstance(array, np.generic) and array.dtype != np.asarray(x).dtype:
                # the entry cast the number (where's float32(0.3)): the graph keeps the cast
                return self.constant_of(Tensor._make(np.asarray(array)))
            return x
        if not isinstance(x, FakeTensor) and isinstance(x._data, FakeArray):
            raise Unsupported(BreakKind.DATA_DEPENDENT_OP, f"{op.name}: an input was built from a "
                              "traced tensor's values", "compute it outside the compiled function")
        if x._requires_grad and not isinstance(x, FakeTensor):
            raise Unsupported(BreakKind.UNSUPPORTED_TENSOR,
                              f"{op.name}: a tensor that requires grad "
                              "was created or reached without a traceable source",
                              "pass it to the compiled function as an argument")
        node = x.node if isinstance(x, FakeTensor) else self.constant_of(x)
        if array.shape != x._data.shape:
            raise Unsupported(BreakKind.UNSUPPORTED_OP,
                              f"{op.name}: its entry function reshaped an "
                              "input before the op; jitgrad cannot record that yet")
        if array.dtype != x._data.dtype:
            node = self._node(OPS["to_dtype"], (node,), {"np_dtype": array.dtype})
            node.meta["promotion"] = True  # eager's op saves x itself, not this cast
            converted = FakeTensor.like(node, Tensor._make(array), x._requires_grad)
            if x.__dict__.get("sym_shape") is not None:
                converted.__dict__["sym_shape"] = x.__dict__["sym_shape"]
        return node


def run_eagerly(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call `fn` with the recorder switched off (real computation on real tensors)."""
    recorder = STATE.recorder
    STATE.recorder = None
    try:
        return fn(*args, **kwargs)
    finally:
        STATE.recorder = recorder


class recording:  # noqa: N801 - used as a context manager, like no_grad
    """Install an OpRecorder for the current thread while tracing."""

    def __init__(self, recorder: OpRecorder) -> None:
        self.recorder = recorder

    def __enter__(self) -> OpRecorder:
        self._previous = STATE.recorder
        STATE.recorder = self.recorder
        return self.recorder

    def __exit__(self, *exc: object) -> None:
        STATE.recorder = self._previous
