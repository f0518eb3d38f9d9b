"""Fusion of a graph's nodes into `FusionGroup`s: pointwise chains, and reductions with
their pointwise prologues and epilogues (Inductor's CPU rules, research/dynamo.md §1F).

Note [Pointwise fusion]: walking the graph in order, a node is *pointwise* when its
target has a scalar lowering (`lowering.LOWERINGS`), it produces one tensor of a kernel
dtype and every tensor it reads is of a kernel dtype. A pointwise node joins the groups
of the pointwise nodes it reads when they iterate over its output shape, and placing the
merged group at this node stays a valid order: every reader outside the group of a value
inside it must come after this node (otherwise an extern between them would need the
group both before and after itself), and the merged group has at most MAX_NODES
members (a longer chain becomes several kernels). Inputs from outside a group may
broadcast and be strided. Inside a group, values are kernel locals; a member is
*materialized* (a group output, written to memory) when something outside the group reads
it: another group, an extern or the graph's output. Matmul and ops without a lowering are externs.

Note [Reduction fusion]: a node `reduction_spec` recognizes (sum, mean, amax/amin,
argmax/argmin, var/std, logsumexp, softmax/log_softmax, layer_norm, and nll_loss of a
log_softmax over the classes, i.e. cross-entropy) on a float32/float64 input X starts a
*reduction group* whose iteration space is X's shape (`group.shape`), reduced over
`spec.dims`. Then, after the pointwise groups are formed:
- prologue: the pointwise group computing X joins the reduction group when it iterates
  over X's shape and nothing outside the reduction group reads any of its members; its
  values are then computed inside the reduction's loops and never written to memory (a
  member also read elsewhere keeps its own kernel, and the reduction reads its output);
- companions: max/min(dim) is recorded as argmax followed by take_along(X, argmax, dim);
  that take_along joins the argmax group (the kernel writes the values with the
  indices); the log_softmax read only by an nll_loss over its classes joins the loss's
  group (cross-entropy: the log-probabilities are never materialized);
- epilogue: one pointwise group reading the reduction's result (or its companion's) and
  iterating over that value's shape joins, when the merged group can run at its last
  member (the placement rule of Note [Pointwise fusion]): e.g. `x.sum(1) / n`, `x.amax(1)
  + b`, `softmax(x) * y`. Other readers see the materialized result.
A reduction group never absorbs another reduction. How the kernels loop is Note
[Reduction kernels] in reductions.py.

Note [Row groups]: composed normalizations (softmax as `exp(x - amax) / sum`, variance
as `((x - mean) ** 2).mean()`, layer_norm and RMSNorm from means, their backward graphs)
chain reductions over the same rows with pointwise code between them that reads a
reduction's result broadcast back over the rows. One *row group* computes such a chain
(Inductor's persistent reductions): reductions of a CHAINED kind (sum, mean, amax, amin)
over the same input shape S and dims, the pointwise groups over S ("over the rows") and
those over the kept elements (`x.sum(-1) / n`, of either keepdim form). Before the
reduction groups are formed, each such reduction seeds a group that absorbs its
neighbours (readers and inputs): another such reduction over the same rows, or a whole
pointwise group over the rows or the kept elements, while
- a member over the rows reads a member over the kept elements only in the keepdim form
  (broadcast along the reduced dims: `x - x.mean(1)` of a square x broadcasts along dim
  1, so it is not a row read), and a member over the kept elements reads none over the
  rows;
- the group can run at its last member (the placement rule of Note [Pointwise fusion]),
  with at most MAX_NODES members.
A seed that gathers a second reduction, or pointwise code over the rows reading its
result, becomes a row group (its kernel: Note [Row kernels] in rows.py); a lone
reduction stays a reduction group, with its prologue and epilogue.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jitgrad.codegen.lowering import KERNEL_DTYPES, is_lowerable, lower_node
from jitgrad.codegen.reduction_rules import CHAINED, ReductionSpec, reduction_spec
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.ir.graph import Graph, Node, describe_value, target_name

# members per pointwise group: numba's SSA pass recurses once per statement of a kernel,
# and a 200-op chain in one kernel overflowed Python's recursion limit
MAX_NODES = 64


@dataclass
class FusionGroup:
    """Graph nodes computed by one kernel over one iteration shape.

    nodes: members in graph order; inputs: the values read from outside (graph Nodes,
    in order of first use); outputs: the members written to memory (Note [Pointwise
    fusion]); shape: the iteration shape (every member's output shape for a pointwise
    group; the reduced input's shape for a reduction group); reduction: the reduction
    node of a reduction group (Note [Reduction fusion]), else None; spec: its
    ReductionSpec; chain: the reductions of a row group and their specs (Note [Row
    groups]), empty for other groups.
    """

    index: int
    shape: tuple[int, ...]
    nodes: list[Node] = field(default_factory=list)
    inputs: list[Node] = field(default_factory=list)
    outputs: list[Node] = field(default_factory=list)
    reduction: Node | None = None
    spec: ReductionSpec | None = None
    chain: dict[Node, ReductionSpec] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"fused_{self.index}"

    @property
    def pointwise(self) -> bool:
        """Whether the group has no reduction (neither a reduction group nor a row group)."""
        return self.reduction is None and not self.chain

    def __str__(self) -> str:
        """`fused_0 [3, 4]: mul, exp, add -> (%add,)`, then one line per member; a
        reduction group says `fused_1 [3, 4] reducing dims (1,): exp, sum -> (%sum)`, a
        row group `fused_2 [3, 4] reducing dims (1,) in rows: amax, sub, exp, sum, div ->
        (%div)`."""
        spec = self.spec or next(iter(self.chain.values()), None)
        reducing = "" if spec is None else f" reducing dims {spec.dims}"
        reducing += " in rows" if self.chain else ""
        header = (f"{self.name} {list(self.shape)}{reducing}: "
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
    Note [Pointwise fusion] and Note [Reduction fusion] for the rules.
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
        merged, size = [], 1
        for group in candidates:
            if _can_place_at(group, node, position) and size + len(group.nodes) <= MAX_NODES:
                merged.append(group)
                size += len(group.nodes)
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
    specs = {node: spec for node in graph.nodes
             if (spec := reduction_spec(node)) is not None}
    rows = _row_groups(specs, groups, group_of, position)
    groups += rows
    chained = {node for group in rows for node in group.chain}
    companions = {spec.companion for spec in specs.values()}
    for node, spec in specs.items():
        # a log_softmax of cross-entropy is in the loss's group
        if node not in companions and node not in chained:
            groups.append(_reduction_group(node, spec, groups, group_of, position))
    groups.sort(key=lambda g: position[g.nodes[-1]])
    for index, group in enumerate(groups):
        group.index = index
        _fill_boundary(group)
    return groups


def _reduction_group(node: Node, spec: ReductionSpec, groups: list[FusionGroup],
                     group_of: dict[Node, FusionGroup], position: dict[Node, int]
                     ) -> FusionGroup:
    """The reduction group of `node`, with its prologue, companion and epilogue (taken out
    of `groups`; see Note [Reduction fusion])."""
    shape = tuple(spec.source.meta["val"].shape)
    core = [node] if spec.companion is None else sorted([node, spec.companion],
                                                        key=position.__getitem__)
    group = FusionGroup(0, shape, list(core), reduction=node, spec=spec)
    if not _can_place_at(group, core[-1], position):  # argmax read before its take_along
        spec = dataclasses.replace(spec, companion=None)
        core = [node]
        group = FusionGroup(0, shape, [node], reduction=node, spec=spec)
    prologue = group_of.get(spec.source)
    if prologue is not None and prologue.pointwise and prologue.shape == shape and all(
            user in core or user in prologue.nodes
            for member in prologue.nodes for user in member.users):
        groups.remove(prologue)
        group.nodes = prologue.nodes + group.nodes
    for member in group.nodes:
        group_of[member] = group
    # cross-entropy's kernel writes the loss only (Note [Reduction kernels])
    results = [] if spec.kind == "cross_entropy" else core
    for candidate in _epilogue_candidates(results, group_of):
        read = [a for m in candidate.nodes for a in m.all_input_nodes
                if group_of.get(a) is group]
        if all(a in results and tuple(a.meta["val"].shape) == candidate.shape for a in read) \
                and _can_place_at(group, candidate.nodes[-1], position, candidate.nodes):
            groups.remove(candidate)
            group.nodes = sorted(group.nodes + candidate.nodes, key=position.__getitem__)
            for member in candidate.nodes:
                group_of[member] = group
            break
    return group


def _row_groups(specs: dict[Node, ReductionSpec], groups: list[FusionGroup],
                group_of: dict[Node, FusionGroup], position: dict[Node, int]
                ) -> list[FusionGroup]:
    """The row groups of the graph (Note [Row groups]), their pointwise groups taken out of
    `groups`; `group_of` maps their members to them."""
    found = []
    for seed, spec in specs.items():
        if seed in group_of or not _chains(spec):
            continue
        group = _grow_row_group(seed, spec, specs, group_of, position)
        if group is None:
            continue
        for member in group.nodes:
            part = group_of.get(member)
            if part is not None and part in groups:
                groups.remove(part)
            group_of[member] = group
        found.append(group)
    return found


def _chains(spec: ReductionSpec) -> bool:
    """Whether a row group may hold this reduction: a chained kind over a non-empty
    iteration shape whose reduced dims hold more than one element."""
    shape = spec.source.meta["val"].shape
    return spec.kind in CHAINED and bool(spec.dims) and math.prod(shape) > 0 \
        and math.prod(shape[d] for d in spec.dims) > 1


def _grow_row_group(seed: Node, spec: ReductionSpec, specs: dict[Node, ReductionSpec],
                    group_of: dict[Node, FusionGroup], position: dict[Node, int]
                    ) -> FusionGroup | None:
    """The row group grown from reduction `seed` by absorbing neighbouring chained
    reductions over the same rows and whole pointwise groups over the rows or over the
    kept elements, while the group stays valid (`_valid_row_group`); None when it fuses
    nothing a reduction group would not (one reduction, no pointwise code reading it)."""
    shape = tuple(spec.source.meta["val"].shape)
    rows = _Rows(shape, spec.dims)
    members, chain = [seed], {seed: spec}
    grown = True
    while grown:
        grown = False
        for member in list(members):
            for neighbour in [*member.all_input_nodes, *member.users]:
                if neighbour in chain or neighbour in members:
                    continue
                part: list[Node]
                other = specs.get(neighbour)
                group = group_of.get(neighbour)
                if other is not None and neighbour not in group_of and _chains(other) \
                        and tuple(other.source.meta["val"].shape) == shape \
                        and other.dims == spec.dims:
                    part, joining = [neighbour], {neighbour: other}
                elif group is not None and group.pointwise \
                        and (group.shape == shape or rows.kept_form(group.shape)):
                    part, joining = group.nodes, {}
                else:
                    continue
                trial = sorted(members + part, key=position.__getitem__)
                if _valid_row_group(trial, chain | joining, rows, position):
                    members, chain, grown = trial, chain | joining, True
    broadcasts = any(tuple(n.meta["val"].shape) == shape and any(
        a in members and not rows.full(a) for a in n.all_input_nodes) for n in members)
    if len(chain) < 2 and not broadcasts:
        return None
    return FusionGroup(0, shape, members,
                       chain={r: chain[r] for r in members if r in chain})


@dataclass(frozen=True)
class _Rows:
    """The iteration shape of a row group and its reduced dims."""

    shape: tuple[int, ...]
    dims: tuple[int, ...]

    def full(self, node: Node) -> bool:
        return tuple(node.meta["val"].shape) == self.shape

    def kept_form(self, shape: tuple[int, ...]) -> bool:
        """Whether a value of `shape` holds one element per kept element, in their order
        (`x.sum(-1)` or `x.sum(-1, keepdim=True)` of any rank)."""
        kept = [self.shape[d] for d in range(len(self.shape)) if d not in self.dims]
        return [n for n in shape if n != 1] == [n for n in kept if n != 1]

    def broadcasts_per_row(self, shape: tuple[int, ...]) -> bool:
        """Whether a value of `shape`, broadcast to the rows, is constant along the reduced
        dims and spans the kept ones (the keepdim form)."""
        if len(shape) > len(self.shape):
            return False
        aligned = (1,) * (len(self.shape) - len(shape)) + tuple(shape)
        return all(aligned[d] == (1 if d in self.dims else self.shape[d])
                   for d in range(len(self.shape)))


def _valid_row_group(members: list[Node], chain: dict[Node, ReductionSpec], rows: _Rows,
                     position: dict[Node, int]) -> bool:
    """Whether `members` can run as one row kernel: at most MAX_NODES; a member over the
    rows reads members over the kept elements only in the keepdim form, a member over
    the kept elements reads no member over the rows (Note [Row groups]); and the group
    can run at its last member (every outside reader comes later)."""
    if len(members) > MAX_NODES:
        return False
    inside = set(members)
    for node in members:
        if node in chain:
            continue
        full = rows.full(node)
        for arg in node.all_input_nodes:
            if arg not in inside:
                continue
            if rows.full(arg) != full and not (
                    full and rows.broadcasts_per_row(tuple(arg.meta["val"].shape))):
                return False
    limit = position[members[-1]]
    return all(user in inside or position[user] > limit
               for node in members for user in node.users)


def _epilogue_candidates(results: list[Node], group_of: dict[Node, FusionGroup]
                         ) -> list[FusionGroup]:
    """Pointwise groups reading one of `results`, in order of first reader."""
    candidates: list[FusionGroup] = []
    for result in results:
        for user in result.users:
            group = group_of.get(user)
            if group is not None and group.pointwise and group not in candidates:
                candidates.append(group)
    return candidates


def _lowered_by(node: Node) -> bool:
    """Whether the node's lowering accepts this call (some decline, e.g. pow on integers)."""
    return lower_node(node, {}) is not None


def _can_place_at(group: FusionGroup, node: Node, position: dict[Node, int],
                  joining: tuple[Node, ...] | list[Node] = ()) -> bool:
    """Whether the group may run at `node`: its members' outside readers all come later
    (readers in `joining`, the nodes merging with it, do not count)."""
    members = set(group.nodes) | set(joining)
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
