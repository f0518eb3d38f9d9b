"""A graph generic in its size symbols, run at concrete sizes (Note [Symbolic sizes]).

`specialize(graph, values, inputs)` evaluates every SymInt argument at `values` and runs
the graph's nodes again on fakes of `inputs` (the call's real inputs), recording a new
graph whose shapes, strides and dtypes are the ones eager gives at these sizes: every op
decides again. Each node's new shape is checked against the one the trace predicted for
it (its `sym_shape`, or its traced shape where it had none): a size the trace took as a
constant that now differs raises `Refused`, and the caller traces anew. The backend
compiles the result like any graph; its kernels are shape-generic, so a specialization
mostly costs fusion and code generation, not kernel compiles.
"""

from __future__ import annotations

from typing import Any

from jitgrad.eager.ops.registry import OpDef
from jitgrad.eager.tensor import Tensor, ViewInfo
from jitgrad.trace.capture import symbolic
from jitgrad.trace.capture.fake import FakeTensor, sym_shape
from jitgrad.trace.capture.recorder import OpRecorder
from jitgrad.trace.ir.graph import Graph, Node, map_arg
from jitgrad.trace.ir.interpreter import Retracer


class Refused(Exception):  # noqa: N818 - a decision, not a failure
    """The graph does not hold at these sizes (`reason` says which node and size)."""


def specialize(graph: Graph, values: tuple[int, ...], inputs: list[Any]) -> Graph:
    """`graph` at symbol values `values` for the call's graph inputs `inputs`."""
    new = Graph()
    recorder = OpRecorder(new, lambda tensor: new.get_attr(
        f"_tensor_constant_s{len(new.attrs)}", tensor))
    run = _Specializer(graph, recorder, values)
    run.run(*inputs)
    _copy_meta(new, run.env)
    return new


class _Specializer(Retracer):
    """The graph's nodes run again with every SymInt argument at `values`, each value
    checked against the trace's prediction and keeping its view of a base."""

    def __init__(self, graph: Graph, recorder: OpRecorder, values: tuple[int, ...]) -> None:
        super().__init__(graph, recorder)
        self.values = values

    def run_node(self, node: Node, given: Any) -> Any:
        value = super().run_node(node, given)
        _check(node, value, self.values)
        _carry_views(node, value, self.env, self.values)
        return value

    def call_function(self, node: Node, args: tuple, kwargs: dict[str, Any]) -> Any:
        result = super().call_function(node, symbolic.substitute(args, self.values),
                                       symbolic.substitute(kwargs, self.values))
        if isinstance(node.target, OpDef) and isinstance(result, FakeTensor):
            result.node.meta["copied_from"] = node
        return result

    def not_an_op(self, node: Node) -> Exception:
        return Refused(f"{node.name} calls {node.target!r}, which is not an op")

    def output(self, node: Node, values: tuple) -> Any:
        return self.new.output(map_arg(node.args, lambda n: _node_of(self.env[n])))


def _copy_meta(new: Graph, env: dict[Node, Any]) -> None:
    """The trace's facts about each node onto its copy (once every node has one: a writer
    named in "overwritten" may come later), nodes among them mapped to their copies."""
    for made in new.nodes:
        node = made.meta.pop("copied_from", None)
        if node is None:
            continue
        for key, meta in node.meta.items():
            if key not in ("val", "captured"):
                made.meta.setdefault(key, _remapped(meta, env))


def _remapped(meta: Any, env: dict[Node, Any]) -> Any:
    if isinstance(meta, Node):
        return _node_of(env[meta]) if meta in env else None
    if type(meta) is tuple:
        return tuple(_remapped(m, env) for m in meta)
    return meta


def _node_of(value: Any) -> Any:
    return value.node if isinstance(value, FakeTensor) else value


def _check(node: Node, value: Any, values: tuple[int, ...]) -> None:
    """Refuse when a size of `node` differs from what the trace predicted at `values`."""
    old = node.meta.get("val")
    olds = old if isinstance(old, tuple) else (old,)
    news = value if isinstance(value, tuple) else (value,)
    for before, after in zip(olds, news, strict=False):
        if not isinstance(before, Tensor) or not isinstance(after, Tensor):
            continue
        predicted = tuple(symbolic.substitute(sym_shape(before), values))
        if predicted != tuple(after._data.shape):
            raise Refused(f"%{node.name} has shape {list(after._data.shape)} at these sizes; "
                          f"the trace expected {list(predicted)}")


def _carry_views(node: Node, value: Any, env: dict[Node, Any], values: tuple[int, ...]) -> None:
    """A value the trace made as a view of another stays one (what the backend reads of
    aliasing: an output that is a view of an input), with its replay at these sizes."""
    old = node.meta.get("val")
    for before, after in zip(old if isinstance(old, tuple) else (old,),
                             value if isinstance(value, tuple) else (value,), strict=False):
        view = getattr(before, "_view", None)
        if view is None or not isinstance(after, FakeTensor) or after._view is not None:
            continue
        base = env.get(view.base.node) if isinstance(view.base, FakeTensor) else None
        if isinstance(base, FakeTensor):
            after._view = ViewInfo(base, symbolic.substitute(view.replay, values),
                                   view.creation, view.version)
