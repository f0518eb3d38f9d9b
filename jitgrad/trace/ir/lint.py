"""`lint(graph)`: the invariants of Note [Graph IR] (graph.py) checked, and with `meta` the
recorded value of each op node checked against its op's shape/dtype rule."""

from __future__ import annotations

from typing import Any

import numpy as np

from jitgrad.eager.ops.registry import OpDef, TensorMeta
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.capture import symbolic
from jitgrad.trace.ir.graph import DTYPE_SHORT_NAMES, OPCODES, Graph, Node, target_name


def lint(graph: Graph, meta: bool = False) -> None:
    """Check the invariants of `graph` (Note [Graph IR] in graph.py); with `meta`, also
    that each op node's meta["val"] has the shapes and dtypes its op gives for its inputs'
    vals (the op's shape/dtype rule run again, `OpDef.infer_meta`): a pass that rewired a
    node or changed a value without its description is caught where it happened.

    Raises: RuntimeError naming the first offending node: a node of another graph, an
    unknown op or a target of the wrong kind, a duplicate name, a placeholder after
    another node, a use before definition or of a node not in the graph, `users`
    out of step with args, a get_attr key missing from `attrs`, no output node at
    the end (or one elsewhere), or (`meta`) a val its op does not give.
    """
    nodes = graph.nodes
    position: dict[Node, int] = {}
    names: set[str] = set()
    for index, node in enumerate(nodes):
        if node.graph is not graph:
            raise RuntimeError(f"graph lint: {node!r} belongs to another graph")
        if node.name in names:
            raise RuntimeError(f"graph lint: two nodes are named {node!r}; names must be "
                               "unique (create nodes through Graph methods)")
        names.add(node.name)
        position[node] = index
    last = len(nodes) - 1
    for index, node in enumerate(nodes):
        _lint_kind(graph, nodes, index, last)
        for used in node.all_input_nodes:
            if used not in position:
                raise RuntimeError(f"graph lint: {node!r} uses {used!r}, which is not in "
                                   "this graph (erased, or from another graph)")
            if position[used] >= index:
                raise RuntimeError(f"graph lint: {node!r} (node {index}) uses {used!r} "
                                   f"before it is defined (node {position[used]})")
            if node not in used.users:
                raise RuntimeError(f"graph lint: {node!r} uses {used!r}, but {used!r}.users "
                                   "does not list it; assign node.args instead of "
                                   "editing node._args")
        for user in node.users:
            if user not in position or node not in user.all_input_nodes:
                raise RuntimeError(f"graph lint: {node!r}.users lists {user!r}, which does "
                                   f"not use it")
    if not nodes or nodes[-1].op != "output":
        raise RuntimeError("graph lint: the graph does not end with an output node; "
                           "call graph.output(values) last")
    if meta:
        for node in nodes:
            _lint_meta(node)

def _lint_kind(graph: Graph, nodes: tuple[Node, ...], index: int, last: int) -> None:
    node = nodes[index]
    op = node.op
    if op not in OPCODES:
        raise RuntimeError(f"graph lint: {node!r} has unknown op {op!r}; expected one of "
                           f"{', '.join(OPCODES)}")
    if op == "placeholder":
        if index > 0 and nodes[index - 1].op != "placeholder":
            raise RuntimeError(f"graph lint: placeholder {node!r} comes after "
                               f"{nodes[index - 1]!r}; placeholders must come first")
    elif op == "call_function":
        if not callable(node.target):
            raise RuntimeError(f"graph lint: call_function {node!r} has a target that is "
                               f"not callable: {type(node.target).__name__}")
    elif op == "get_attr":
        if node.target not in graph.attrs:
            raise RuntimeError(f"graph lint: get_attr {node!r} reads {node.target!r}, "
                               "which is not in graph.attrs; create it with "
                               "graph.get_attr(name, value)")
    elif index != last:
        raise RuntimeError(f"graph lint: output node {node!r} is node {index} of "
                           f"{last + 1}; the output must be the only one, and last")


def _lint_meta(node: Node) -> None:
    """Raise when an op node's val is not what its op gives for its inputs' vals."""
    val = node.meta.get("val")
    if node.op != "call_function" or not isinstance(node.target, OpDef) or val is None:
        return
    inputs = tuple(_meta_of(arg.meta.get("val")) if isinstance(arg, Node) else arg
                   for arg in node.args)
    try:
        inferred = node.target.infer_meta(symbolic.hinted(inputs), symbolic.hinted(node.kwargs))
    except Exception as err:  # any refusal is the finding
        raise RuntimeError(f"graph lint: {node!r} ({target_name(node.target)}): its op "
                           f"refuses its inputs' vals: {type(err).__name__}: {err}") from err
    inferred = inferred if isinstance(inferred, tuple) and not isinstance(
        inferred, TensorMeta) else (inferred,)
    vals = val if isinstance(val, tuple) else (val,)
    got = [(tuple(v._data.shape), v._data.dtype) for v in vals if isinstance(v, Tensor)]
    want = [(tuple(m.shape), m.dtype) for m in inferred]
    if got != want:
        raise RuntimeError(f"graph lint: {node!r} ({target_name(node.target)}) is described "
                           f"as {_describe_metas(got)}, but its op gives "
                           f"{_describe_metas(want)} for its inputs")


def _meta_of(val: Any) -> Any:
    """What an op's shape/dtype rule sees of an input's val (a number as is)."""
    if isinstance(val, Tensor):
        data = val._data
        return TensorMeta.of(data) if isinstance(data, np.ndarray) else data
    return val


def _describe_metas(metas: list[tuple[tuple[int, ...], np.dtype]]) -> str:
    return ", ".join(f"{DTYPE_SHORT_NAMES.get(d.name, d.name)}{list(shape)}"
                     for shape, d in metas)
