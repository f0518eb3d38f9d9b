"""Entries whose graph is generic in size symbols (Note [Symbolic sizes] in symbolic.py).

A `SymbolicGraph` is what such an entry's runner calls in place of the backend's
callable: it reads the symbols' values off the graph inputs and runs the backend's
compilation of the graph at those sizes, made on first use (`specialize`) and cached.

Note [Checking a symbolic trace]
A symbolic trace runs eager's ops on concrete sizes, so an op that turned a size into a
plain number inside its own code (a constant computed from a shape) would bake it into
the graph without any guard. Two checks keep that from giving a wrong result:
- every specialization re-runs the graph's ops at the new sizes and refuses when a node's
  shape differs from the trace's prediction (jitgrad/trace/runtime/specialize.py);
- a new entry is *provisional* until it has met a second set of sizes: that call also
  traces the function exactly at its sizes, and the entry is kept only if the exact
  graph equals the generic one evaluated there, node for node (ops, arguments,
  constants). A mismatch means a size was baked in: the entry keeps serving its own
  sizes only, and the dims become static for the frame (`SizePolicy.static`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jitgrad.eager.ops.registry import OpDef
from jitgrad.eager.tensor import Size, Tensor
from jitgrad.trace.capture import symbolic
from jitgrad.trace.capture.fake import number_tensor
from jitgrad.trace.capture.recorder import run_eagerly
from jitgrad.trace.capture.sources import SizeSource, Source
from jitgrad.trace.ir.graph import Graph, map_arg
from jitgrad.trace.ir.graph_module import GraphModule
from jitgrad.trace.runtime import report
from jitgrad.trace.runtime.specialize import Refused, specialize


class SymbolicGraph:
    """The compiled callable of an entry with size symbols: `(*graph_inputs) -> tuple`.

    positions[k]: (input index, dim) where symbol k is read. specializations: the
    backend's callable per tuple of symbol values; refused: values it cannot serve.
    `read(*args, **kwargs)` gives a call's graph inputs (a generated function with the
    traced function's signature); stop_at: the graph break the trace stopped at.
    """

    def __init__(self, graph: Graph, backend: Callable[..., Any], result: Any,
                 example_inputs: list[Any], traced: list[tuple], fn: Callable[..., Any],
                 stop_at: int | None) -> None:
        self.graph = graph
        self.traced = traced  # the trace's signature, for Note [Checking a symbolic trace]
        self.backend = backend
        self.shape_env = shape_env = result.shape_env
        input_sources: list[Source] = result.input_sources
        self.positions = [(input_sources.index(s.base), s.dim) for s in shape_env.sources]
        self.read = result.guards.build_reader_fn(fn, input_sources)
        self.numbers = frozenset(i for i, source in enumerate(input_sources)
                                 if source in result.number_sources)
        self.stop_at = stop_at
        self.specializations: dict[tuple[int, ...], Any] = {}
        self.refused: set[tuple[int, ...]] = set()
        self.provisional = True
        self.closed = False  # its check failed: it serves the sizes it has, no new ones
        self.hints = tuple(shape_env.hints)
        self.compile(self.hints, example_inputs)

    def serves(self, args: tuple, kwargs: dict[str, Any]) -> bool:
        """Whether a specialization for this call's sizes exists already."""
        return self.values(self.read(*args, **kwargs)) in self.specializations

    def values(self, inputs: Any) -> tuple[int, ...]:
        return tuple(inputs[i]._data.shape[d] for i, d in self.positions)

    def compile(self, values: tuple[int, ...], inputs: list[Any]) -> Any:
        """The backend's callable at `values` (raises Refused)."""
        compiled = self.specializations.get(values)
        if compiled is None:
            compiled = self.backend(GraphModule(specialize(self.graph, values, inputs)), inputs)
            self.specializations[values] = compiled
        return compiled

    def __call__(self, *inputs: Any) -> tuple:
        return self.compile(self.values(inputs), list(inputs))(*inputs)

    @property
    def fusion_groups(self) -> Any:
        return getattr(self.specializations[self.hints], "fusion_groups", ())

    def show(self) -> str:
        sizes = ", ".join(f"s{k} = {source.name()}" for k, source in
                          enumerate(self.shape_env.sources))
        seen = "; ".join(str(list(v)) for v in self.specializations)
        head = (f"# symbolic sizes: {sizes}\n# specialized for {seen}"
                f"{' (provisional)' if self.provisional else ''}\n"
                f"# code for the traced sizes {list(self.hints)}:\n")
        inner = getattr(self.specializations[self.hints], "show", None)
        return head + (inner() if inner is not None else "")

    def accepts(self, args: tuple, kwargs: dict[str, Any],
                trace_exact: Callable[[int | None], list[tuple] | None]) -> bool:
        """Whether this entry serves the call `(*args, **kwargs)`: checked once per new set
        of sizes (Note [Checking a symbolic trace]), `trace_exact(stop_at)` giving the
        signature of the call traced without symbols; False sends the call to a new
        trace."""
        inputs = list(self.read(*args, **kwargs))
        values = self.values(inputs)
        inputs = [number_tensor(v) if i in self.numbers else v for i, v in enumerate(inputs)]
        if values in self.specializations:
            return True
        if values in self.refused or self.closed:
            return False
        try:
            if self.provisional:
                exact = trace_exact(self.stop_at)
                mismatch = "the exact trace failed" if exact is None else \
                    same_graph(exact, self.traced, values)
                if mismatch is not None:
                    self.closed = True
                    raise Refused(mismatch)
                self.provisional = False
            self.compile(values, inputs)
        except Refused as refused:
            self.refused.add(values)
            report.record_recompile(f"sizes {list(values)} refused by the symbolic entry: "
                                    f"{refused}")
            return False
        return True


