"""Helpers for tests of compiled code."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jitgrad.trace.ir.graph_module import GraphModule
from jitgrad.trace.runtime.backends import Backend, lookup_backend


class CountingBackend:
    """A backend that counts what it compiles, then delegates (torch's `CompileCounter`).

    compile_count: graphs compiled; op_count: their call_function nodes, summed;
    graphs: the GraphModules received, in order. `backend` (default "eager", the oracle) compiles.
    Counts are exact, so tests assert them with ==.
    """

    def __init__(self, backend: str | Backend = "eager") -> None:
        self.backend = lookup_backend(backend)
        self.graphs: list[GraphModule] = []
        self.compile_count = 0
        self.op_count = 0

    def __call__(self, gm: GraphModule, example_inputs: list[Any]) -> Callable[..., tuple]:
        self.graphs.append(gm)
        self.compile_count += 1
        self.op_count += sum(1 for node in gm.graph.nodes if node.op == "call_function")
        return self.backend(gm, example_inputs)

    def clear(self) -> None:
        """Forget everything counted so far."""
        self.graphs.clear()
        self.compile_count = 0
        self.op_count = 0
