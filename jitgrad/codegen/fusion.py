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
A reduction group never absorbs another reduction; chained reductions are separate
kernels. How the kernels loop is Note [Reduction kernels] in reductions.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jitgrad.codegen.lowering import KERNEL_DTYPES, is_lowerable, lower_node
from jitgrad.eager.ops.registry import OPS
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.ir.graph import Graph, Node, describe_value, target_name

REDUCTION_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
# reductions whose output has the input's shape (they normalize along the reduced dims)
NORMALIZING = frozenset({"softmax", "log_softmax", "layer_norm"})
_REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "argmax", "argmin", "var", "std",
                         "logsumexp", "softmax", "log_softmax", "layer_norm", "nll_loss",
                         "max", "min"})
# ops whose forward is another kind's (a full max is amax over all dims; only their
# backward formulas differ, and backward graphs are built from those)
_KIND_OF = {"max": "amax", "min": "amin"}


# members per pointwise group: numba's SSA pass recurses once per statement of a kernel,
# and a 200-op chain in one kernel overflowed Python's recursion limit
MAX_NODES = 64


@dataclass(frozen=True)
class ReductionSpec:
    """What a reduction node computes, as the kernels see it (Note [Reduction fusion]).

    kind: the op name ("cross_entropy" for nll_loss of a log_softmax); source: the node
    whose values are reduced (X; for cross-entropy, the log_softmax's input); dims: the
    reduced dims of X's shape, sorted (all of them for dim=None, () for a 0-d X);
    companion: the take_along of max/min(dim) or the log_softmax of cross-entropy, if any.
    """

    kind: str
    source: Node
    dims: tuple[int, ...]
    companion: Node | None = None

    @property
    def normalizing(self) -> bool:
        """Whether the result has X's shape (softmax, log_softmax, layer_norm)."""
        return self.kind in NORMALIZING


def reduction_spec(node: Node) -> ReductionSpec | None:
    """The ReductionSpec of `node`, or None when it is not a reduction the kernels cover.

    Covered: a float32/float64 X whose result keeps X's dtype (indices for argmax/argmin),
    layer_norm with absent or same-dtype weight/bias, and nll_loss (any reduction, optional
    class weights) of a log_softmax over dim 1 of an (N, C) X read by nothing else.
    """
    name = getattr(node.target, "name", None)
    if node.op != "call_function" or name not in _REDUCTIONS or OPS.get(name) is not node.target:
        return None
    kind = _KIND_OF.get(name, name)
    source = node.args[0]
    if kind == "nll_loss":
        return _cross_entropy_spec(node)
    if not isinstance(source, Node) or _dtype(source) not in REDUCTION_DTYPES:
        return None
    ndim = source.meta["val"].ndim
    if ndim == 0 and kind != "layer_norm":  # no dims: eager's dim 0 is the value itself
        return ReductionSpec(kind, source, ()) if _dtype(node) in (
            _dtype(source), np.dtype(np.int64)) else None
    if kind in ("argmax", "argmin"):
        dim = node.kwargs["dim"]
        dims = tuple(range(ndim)) if dim is None else (dim,)
        return ReductionSpec(kind, source, dims, _take_along_of(node, source, dim))
    if _dtype(node) != _dtype(source):
        return None
    if kind == "layer_norm":
        if any(a is not None and (not isinstance(a, Node) or _dtype(a) != _dtype(source)
                                  or a.meta["val"].ndim != node.kwargs["normalized_ndim"])
               for a in node.args[1:]):
            return None
        return ReductionSpec(kind, source, tuple(range(ndim - node.kwargs["normalized_ndim"],
                                                       ndim)))
    dims = node.kwargs["dims"]
    return ReductionSpec(kind, source, tuple(range(ndim)) if dims is None else tuple(dims))


def _dtype(node: Any) -> np.dtype | None:
    val = node.meta.get("val") if isinstance(node, Node) else None
    return val.dtype.np if isinstance(val, Tensor) else None


def _take_along_of(argmax: Node, source: Node, dim: int | None) -> Node | None:
    """The take_along(X, argmax, dim) of max/min(dim), if it is among argmax's readers."""
    if dim is None:
        return None
    for user in argmax.users:
        if user.op == "call_function" and user.target is OPS["take_along"] \
                and user.args[:2] == (source, argmax) and user.kwargs.get("dim") == dim:
            return user
    return None


def _cross_entropy_spec(nll: Node) -> ReductionSpec | None:
    log_probs, target, weight = nll.args
    if not (isinstance(log_probs, Node) and log_probs.op == "call_function"
            and log_probs.target is OPS["log_softmax"] and log_probs.kwargs["dims"] == (1,)
            and list(log_probs.users) == [nll]):
        return None
    source = log_probs.args[0]
    if not isinstance(source, Node) or _dtype(source) not in REDUCTION_DTYPES \
            or _dtype(log_probs) != _dtype(source) or source.meta["val"].ndim != 2:
        return None
    if _dtype(target) != np.dtype(np.int64) or (
            weight is not None and (not isinstance(weight, Node)
                                    or _dtype(weight) != _dtype(source))):
        return None
    return ReductionSpec("cross_entropy", source, (1,), log_probs)


@dataclass
class FusionGroup:
    """Graph nodes computed by one kernel over one iteration shape.

    nodes: members in graph order; inputs: the values read from outside (graph Nodes,
    in order of first use); outputs: the members written to memory (Note [Pointwise
    fusion]); shape: the iteration shape (every member's output shape for a pointwise
    group; the reduced input's shape for a reduction group); reduction: the reduction
    node of a reduction group (Note [Reduction fusion]), else None; spec: its
    ReductionSpec.
    """

    index: int
    shape: tuple[int, ...]
    nodes: list[Node] = field(default_factory=list)
    inputs: list[Node] = field(default_factory=list)
    outputs: list[Node] = field(default_factory=list)
    reduction: Node | None = None
    spec: ReductionSpec | None = None

    @property
    def name(self) -> str:
        return f"fused_{self.index}"

    def __str__(self) -> str:
        """`fused_0 [3, 4]: mul, exp, add -> (%add,)`, then one line per member; a
        reduction group says `fused_1 [3, 4] reducing dims (1,): exp, sum -> (%sum)`."""
        reducing = "" if self.spec is None else f" reducing dims {self.spec.dims}"
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
    companions = {spec.companion for spec in specs.values()}
    for node, spec in specs.items():
        if node not in companions:  # a log_softmax of cross-entropy is in the loss's group
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
    if prologue is not None and prologue.reduction is None and prologue.shape == shape and all(
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


def _epilogue_candidates(results: list[Node], group_of: dict[Node, FusionGroup]
                         ) -> list[FusionGroup]:
    """Pointwise groups reading one of `results`, in order of first reader."""
    candidates: list[FusionGroup] = []
    for result in results:
        for user in result.users:
            group = group_of.get(user)
            if group is not None and group.reduction is None and group not in candidates:
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
