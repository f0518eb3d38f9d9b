"""Compiled training, at compile time: the joint forward and backward graphs of a region.

How they run (one autograd Node per compiled region) is jitgrad/codegen/autograd.py.

Note [Joint graphs] (AOTAutograd's design, research/dynamo.md §1F): when grad mode is on
(at the graph's entry, or inside it after an `enable_grad()` switch) and an input of a
captured graph requires grad, `build_joint_graphs` re-runs the graph
on fake tensors under an OpRecorder, then walks the recorded op calls in reverse and
calls each op's own backward formula (`OpDef.backward` with the Tensor namespace
`xp.TENSOR`) on fakes, so the backward graph holds exactly the ops eager autograd would
run: one source of truth. What eager's engine does between nodes happens here too, with
the same function (`validate_tensor_grad`: sum broadcast gradients to the input's shape,
cast to its dtype), and gradients reaching one value twice are added. Only inputs that
require grad, and ops on the path from them, get a backward (the recorder propagates
requires_grad as eager does, grad-mode regions included); dead code elimination prunes
the rest.

The joint graph is then split (the default partition of AOTAutograd): the forward graph
is every node the user's outputs (or a grad-mode switch) need; the backward graph is the
rest; the *saved* values are forward values the backward reads. A backward formula's
tangent-free work (`cos(x)` in sin's derivative) stays in the backward graph, so it is
recomputed from saved inputs rather than kept alive since the forward.

At run time a `CompiledRegion` runs the compiled forward on detached inputs, wraps the
outputs with one `CompiledFunctionBackward` node as their grad_fn (next_edges: the inputs
that require grad), and that node runs the compiled backward on the saved values and the
output gradients. Saved values are checked for in-place writes (inputs by their own
version counters, saved outputs by the counter of the tensor the caller got) and freed
after a backward without `retain_graph`, with eager's errors. As in eager, an input
reached only from outputs that got no gradient in a backward call gets None there, not
zeros (`JointGraphs.reach`). Higher-order gradients (`create_graph=True`)
are refused with a clear error: the backward graph runs on arrays and records nothing.

Note [Outputs without a gradient]: eager's engine runs only the nodes a gradient reaches,
so when a backward call gives some of a region's outputs no gradient, what only those
outputs feed is never computed. Zeros in their place would differ wherever a formula
turns a zero gradient into NaN (0 * inf in `sqrt`'s derivative at 0), and the NaN would
reach values eager computes exactly. Such a call runs the backward graph pruned by
`without_tangents` (compiled once per set of outputs without a gradient); the full
backward serves calls where every output got one.

Note [Saved values overwritten in the graph]: the captured graph is functional, so a value
an in-place op of the user's program overwrote still exists in it; eager would have
saved the tensor and found its version changed. Tracing marks such values
(`meta["overwritten"]`, jitgrad/trace/capture/fake.py `_mark_overwritten`), and the backward walk
records, for each formula that saves one, eager's error and the user outputs whose
gradients reach that op (`JointGraphs.overwritten`): a backward call that gets a gradient
for one of them raises it. The in-place op itself may save the value it overwrites
(eager keeps a copy of the old self). A value an op's entry cast for type promotion
(`meta["promotion"]`) is saved as the uncast tensor, as eager saves it, so a later
write into a graph input is caught by the input's own version counter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from jitgrad.eager import xp
from jitgrad.eager.engine import validate_tensor_grad
from jitgrad.eager.grad_mode import no_grad, set_grad_mode
from jitgrad.eager.node import forward_name, modified_error
from jitgrad.eager.ops.registry import OPS, OpDef
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.breaks.unsupported import BreakKind, Unsupported
from jitgrad.trace.capture.fake import FakeTensor
from jitgrad.trace.capture.recorder import OpRecorder, recording
from jitgrad.trace.ir.graph import Graph, map_arg
from jitgrad.trace.ir.graph import Node as GraphNode
from jitgrad.trace.ir.interpreter import Retracer


@dataclass
class JointGraphs:
    """A captured graph split into a forward and a backward graph (Note [Joint graphs]).

    forward: placeholders = the captured graph's inputs; outputs = the user's outputs,
    then the saved intermediates (`num_user_outputs` first).
    backward: placeholders = the saved values (`saved`), then one tangent per
    differentiable user output; outputs = one gradient per input, None where the input
    needs none.
    saved: per backward saved placeholder, ("input", i) for the captured graph's input i,
    ("user", k) for the tensor returned as user output k (its in-place writes after the
    call are checked, as eager checks a saved output), or ("output", j) for forward output
    j (an intermediate only the backward sees).
    differentiable: per user output, whether it requires grad (gets a tangent).
    aliases: per user output that is an input or a view of one, `(input index, view
    replay steps)`, else None: the region returns that input itself, or the view rebuilt
    on it by eager view ops, so in-place writes through it reach the input as in eager
    (AOTAutograd regenerates aliased outputs the same way).
    grad_inputs: per input, whether it requires grad (has an edge).
    reach: per input, the user outputs whose gradients reach it (see `_Gradients`).
    overwritten: (user outputs, error) per backward formula that reads a value an in-place
    op in the forward overwrote after the op saved it: a backward that gets a gradient for
    one of those outputs raises eager's error (Note [Saved values overwritten in the graph]).
    """

    forward: Graph
    backward: Graph
    num_user_outputs: int
    saved: list[tuple[str, int]]
    differentiable: tuple[bool, ...]
    grad_inputs: tuple[bool, ...]
    aliases: tuple[tuple[int, tuple] | None, ...]
    reach: tuple[frozenset[int], ...]
    overwritten: tuple[tuple[frozenset[int], str], ...] = ()


class _BackwardContext:
    """What a backward formula reads from `ctx` (the OpNode in eager): params,
    needs_input_grad, input_metadata, next_edges (only its length is used)."""

    def __init__(self, op: OpDef, params: dict[str, Any], inputs: tuple) -> None:
        self.op = op
        self.params = params
        self.needs_input_grad = tuple(isinstance(x, Tensor) and x._requires_grad
                                      for x in inputs)
        self.input_metadata: tuple[tuple[tuple[int, ...], np.dtype] | None, ...] = tuple(
            (x._data.shape, x._data.dtype) if isinstance(x, Tensor) else None for x in inputs)
        self.next_edges = self.needs_input_grad

    def name(self) -> str:
        return self.op.node_class.__name__


class _LoggingRecorder(OpRecorder):
    """An OpRecorder that also keeps each recorded op call, for the backward walk."""

    def __init__(self, graph: Graph, constant_of: Callable[[Tensor], GraphNode]) -> None:
        super().__init__(graph, constant_of)
        self.calls: list[tuple[OpDef, tuple, dict[str, Any], Any, Any]] = []

    def __call__(self, op: OpDef, inputs: tuple, arrays: tuple, params: dict[str, Any]) -> Any:
        result = super().__call__(op, inputs, arrays, params)
        self.calls.append((op, inputs, params, result, self.location))
        return result


def build_joint_graphs(graph: Graph, example_inputs: list[Any]) -> JointGraphs:
    """Forward and backward graphs of `graph` for inputs like `example_inputs`.

    Raises Unsupported when the graph holds something the backward cannot be built for
    (a callable that is not an op, an output that is an input itself, a backward formula
    that reads a traced value); the caller then runs the captured graph eagerly.
    """
    joint = Graph()
    recorder = _LoggingRecorder(joint, lambda t: joint.get_attr("_tensor_constant", t))
    forward = _JointForward(graph, recorder)
    with recording(recorder):
        outputs = forward.run(*example_inputs)
        env = forward.env
        aliases = tuple(_input_alias(graph, node) for node in graph.outputs)
        inputs = [env[p] for p in graph.placeholders]
        grad_inputs = tuple(isinstance(x, Tensor) and x._requires_grad for x in inputs)
        with no_grad():
            tangents, differentiable = _tangents(joint, outputs, aliases)
            grads = _run_backward(recorder.calls, recorder, tangents)
    input_grads = [grads.get(x.node) if wanted else None
                   for x, wanted in zip(inputs, grad_inputs, strict=True)]
    reach = tuple(grads.reach.get(x.node, frozenset()) if isinstance(x, FakeTensor)
                  else frozenset() for x in inputs)
    user_outputs = [v.node if isinstance(v, FakeTensor) else v for v in outputs]
    joint.output((*user_outputs, *(g.node if g is not None else None for g in input_grads)))
    joint.eliminate_dead_code()
    split = _partition(joint, len(user_outputs), differentiable, grad_inputs, aliases, reach)
    split.overwritten = tuple(grads.overwritten)
    return split


def _input_alias(graph: Graph, output: Any) -> tuple[int, tuple] | None:
    """(input index, replay steps) when a captured output is an input or a view of one."""
    if not isinstance(output, GraphNode):
        return None
    if output.op == "placeholder":
        return graph.placeholders.index(output), ()
    val = output.meta.get("val")
    view = getattr(val, "_view", None)
    if view is None:
        return None
    base = view.base
    if isinstance(base, FakeTensor) and base.node.op == "placeholder" and \
            base.node.graph is graph:
        return graph.placeholders.index(base.node), view.replay
    return None


class _JointForward(Retracer):
    """The captured graph run again on fakes into the joint graph, each op's call logged
    (`_LoggingRecorder`) for the backward walk."""

    def call_function(self, node: GraphNode, args: tuple, kwargs: dict[str, Any]) -> Any:
        value = super().call_function(node, args, kwargs)
        if isinstance(node.target, OpDef):
            _carry_saving_meta(node, value)
        return value

    def not_an_op(self, node: GraphNode) -> Exception:
        return Unsupported(BreakKind.JOINT_GRAPH, f"{node.target!r} has no backward formula "
                           "the compiler can trace")


def _carry_saving_meta(node: GraphNode, value: Any) -> None:
    """The captured node's facts about saving its value (Note [Saved values overwritten in
    the graph]) onto the joint graph's node for the same value."""
    if isinstance(value, FakeTensor):
        value.node.meta["captured"] = node
        for key in ("overwritten", "promotion"):
            if key in node.meta:
                value.node.meta[key] = node.meta[key]


