"""The graph IR of jitgrad.trace: a `Graph` of `Node`s and its listing (its Python code:
python_code.py; its invariants checked: `lint` in lint.py).

Note [Graph IR]: a Graph is an ordered list of Nodes in SSA form. Each Node is one of
- `placeholder`: a graph input; `target` is the input's name (all placeholders come first);
- `call_function`: `target(*args, **kwargs)`; the target is an `OpDef` (recorded by
  tracing one `apply_op` call, kwargs = the op's params), `operator.getitem` (one output
  of a multi-output op), an `allow_in_graph` user function or a grad-mode switch;
- `get_attr`: a constant or parameter the graph reads; `target` is its key in
  `Graph.attrs`, where the value lives (a GraphModule takes it from there);
- `output`: the last node; its args are the flat tuple of values the graph returns.
args may nest tuples, lists, dicts and slices whose leaves are Nodes or constants.
`node.users` (a dict used as an ordered set) always lists the nodes that read `node`:
it is maintained whenever args change, so passes never rebuild it. `node.meta["val"]`
describes the value (a Tensor, real or fake; a tuple of them; or a Python value) and
`node.meta["source"]` the user's line (`SourceLocation`). This is torch.fx's design
(torch/fx/graph.py, torch/fx/node.py) without call_method/call_module: tensor methods
are normalized to their op while tracing (DESIGN.md, Trace).
"""

from __future__ import annotations

import keyword
import operator
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from jitgrad.eager.ops.registry import OpDef
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.capture import symbolic

OPCODES = ("placeholder", "call_function", "get_attr", "output")

# call_function targets other than OpDefs that may be erased when unused
PURE_FUNCTIONS = (operator.getitem,)

# globals of the generated code (python_code.py); never node names
RESERVED_NAMES = frozenset({"ops", "attrs", "np", "float", "slice", "forward"})

DTYPE_SHORT_NAMES = {"float16": "f16", "float32": "f32", "float64": "f64", "int8": "i8",
                     "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8",
                     "bool": "b8"}

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
DOTTED_NAME = re.compile(r"[A-Za-z_][\w.]*")


class SourceLocation(NamedTuple):
    """The user's code that produced a node: file, 1-based line, 0-based columns, line text
    and the name of the function the line is in.

    col/end_col come from the instruction's `positions` (CPython 3.11 `dis`) and may be
    None. `str()` gives the short form printed in listings, `train.py:12`.
    """

    filename: str
    lineno: int
    col: int | None
    end_col: int | None
    text: str
    function: str = ""

    def __str__(self) -> str:
        return f"{os.path.basename(self.filename)}:{self.lineno}"


