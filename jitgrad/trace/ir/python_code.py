"""A graph as Python source: `generate_python(graph)` gives the `forward` function a
GraphModule compiles (one statement per node, each with its user line).

Note [Eager versions of a functional graph]: a captured graph is functional, so running
it with eager ops (a GraphModule: the "eager" backend, check mode's oracle) would let a
backward read a value the user's program overwrote in place, where eager raises
"modified by an inplace operation". Tracing marks what eager's version counters would
see: `meta["overwritten"] = (storage, version)` on a value an in-place write replaced
(Note [Saved values overwritten in the graph] in jitgrad/codegen/joint_graphs.py), and
`meta["promotion"]` on a dtype cast an op's entry made (eager's op saves the tensor, not
the cast). The generated Python advances an overwritten value's version counter by the
number of writes that replaced it, around its last read: before it when that read is the
writing op (which may save the old value, as eager's in-place op saves a copy), after it
otherwise; and it gives a promotion cast and a view their source's counter, so the saved
values eager autograd checks are the ones eager had (a view of an input written after
the call raises as eager's does).
"""

from __future__ import annotations

import math
import operator
from typing import Any, NamedTuple

import numpy as np

from jitgrad.eager.ops.registry import OpDef
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.capture import symbolic
from jitgrad.trace.ir.graph import (
    DOTTED_NAME,
    RESERVED_NAMES,
    Graph,
    Node,
    identifier,
    render,
    render_call,
    short_location,
    target_name,
)


class PythonCode(NamedTuple):
    """The source of a graph's `forward` function, the globals it reads, and the node each
    line computes (`line_nodes[lineno - 1]`; None for the `def` line)."""

    source: str
    globals: dict[str, Any]
    line_nodes: tuple[Node | None, ...]


def generate_python(graph: Graph) -> PythonCode:
    """Runnable source of `def forward(<placeholders>):` returning the output tuple.

    One statement per node (`mm = ops.matmul(x, w)  # train.py:12`); an intermediate is
    deleted after its last use. `globals` holds what it reads: `ops` (the OpDefs called,
    by name), `attrs` (the graph's attrs), `np`, and each other callable or constant
    under its name.
    Raises: RuntimeError if the graph has no output node.
    """
    writer = _CodeWriter(graph)
    return PythonCode(writer.source, writer.globals, writer.line_nodes)


