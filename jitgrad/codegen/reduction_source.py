"""The pieces of a reduction kernel's source: the module prelude, the group's operands
and element bodies (`ReductionSource`), and the steps of a kind's program (`Step`,
`Program`), which reduction_kinds.py writes per kind and reductions.py lowers into loops
(Note [Reduction kernels] in reductions.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from jitgrad.codegen.fusion import FusionGroup
from jitgrad.codegen.kernels import node_statements
from jitgrad.trace.ir.graph import Node

REDUCTION_PRELUDE = '''\
import math

import numpy as np
from numba import config as numba_config
from numba import njit, prange
from llvmlite import ir
from numba.extending import intrinsic

from jitgrad.codegen import mathlib

OPTIONS = dict(cache=True, error_model='numpy', nogil=True)
THREADS = numba_config.NUMBA_NUM_THREADS
BLOCK = 4096  # elements per partial sum (Note [Reduction kernels])


@intrinsic
def _accumulate(typingctx, total, term):
    # total + term with the "reassoc" flag alone, so the loop vectorizer may keep per-lane
    # partial sums (Note [Reduction kernels]); term is converted to total's type first
    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[1], signature.args[1], signature.args[0])
        return builder.fadd(args[0], value, flags=("reassoc",))

    return total(total, term), codegen


def _nan_ignoring(name):
    # llvm.maxnum: a NaN operand yields the other one; unlike a compare and select,
    # a loop reducing with them vectorizes without the no-NaNs flag (Note [Reduction kernels])
    @intrinsic
    def call(typingctx, a, b):
        def codegen(context, builder, signature, args):
            kind = args[0].type
            function = builder.module.declare_intrinsic(
                f"llvm.{name}", [kind], ir.FunctionType(kind, [kind, kind]))
            return builder.call(function, args)

        return a(a, b), codegen

    return call


_maxnum = _nan_ignoring("maxnum")
_minnum = _nan_ignoring("minnum")
'''


@dataclass(frozen=True)
class Operand:
    """One array argument of a reduction kernel.

    name: its parameter name; node: the graph value; space: "full" (broadcast to the
    iteration shape S), "reduced" (broadcast to `shape`, an output-space shape: S with the
    reduced dims squeezed or kept as 1) or "table" (a contiguous 1-D array indexed by
    value: cross-entropy's class weights).
    """

    name: str
    node: Node
    space: str
    shape: tuple[int, ...]


class ReductionSource:
    """The pieces of one reduction kernel's source (see `lower_reduction_group`)."""

    def __init__(self, group: FusionGroup) -> None:
        spec = group.spec
        assert spec is not None and group.reduction is not None, "not a reduction group"
        self.group, self.spec, self.reduction = group, spec, group.reduction
        self.shape = tuple(group.shape)
        members = set(group.nodes)
        core = {group.reduction, spec.companion}
        # the prologue is what the reduction reads, not what comes before it: an epilogue
        # member may precede the reduction in graph order (`z = y * 2; x.sum(1, True) + z`)
        feeds = _ancestors_in([n for n in core if n is not None], members)
        self.prologue = [n for n in group.nodes if n not in core and n in feeds]
        self.epilogue = [n for n in group.nodes if n not in core and n not in feeds]
        self.dtype = spec.source.meta["val"].dtype.np
        self.operands: list[Operand] = []
        if spec.kind == "cross_entropy":
            rows = (self.shape[0],)
            self.operands += [Operand("out0", group.reduction, "reduced", rows),
                              Operand("out1", group.reduction, "reduced", rows)]
        else:
            for k, node in enumerate(group.outputs):
                space = "full" if spec.normalizing else "reduced"
                self.operands.append(Operand(f"out{k}", node, space,
                                              tuple(node.meta["val"].shape)))
        self._inputs: dict[tuple[Node, str, tuple[int, ...]], Operand] = {}
        for node in self.prologue:
            self._read(node, "full", self.shape, members)
        if spec.source not in members:
            self._input(spec.source, "full", self.shape)
        if spec.kind == "layer_norm":
            for arg in group.reduction.args[1:]:
                if isinstance(arg, Node):
                    self._input(arg, "full", self.shape)
        for node in self.epilogue:
            if spec.normalizing:
                self._read(node, "full", self.shape, members)
            else:
                self._read(node, "reduced", tuple(node.meta["val"].shape), members)
        if spec.kind == "cross_entropy":
            _, target, weight = group.reduction.args
            self._input(target, "reduced", (self.shape[0],))
            if weight is not None:
                self._input(weight, "table", ())

    def _read(self, node: Node, space: str, shape: tuple[int, ...], members: set) -> None:
        for arg in node.all_input_nodes:
            if arg not in members:
                self._input(arg, space, shape)

    def _input(self, node: Node, space: str, shape: tuple[int, ...]) -> Operand:
        key = (node, space, shape)
        if key not in self._inputs:
            name = "table0" if space == "table" else f"in{len(self._inputs)}"
            operand = Operand(name, node, space, shape)
            self._inputs[key] = operand
            self.operands.append(operand)
        return self._inputs[key]

    def constant_along_rows(self, op: Operand) -> bool:
        """Whether full-space input `op` has one value per output element: broadcast along
        every reduced dim (the mean in `x - x.mean(-1, True)`), so `kernel_rows` reads it
        once per row (Note [Reduction kernels])."""
        if op.space != "full" or not op.name.startswith("in"):
            return False
        shape = tuple(getattr(op.node.meta.get("val"), "shape", ()))
        aligned = (1,) * (len(self.shape) - len(shape)) + shape
        return all(aligned[d] == 1 for d in self.spec.dims)

    @property
    def strided(self) -> list[Operand]:
        """The operands with offsets and strides (all but tables), in argument order."""
        return [op for op in self.operands if op.space != "table"]

    # ----- element bodies -------------------------------------------------------------

    def prologue_body(self) -> list[str]:
        """Statements computing `v`, the reduced value at one element (`{inK}` = operands)."""
        names: dict[Node, str] = {}
        lines = []
        for op in self.strided:
            if op.space == "full" and op.name.startswith("in") and op.node not in names \
                    and self._reads_in_prologue(op.node):
                names[op.node] = f"x{op.name[2:]}"
                lines.append(f"{names[op.node]} = {{{op.name}}}")
        lines += node_statements(self.prologue, names, "p")
        lines.append(f"v = {names[self.spec.source]}")
        return lines

    def _reads_in_prologue(self, node: Node) -> bool:
        return node is self.spec.source or any(node in n.all_input_nodes for n in self.prologue)

    def epilogue_body(self, results: dict[Node, str], space: str) -> list[str]:
        """Statements of the epilogue and the output writes, given the locals holding the
        reduction's results; operands of `space` are `{inK}`/`{outK}` placeholders."""
        names = dict(results)
        lines = []
        for op in self.strided:
            if op.space == space and op.name.startswith("in") and op.node not in names \
                    and any(op.node in n.all_input_nodes for n in self.epilogue):
                names[op.node] = f"y{op.name[2:]}"
                lines.append(f"{names[op.node]} = {{{op.name}}}")
        lines += node_statements(self.epilogue, names, "e")
        for op in self.strided:
            if op.name.startswith("out"):
                lines.append(f"{{{op.name}}} = {names[op.node]}")
        return lines


def _ancestors_in(roots: list[Node], members: set[Node]) -> set[Node]:
    """The members that `roots` read, directly or through other members."""
    found: set[Node] = set()
    stack = [a for root in roots for a in root.all_input_nodes]
    while stack:
        node = stack.pop()
        if node in members and node not in found:
            found.add(node)
            stack.extend(node.all_input_nodes)
    return found


@dataclass
class Step:
    """One step of a kind's program for one output element.

    A code step (`is_pass` False) runs `lines` once; a pass runs them at every reduced
    element, after the prologue's `v` (unless `prologue` is False). writes: the pass reads
    or writes full-space outputs; partial: (name, dtype, total) makes `name` a per-block
    partial sum added to the float64 `total` (see `_pass`); condition: an expression of the
    state, the pass runs only when it holds (in the column variant: for any column).
    """

    lines: list[str]
    is_pass: bool = False
    writes: bool = False
    prologue: bool = True
    partial: tuple[str, str, str] | None = None
    condition: str | None = None  # a pass runs only where it holds (for some column)


@dataclass
class Program:
    """What a reduction kind computes per output element: `steps`, whose locals named in
    `state` ((name, numpy dtype) pairs) live across steps. columns: whether the column
    variant exists (Note [Reduction kernels])."""

    state: list[tuple[str, str]]
    steps: list[Step]
    columns: bool = True


def fill(line: str, access: dict[str, str]) -> str:
    """`line` with its `{operand}` placeholders replaced by element accesses."""
    return line.format_map(access)