def _tangents(joint: Graph, outputs: Any, aliases: tuple) -> tuple[_Gradients, tuple[bool, ...]]:
    """One tangent placeholder per differentiable output, added into the gradients by node."""
    grads = _Gradients()
    differentiable = []
    for i, value in enumerate(outputs):
        wanted = isinstance(value, FakeTensor) and value._requires_grad and \
            aliases[i] is None  # an aliased output gets its grad_fn from eager view ops
        differentiable.append(wanted)
        if not wanted:
            continue
        node = joint.placeholder(f"tangent_{i}")
        tangent = FakeTensor.of(node, value.shape, value._data.dtype, False)
        grads.add(value.node, tangent, frozenset((i,)))
    return grads, tuple(differentiable)


class _Gradients:
    """The gradient of each forward value (by node) and the user outputs it comes from.

    reach[node]: the indices of the user outputs whose gradient flows into the node's
    through ops that need it, as eager's graph connects them: an input reached only from
    outputs that got no gradient in a backward call gets None there, not zeros (eager
    never runs the nodes on that path).
    overwritten: (the user outputs whose gradients reach the op, eager's error) for each op
    whose backward reads a value the graph overwrote later (see `JointGraphs.overwritten`).
    """

    def __init__(self) -> None:
        self.grads: dict[GraphNode, Any] = {}
        self.reach: dict[GraphNode, frozenset[int]] = {}
        self.overwritten: list[tuple[frozenset[int], str]] = []

    def get(self, node: GraphNode) -> Any:
        return self.grads.get(node)

    def add(self, node: GraphNode, grad: Any, sources: frozenset[int]) -> None:
        previous = self.grads.get(node)
        self.grads[node] = grad if previous is None else previous + grad
        self.reach[node] = self.reach.get(node, frozenset()) | sources


