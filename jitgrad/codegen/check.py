"""Check mode: each compiled graph runs beside the eager oracle, and a difference is named.

`backend="check"` (or JITGRAD_CHECK=1 with the default backend) is the numba backend with
every graph it compiles wrapped in a `CheckedGraph`; with another backend, JITGRAD_CHECK
wraps what that backend returns the same way (`checked`), but only the numba backend's
programs can be searched kernel by kernel.

Note [Check mode]: on each call, a CheckedGraph runs the compiled program, then the
captured graph with eager ops (`GraphModule.forward`, the oracle) on the same inputs,
the random generator rewound in between so both draw the same numbers, and compares the
outputs (Note [Check tolerance] in compare.py). When an output differs, it finds the
first differing node: the graph is run node by node with eager ops and in float64;
each fusion group's kernel is run in graph order on the eager values of its inputs, and
the first kernel whose outputs differ is taken apart into one kernel per shape with
every member written out (its reduction alone in one more kernel), so the first member
in graph order whose value differs is the node reported, with its op, user file:line,
error and the kernel that computed it (`fused_2` and its source file). Externs run the
same eager ops as the oracle, so only kernels are searched; when no kernel differs on
eager inputs (a custom backend, or a fault in how the program is wired), the first
differing graph output is reported.

Training: the captured graph's forward and backward graphs are each a CheckedGraph, and
the region (`CheckedRegion`) also runs the captured graph with eager autograd on fresh
leaves, so each backward's gradients are compared with eager autograd's for the same
output gradients: a wrong backward kernel is named in the backward graph (its nodes carry
the file:line of the forward op they differentiate), a wrong backward graph as a whole
by the input whose gradient differs.

What the user gets: the compiled values when they match. On a difference, JITGRAD_CHECK=
raise (the default, also for `backend="check"`) raises CheckError (a RuntimeError) with
the report; JITGRAD_CHECK=warn warns (CheckWarning, once per node, at the node's user
line) and returns eager's values (a region whose forward differs runs eagerly for that
call, autograd included; a differing backward returns eager autograd's gradients), so the
program goes on with correct numbers. Costs, only in check mode: every graph runs twice
(three times when training), and a difference costs two node-by-node runs and a few
kernel compiles. An `allow_in_graph` function in a checked graph runs in each of these
runs, side effects included.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from numba.core.errors import NumbaError

from jitgrad import config
from jitgrad.codegen.autograd import CompiledRegion
from jitgrad.codegen.backend import CompiledGraph, build_program, compile_graph
from jitgrad.codegen.compare import Difference, compare, magnitude, to_float64
from jitgrad.codegen.fusion import FusionGroup, describe_node
from jitgrad.codegen.kernels import Kernel
from jitgrad.eager.engine import grad as autograd_grad
from jitgrad.eager.grad_mode import STATE, enable_grad, no_grad, set_grad_mode
from jitgrad.eager.ops.random import default_generator
from jitgrad.eager.ops.registry import OpDef
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.ir.graph import Graph, Node, describe_value, target_name
from jitgrad.trace.ir.graph_module import GraphModule
from jitgrad.trace.ir.interpreter import Interpreter

# what a node-by-node rerun in float64 may raise for an op that insists on its dtypes;
# that node's reference is then eager's value
_FLOAT64_FAILURES = (RuntimeError, TypeError, ValueError, IndexError, NotImplementedError)


class CheckError(RuntimeError):
    """A compiled value differs from eager's (check mode, JITGRAD_CHECK=raise)."""


class CheckWarning(RuntimeWarning):
    """A compiled value differs from eager's (JITGRAD_CHECK=warn); eager's is used."""


def check_backend(gm: GraphModule, example_inputs: list[Any]) -> Any:
    """`backend="check"`: the numba backend with every graph checked (Note [Check mode])."""
    program = build_program(gm, example_inputs, lambda graph, attrs: CheckedGraph(
        graph, attrs, compile_graph(graph, attrs)))
    if isinstance(program, CompiledRegion):
        cast(CheckedGraph, program.forward).label = "forward graph"
        cast(CheckedGraph, program.backward).label = "backward graph"
        return CheckedRegion(program, gm)
    return program