class _Ref(int):
    """A node's position in a graph signature (`signature`)."""


def signature(graph: Graph) -> list[tuple]:
    """`graph`'s nodes as (op, target, args, kwargs, constant) with nodes as positions:
    taken before dead code goes, so a view only the runner rebuilds is compared too."""
    index = {node: _Ref(i) for i, node in enumerate(graph.nodes)}
    return [(node.op, node.target, map_arg(node.args, index.__getitem__),
             map_arg(node.kwargs, index.__getitem__),
             graph.attrs[node.target] if node.op == "get_attr" else None)
            for node in graph.nodes if node.op != "output"]


def same_graph(exact: list[tuple], generic: list[tuple], values: tuple[int, ...]) -> str | None:
    """None when the `generic` signature at symbol values `values` is the `exact` one, node
    for node (outputs aside: both traces return the same Python structure); else the
    first difference."""
    if len(exact) != len(generic):
        return f"{len(exact)} nodes traced exactly, {len(generic)} generic"
    for i, (a, b) in enumerate(zip(exact, generic, strict=True)):
        op, target, args, kwargs, constant = a
        if op == "get_attr" and _is_creation(b):  # a constant exactly, an op generically
            if not _same_constant(constant, run_eagerly(b[1], **symbolic.substitute(
                    b[3], values))):
                return f"node {i}: the constant differs from {b[1]!r} at these sizes"
            continue
        if op != b[0] or (op != "get_attr" and target is not b[1] and target != b[1]):
            return f"node {i} is {target!r}, generically {b[1]!r}"
        if op == "get_attr" and not _same_constant(constant, b[4]):
            return f"node {i}: constant {target} differs"
        expected = symbolic.substitute((b[2], b[3]), values)
        if not _same_args((args, kwargs), expected):
            return f"node {i} ({target!r}): arguments {args} {kwargs}, generically {expected}"
    return None


def _is_creation(node: tuple) -> bool:
    """A node making a tensor from sizes alone (FULL, ARANGE of creation.py)."""
    return node[0] == "call_function" and isinstance(node[1], OpDef) and \
        not node[1].input_names and not node[2]


def _same_args(a: Any, b: Any) -> bool:
    if isinstance(a, _Ref) or isinstance(b, _Ref):
        return isinstance(a, _Ref) and isinstance(b, _Ref) and int(a) == int(b)
    if type(a) is not type(b) and not (isinstance(a, int) and isinstance(b, int)):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same_args(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_args(a[k], b[k]) for k in a)
    if isinstance(a, slice):
        return _same_args((a.start, a.stop, a.step), (b.start, b.stop, b.step))
    if isinstance(a, float) and a != a:
        return b != b
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - values without a plain ==: only themselves
        return a is b


def _same_constant(a: Any, b: Any) -> bool:
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return a._data.shape == b._data.shape and a._data.dtype == b._data.dtype and \
            bool(np.array_equal(a._data, b._data, equal_nan=True))
    return a is b


def size_expr(value: Any, size_of: Callable[[SizeSource], str],
              shape_env: symbolic.ShapeEnv, const: Callable[[Any], str]) -> str:
    """Runner source computing `value` (a SymInt, or a tuple, Size or list holding them)
    from the call's sizes; other items are constants."""
    if isinstance(value, symbolic.SymInt):
        return symbolic.render(value.expr, lambda k: size_of(shape_env.sources[k]))
    if isinstance(value, (tuple, list)):
        items = [size_expr(v, size_of, shape_env, const) for v in value]
        text = f"({', '.join(items)}{',' if len(items) == 1 else ''})"
        if isinstance(value, Size):
            return f"{const(Size)}({text})"
        return f"[{', '.join(items)}]" if isinstance(value, list) else text
    return const(value)