def _run_backward(calls: list, recorder: OpRecorder, grads: _Gradients) -> _Gradients:
    """Each recorded op's backward formula, in reverse order, on fakes (Note [Joint graphs])."""
    for op, inputs, params, result, location in reversed(calls):
        outs = result if isinstance(result, tuple) else (result,)
        g = [grads.get(o.node) for o in outs]
        if not op.differentiable or all(x is None for x in g):
            continue
        ctx = _BackwardContext(op, params, inputs)
        if not any(ctx.needs_input_grad):
            continue
        recorder.location = location
        saved = tuple(_saved_value(op, i, condition, inputs, result, ctx)
                      for i, condition in op.save_plan)
        g_arg = g[0] if op.num_outputs == 1 else g
        if op.num_outputs == 1 and g_arg is None:
            continue
        sources = frozenset().union(*(grads.reach.get(o.node, frozenset()) for o in outs))
        captured = {o.node.meta.get("captured") for o in outs}
        grads.overwritten.extend((sources, message) for message in (
            _overwritten_message(v, captured) for v in saved) if message is not None)
        input_grads = op.backward(xp.TENSOR, ctx, g_arg, *saved)
        if len(input_grads) != len(inputs):
            raise Unsupported(BreakKind.JOINT_GRAPH, f"{op.name}: its backward returned "
                              f"{len(input_grads)} gradients for {len(inputs)} inputs")
        for index, (x, grad) in enumerate(zip(inputs, input_grads, strict=True)):
            if grad is None or not ctx.needs_input_grad[index]:
                continue
            metadata = ctx.input_metadata[index]
            assert metadata is not None, "an input needing a gradient is a tensor"
            shape, dtype = metadata
            grad = validate_tensor_grad(ctx, index, grad, shape, dtype)
            if not isinstance(grad, FakeTensor):
                grad = _as_graph_value(grad, recorder)
            grads.add(x.node, grad, sources)
    return grads