def checked(backend: Callable[..., Any]) -> Callable[..., Any]:
    """`backend` with what it returns checked against eager (outputs only: its programs
    are not searched kernel by kernel)."""
    def check(gm: GraphModule, example_inputs: list[Any]) -> Any:
        compiled = backend(gm, example_inputs)
        return CheckedGraph(gm.graph, gm.attrs, compiled)
    return check


@dataclass
class Mismatch:
    """The first compiled value found to differ: which node, how, and what computed it."""

    node: Node
    difference: Difference
    label: str
    kernel: Any = None
    group: FusionGroup | None = None
    outputs: list[Node] = field(default_factory=list)
    note: str = ""
    title: str = ""

    def __str__(self) -> str:
        node = self.node
        title = self.title or (f"jitgrad check: the compiled {self.label} computes "
                               f"%{node.name} differently from eager")
        lines = [title, f"  node:    {_describe(node)}", f"  op:      {_op_name(node)}"]
        location = node.meta.get("source")
        if location is not None:
            lines.append(f"  at:      {location}")
            if location.text.strip():
                lines.append(f"               {location.text.strip()}")
        lines.append(f"  kernel:  {self._kernel_text()}")
        lines.append(f"  error:   {self.difference.detail}")
        if self.outputs:
            lines.append(f"  outputs: {', '.join(f'%{n.name}' for n in self.outputs)} of the "
                         f"{self.label} differ")
        if self.note:
            lines.append(f"  note:    {self.note}")
        lines.append("  mode:    JITGRAD_CHECK=raise raises, JITGRAD_CHECK=warn warns and "
                     "continues with eager's values")
        return "\n".join(lines)

    def _kernel_text(self) -> str:
        if self.kernel is None and self.node.op == "placeholder":
            return "see the backward graph's kernels"
        if self.kernel is None:
            return "none found (no kernel of this graph differs on eager's inputs)"
        assert self.group is not None, "a kernel is found with its fusion group"
        members = ", ".join(target_name(n.target) for n in self.group.nodes)
        return f"{self.kernel.name} of the {self.label} ({members}), source {self.kernel.path}"


def _describe(node: Node) -> str:
    if node.op == "placeholder":
        return f"%{node.name} (graph input)  {describe_value(node.meta.get('val'))}"
    return describe_node(node)


def _op_name(node: Node) -> str:
    return "input" if node.op == "placeholder" else target_name(node.target)


def _action() -> str:
    return config.CHECK or "raise"


def _report(mismatch: Mismatch, warned: set[str]) -> None:
    """Raise CheckError; with JITGRAD_CHECK=warn, warn (CheckWarning) at the node's user
    line instead, once per node of a checked program (`warned`: the nodes warned about)."""
    if _action() != "warn":
        raise CheckError(str(mismatch))
    if mismatch.node.name in warned:
        return
    warned.add(mismatch.node.name)
    location = mismatch.node.meta.get("source")
    if location is None:
        warnings.warn(str(mismatch), CheckWarning, stacklevel=3)
    else:
        warnings.warn_explicit(str(mismatch), CheckWarning, location.filename, location.lineno)


