"""Running a graph node by node: `Interpreter` (torch.fx.Interpreter's shape) and `Retracer`.

`Interpreter(graph).run(*inputs)` binds the placeholders to `inputs` in order, evaluates
every other node on its args' values and returns the output node's; each kind of node
goes through a method a subclass overrides (`placeholder`, `get_attr`, `call_function`,
`output`), and `run_node` wraps them all, for per-node bookkeeping. `env` holds every
node's value afterwards.

`Retracer` runs a graph again on fake tensors under an op recorder, so the ops record a
new graph and decide again on the new fakes: the joint forward/backward graph
(jitgrad/codegen/joint_graphs.py), a graph at concrete sizes (jitgrad/trace/runtime/specialize.py).
"""

from __future__ import annotations

import operator
from typing import Any

from jitgrad.eager.grad_mode import STATE, set_grad_mode
from jitgrad.eager.ops.registry import OpDef
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.capture.fake import FakeNumber, FakeTensor
from jitgrad.trace.capture.recorder import OpRecorder, recording
from jitgrad.trace.ir.graph import Graph, Node, map_arg


class Interpreter:
    """Evaluates `graph` on given inputs; `attrs` are the constants get_attr nodes read
    (the graph's own by default)."""

    def __init__(self, graph: Graph, attrs: dict[str, Any] | None = None) -> None:
        self.graph = graph
        self.attrs = graph.attrs if attrs is None else attrs
        self.env: dict[Node, Any] = {}

    def run(self, *inputs: Any) -> Any:
        """The output node's values (None for a graph without one)."""
        given = iter(inputs)
        for node in self.graph.nodes:
            if node.op == "output":
                return self.output(node, self.fetch(node.args))
            self.env[node] = self.run_node(node, given)
        return None

    def fetch(self, value: Any) -> Any:
        """`value` (args, kwargs) with each Node replaced by its value."""
        return map_arg(value, self.env.__getitem__)

    def run_node(self, node: Node, given: Any) -> Any:
        if node.op == "placeholder":
            return self.placeholder(node, next(given))
        if node.op == "get_attr":
            return self.get_attr(node, self.attrs[node.target])
        return self.call_function(node, self.fetch(node.args), self.fetch(node.kwargs))

    def placeholder(self, node: Node, value: Any) -> Any:
        return value

    def get_attr(self, node: Node, value: Any) -> Any:
        return value

    def call_function(self, node: Node, args: tuple, kwargs: dict[str, Any]) -> Any:
        return node.target(*args, **kwargs)

    def output(self, node: Node, values: tuple) -> Any:
        return values


class Retracer(Interpreter):
    """Runs `graph` on fakes of `inputs` under `recorder`, which records into its graph
    (`new`): placeholders and constants become `new`'s, a grad-mode switch is recorded
    and switches the mode, an OpDef runs as while tracing; the grad mode of the call is
    restored after. Another call target raises `not_an_op(node)`."""

    def __init__(self, graph: Graph, recorder: OpRecorder) -> None:
        super().__init__(graph)
        self.recorder = recorder
        self.new = recorder.graph

    def run(self, *inputs: Any) -> Any:
        mode = STATE.enabled
        try:
            with recording(self.recorder):
                return super().run(*inputs)
        finally:
            set_grad_mode(mode)

    def run_node(self, node: Node, given: Any) -> Any:
        self.recorder.location = node.meta.get("source")
        return super().run_node(node, given)

    def placeholder(self, node: Node, value: Any) -> Any:
        val = node.meta.get("val")
        placeholder = self.new.placeholder(node.target, val)
        if not isinstance(value, Tensor):
            return value
        cls = FakeNumber if isinstance(val, FakeNumber) else FakeTensor
        # the tensor's own flag: ops propagate it only where grad mode is on
        return cls.like(placeholder, value, value._requires_grad)

    def get_attr(self, node: Node, value: Any) -> Any:
        attr = self.new.get_attr(node.target, value)
        return FakeTensor.like(attr, value, False) if isinstance(value, Tensor) else value

    def call_function(self, node: Node, args: tuple, kwargs: dict[str, Any]) -> Any:
        if node.target is set_grad_mode:
            set_grad_mode(*args)
            self.new.call_function(set_grad_mode, args)
            return None
        if node.target is operator.getitem:
            return args[0][args[1]]
        if not isinstance(node.target, OpDef):
            raise self.not_an_op(node)
        return node.target(*args, **kwargs)

    def not_an_op(self, node: Node) -> Exception:
        return TypeError(f"{node!r} calls {node.target!r}, which is not an op")