def _saved_value(op: OpDef, index: int, condition: int, inputs: tuple, result: Any,
                 ctx: _BackwardContext) -> Any:
    if index == -1:
        return result
    if condition >= 0 and not ctx.needs_input_grad[condition]:
        return None
    value = inputs[index]
    if isinstance(value, FakeTensor) and value.node.meta.get("promotion"):
        return value.node.args[0].meta["val"]  # eager saves the tensor, not its cast
    return value


def _overwritten_message(value: Any, saver: set[GraphNode | None]) -> str | None:
    """Eager's error for a value saved by the op of captured node(s) `saver` that an
    in-place op of the graph overwrote later, or None (Note [Saved values overwritten in
    the graph]). The in-place op itself may save the value it overwrites."""
    if not isinstance(value, FakeTensor) or "overwritten" not in value.node.meta:
        return None
    storage, version, writer = value.node.meta["overwritten"]
    if writer in saver:
        return None
    node = value.node
    while node.target is OPS["with_history"]:  # the value stands for the tensor written
        node = node.args[0]
    if node.op == "placeholder":
        where = "a leaf Tensor"
    else:
        producer = node.target
        name = producer.node_class.__name__ if isinstance(producer, OpDef) else "graph"
        where = f"output 0 of {forward_name(name)}"
    return str(modified_error(value, where, storage.bumps, version))


def _as_graph_value(grad: Tensor, recorder: OpRecorder) -> FakeTensor:
    """A constant gradient (a formula returned real zeros) as a graph constant."""
    node = recorder.constant_of(grad)
    return FakeTensor.of(node, grad.shape, grad._data.dtype, False)


def _partition(joint: Graph, num_user: int, differentiable: tuple[bool, ...],
               grad_inputs: tuple[bool, ...], aliases: tuple,
               reach: tuple[frozenset[int], ...]) -> JointGraphs:
    """Split the joint graph (Note [Joint graphs]): forward = what the user's outputs and
    grad-mode switches need; backward = the rest; saved = forward values it reads."""
    user_outputs = joint.outputs[:num_user]
    input_grads = joint.outputs[num_user:]
    primals = [n for n in joint.placeholders if not n.target.startswith("tangent_")]
    tangents = [n for n in joint.placeholders if n.target.startswith("tangent_")]
    roots = [n for n in user_outputs if isinstance(n, GraphNode)]
    roots += _forward_effects(joint, tangents)
    in_forward = _ancestors(roots)
    in_forward.update(primals)
    backward_nodes = [n for n in joint.nodes if n not in in_forward and n.op != "output"]
    saved = []
    for node in joint.nodes:
        if node in in_forward and node.op != "get_attr" and any(
                user not in in_forward and user.op != "output" for user in node.users):
            saved.append(node)

    forward = Graph()
    copies: dict[GraphNode, Any] = {}
    for node in joint.nodes:
        if node in in_forward:
            copies[node] = forward.node_copy(node, copies.__getitem__)
    # a saved user output is saved as the tensor the caller gets: its writes are checked
    intermediates = [n for n in saved if n.op != "placeholder" and n not in user_outputs]
    forward.output((*map_arg(tuple(user_outputs), copies.__getitem__),
                    *(copies[n] for n in intermediates)))

    backward = Graph()
    bcopies: dict[GraphNode, Any] = {}
    saved_spec: list[tuple[str, int]] = []
    for node in saved:
        bcopies[node] = backward.placeholder(f"saved_{node.name}", node.meta.get("val"))
        if node.op == "placeholder":
            saved_spec.append(("input", primals.index(node)))
        elif node in user_outputs:
            saved_spec.append(("user", user_outputs.index(node)))
        else:
            saved_spec.append(("output", num_user + intermediates.index(node)))
    for node in tangents:
        bcopies[node] = backward.placeholder(node.target, node.meta.get("val"))
    for node in joint.nodes:
        if node.op == "get_attr" and node in in_forward and any(
                user not in in_forward for user in node.users):
            bcopies[node] = backward.node_copy(node, bcopies.__getitem__)
    for node in backward_nodes:
        if node.op == "placeholder":
            continue
        bcopies[node] = backward.node_copy(node, bcopies.__getitem__)
    backward.output(tuple(bcopies.get(g) if isinstance(g, GraphNode) else None
                          for g in input_grads))
    return JointGraphs(forward, backward, num_user, saved_spec, differentiable, grad_inputs,
                       aliases, reach)