class _CodeWriter:
    """Writes one graph's `forward` source, collecting the globals it names."""

    def __init__(self, graph: Graph) -> None:
        output = graph.output_node
        if output is None:
            raise RuntimeError("generate_python: the graph has no output node; call "
                               "graph.output(values) first")
        self.graph = graph
        self.ops: dict[str, OpDef] = {}
        self.globals: dict[str, Any] = {"ops": None, "attrs": graph.attrs, "np": np}
        self._global_names: dict[int, str] = {}
        # generated names must differ from every local of forward (a node without users
        # is a bare call statement, not a local)
        self._taken = set(RESERVED_NAMES) | {n.name for n in graph.nodes
                                             if n.users or n.op in ("placeholder", "get_attr")}
        params = ", ".join(n.name for n in graph.placeholders)
        statements = _last_uses(graph)
        body = [self._statement(node, dead) for node, dead in statements]
        live = [n for n in output.all_input_nodes if "overwritten" in n.meta]
        body.extend(self._bump(n) for n in live)
        body.append(f"return {render(output.args, self._leaf)}")
        self.line_nodes = (None, *(node for node, _ in statements), output)
        self.globals["ops"] = _OpNamespace(self.ops)
        self.source = f"def forward({params}):\n" + "".join(f"    {line}\n" for line in body)

    def _statement(self, node: Node, dead: list[Node]) -> str:
        if node.op == "get_attr":
            line = f"{node.name} = attrs[{node.target!r}]"
        else:
            args = node.args
            if node.target is operator.getitem and len(args) == 2 and not node.kwargs:
                call = f"{self._leaf(args[0])}[{render(args[1], self._leaf)}]"
            else:
                call = f"{self._callee(node.target, node.meta.get('callee'))}(" \
                       f"{render_call(args, node.kwargs, self._leaf)})"
            line = f"{node.name} = {call}" if node.users else call
            if node.users and (node.meta.get("promotion") or _is_view(node)):
                line += f"; {self._global(share_version, 'share_version')}" \
                        f"({node.name}, {self._leaf(args[0])})"
        for n in dead:
            if "overwritten" in n.meta:
                if n.meta["overwritten"][2] is node:
                    line = f"{self._bump(n)}; {line}"
                else:
                    line += f"; {self._bump(n)}"
        if dead:
            line += f"; del {', '.join(n.name for n in dead)}"
        location = short_location(node.meta.get("source"))
        return f"{line}  # {location}" if location else line

    def _bump(self, node: Node) -> str:
        storage, version, _ = node.meta["overwritten"]
        return f"{self._global(bump_version, 'bump_version')}({node.name}, " \
               f"{storage.bumps - version})"

    def _callee(self, target: Any, name: str | None = None) -> str:
        """The generated code's name for a call target; `name` (a node's
        `meta["callee"]`) names a callable whose own name says less (a kernel's `run`)."""
        if isinstance(target, OpDef):
            name = target.name
            counter = 0
            while self.ops.get(name, target) is not target:
                counter += 1
                name = f"{target.name}_{counter}"
            self.ops[name] = target
            return f"ops.{name}"
        return self._global(target, name or target_name(target))

    def _leaf(self, value: Any) -> str:
        if isinstance(value, Node):
            return value.name
        if isinstance(value, symbolic.SymInt):  # a generic graph runs specialized, not as is
            return symbolic.render(value.expr, lambda k: f"s{k}")
        kind = type(value)
        if value is None or kind in (bool, int, str, bytes):
            return repr(value)
        if kind is float:
            return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
        if value is Ellipsis:
            return "..."
        if isinstance(value, np.dtype) and value.names is None:
            return f"np.dtype({value.name!r})"
        if isinstance(value, tuple):  # a namedtuple: rebuild it from its class
            items = ", ".join(render(v, self._leaf) for v in value)
            return f"{self._global(kind, kind.__name__)}({items})"
        base = getattr(value, "__name__", None)
        if not isinstance(base, str):
            text = repr(value)  # `jitgrad.float32` -> float32; else the type: `generator`
            dotted = DOTTED_NAME.fullmatch(text)
            base = text.rsplit(".", 1)[-1] if dotted else kind.__name__.lower()
        return self._global(value, base)

    def _global(self, value: Any, base: str) -> str:
        """The global name under which the generated code reads `value`."""
        name = self._global_names.get(id(value))
        if name is None:
            base = identifier(base)
            name = base
            counter = 0
            while name in self._taken:
                counter += 1
                name = f"{base}_{counter}"
            self._taken.add(name)
            self._global_names[id(value)] = name
            self.globals[name] = value
        return name


class _OpNamespace:
    """`ops.<name>` in generated code: the OpDefs a graph calls, as attributes."""

    def __init__(self, ops: dict[str, OpDef]) -> None:
        self.__dict__.update(ops)

    def __repr__(self) -> str:
        return f"ops({', '.join(sorted(self.__dict__))})"


def bump_version(value: Any, writes: int) -> None:
    """Advance a tensor's version counter by the in-place writes that replaced its value
    (Note [Eager versions of a functional graph])."""
    if isinstance(value, Tensor):
        value._version_counter().value += writes


def share_version(value: Any, source: Any) -> None:
    """A promotion cast or a view reports its source's in-place writes, as eager's view
    shares its base's counter (Note [Eager versions of a functional graph])."""
    if isinstance(value, Tensor) and isinstance(source, Tensor) and value is not source:
        value._vc = source._version_counter()


def _is_view(node: Node) -> bool:
    """Whether `node` is, in eager, a view sharing its first argument's counter: its value
    has a ViewInfo, and no value on its way to the root base was overwritten in the graph
    (those counters are advanced by `bump_version` for the value alone)."""
    val = node.meta.get("val")
    if not (isinstance(val, Tensor) and val._view is not None and node.args and
            isinstance(node.args[0], Node)) or "overwritten" in node.meta:
        return False
    source = node.args[0]
    base = source.meta.get("val")
    return isinstance(base, Tensor) and "overwritten" not in source.meta and (
        source.op == "placeholder" or base._view is None or _is_view(source))


def _last_uses(graph: Graph) -> list[tuple[Node, list[Node]]]:
    """Each non-placeholder, non-output node with the intermediates it reads last."""
    seen: set[Node] = set()
    dead_after: dict[Node, list[Node]] = {}
    for node in reversed(graph.nodes):
        for used in node.all_input_nodes:
            if used not in seen:
                seen.add(used)
                if node.op != "output" and used.op == "call_function":
                    dead_after.setdefault(node, []).append(used)
    return [(n, dead_after.get(n, [])) for n in graph.nodes
            if n.op in ("call_function", "get_attr")]