class CheckedGraph:
    """A compiled graph run beside its eager oracle (Note [Check mode]).

    graph/attrs: the graph compiled; compiled: what the backend made of it; label: the
    name used in reports ("graph", "forward graph", "backward graph"). Called like the
    compiled program; returns its outputs, or eager's when they differ in warn mode.
    """

    def __init__(self, graph: Graph, attrs: dict[str, Any], compiled: Callable[..., Any],
                 label: str = "graph") -> None:
        self.graph = graph
        self.attrs = attrs
        self.compiled = compiled
        self.label = label
        self.oracle = GraphModule(graph, attrs).forward
        self.fusion_groups = getattr(compiled, "fusion_groups", ())
        self.warned: set[str] = set()

    def __call__(self, *inputs: Any) -> tuple:
        before = default_generator.get_state()
        outputs = self.compiled(*inputs)
        after = default_generator.get_state()
        default_generator.set_state(before)
        expected = self.oracle(*inputs)
        default_generator.set_state(after)
        nodes = self.graph.outputs
        if all(compare(c, o) is None for c, o in zip(outputs, expected, strict=True)):
            return outputs
        mismatch = self._search(inputs, outputs, nodes, before)
        default_generator.set_state(after)
        if mismatch is None:
            return outputs
        _report(mismatch, self.warned)
        return expected

    def _search(self, inputs: tuple, outputs: tuple, nodes: tuple,
                rng_state: Tensor) -> Mismatch | None:
        """The first differing node, once float64 confirms an output differs; else None."""
        run = NodeValues(self.graph, self.attrs, inputs, rng_state)
        differing = [node for node, value in zip(nodes, outputs, strict=True)
                     if isinstance(node, Node) and run.difference(node, value) is not None]
        if not differing:
            return None
        found = self._first_kernel_mismatch(run) if isinstance(self.compiled,
                                                               CompiledGraph) else None
        if found is None:
            node = differing[0]
            value = outputs[nodes.index(node)]
            difference = run.difference(node, value)
            assert difference is not None, "it is among the differing outputs"
            found = Mismatch(node, difference, self.label)
            found.group, found.kernel = self._producer(node)
        found.outputs = differing
        return found

    def _producer(self, node: Node) -> tuple[FusionGroup | None, Any]:
        if isinstance(self.compiled, CompiledGraph):
            for group, kernel in zip(self.compiled.fusion_groups, self.compiled.kernels,
                                     strict=True):
                if node in group.nodes:
                    return group, kernel
        return None, None

    def _first_kernel_mismatch(self, run: NodeValues) -> Mismatch | None:
        """The first kernel (graph order) whose outputs differ on eager's inputs, and in it
        the first differing member."""
        compiled = self.compiled
        assert isinstance(compiled, CompiledGraph), "only numba programs have kernels"
        for group, kernel in zip(compiled.fusion_groups, compiled.kernels, strict=True):
            values = kernel(*(run.eager[n] for n in group.inputs))
            values = values if len(group.outputs) > 1 else (values,)
            for node, value in zip(group.outputs, values, strict=True):
                difference = run.difference(node, value)
                if difference is not None:
                    member = _first_member(group, run)
                    note = "" if member is not None else ("its members match eager when each "
                                                          "is written out; only the fused "
                                                          "kernel differs")
                    node, difference = member or (node, difference)
                    return Mismatch(node, difference, self.label, kernel, group, note=note)
        return None


class NodeValues:
    """Every node's value in one call: `eager` (eager ops) and `reference` (float64)."""

    def __init__(self, graph: Graph, attrs: dict[str, Any], inputs: tuple,
                 rng_state: Tensor) -> None:
        default_generator.set_state(rng_state)
        self.eager = run_node_by_node(graph, attrs, inputs)
        default_generator.set_state(rng_state)
        self.reference = run_node_by_node(graph, attrs, inputs, self.eager)

    def difference(self, node: Node, value: Any) -> Difference | None:
        """How `value`, compiled, differs from `node`'s eager value (None if it does not)."""
        scale = max((magnitude(self.eager[n]) for n in node.all_input_nodes), default=0.0)
        return compare(value, self.eager[node], self.reference.get(node), scale)


def run_node_by_node(graph: Graph, attrs: dict[str, Any], inputs: tuple,
                     eager: dict[Node, Any] | None = None) -> dict[Node, Any]:
    """Each node's value, running `graph` with eager ops (no autograd recording).

    With `eager` (the values of an eager run), float inputs and constants are cast to
    float64 and every op reruns on them (the reference of Note [Check tolerance]); a node
    whose op refuses float64, or that is not an op (an allow_in_graph function, a
    grad-mode switch), takes eager's value, cast.
    """
    run = _EagerRun(graph, attrs, eager)
    entry_mode = STATE.enabled
    try:
        with no_grad():
            run.run(*inputs)
    finally:
        set_grad_mode(entry_mode)
    return run.env


class _EagerRun(Interpreter):
    def __init__(self, graph: Graph, attrs: dict[str, Any], eager: dict[Node, Any] | None
                 ) -> None:
        super().__init__(graph, attrs)
        self.eager = eager

    def placeholder(self, node: Node, value: Any) -> Any:
        return value if self.eager is None else to_float64(value)

    def get_attr(self, node: Node, value: Any) -> Any:
        return value if self.eager is None else to_float64(value)

    def call_function(self, node: Node, args: tuple, kwargs: dict[str, Any]) -> Any:
        if self.eager is None:
            return node.target(*args, **kwargs)
        if not isinstance(node.target, OpDef) and node.target is not operator.getitem:
            return to_float64(self.eager[node])
        try:
            return node.target(*args, **kwargs)
        except _FLOAT64_FAILURES:
            return to_float64(self.eager[node])