def _forward_effects(joint: Graph, tangents: list[GraphNode]) -> list[GraphNode]:
    """Nodes the forward runs although no output needs them: grad-mode switches and the
    impure calls (value checks, random draws) that read no tangent, in eager's order."""
    from_tangents = set(tangents)
    effects = []
    for node in joint.nodes:
        if any(n in from_tangents for n in node.all_input_nodes):
            from_tangents.add(node)
        elif node.op == "call_function" and (node.target is set_grad_mode or (
                isinstance(node.target, OpDef) and node.is_impure())):
            effects.append(node)
    return effects


def _ancestors(roots: list[GraphNode]) -> set[GraphNode]:
    seen: set[GraphNode] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(node.all_input_nodes)
    return seen


def without_tangents(backward: Graph, absent: frozenset[int],
                     reach: tuple[frozenset[int], ...]) -> Graph:
    """`backward` as eager runs it when the user outputs `absent` got no gradient (Note
    [Outputs without a gradient]): what only their tangents reach is not computed, a
    gradient sum keeps its other terms, and an op mixing them with gradients that did
    arrive (a multi-output formula) reads zeros. An input gradient left with no term is
    None, unless an output that got a gradient reaches the input (`reach`, per input):
    then eager's formulas gave it zeros (`zero_()`'s backward, folded to a constant
    here), and so does this graph. The placeholders stay, so the calling convention does
    not change."""
    pruned = Graph()
    copies: dict[GraphNode, Any] = {}
    missing: set[GraphNode] = set()  # values only absent tangents reach
    carries: set[GraphNode] = set()  # values some tangent reaches
    for node in backward.nodes:
        if node.op == "output":
            break
        if node.op == "placeholder" and node.target.startswith("tangent_"):
            carries.add(node)
            if int(node.target.removeprefix("tangent_")) in absent:
                missing.add(node)
        gradients = [n for n in node.all_input_nodes if n in carries]
        if gradients:
            carries.add(node)
            if all(n in missing for n in gradients):
                missing.add(node)
                continue
            kept = [n for n in gradients if n not in missing]
            if node.target is OPS["add"] and len(gradients) == 2 and len(kept) == 1 and \
                    not node.kwargs and _same_meta(kept[0], node):
                copies[node] = copies[kept[0]]
                continue
        for n in node.all_input_nodes:
            if n in missing and n.op != "placeholder" and n not in copies:
                copies[n] = pruned.get_attr("zeros", Tensor._make(np.zeros(
                    n.meta["val"].shape, n.meta["val"]._data.dtype)))
        if node not in missing or node.op == "placeholder":
            copies[node] = pruned.node_copy(node, copies.__getitem__)
    outputs = []
    for g, sources in zip(backward.outputs, reach, strict=True):
        if isinstance(g, GraphNode) and g in missing:
            val = g.meta["val"]
            g = pruned.get_attr("zeros", Tensor._make(np.zeros(val.shape, val._data.dtype))) \
                if sources - absent else None
        outputs.append(copies.get(g, g) if isinstance(g, GraphNode) else g)
    pruned.output(tuple(outputs))
    pruned.eliminate_dead_code()  # what only fed the pruned terms (and the saved values it read)
    return pruned


def saved_read(backward: Graph) -> tuple[bool, ...]:
    """Per saved value (the `saved_*` placeholders, in order), whether `backward` reads it."""
    return tuple(bool(p.users) for p in backward.placeholders if p.target.startswith("saved_"))


def _same_meta(a: GraphNode, b: GraphNode) -> bool:
    va, vb = a.meta.get("val"), b.meta.get("val")
    return isinstance(va, Tensor) and isinstance(vb, Tensor) and va.shape == vb.shape and \
        va._data.dtype == vb._data.dtype