def map_arg(value: Any, fn: Callable[[Node], Any]) -> Any:
    """`value` with every Node `n` inside it replaced by `fn(n)`.

    Walks tuples (namedtuples and tuple subclasses keep their type), lists, dict values
    and slices; other values are returned as they are.
    """
    if isinstance(value, Node):
        return fn(value)
    if isinstance(value, tuple):
        items = [map_arg(v, fn) for v in value]
        if type(value) is tuple:
            return tuple(items)
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, list):
        return [map_arg(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_arg(v, fn) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(map_arg(value.start, fn), map_arg(value.stop, fn), map_arg(value.step, fn))
    return value


class Node:
    """One operation of a `Graph` (`graph.Node`, not the autograd `Node`). See Note [Graph IR].

    name: a unique Python identifier within the graph (the user's variable name when
    given, else derived from the target: `mul`, `mul_1`, ...).
    users: the nodes that read this one, in the order they started to; kept current when
    any node's args or kwargs are assigned.
    """

    __slots__ = ("graph", "name", "op", "target", "_args", "_kwargs", "users", "meta")

    def __init__(self, graph: Graph, name: str, op: str, target: Any, args: tuple,
                 kwargs: dict[str, Any]) -> None:
        assert op in OPCODES, f"unknown node op {op!r}"
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self._args: tuple = ()
        self._kwargs: dict[str, Any] = {}
        self.users: dict[Node, None] = {}
        self.meta: dict[str, Any] = {}
        self._set_inputs(args, kwargs)

    @property
    def args(self) -> tuple:
        return self._args

    @args.setter
    def args(self, value: tuple) -> None:
        self._set_inputs(value, self._kwargs)

    @property
    def kwargs(self) -> dict[str, Any]:
        return self._kwargs

    @kwargs.setter
    def kwargs(self, value: dict[str, Any]) -> None:
        self._set_inputs(self._args, value)

    @property
    def all_input_nodes(self) -> list[Node]:
        """The distinct Nodes among args and kwargs, in order of first appearance."""
        found: dict[Node, None] = {}
        map_arg((self._args, self._kwargs), lambda n: found.setdefault(n, None))
        return list(found)

    def _set_inputs(self, args: tuple, kwargs: dict[str, Any]) -> None:
        for node in self.all_input_nodes:
            node.users.pop(self, None)
        self._args = tuple(args)
        self._kwargs = dict(kwargs)
        for node in self.all_input_nodes:
            node.users[self] = None

    def replace_input_with(self, old: Node, new: Any) -> None:
        """Read `new` wherever this node reads `old` (in args and kwargs)."""
        def swap(n: Node) -> Any:
            return new if n is old else n

        self._set_inputs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    def replace_all_uses_with(self, replacement: Any) -> list[Node]:
        """Make every user of this node read `replacement` instead; returns those users."""
        users = list(self.users)
        for user in users:
            user.replace_input_with(self, replacement)
        return users

    def is_impure(self) -> bool:
        """True when removing this node, even unused, would change what the graph does.

        Placeholders and the output always stay. An OpDef call is pure unless the op is
        marked `impure` (random ops consume generator state); other call targets are
        impure unless listed in PURE_FUNCTIONS (grad-mode switches and user functions
        may have side effects); get_attr nodes are pure.
        """
        if self.op == "call_function":
            if isinstance(self.target, OpDef):
                return bool(getattr(self.target, "impure", False))
            return not any(self.target is f for f in PURE_FUNCTIONS)
        return self.op != "get_attr"

    def __repr__(self) -> str:
        return f"%{self.name}"


class Graph:
    """An ordered list of `Node`s with the constants they read (`attrs`). See Note [Graph IR].

    New call_function/get_attr/output nodes are appended, or inserted before the node
    given to `inserting_before`; placeholders always go after the last placeholder.
    """

    def __init__(self) -> None:
        self._nodes: list[Node] = []
        self._used_names: set[str] = set()
        self._name_counters: dict[str, int] = {}
        self._insert_before: Node | None = None
        self.attrs: dict[str, Any] = {}

    # ----- building -------------------------------------------------------------------
    @property
    def nodes(self) -> tuple[Node, ...]:
        """The nodes in order (a snapshot: safe to erase nodes while iterating it)."""
        return tuple(self._nodes)

    @property
    def placeholders(self) -> list[Node]:
        return [n for n in self._nodes if n.op == "placeholder"]

    @property
    def output_node(self) -> Node | None:
        last = self._nodes[-1] if self._nodes else None
        return last if last is not None and last.op == "output" else None

    @property
    def outputs(self) -> tuple:
        """What a finished graph returns: its output node's args."""
        node = self.output_node
        assert node is not None, "a finished graph ends in its output node"
        return node.args

    def placeholder(self, name: str, val: Any = None) -> Node:
        """A graph input named after `name` (node.target keeps `name` exactly).

        val: the example value (a Tensor, real or fake, or a Python value) stored as
        `meta["val"]`. Inserted after the existing placeholders, so inputs discovered
        late in a trace still come first.
        """
        node = Node(self, self._unique_name(name), "placeholder", name, (), {})
        index = 0
        while index < len(self._nodes) and self._nodes[index].op == "placeholder":
            index += 1
        self._nodes.insert(index, node)
        if val is not None:
            node.meta["val"] = val
        return node

    def call_function(self, target: Callable, args: tuple, kwargs: dict[str, Any] | None = None,
                      name: str | None = None) -> Node:
        """A node computing `target(*args, **kwargs)`; named `name`, else after the target."""
        return self._create("call_function", target, args, kwargs or {},
                            name or target_name(target))

    def get_attr(self, name: str, value: Any) -> Node:
        """A node reading the constant or parameter `value`, stored in `self.attrs`.

        The key is `name`, or `name_1`, ... when `name` already holds a different object.
        meta["val"] is `value`.
        """
        key = name
        counter = 0
        while key in self.attrs and self.attrs[key] is not value:
            counter += 1
            key = f"{name}_{counter}"
        self.attrs[key] = value
        node = self._create("get_attr", key, (), {}, key)
        node.meta["val"] = value
        return node

    def output(self, values: tuple | list) -> Node:
        """The output node returning the flat tuple `values` (Nodes and constants)."""
        return self._create("output", "output", tuple(values), {}, "output")

    @contextmanager
    def inserting_before(self, node: Node) -> Iterator[None]:
        """Within the block, new non-placeholder nodes are inserted before `node`."""
        previous = self._insert_before
        self._insert_before = node
        try:
            yield
        finally:
            self._insert_before = previous

    def _create(self, op: str, target: Any, args: tuple, kwargs: dict[str, Any],
                name: str) -> Node:
        """A new node at the insertion point (checked before the node starts using its args)."""
        anchor = self._insert_before
        if anchor is None and self.output_node is not None:
            raise RuntimeError(
                f"Graph: cannot append a {op} node ({name}) after the output node; insert it "
                "with `with graph.inserting_before(graph.output_node):`")
        node = Node(self, self._unique_name(name), op, target, args, kwargs)
        if anchor is None:
            self._nodes.append(node)
        else:
            self._nodes.insert(self._nodes.index(anchor), node)
        return node

    def _unique_name(self, candidate: str) -> str:
        base = identifier(candidate)
        name = base
        while name in self._used_names or name in RESERVED_NAMES:
            count = self._name_counters.get(base, 0) + 1
            self._name_counters[base] = count
            name = f"{base}_{count}"
        self._used_names.add(name)
        return name

    # ----- editing --------------------------------------------------------------------
    def erase_node(self, node: Node) -> None:
        """Remove `node`, which must have no users; a get_attr's value goes with its last reader.

        Raises: RuntimeError if some node still reads it.
        """
        if node.users:
            users = ", ".join(repr(u) for u in node.users)
            raise RuntimeError(
                f"Graph.erase_node: {node!r} still has users ({users}); redirect them first, "
                "e.g. node.replace_all_uses_with(other)")
        if node.graph is not self or node not in self._nodes:
            raise RuntimeError(f"Graph.erase_node: {node!r} is not a node of this graph")
        node._set_inputs((), {})
        self._nodes.remove(node)
        if node.op == "get_attr" and not any(
                n.op == "get_attr" and n.target == node.target for n in self._nodes):
            del self.attrs[node.target]

    def eliminate_dead_code(self) -> bool:
        """Erase unused pure nodes (see `Node.is_impure`); True if anything was erased.

        One backward walk finds them (a node is dead when it is pure and only dead nodes
        read it, so a chain of dead nodes goes at once), then one pass drops them: O(n).
        """
        dead: set[Node] = set()
        for node in reversed(self._nodes):
            if not node.is_impure() and all(user in dead for user in node.users):
                dead.add(node)
        if not dead:
            return False
        for node in dead:
            node._set_inputs((), {})
        self._nodes = [node for node in self._nodes if node not in dead]
        read = {node.target for node in self._nodes if node.op == "get_attr"}
        for node in dead:
            if node.op == "get_attr" and node.target not in read:
                self.attrs.pop(node.target, None)
        return True

    def node_copy(self, node: Node, arg_transform: Callable[[Node], Any]) -> Node:
        """A copy of `node` (of another graph) in this one, its Node args mapped through
        `arg_transform` (torch.fx's Graph.node_copy). The copy keeps the name where it is
        free, the constant of a get_attr, and the meta that describes the value ("val")
        and its user line ("source"); facts about the source graph's eager versions
        (Note [Eager versions of a functional graph] in python_code.py) stay with that graph."""
        args = map_arg(node.args, arg_transform)
        if node.op == "placeholder":
            copy = self.placeholder(node.target)
        elif node.op == "get_attr":
            copy = self.get_attr(node.target, node.graph.attrs[node.target])
        elif node.op == "output":
            copy = self.output(args)
        else:
            copy = self.call_function(node.target, args, map_arg(node.kwargs, arg_transform),
                                      name=node.name)
        for key in ("val", "source"):
            if key in node.meta:
                copy.meta[key] = node.meta[key]
        return copy

    # ----- printing -------------------------------------------------------------------
    def __str__(self) -> str:
        """The listing: one aligned row per node with its type and the user's file:line.

        graph(x: f32[64, 128], w: f32[128, 10]):
          %mm   = call_function[matmul](%x, %w)   f32[64, 10]   train.py:12
          %relu = call_function[relu](%mm)        f32[64, 10]   train.py:13
          return (%relu,)
        """
        inputs = []
        for node in self.placeholders:
            described = describe_value(node.meta.get("val"))
            inputs.append(f"{node.name}: {described}" if described else node.name)
        rows = []
        footer = []
        for node in self._nodes:
            if node.op == "output":
                footer.append(f"  return {render(node.args, _listing_leaf)}")
            elif node.op != "placeholder":
                rows.append([f"%{node.name}", _listing_rhs(node),
                             describe_value(node.meta.get("val")),
                             short_location(node.meta.get("source"))])
        return "\n".join([f"graph({', '.join(inputs)}):", *_align(rows), *footer])


def target_name(target: Any) -> str:
    """A short readable name of a call target: an op's name, a function's `__name__`."""
    if isinstance(target, OpDef):
        return target.name
    return getattr(target, "__name__", type(target).__name__)


def describe_value(val: Any) -> str:
    """`f32[64, 10]` for a Tensor (`f32[] grad` if it requires grad), `(i64[2], f32[])`
    for a tuple of values, the type name (`int`) for other values, "" for None."""
    if val is None:
        return ""
    if isinstance(val, Tensor):
        dtype = val.dtype.name
        sizes = ", ".join(map(_listing_leaf, val.shape))  # a symbolic size as `s0`
        text = f"{DTYPE_SHORT_NAMES.get(dtype, dtype)}[{sizes}]"
        return f"{text} grad" if val.requires_grad else text
    if isinstance(val, (tuple, list)):
        inner = ", ".join(describe_value(v) or "None" for v in val)
        return f"({inner},)" if len(val) == 1 else f"({inner})"
    return type(val).__name__


def identifier(candidate: str) -> str:
    name = re.sub(r"\W", "_", candidate) or "_"
    if name[0].isdigit():
        name = f"_{name}"
    return f"{name}_" if keyword.iskeyword(name) else name


def short_location(location: Any) -> str:
    if location is None:
        return ""
    return f"{os.path.basename(location.filename)}:{location.lineno}"


def render(value: Any, leaf: Callable[[Any], str]) -> str:
    """Python-literal text of nested tuples/lists/dicts/slices; `leaf` renders the rest."""
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        items = [render(v, leaf) for v in value]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if isinstance(value, list):
        return f"[{', '.join(render(v, leaf) for v in value)}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{render(k, leaf)}: {render(v, leaf)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, slice):
        parts = (render(p, leaf) for p in (value.start, value.stop, value.step))
        return f"slice({', '.join(parts)})"
    return leaf(value)


def render_call(args: tuple, kwargs: dict[str, Any], leaf: Callable[[Any], str]) -> str:
    parts = [render(a, leaf) for a in args]
    parts += [f"{k}={render(v, leaf)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def _listing_leaf(value: Any) -> str:
    if isinstance(value, Node):
        return repr(value)
    if isinstance(value, symbolic.SymInt):
        return symbolic.render(value.expr, lambda k: f"s{k}")
    text = repr(value)
    # objects without a value repr would print their address: not deterministic
    return f"<{type(value).__name__}>" if _ADDRESS.search(text) else text


def _listing_rhs(node: Node) -> str:
    if node.op == "get_attr":
        return f"get_attr[{node.target}]"
    label = target_name(node.target)
    if getattr(node.target, "__module__", None) in ("operator", "_operator"):
        label = f"operator.{label}"
    return f"call_function[{label}]({render_call(node.args, node.kwargs, _listing_leaf)})"


def _align(rows: list[list[str]]) -> list[str]:
    """`  name = rhs   type   file:line` with every column padded to its widest entry;
    a column empty in every row is dropped."""
    if not rows:
        return []
    columns = [i for i in range(len(rows[0])) if i < 2 or any(row[i] for row in rows)]
    widths = {i: max(len(row[i]) for row in rows) for i in columns}
    lines = []
    for row in rows:
        cells = [row[i].ljust(widths[i]) for i in columns]
        lines.append(f"  {cells[0]} = {'   '.join(cells[1:])}".rstrip())
    return lines