def _first_member(group: FusionGroup, run: NodeValues) -> tuple[Node, Difference] | None:
    """The first member of `group` (graph order) whose value differs, each member written
    out by a debugging kernel fed with eager's inputs; None when all match (or numba
    cannot compile the debugging kernels)."""
    computed: dict[Node, Any] = {}
    try:
        for unit in _debug_units(group):
            values = Kernel(unit)(*(run.eager[n] for n in unit.inputs))
            values = values if len(unit.outputs) > 1 else (values,)
            computed.update(zip(unit.outputs, values, strict=True))
    except NumbaError:
        return None
    for node in group.nodes:
        if node in computed:
            difference = run.difference(node, computed[node])
            if difference is not None:
                return node, difference
    return None


def _debug_units(group: FusionGroup) -> list[FusionGroup]:
    """`group` split so every member is an output: its pointwise members by shape, and each
    reduction (with its companion) alone; values between units come from eager."""
    reductions = dict(group.chain)
    if group.reduction is not None and group.spec is not None:
        reductions[group.reduction] = group.spec
    core = {n for r, spec in reductions.items() for n in (r, spec.companion) if n is not None}
    by_shape: dict[tuple[int, ...], list[Node]] = {}
    for node in group.nodes:
        if node not in core:
            by_shape.setdefault(tuple(node.meta["val"].shape), []).append(node)
    units = [_unit(group.index, shape, nodes, nodes) for shape, nodes in by_shape.items()]
    for reduction, spec in reductions.items():
        nodes = [n for n in group.nodes if n in (reduction, spec.companion)]
        written = [n for n in nodes if not (spec.kind == "cross_entropy" and n is spec.companion)]
        units.append(_unit(group.index, tuple(spec.source.meta["val"].shape), nodes, written,
                           reduction, spec))
    return units


def _unit(index: int, shape: tuple[int, ...], nodes: list[Node], outputs: list[Node],
          reduction: Node | None = None, spec: Any = None) -> FusionGroup:
    members = set(nodes)
    inputs: dict[Node, None] = {}
    for node in nodes:
        for arg in node.all_input_nodes:
            if arg not in members:
                inputs.setdefault(arg, None)
    return FusionGroup(index, shape, list(nodes), list(inputs), list(outputs), reduction, spec)


class CheckedRegion:
    """A compiled training region whose gradients are checked against eager autograd.

    Each call runs the region (its forward and backward graphs are CheckedGraphs) and the
    captured graph with eager autograd on fresh leaves; the outputs' backward compares
    the compiled gradients with `autograd.grad` of eager's outputs for the same output
    gradients (Note [Check mode]).
    """

    def __init__(self, region: CompiledRegion, gm: GraphModule) -> None:
        self.region = region
        self.graph = gm.graph
        self.region_attrs = gm.attrs
        self.oracle = gm.forward
        self.fusion_groups = region.fusion_groups
        self.warned: set[str] = set()

    def __call__(self, *inputs: Any) -> tuple:
        region = self.region
        before = default_generator.get_state()
        leaves = [x.detach().requires_grad_() if isinstance(x, Tensor) and x.requires_grad
                  else x for x in inputs]
        expected: list[Any] = []
        outputs = _CheckingRegion(region, lambda absent: _GradientCheck(
            self, leaves, expected, before, absent))(*inputs)
        after = default_generator.get_state()
        default_generator.set_state(before)
        with enable_grad():
            expected.extend(self.oracle(*leaves))
        default_generator.set_state(after)
        differing = self._differing_output(inputs, outputs, expected, before)
        default_generator.set_state(after)
        if differing is None:
            return outputs
        _report(Mismatch(*differing, "region", note=(
            "the joint forward graph (codegen/joint_graphs.py) computes this output differently "
            "from the captured graph")), self.warned)
        default_generator.set_state(before)
        with enable_grad():  # eager autograd through the caller's own tensors
            return self.oracle(*inputs)

    def _differing_output(self, inputs: tuple, outputs: tuple, expected: list[Any],
                          rng_state: Tensor) -> tuple[Node, Difference] | None:
        """The first user output that differs from eager's (float64 decides, as in
        CheckedGraph), with how; None when all match."""
        nodes = self.graph.outputs
        if all(compare(c, o) is None for c, o in zip(outputs, expected, strict=True)):
            return None
        run = NodeValues(self.graph, self.region_attrs, inputs, rng_state)
        for node, value in zip(nodes, outputs, strict=True):
            difference = run.difference(node, value) if isinstance(node, Node) else None
            if difference is not None:
                return node, difference
        return None


