"""The "numba" backend: fusion groups become kernels, everything else runs as an extern.

Contract (DESIGN.md, Codegen): `numba_backend(gm, example_inputs) -> callable(*flat_inputs)
-> tuple`. The callable is a `CompiledGraph`: the graph's program (Note [Graph programs]
in program.py), which calls each fusion group's `Kernel` and runs every other node as an
extern, its OpDef's numpy forward on arrays, so an op without a lowering never fails the
compile; the program deletes each intermediate after its last use. Reductions with their
pointwise prologues and epilogues are fusion groups too (Note [Reduction fusion]; kernels
in `reductions.py`).
A kernel numba fails to compile makes its graph run with eager ops, with one warning.
A graph whose inputs require grad (with grad enabled at its entry or inside it) is split
into forward and backward graphs (Note [Joint graphs] in joint_graphs.py), each compiled this
way, and runs as a `CompiledRegion` with one autograd node; when its backward cannot be
built, it runs `gm.forward` itself so eager autograd records through it (logged on `perf_hints`).
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from typing import Any

from numba.core.errors import NumbaError

from jitgrad import config
from jitgrad.codegen import progress
from jitgrad.codegen.autograd import compile_region
from jitgrad.codegen.fusion import FusionGroup, find_fusion_groups
from jitgrad.codegen.kernels import Kernel
from jitgrad.codegen.launch_cost import worth_a_kernel
from jitgrad.codegen.program import build_program_graph
from jitgrad.eager.grad_mode import STATE, set_grad_mode
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.breaks.unsupported import Unsupported
from jitgrad.trace.ir.graph import Graph
from jitgrad.trace.ir.graph_module import GraphModule
from jitgrad.trace.runtime import report

_LOG = config.logger("output_code")
_PERF_LOG = config.logger("perf_hints")
_FUSION_LOG = config.logger("fusion")


class CompiledGraph:
    """What the numba backend returns: call it with the graph's flat inputs.

    fusion_groups: the FusionGroups run as kernels (for `explain()`); kernels: their
    Kernels, in the same order; numpy_groups: the groups too small for a kernel, whose
    members run as numpy ops (Note [Groups too small for a kernel] in launch_cost.py);
    wrapper: the GraphModule that runs them (its `code` is the wrapper source).
    """

    def __init__(self, wrapper: GraphModule, fusion_groups: list[FusionGroup],
                 kernels: list[Kernel], graph: Graph, attrs: dict[str, Any],
                 numpy_groups: list[FusionGroup]) -> None:
        self.wrapper = wrapper
        self.fusion_groups = fusion_groups
        self.numpy_groups = numpy_groups
        self.kernels = kernels
        self.forward = wrapper.forward
        self._graph = graph
        self._attrs = attrs
        self._first = bool(kernels)

    def show(self) -> str:
        """Its fusion groups, each kernel's source (once per kernel file) and the wrapper's
        code: what `jitgrad.show` prints after an entry's runner."""
        parts = ["# fusion groups:", *([str(g) for g in self.fusion_groups] or ["(none)"])]
        if self.numpy_groups:
            parts += ["# groups run as numpy ops (too small for a kernel):",
                      *(str(g) for g in self.numpy_groups)]
        shown = set()
        for kernel in self.kernels:
            if kernel.path in shown:
                parts.append(f"# kernel {kernel.name}: {kernel.path.name}, shown above")
                continue
            shown.add(kernel.path)
            parts.append(f"# kernel {kernel.name} ({kernel.path.name}):\n{kernel.source}")
        parts.append(f"# wrapper:\n{self.wrapper.code}")
        return "\n".join(parts)

    def __call__(self, *inputs: Any) -> tuple:
        if self._first:  # its kernels compile now (Note [Compile status] in progress.py)
            self._first = False
            with progress.first_call(self._status_name(), len(self.kernels)):
                return self(*inputs)
        try:
            return self.forward(*inputs)
        except (NumbaError, RecursionError) as err:
            # numba compiles a kernel at its first launch: a failure there is the
            # compiler's, so this graph runs with eager ops from now on (kernels write
            # only fresh buffers, so nothing the graph computed before is lost)
            warnings.warn(f"jitgrad: a kernel failed to compile in numba "
                          f"({type(err).__name__}: {str(err).splitlines()[0][:200]}); this "
                          "graph runs with eager ops (please report it with "
                          "JITGRAD_LOGS=output_code output)", RuntimeWarning, stacklevel=2)
            self.forward = GraphModule(self._graph, self._attrs).forward
            return self.forward(*inputs)


    def _status_name(self) -> str:
        """`forward_3 (train.py:12)`: the program and the user line of its first node."""
        location = next((n.meta["source"] for n in self._graph.nodes
                         if n.meta.get("source") is not None), None)
        name = self.forward.__name__
        return name if location is None else f"{name} ({location})"


