"""Compiled training, at run time: one autograd Node per compiled region.

`compile_region` splits a captured graph into its joint forward and backward graphs
(Note [Joint graphs] in joint_graphs.py) and compiles each; a `CompiledRegion` runs the
forward and records one `CompiledFunctionBackward` node, which runs the backward (Note
[Outputs without a gradient] for calls where some outputs got no gradient).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from jitgrad.codegen.joint_graphs import (
    JointGraphs,
    build_joint_graphs,
    saved_read,
    without_tangents,
)
from jitgrad.eager.node import ERR_FREED, Node, SavedValues
from jitgrad.eager.tensor import Tensor, gradient_edge
from jitgrad.eager.views import rebuild_view
from jitgrad.trace.ir.graph import Graph
from jitgrad.trace.runtime import report
from jitgrad.trace.runtime.user_lines import add_user_location

ERR_CREATE_GRAPH = (
    "create_graph=True reached a compiled region (CompiledFunctionBackward): its backward "
    "is a compiled graph that records no history, so higher-order gradients cannot flow "
    "through it. Hint: run this code eagerly for higher-order gradients "
    "(jitgrad.compile(fn, backend=\"eager\") or jitgrad.disable).")


def compile_region(graph: Graph, example_inputs: list[Any],
                   compile_graph: Callable[[Graph], Callable[..., tuple]]) -> Any:
    """`graph` split into joint graphs, each compiled by `compile_graph(graph) -> callable`
    (the numba backend's kernels; tests also pass `GraphModule` to check the joint graphs
    alone), as a CompiledRegion; just `compile_graph(graph)` when no output needs a
    gradient. Raises Unsupported as `build_joint_graphs` does."""
    start = time.perf_counter()
    joint = build_joint_graphs(graph, example_inputs)
    report.record_time("joint graph", time.perf_counter() - start)
    if not any(joint.differentiable) and not any(joint.aliases):
        return compile_graph(graph)  # e.g. an optimizer update under no_grad
    forward = compile_graph(joint.forward)
    backward = compile_graph(joint.backward)
    groups = [_Labeled("forward", g) for g in getattr(forward, "fusion_groups", ())] + \
        [_Labeled("backward", g) for g in getattr(backward, "fusion_groups", ())]
    return CompiledRegion(joint, forward, backward, groups, compile_graph)


class _Labeled:
    """A fusion group listed with the graph it belongs to (`explain()` shows both halves)."""

    def __init__(self, label: str, group: Any) -> None:
        self.label = label
        self.group = group

    def __str__(self) -> str:
        return f"{self.label} {self.group}"


class CompiledFunctionBackward(Node):
    """The one autograd node of a compiled region's call (its outputs' grad_fn).

    next_edges: one per input of the captured graph (None where it needs no gradient);
    apply runs the region's compiled backward graph on the saved values and the output
    gradients (zeros for outputs that got none); an input reached only from outputs that
    got none gets None, as in eager (`JointGraphs.reach`). An error raised in it names the
    user's line of the forward op (Note [Errors at the user's line] in
    jitgrad/trace/runtime/user_lines.py).
    Raises RuntimeError: on `create_graph=True` (ERR_CREATE_GRAPH), after the saved
    values were freed (ERR_FREED), or when a saved input was modified in place.
    """

    __slots__ = ("region", "saved", "output_metadata")

    def __init__(self, region: CompiledRegion, output_metadata: tuple) -> None:
        super().__init__()
        self.region = region
        self.saved: SavedValues | None = None  # set once the outputs exist
        self.output_metadata = output_metadata

    @property
    def num_outputs(self) -> int:  # type: ignore[override]
        return len(self.output_metadata)

    def apply(self, grad_outputs: list[Any], create_graph: bool) -> tuple[Any, ...]:
        if create_graph:
            raise RuntimeError(ERR_CREATE_GRAPH)
        saved = self.saved
        if saved is None:
            raise RuntimeError(ERR_FREED)
        tangents, absent = [], []
        for i, (grad, meta) in enumerate(zip(grad_outputs, self.output_metadata, strict=True)):
            if meta is None:
                continue
            if grad is None:
                absent.append(i)
            tangents.append(Tensor._make(np.zeros(*meta) if grad is None else grad))
        backward, read = self.region.backward_for(frozenset(absent))
        # only what this backward reads is version-checked: eager checks a saved value when
        # the node saving it runs, and runs only the nodes a gradient reaches
        saved.check(self, self._modified_output, read)
        for sources, message in self.region.joint.overwritten:
            if any(grad_outputs[j] is not None for j in sources):
                raise RuntimeError(message)
        values = [v if isinstance(v, Tensor) else Tensor._make(v) for v in saved.values]
        try:
            grads = backward(*values, *tangents)
        except Exception as err:  # at the forward line whose backward raised
            add_user_location(err)
            raise
        return tuple(None if g is None or all(grad_outputs[j] is None for j in reach) else
                     g._data for g, reach in zip(grads, self.region.joint.reach, strict=True))

    def _modified_output(self, _index: int) -> Tensor:
        """The saved output `SavedValues.check` reports: the first whose version changed."""
        saved = self.saved
        assert saved is not None, "only called while saved values exist"
        for (_, index), value, counter, version in zip(
                self.region.joint.saved, saved.values, saved.counters, saved.versions,
                strict=True):
            if counter is not None and counter.changed_since(version):
                out = Tensor._make(value, True, self, index)
                out._vc = counter
                return out
        raise AssertionError("check() reports a modified saved output, so one exists")

    def release_variables(self) -> None:
        self.saved = None


class CompiledRegion:
    """A captured graph compiled for training: callable on the graph's flat inputs, it
    returns the outputs, recording one CompiledFunctionBackward (see Note [Joint graphs]).

    joint: the split graphs; forward/backward: their compiled callables (the backend's
    output for each); fusion_groups: the forward's then the backward's, for explain();
    compile_graph: the backend's compiler, for the backward of a call where some outputs
    got no gradient (`backward_for`).
    """

    def __init__(self, joint: JointGraphs, forward: Callable[..., tuple],
                 backward: Callable[..., tuple], fusion_groups: list[Any],
                 compile_graph: Callable[[Graph], Callable[..., tuple]]) -> None:
        self.joint = joint
        self.forward = forward
        self.backward = backward
        self.fusion_groups = fusion_groups
        self.compile_graph = compile_graph
        self._partial: dict[frozenset[int], tuple[Callable[..., tuple], tuple[bool, ...]]] = {
            frozenset(): (backward, saved_read(joint.backward))}

    def backward_for(self, absent: frozenset[int]) -> tuple[Callable[..., tuple],
                                                             tuple[bool, ...]]:
        """The compiled backward for a call where the user outputs `absent` got no
        gradient (Note [Outputs without a gradient]), compiled once per such set, and
        which saved values it reads."""
        found = self._partial.get(absent)
        if found is None:
            graph = without_tangents(self.joint.backward, absent, self.joint.reach)
            found = self._partial[absent] = (self.compile_graph(graph), saved_read(graph))
        return found

    def show(self) -> str:
        """The forward and backward graphs, each with its compiled code (`jitgrad.show`)."""
        parts = []
        for label, graph, compiled in (("forward", self.joint.forward, self.forward),
                                       ("backward", self.joint.backward, self.backward)):
            parts.append(f"# {label} graph:\n{graph}")
            show = getattr(compiled, "show", None)
            if show is not None:
                parts.append(show())
        return "\n".join(parts)

    def __call__(self, *inputs: Any) -> tuple:
        joint = self.joint
        detached = [Tensor._make(x._data) if isinstance(x, Tensor) else x for x in inputs]
        results = self.forward(*detached)
        user = results[:joint.num_user_outputs]
        metadata = tuple((out.shape, out._data.dtype) if wanted else None
                         for out, wanted in zip(user, joint.differentiable, strict=True))
        node = CompiledFunctionBackward(self, metadata)
        node.next_edges = tuple(gradient_edge(x) if wanted else None
                                for x, wanted in zip(inputs, joint.grad_inputs, strict=True))
        node.input_metadata = tuple((x.shape, x._data.dtype) if isinstance(x, Tensor) else None
                                    for x in inputs)
        returned = tuple(_rebuild_alias(inputs, alias) if alias is not None else
                         Tensor._make(out._data, True, node, i) if wanted else out
                         for i, (out, wanted, alias) in enumerate(zip(
                             user, joint.differentiable, joint.aliases, strict=True)))
        node.saved = _saved_values(joint, inputs, returned, results)
        return returned


def _saved_values(joint: JointGraphs, inputs: tuple, returned: tuple,
                  results: tuple) -> SavedValues:
    """What the backward reads, with the versions to check (JointGraphs.saved): inputs as
    Tensors, returned outputs as arrays with the returned tensor's version counter (no
    reference from the node back to its own output), intermediates as arrays."""
    values, counters, versions = [], [], []
    owners: dict[int, Tensor] | None = None
    for kind, index in joint.saved:
        counter = None
        if kind == "input":
            value = inputs[index]
        elif kind == "user":
            counter = returned[index]._version_counter()
            value = returned[index]._data
        else:
            value = results[index]._data
            if isinstance(value, np.ndarray):
                # an input's or a returned output's array or a view of one: eager saved a
                # tensor sharing that one's counter, so its later writes are checked
                if owners is None:
                    owners = {id(_storage_of(t._data)): t for t in (*returned, *inputs)
                              if isinstance(t, Tensor)}
                owner = owners.get(id(_storage_of(value)))
                if owner is not None:
                    counter = owner._version_counter()
        values.append(value)
        counters.append(counter)
        versions.append(counter.value if counter is not None else
                        value._version if isinstance(value, Tensor) else 0)
    return SavedValues(values, counters, versions)


def _storage_of(array: Any) -> Any:
    """The array at the root of `array`'s `.base` chain (its storage)."""
    while isinstance(getattr(array, "base", None), np.ndarray):
        array = array.base
    return array


def _rebuild_alias(inputs: tuple, alias: tuple[int, tuple]) -> Tensor:
    """An aliased output (JointGraphs.aliases): the input, or its view made by eager ops."""
    index, replay = alias
    return rebuild_view(inputs[index], replay, "default") if replay else inputs[index]
