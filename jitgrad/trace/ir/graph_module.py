"""`GraphModule`: a Graph compiled into a real Python function that runs eager ops.

The function is `generate_python(graph)` compiled under a readable file name,
`<jitgrad graph forward_3>`, whose source is registered in `linecache`, so a traceback
through a graph shows the generated line (`relu = ops.relu(mm)  # train.py:13`), and that
line names the user's file:line; an error raised in it is re-raised with that line
(Note [Errors at the user's line] in user_lines.py).
"""

from __future__ import annotations

import itertools
import linecache
import weakref
from collections.abc import Callable
from typing import Any

from jitgrad.trace.ir.graph import Graph
from jitgrad.trace.ir.lint import lint
from jitgrad.trace.ir.python_code import generate_python
from jitgrad.trace.runtime import user_lines

_FORWARD_IDS = itertools.count()


class GraphModule:
    """A Graph plus the function its generated Python (`generate_python`) defines, made
    when `forward` or `code` is first read.

    graph: the Graph (linted when the GraphModule is made); attrs: values of its get_attr nodes,
    `graph.attrs` updated with the `attrs` argument (e.g. other parameters of the same
    names). `forward(*inputs) -> tuple` (also `gm(*inputs)`) takes one value per
    placeholder, in order, and returns the output tuple; it calls OpDefs eagerly, so
    autograd records through it. `code` is the source; `str(gm)` the graph listing.
    Raises: RuntimeError (from `lint`, ir/lint.py) for a malformed graph.
    """

    def __init__(self, graph: Graph, attrs: dict[str, Any] | None = None) -> None:
        self.graph = graph
        self.attrs = dict(graph.attrs)
        if attrs:
            self.attrs.update(attrs)
        self.recompile()

    def recompile(self) -> None:
        """Check the graph and drop the generated function (after a pass edited the graph);
        `code` and `forward` are generated again when first read. A backend that compiles
        the graph its own way (the numba backend's program) never pays for them."""
        lint(self.graph, meta=True)
        self._generated: tuple[str, Callable[..., tuple]] | None = None

    @property
    def code(self) -> str:
        return self._generate()[0]

    @property
    def forward(self) -> Callable[..., tuple]:
        return self._generate()[1]

    def _generate(self) -> tuple[str, Callable[..., tuple]]:
        if self._generated is not None:
            return self._generated
        source, namespace, line_nodes = generate_python(self.graph)
        namespace["attrs"] = self.attrs
        name = f"forward_{next(_FORWARD_IDS)}"
        filename = f"<jitgrad graph {name}>"
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our generated code
        # taken out of its own globals: no reference cycle, so it is freed without gc
        forward: Callable[..., tuple] = namespace.pop("forward")
        forward.__code__ = forward.__code__.replace(co_name=name, co_qualname=name)
        forward.__qualname__ = forward.__name__ = name
        # mtime None: linecache.checkcache keeps the entry (no file to compare against)
        linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True),
                                     filename)
        weakref.finalize(forward, linecache.cache.pop, filename, None)
        # See Note [Errors at the user's line]
        user_lines.register(filename, [None if node is None else node.meta.get("source")
                                       for node in line_nodes], forward)
        self._generated = (source, forward)
        return self._generated

    def __call__(self, *inputs: Any) -> tuple:
        return self.forward(*inputs)

    def __str__(self) -> str:
        return str(self.graph)

    def __repr__(self) -> str:
        return f"GraphModule({self.forward.__name__}, {len(self.graph.nodes)} nodes)"
