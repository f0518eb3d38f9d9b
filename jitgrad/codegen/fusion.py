"""Vertical fusion of pointwise chains into `FusionGroup`s (Inductor's CPU rules, first part).

Note [Pointwise fusion]: walking the graph in order, a node is *pointwise* when its
target has a scalar lowering (`lowering.LOWERINGS`), it produces one tensor of a kernel
dtype and every tensor it reads is of a kernel dtype. A pointwise node joins the groups
of the pointwise nodes it reads when they iterate over its output shape, and placing the
merged group at this node stays a valid order: every reader outside the group of a value
inside it must come after this node (otherwise an extern between them would need the
group both before and after itself). Inputs from outside a group may broadcast and be
strided. Inside a group, values are kernel locals; a member is *materialized* (a group
output, written to memory) when something outside the group reads it: another group, an
extern or the graph's output. Reductions, matmul and ops without a lowering are externs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jitgrad.codegen.lowering import KERNEL_DTYPES, is_lowerable, lower_node
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.graph import Graph, Node, describe_value, target_name


@dataclass
class FusionGroup:
    """Pointwise graph nodes computed by one kernel over one iteration shape.

    nodes: members in graph order; inputs: the values read from outside (graph Nodes,
    in order of first use); outputs: the members written to memory (Note [Pointwise
    fusion]); shape: the iteration shape (every member's output shape).
    """

    index: int
    shape: tuple[int, ...]
    nodes: list[Node] = field(default_factory=list)
    inputs: list[Node] = field(default_factory=list)
    outputs: list[Node] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"fused_{self.index}"

    def __str__(self) -> str:
        """`fused_0 [3, 4]: mul, exp, add -> (%add,)`, then one line per member."""
        header = (f"{self.name} {list(self.shape)}: "
                  f"{', '.join(target_name(n.target) for n in self.nodes)} -> "
                  f"({', '.join(repr(n) for n in self.outputs)})")
        return "\n".join([header, *(f"  {describe_node(n)}" for n in self.nodes)])


def describe_node(node: Node) -> str:
    """`%add = add(%mul, 1.0)  f32[3, 4]  train.py:12`: one member, as kernel headers list it."""
    args = ", ".join(repr(a) if isinstance(a, Node) else repr(a) for a in node.args)
    params = "".join(f", {k}={v!r}" for k, v in node.kwargs.items())
    text = f"%{node.name} = {target_name(node.target)}({args}{params})  " \
           f"{describe_value(node.meta.get('val'))}"
    source = node.meta.get("source")
    return f"{text}  {source}" if source is not None else text


def is_pointwise(node: Node) -> bool:
    """Whether `node` can live in a fusion group (see Note [Pointwise fusion])."""
    if node.op != "call_function" or not is_lowerable(node.target):
        return False
    val = node.meta.get("val")
    if not isinstance(val, Tensor) or val.dtype.np not in KERNEL_DTYPES:
        return False
    for arg in node.args:
        if isinstance(arg, Node):
            arg_val = arg.meta.get("val")
            if not isinstance(arg_val, Tensor) or arg_val.dtype.np not in KERNEL_DTYPES:
                return False
        elif not _is_scalar(arg):
            return False
    return all(not isinstance(v, Node) for v in node.kwargs.values())


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, np.bool_, np.integer,
                                               np.floating))


def find_fusion_groups(graph: Graph) -> list[FusionGroup]:
    """The fusion groups of `graph`, in the order of their last member.

    Each group has at least one member; its inputs and outputs are filled in. See
    Note [Pointwise fusion] for the rules.
    """
    position = {node: i for i, node in enumerate(graph.nodes)}
    group_of: dict[Node, FusionGroup] = {}
    groups: list[FusionGroup] = []
    for node in graph.nodes:
        if not is_pointwise(node) or not _lowered_by(node):
            continue
        shape = tuple(node.meta["val"].shape)
        candidates = []
        for arg in node.all_input_nodes:
            group = group_of.get(arg)
            if group is not None and group.shape == shape and group not in candidates:
                candidates.append(group)
        merged = [g for g in candidates if _can_place_at(g, node, position)]
        if merged:
            target = merged[0]
            for other in merged[1:]:
                target.nodes.extend(other.nodes)
                for member in other.nodes:
                    group_of[member] = target
                groups.remove(other)
            target.nodes.sort(key=position.__getitem__)
        else:
            target = FusionGroup(0, shape)
            groups.append(target)
        target.nodes.append(node)
        group_of[node] = target
    groups.sort(key=lambda g: position[g.nodes[-1]])
    for index, group in enumerate(groups):
        group.index = index
        _fill_boundary(group)
    return groups


def _lowered_by(node: Node) -> bool:
    """Whether the node's lowering accepts this call (some decline, e.g. pow on integers)."""
    return lower_node(node, {}) is not None


def _can_place_at(group: FusionGroup, node: Node, position: dict[Node, int]) -> bool:
    """Whether the group may run at `node`: its members' outside readers all come later."""
    members = set(group.nodes)
    limit = position[node]
    return all(user is node or user in members or position[user] > limit
               for member in group.nodes for user in member.users)


def _fill_boundary(group: FusionGroup) -> None:
    members = set(group.nodes)
    inputs: dict[Node, None] = {}
    for node in group.nodes:
        for arg in node.all_input_nodes:
            if arg not in members:
                inputs.setdefault(arg, None)
    group.inputs = list(inputs)
    group.outputs = [n for n in group.nodes if any(u not in members for u in n.users)]