def numba_backend(gm: GraphModule, example_inputs: list[Any]) -> Any:
    """Compile `gm` into fused kernels and externs (see the module docstring).

    Returns a CompiledGraph; a CompiledRegion when grad mode is on and an example input
    requires grad; `gm.forward` when such a graph's backward cannot be built.
    """
    return build_program(gm, example_inputs, compile_graph)


def build_program(gm: GraphModule, example_inputs: list[Any],
                  compile_one: Callable[[Graph, dict[str, Any]], Any]) -> Any:
    """`numba_backend` with each graph (captured, or the forward and backward of a joint
    pair) compiled by `compile_one(graph, attrs)` (check mode wraps `compile_graph`)."""
    if not (_records_grad(gm.graph) and any(isinstance(x, Tensor) and x.requires_grad
                                            for x in example_inputs)):
        return compile_one(gm.graph, gm.attrs)
    try:
        return compile_region(gm.graph, example_inputs,
                              lambda graph: compile_one(graph, graph.attrs))
    except Unsupported as e:
        _PERF_LOG.info("graph runs with eager autograd (its backward was not compiled): %s",
                       e.message)
        return gm.forward


def _records_grad(graph: Graph) -> bool:
    """Whether grad mode is on somewhere in `graph`: at its entry, or after a switch into
    an `enable_grad()`/`set_grad_enabled(True)` block (the function may be called under
    `no_grad()` and turn grad mode on inside)."""
    return STATE.enabled or any(node.target is set_grad_mode and node.args == (True,)
                                for node in graph.nodes if node.op == "call_function")


def compile_graph(graph: Graph, attrs: dict[str, Any]) -> CompiledGraph:
    """Fusion groups of `graph` compiled into kernels, run by its program (a GraphModule
    over arrays, Note [Graph programs] in program.py)."""
    start = time.perf_counter()
    groups: list[FusionGroup] = []
    numpy_groups: list[FusionGroup] = []
    for group in find_fusion_groups(graph):
        (groups if worth_a_kernel(group) else numpy_groups).append(group)
    if _FUSION_LOG.isEnabledFor(logging.INFO):
        _FUSION_LOG.info("%d fusion group(s)\n%s", len(groups),
                         "\n".join(str(g) for g in groups) or "(none)")
        if numpy_groups:
            _FUSION_LOG.info("%d group(s) run as numpy ops (too small for a kernel)\n%s",
                             len(numpy_groups), "\n".join(str(g) for g in numpy_groups))
    kernels = [Kernel(group) for group in groups]
    wrapper = GraphModule(build_program_graph(graph, groups, kernels), attrs)
    report.record_time("codegen", time.perf_counter() - start)
    if _LOG.isEnabledFor(logging.INFO):
        _LOG.info("wrapper of %d kernel(s)\n%s", len(kernels), wrapper.code)
    return CompiledGraph(wrapper, groups, kernels, graph, attrs, numpy_groups)