class _CheckingRegion(CompiledRegion):
    """A region's compiled graphs whose backward, for any set of outputs without a
    gradient, is `check(absent)`: one _GradientCheck."""

    def __init__(self, region: CompiledRegion,
                 check: Callable[[frozenset[int]], Callable[..., tuple]]) -> None:
        super().__init__(region.joint, region.forward, region.backward, region.fusion_groups,
                         region.compile_graph)
        self._check = check

    def backward_for(self, absent: frozenset[int]) -> tuple[Callable[..., tuple],
                                                             tuple[bool, ...]]:
        """The checking backward, and what the region's own backward reads."""
        return self._check(absent), super().backward_for(absent)[1]


class _GradientCheck:
    """The backward of one CheckedRegion call where the user outputs `absent` got no
    gradient: the compiled gradients, compared with eager autograd's through the leaves
    of the same call."""

    def __init__(self, checked: CheckedRegion, leaves: list[Any], expected: list[Any],
                 rng_state: Tensor, absent: frozenset[int]) -> None:
        self.checked = checked
        self.leaves = leaves
        self.expected = expected
        self.rng_state = rng_state
        self.absent = absent

    def __call__(self, *values: Any) -> tuple:
        joint = self.checked.region.joint
        grads = self.checked.region.backward_for(self.absent)[0](*values)
        tangents = values[len(joint.saved):]
        wanted = [i for i, needed in enumerate(joint.grad_inputs) if needed]
        got = [i for i, d in enumerate(joint.differentiable) if d and i not in self.absent]
        present = [t for i, t in zip((i for i, d in enumerate(joint.differentiable) if d),
                                     tangents, strict=True) if i not in self.absent]
        with enable_grad():
            oracle = autograd_grad([self.expected[i] for i in got],
                                   [self.leaves[i] for i in wanted], present,
                                   retain_graph=True, allow_unused=True)
        compiled = [grads[i] for i in wanted]
        references = [None] * len(wanted)
        if any(compare(c, o) is not None for c, o in zip(compiled, oracle, strict=True)):
            references = self._float64_gradients(present, got, wanted)
        for i, c, o, r in zip(wanted, compiled, oracle, references, strict=True):
            difference = compare(c, o, r)
            if difference is not None:
                node = self.checked.graph.placeholders[i]
                mismatch = Mismatch(node, difference, "backward", title=(
                    f"jitgrad check: the compiled gradient of input %{node.name} differs from "
                    "eager autograd's"), note=(
                    "every kernel of the backward graph matched its eager node, so the "
                    "backward graph itself (codegen/joint_graphs.py) differs"))
                _report(mismatch, self.checked.warned)
                return tuple(oracle[wanted.index(k)] if k in wanted else None
                             for k in range(len(joint.grad_inputs)))
        return grads

    def _float64_gradients(self, tangents: list[Any], got: list[int],
                           wanted: list[int]) -> list[Any]:
        """The wanted inputs' gradients, from outputs `got` with `tangents`, with every
        float cast to float64 (Note [Check tolerance]); Nones when an op refuses float64."""
        leaves = [to_float64(x.detach()).requires_grad_() if isinstance(x, Tensor)
                  and x.requires_grad else to_float64(x) for x in self.leaves]
        state = default_generator.get_state()
        default_generator.set_state(self.rng_state)
        try:
            with enable_grad():
                results = self.checked.oracle(*leaves)
                outputs = [results[i] for i in got]
                return list(autograd_grad(outputs, [leaves[i] for i in wanted],
                                          [to_float64(t) for t in tangents],
                                          allow_unused=True))
        except _FLOAT64_FAILURES:
            return [None] * len(wanted)
        finally:
            default_generator.set_state(state)
