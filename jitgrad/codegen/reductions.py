"""Kernels for reduction groups: sum, mean, amax/amin, argmax/argmin (max/min with dim),
var/std, logsumexp, softmax, log_softmax, layer_norm and cross-entropy, over any dims.

Note [Reduction kernels]: a reduction group (Note [Reduction fusion] in fusion.py)
iterates over its input's shape S, split into *kept* dims (one output element each) and
*reduced* dims. Every operand reaches the kernel as a flat array plus an element offset
and one element stride per dim of S: inputs of the prologue (and layer_norm's weight and
bias) broadcast to S; outputs and epilogue inputs of a reducing kind live in the output
space, so their stride along every reduced dim is 0. The wrapper (`ReductionKernel.
__call__`) permutes the kept dims first, coalesces the kept dims and the reduced dims
separately (as `kernels.coalesce` does for pointwise kernels) and passes sizes and
strides as arrays: the loops decompose the flat output index and the flat row index over
them, so the kernel source depends only on the group's ops and dtypes, not on the rank,
the dims or the layout, and one compiled kernel per reduction kind and dtype serves every
call (e.g. `x.sum(0)`, `x.sum((1, 2), keepdim=True)` and `x.t().sum()`); sum/mean,
var/std, amax/amin and argmax/argmin share a kernel, told apart by runtime scalars.

For each output element the kernel makes one or more passes over the reduced elements,
row by row along the innermost reduced dim; a row whose operands all have stride 1 is
sliced out first so the loop vectorizes (Note [Kernel layout]); the prologue is
recomputed in each pass, never stored. Numerically stable forms:
- sums (sum, mean, var, std, layer_norm's statistics, softmax's denominator) accumulate
  in float64, also for float32 inputs, so a float32 sum of 2^24 elements has the error of
  one final rounding (numpy's pairwise float32 sum: a few ulps); float64 accumulates in
  the vectorizer's partial sums, tested against math.fsum. The kernels compile without
  fast-math flags (Note [No fast-math in pointwise code] in kernels.py): only the adds
  into an accumulator (`_accumulate`: sums, sums of squares, the NaN check's sum) carry
  `reassoc`, which lets the loop vectorizer split them into per-lane partial sums, so the
  prologue, the epilogue and the normalizing passes compute what eager computes;
- var/std are two-pass (mean first, then squared deviations), divided by max(0, N -
  correction) as the eager op (0/0 = NaN, x/0 = inf);
- max/min propagate NaN (`v > m or v != v`), argmax/argmin take the first extremum and
  the first NaN, as numpy and PyTorch;
- softmax, log_softmax, logsumexp and cross-entropy subtract the max (an all -inf slice:
  softmax NaN as eager, logsumexp -inf); log_softmax writes `(x - max) - log(sum)`, two
  subtractions in that order (`x - (max + log(sum))` loses digits for inputs of large
  magnitude, measured: 3e-4 absolute error on rows near 1e4 in float32);
- cross-entropy (nll_loss of a log_softmax over the classes of an (N, C) input) computes
  each row's `-(x[t] - max - log(sum)) * w[t]` without materializing the
  log-probabilities, then sums the rows in float64 (mean divides by the summed weights of
  the kept targets, NaN when all are ignored); a class id outside [0, C) raises
  IndexError "Target 7 is out of bounds." as the eager op's check does.
Each kind is a `_Program`: steps (code, or passes over the slice) whose cross-step locals
are its `state`. The row variant (`kernel`) runs the steps once per output element. When
the reduced dims are strided but the innermost kept dim is contiguous (`x.sum(0)` of a
C-contiguous matrix, bias gradients), rows would walk memory column by column; the column
variant (`kernel_columns`) instead takes nk = the innermost kept dim's size output
elements at once, makes each state local an array over them (`st_mx[k]`), and loops over
the nk contiguous columns innermost, so the loads stay consecutive and vectorize
(measured on 4096x4096 float32: x.sum(0) 580 ms in rows, 13 ms in columns, numpy 12 ms).
The wrapper picks the variant per layout. Above PARALLEL_THRESHOLD input elements, with
several output elements (column blocks) and more than one numba thread, the `prange`
twin of either variant shares them out. The common layout, one coalesced kept dim and one
contiguous reduced dim (`x.sum(-1)`, `x.sum()`, softmax over the last dim of a contiguous
tensor, with inputs broadcast along the reduced dim read once per row), takes
`kernel_rows`: the row variant without the index decomposition and the strided branch,
which compiles in less than half the time (measured: 0.31 s against 0.77 s
for a float32 sum; Note [Kernel variants] in kernels.py) and runs the same statements in
the same order.
"""

from __future__ import annotations

import ast
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from jitgrad.codegen import cache, progress
from jitgrad.codegen.fusion import FusionGroup, describe_node
from jitgrad.codegen.kernels import (
    PARALLEL_THRESHOLD,
    allocate,
    coalesce,
    dim_order,
    flat_view,
    log_kernel,
    node_statements,
)
from jitgrad.codegen.reduction_rules import ReductionSpec
from jitgrad.eager.tensor import Tensor
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
class _Operand:
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


class _Source:
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
        self.operands: list[_Operand] = []
        if spec.kind == "cross_entropy":
            rows = (self.shape[0],)
            self.operands += [_Operand("out0", group.reduction, "reduced", rows),
                              _Operand("out1", group.reduction, "reduced", rows)]
        else:
            for k, node in enumerate(group.outputs):
                space = "full" if spec.normalizing else "reduced"
                self.operands.append(_Operand(f"out{k}", node, space,
                                              tuple(node.meta["val"].shape)))
        self._inputs: dict[tuple[Node, str, tuple[int, ...]], _Operand] = {}
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

    def _input(self, node: Node, space: str, shape: tuple[int, ...]) -> _Operand:
        key = (node, space, shape)
        if key not in self._inputs:
            name = "table0" if space == "table" else f"in{len(self._inputs)}"
            operand = _Operand(name, node, space, shape)
            self._inputs[key] = operand
            self.operands.append(operand)
        return self._inputs[key]

    def constant_along_rows(self, op: _Operand) -> bool:
        """Whether full-space input `op` has one value per output element: broadcast along
        every reduced dim (the mean in `x - x.mean(-1, True)`), so `kernel_rows` reads it
        once per row (Note [Reduction kernels])."""
        if op.space != "full" or not op.name.startswith("in"):
            return False
        shape = tuple(getattr(op.node.meta.get("val"), "shape", ()))
        aligned = (1,) * (len(self.shape) - len(shape)) + shape
        return all(aligned[d] == 1 for d in self.spec.dims)

    @property
    def strided(self) -> list[_Operand]:
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
class _Step:
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
class _Program:
    """What a reduction kind computes per output element: `steps`, whose locals named in
    `state` ((name, numpy dtype) pairs) live across steps. columns: whether the column
    variant exists (Note [Reduction kernels])."""

    state: list[tuple[str, str]]
    steps: list[_Step]
    columns: bool = True


def lower_reduction_group(group: FusionGroup) -> tuple[str, str]:
    """The kernel module computing reduction `group` (Note [Reduction kernels]): (header,
    body), as `kernels.lower_group` returns them.

    The module defines `kernel(outer_sizes, reduce_sizes, strides, offsets, scalars,
    <operands>)`, `kernel_parallel` (prange over output elements), `kernel_rows` (one kept
    and one dense reduced dim, same arguments), and, except for
    cross-entropy, `kernel_columns` and `kernel_columns_parallel` (the innermost kept dim
    is the inner loop, with per-column state). outer_sizes and reduce_sizes are int64
    (>= 1 dims each), strides int64 (strided operands, outer dims + reduced dims) in
    elements, offsets int64 (strided operands,), scalars float64 (the reduced count, then
    the kind's parameters: sum/mean's divisor, var/std's divisor and square-root flag,
    the sign of amax/amin/argmax/argmin, layer_norm's eps, cross-entropy's ignore_index
    and reduction code). Operands: out0, ... (outputs), in0, ... (inputs),
    then for cross-entropy table0 (class weights, if any), total (1,) and bad (2,) int64
    (a flag and the first bad class id).
    """
    source = _Source(group)
    spec = source.spec
    header = [f"# jitgrad kernel {group.name} over {list(group.shape)} reducing dims "
              f"{spec.dims} ({spec.kind}): {len(group.nodes)} fused node(s)"]
    header += [f"#   {describe_node(n)}" for n in group.nodes]
    roles = {"out0": "per-row losses of ", "out1": "per-row weights of "} \
        if spec.kind == "cross_entropy" else {}
    header += [f"# {op.name} = {roles.get(op.name, '')}%{op.node.name} ({op.space})"
               for op in source.operands]
    strided = source.strided
    params = [op.name for op in source.operands]
    if spec.kind == "cross_entropy":
        params += ["total", "bad"]
    lines = [REDUCTION_PRELUDE]
    program = _KINDS[spec.kind](source)
    variants = [("kernel", "range", "", "general"),
                ("kernel_parallel", "prange", ", parallel=True", "general"),
                ("kernel_rows", "range", "", "rows")]
    if program.columns:
        variants += [("kernel_columns", "range", "", "columns"),
                     ("kernel_columns_parallel", "prange", ", parallel=True", "columns")]
    for name, loop, extra, layout in variants:
        columns = layout == "columns"
        lines += ["", f"@njit(**OPTIONS{extra})",
                  f"def {name}(outer_sizes, reduce_sizes, strides, offsets, scalars, "
                  f"{', '.join(params)}):"]
        if layout == "rows":
            lines += _rows_setup(strided)
        else:
            lines += _setup(strided, columns)
        lines.append(f"    for o in {loop}({'n_blocks' if columns else 'n_outer_total'}):")
        if layout == "rows":
            lines += [f"        b_{op.name} = offsets[{k}] + o * strides[{k}, 0]"
                      for k, op in enumerate(strided)]
        else:
            lines += _outer_offsets(strided, columns)
        if columns:
            lines += [f"        st_{name_} = np.empty(nk, {dtype})"
                      for name_, dtype in program.state]
            body = _column_steps(source, program)
        else:
            body = _row_steps(source, program, rows=layout == "rows")
        lines += [f"        {line}" for line in body]
        if spec.kind == "cross_entropy":
            lines += _cross_entropy_total(source)
        lines.append("")
    return "\n".join(header) + "\n", "\n".join(lines)


def _setup(strided: list[_Operand], columns: bool) -> list[str]:
    lines = ["    n_outer = outer_sizes.shape[0]",
             "    n_reduce = reduce_sizes.shape[0]",
             "    n_outer_total = 1",
             "    for d in range(n_outer):",
             "        n_outer_total *= outer_sizes[d]",
             "    m = reduce_sizes[n_reduce - 1]",
             "    rows = 1 if m > 0 else 0",
             "    for d in range(n_reduce - 1):",
             "        rows *= reduce_sizes[d]",
             "    count = scalars[0]"]
    lines += [f"    s_{op.name} = strides[{k}, n_outer + n_reduce - 1]"
              for k, op in enumerate(strided)]
    full = [op for op in strided if op.space == "full"]
    if columns:
        lines += ["    nk = outer_sizes[n_outer - 1]",
                  "    n_blocks = n_outer_total // nk if nk > 0 else 0"]
        lines += [f"    t_{op.name} = strides[{k}, n_outer - 1]" for k, op in enumerate(strided)]
        dense = " and ".join(f"t_{op.name} == 1" for op in full) or "True"
    else:
        dense = " and ".join(f"s_{op.name} == 1" for op in full) or "True"
    lines.append(f"    dense = {dense}")
    return lines


def _rows_setup(strided: list[_Operand]) -> list[str]:
    """The setup of `kernel_rows`: one kept dim, one reduced dim (contiguous, or of size 1)."""
    lines = ["    n_outer_total = outer_sizes[0]",
             "    m = reduce_sizes[0]",
             "    count = scalars[0]"]
    return lines + [f"    s_{op.name} = strides[{k}, 1]" for k, op in enumerate(strided)]


def _outer_offsets(strided: list[_Operand], columns: bool) -> list[str]:
    """b_<operand>: the offsets of output element `o` (of column block `o`)."""
    lines = ["        q = o + 0  # a copy: numba refuses to update an alias of the prange index"]
    lines += [f"        b_{op.name} = offsets[{k}]" for k, op in enumerate(strided)]
    last = "n_outer - 2" if columns else "n_outer - 1"
    lines += [f"        for d in range({last}, -1, -1):",
              "            size = outer_sizes[d]",
              "            i = q % size",
              "            q //= size"]
    lines += [f"            b_{op.name} += i * strides[{k}, d]" for k, op in enumerate(strided)]
    return lines


def _row_steps(source: _Source, program: _Program, rows: bool = False) -> list[str]:
    """The steps for one output element; `rows`: of `kernel_rows`, one dense row."""
    reduced = {op.name: f"{op.name}[b_{op.name}]" for op in source.strided
               if op.space == "reduced"}
    walk = _dense_row_pass if rows else _pass
    lines = []
    for step in program.steps:
        if step.is_pass and step.condition is not None:
            lines += [f"if {step.condition}:", *(f"    {line}" for line in walk(source, step))]
        elif step.is_pass:
            lines += walk(source, step)
        else:
            lines += [_fill(line, reduced) for line in step.lines]
    return lines


def _column_steps(source: _Source, program: _Program) -> list[str]:
    """The steps with each state local `x` an array `st_x[k]` over the nk columns: each
    per-column block loads the state it reads and stores the state it writes."""
    state = [name for name, _ in program.state]
    reduced = {op.name: f"{op.name}[b_{op.name} + k * t_{op.name}]" for op in source.strided
               if op.space == "reduced"}
    lines = []
    for step in program.steps:
        if step.is_pass and step.condition is not None:
            lines += ["any_column = False", "for k in range(nk):",
                      *(f"    {line}" for line in _per_column(
                          [f"any_column |= {step.condition}"], state)),
                      "if any_column:",
                      *(f"    {line}" for line in _column_pass(source, step, state))]
        elif step.is_pass:
            lines += _column_pass(source, step, state)
        else:
            lines.append("for k in range(nk):")
            lines += [f"    {line}" for line in _per_column(
                [_fill(line, reduced) for line in step.lines], state)]
    return lines


def _per_column(block: list[str], state: list[str]) -> list[str]:
    """`block` (whole statements) for column k: the state locals it reads loaded from
    their `st_` arrays first, those it assigns stored back after (found by parsing it)."""
    tree = ast.parse("\n".join(block))
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    written = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
               and isinstance(n.ctx, ast.Store)}
    return [*(f"{name} = st_{name}[k]" for name in state if name in used), *block,
            *(f"st_{name}[k] = {name}" for name in state if name in written)]


def _pass_operands(source: _Source, step: _Step) -> list[tuple[int, _Operand]]:
    return [(k, op) for k, op in enumerate(source.strided) if op.space == "full"
            and (step.writes or op.name.startswith("in"))]


def _row_offsets(operands: list[tuple[int, _Operand]]) -> list[str]:
    """c_<operand>: the offsets of row `r` of the reduced elements."""
    lines = ["for r in range(rows):", "    q = r"]
    lines += [f"    c_{op.name} = b_{op.name}" for _, op in operands]
    lines += ["    for d in range(n_reduce - 2, -1, -1):",
              "        size = reduce_sizes[d]",
              "        i = q % size",
              "        q //= size"]
    lines += [f"        c_{op.name} += i * strides[{k}, n_outer + d]" for k, op in operands]
    return lines


def _pass(source: _Source, step: _Step) -> list[str]:
    """A loop over the reduced elements of output element `o`: the prologue's `v` at each
    (unless `step.prologue` is False), then the step's lines.

    Rows are walked in blocks of BLOCK elements; with `step.partial` = (name, dtype,
    total), `name` is a per-block partial sum of that dtype, set to 0 before each block
    and added to `total` (float64) after it, so a float32 partial's error stays that of
    BLOCK elements (blocked summation).
    """
    operands = _pass_operands(source, step)
    lines = _row_offsets(operands)
    element = (source.prologue_body() if step.prologue else []) + step.lines
    partial = step.partial
    start = [] if partial is None else [f"{partial[0]} = {partial[1]}(0.0)"]
    flush = [] if partial is None else [f"{partial[2]} += np.float64({partial[0]})"]
    lines += ["    for j0 in range(0, m, BLOCK):",
              "        n_j = min(BLOCK, m - j0)",
              "        if dense:"]
    lines += [f"            row_{op.name} = {op.name}[c_{op.name} + j0:c_{op.name} + j0 + n_j]"
              for _, op in operands]
    lines += [f"            {line}" for line in start]
    lines.append("            for j in range(n_j):")
    dense = {op.name: f"row_{op.name}[j]" for _, op in operands} | {"index": "r * m + j0 + j"}
    lines += [f"                {_fill(line, dense)}" for line in element]
    lines += [f"            {line}" for line in flush]
    lines.append("        else:")
    lines += [f"            {line}" for line in start]
    lines.append("            for j in range(n_j):")
    strided = {op.name: f"{op.name}[c_{op.name} + (j0 + j) * s_{op.name}]"
               for _, op in operands} | {"index": "r * m + j0 + j"}
    lines += [f"                {_fill(line, strided)}" for line in element]
    lines += [f"            {line}" for line in flush]
    return lines


def _dense_row_pass(source: _Source, step: _Step) -> list[str]:
    """`_pass` over the one row of `kernel_rows`, which starts at `b_<operand>` and whose
    elements are consecutive: the blocks and statements of `_pass`'s dense branch."""
    operands = _pass_operands(source, step)
    element = (source.prologue_body() if step.prologue else []) + step.lines
    partial = step.partial
    constant = {op.name for _, op in operands if source.constant_along_rows(op)}
    lines = ["for j0 in range(0, m, BLOCK):", "    n_j = min(BLOCK, m - j0)"]
    lines += [f"    row_{op.name} = {op.name}[b_{op.name}]" if op.name in constant else
              f"    row_{op.name} = {op.name}[b_{op.name} + j0:b_{op.name} + j0 + n_j]"
              for _, op in operands]
    if partial is not None:
        lines.append(f"    {partial[0]} = {partial[1]}(0.0)")
    lines.append("    for j in range(n_j):")
    dense = {op.name: f"row_{op.name}" if op.name in constant else f"row_{op.name}[j]"
             for _, op in operands} | {"index": "j0 + j"}
    lines += [f"        {_fill(line, dense)}" for line in element]
    if partial is not None:
        lines.append(f"    {partial[2]} += np.float64({partial[0]})")
    return lines


def _column_pass(source: _Source, step: _Step, state: list[str]) -> list[str]:
    """The column variant of `_pass`: for each reduced element, a loop over the nk
    columns (contiguous when `dense`), updating per-column state; a partial sum is one
    term long, added to its float64 total at once."""
    operands = _pass_operands(source, step)
    element = (source.prologue_body() if step.prologue else []) + step.lines
    if step.partial is not None:
        name, dtype, total = step.partial
        element = [f"{name} = {dtype}(0.0)", *element, f"{total} += np.float64({name})"]
    lines = _row_offsets(operands)
    lines.append("    for jj in range(m):")
    lines += [f"        e_{op.name} = c_{op.name} + jj * s_{op.name}" for _, op in operands]
    lines.append("        if dense:")
    lines += [f"            row_{op.name} = {op.name}[e_{op.name}:e_{op.name} + nk]"
              for _, op in operands]
    lines.append("            for k in range(nk):")
    dense = {op.name: f"row_{op.name}[k]" for _, op in operands} | {"index": "r * m + jj"}
    lines += [f"                {line}" for line in _per_column(
        [_fill(line, dense) for line in element], state)]
    lines += ["        else:", "            for k in range(nk):"]
    strided = {op.name: f"{op.name}[e_{op.name} + k * t_{op.name}]"
               for _, op in operands} | {"index": "r * m + jj"}
    lines += [f"                {line}" for line in _per_column(
        [_fill(line, strided) for line in element], state)]
    return lines


def _fill(line: str, access: dict[str, str]) -> str:
    """`line` with its `{operand}` placeholders replaced by element accesses."""
    return line.format_map(access)


def _writes(source: _Source, results: dict[Node, str]) -> list[str]:
    """The epilogue and output writes of a reducing kind (reduced-space placeholders)."""
    return source.epilogue_body(results, "reduced")


def _typed(source: _Source) -> str:
    return f"np.{source.dtype.name}"


def _math(source: _Source, name: str, argument: str) -> str:
    suffix = {"float32": "f32", "float64": "f64"}[source.dtype.name]
    return f"mathlib.{name}_{suffix}({_typed(source)}({argument}))"


def _code(*lines: str) -> _Step:
    return _Step(list(lines))


def _max_steps(source: _Source, signed: bool = False, nan_check: bool = True
               ) -> list[_Step]:
    """`mx`: the NaN-propagating max of v (of `v * scalars[1]` when `signed`) over the slice.

    The pass reduces with llvm.maxnum, which vectorizes (a select on `v > mx or v != v`
    does not, nor does any NaN test in the same loop: measured 5-15x slower) but ignores
    NaN. With `nan_check`, a second pass sums v into `chk` (vectorized; NaN only if a NaN
    or infinities of both signs were seen) and, rarely, a third looks for a NaN, which
    makes the result NaN as numpy's maximum.reduce. softmax, log_softmax, logsumexp and
    cross-entropy skip the check: a NaN in the slice makes their sum of exp(v - mx), and
    so every result of the slice, NaN as eager's.
    """
    t = _typed(source)
    value = f"v * {t}(scalars[1])" if signed else "v"
    if any("mathlib." in line for line in source.prologue_body()):
        # LLVM's loop vectorizer (llvmlite 0.49, 0.50) aborts the process on maxnum
        # reductions of some math library results (cos, sin, erf: "VPlan cost model and
        # legacy cost model disagreed"): these reduce with a compare and select, which
        # ignores NaN as maxnum does and is not vectorized
        combine = f"mx = {value} if {value} > mx else mx"
    else:
        combine = f"mx = _maxnum(mx, {value})"
    steps = [_code(f"mx = {t}(-np.inf)"), _Step([combine], is_pass=True)]
    if nan_check:
        steps += [_code(f"chk = {t}(0.0)", "has_nan = False"),
                  _Step(["chk = _accumulate(chk, v)"], is_pass=True),
                  _Step(["has_nan |= v != v"], is_pass=True, condition="chk != chk"),
                  _code("if has_nan:", f"    mx = {t}(np.nan)")]
    return steps


def _max_state(source: _Source, nan_check: bool = True) -> list[tuple[str, str]]:
    state = [("mx", _typed(source))]
    return state + [("chk", _typed(source)), ("has_nan", "np.bool_")] if nan_check else state


def _sum_steps(term: str = "v", partial: str = "np.float64") -> list[_Step]:
    """`acc`: the float64 sum of `term` over the slice, from per-block partial sums of
    dtype `partial` (float64 for user-visible sums; the input dtype for sums of exp, whose
    terms lie in [0, 1], as eager's own float32 sums)."""
    return [_code("acc = np.float64(0.0)"),
            _Step([f"part = _accumulate(part, {partial}({term}))"], is_pass=True,
                  partial=("part", partial, "acc"))]


def _squares_steps() -> list[_Step]:
    """`mean` and `sq` (the sum of squared deviations from it), in float64: two passes."""
    return [*_sum_steps(), _code("mean = acc / count", "sq = np.float64(0.0)"),
            _Step(["dev = np.float64(v) - mean", "sq = _accumulate(sq, dev * dev)"], is_pass=True)]


_SQUARES_STATE = [("acc", "np.float64"), ("mean", "np.float64"), ("sq", "np.float64")]


# Kinds that differ only by a runtime scalar share one kernel source (fewer compiles):
# sum/mean divide by scalars[1] (1 or the count), var/std take the square root when
# scalars[2] is set, amin/argmin are amax/argmax of v * scalars[1] (-1: exact, NaN stays).


def _narrow_float(source: _Source) -> bool:
    """Whether eager computes this reduction's float16/float32 statistics in float32."""
    return source.dtype.kind == "f" and source.dtype.itemsize < 8


def _eager_mean(source: _Source, count: str) -> str:
    """eager's mean of the float64 sum `acc` (jitgrad/eager/ops/reduction.py): for
    float16/float32 the sum is rounded to float32 (PyTorch's accumulation type) before the
    division, so an overflowing sum gives inf as eager's does."""
    return f"np.float32(acc) / np.float32({count})" if _narrow_float(source) else \
        f"acc / {count}"


def _sum_kind(source: _Source) -> _Program:
    t = _typed(source)
    return _Program([("acc", "np.float64")], [
        *_sum_steps(), _code(f"res = {t}({_eager_mean(source, 'scalars[1]')})",
                             *_writes(source, {source.reduction: "res"}))])


def _var_kind(source: _Source) -> _Program:
    # eager's corrected two-pass mean (jitgrad/eager/ops/reduction.py): a pass summing the
    # deviations from the first mean corrects its rounding, so equal values give exactly 0
    return _Program(_SQUARES_STATE, [
        *_sum_steps(), _code("mean = acc / count", "acc = np.float64(0.0)"),
        _Step(["dev = np.float64(v) - mean", "acc = _accumulate(acc, dev)"], is_pass=True),
        _code("mean = mean + acc / count", "sq = np.float64(0.0)"),
        _Step(["dev = np.float64(v) - mean", "sq = _accumulate(sq, dev * dev)"], is_pass=True),
        _code("variance = sq / scalars[1]",
              f"res = {_typed(source)}(math.sqrt(variance) if scalars[2] != 0.0 else variance)",
              *_writes(source, {source.reduction: "res"}))])


def _extremum_kind(source: _Source) -> _Program:
    t = _typed(source)
    return _Program(_max_state(source), [
        *_max_steps(source, signed=True),
        _code(f"res = mx * {t}(scalars[1])", *_writes(source, {source.reduction: "res"}))])


def _arg_kind(source: _Source) -> _Program:
    t = _typed(source)
    results = {source.reduction: "ix"}
    if source.spec.companion is not None:
        results[source.spec.companion] = "value"
    return _Program([("mx", t), ("ix", "np.int64")], [
        _code(f"mx = {t}(-np.inf)", "ix = np.int64(0)"),
        _Step([f"w = v * {t}(scalars[1])", "if w > mx or (w != w and mx == mx):", "    mx = w",
               "    ix = {index}"], is_pass=True),
        _code(f"value = mx * {t}(scalars[1])", *_writes(source, results))])


def _logsumexp_kind(source: _Source) -> _Program:
    t = _typed(source)
    return _Program([*_max_state(source, False), ("shift", t), ("acc", "np.float64")], [
        *_max_steps(source, nan_check=False),
        _code(f"shift = mx if (mx == mx and abs(mx) != np.inf) else {t}(0.0)"),
        *_sum_steps(_math(source, "exp", "v - shift"), t),
        _code(f"res = {t}(math.log(acc) + np.float64(shift))",
              *_writes(source, {source.reduction: "res"}))])


def _normalizing_pass(source: _Source, value: list[str], prologue: bool = True) -> _Step:
    """The write pass of softmax/log_softmax/layer_norm: `value` computes `y`."""
    full = {op.name: f"{{{op.name}}}" for op in source.strided} | {"index": "{index}"}
    epilogue = source.epilogue_body({source.reduction: "y"}, "full")
    return _Step(value + [_fill(line, full) for line in epilogue], is_pass=True, writes=True,
                 prologue=prologue)


def _softmax_kind(source: _Source) -> _Program:
    """Three passes: the max; exp(v - max) summed and stored in the first output of the
    input's dtype; the stored values scaled in place (one exp per element), then the
    epilogue. Without such an output (only, say, a bool epilogue is written), the last
    pass recomputes exp(v - max)."""
    t = _typed(source)
    exp = _math(source, "exp", "v - mx")
    first = next((op for op in source.strided if op.name.startswith("out")
                  and op.node.meta["val"].dtype.np == source.dtype), None)
    if first is None:
        store = _Step([f"part = _accumulate(part, {exp})"], is_pass=True,
                      partial=("part", t, "acc"))
        write = _normalizing_pass(source, [f"y = {exp} * scale"])
    else:
        store = _Step([f"e = {exp}", "part = _accumulate(part, e)", f"{{{first.name}}} = e"],
                      is_pass=True, writes=True, partial=("part", t, "acc"))
        write = _normalizing_pass(source, [f"y = {{{first.name}}} * scale"], prologue=False)
    return _Program([*_max_state(source, False), ("acc", "np.float64"), ("scale", t)], [
        *_max_steps(source, nan_check=False), _code("acc = np.float64(0.0)"), store,
        _code(f"scale = {t}(1.0 / acc)"), write])


def _log_softmax_kind(source: _Source) -> _Program:
    t = _typed(source)
    return _Program([*_max_state(source, False), ("acc", "np.float64"), ("lse", t)], [
        *_max_steps(source, nan_check=False), *_sum_steps(_math(source, "exp", "v - mx"), t),
        _code(f"lse = {t}(math.log(acc))"),
        _normalizing_pass(source, ["y = (v - mx) - lse"])])


def _layer_norm_kind(source: _Source) -> _Program:
    t = _typed(source)
    value = ["y = (v - mean_t) * rstd_t"]
    weight, bias = source.reduction.args[1:]
    for arg, symbol in ((weight, "*"), (bias, "+")):
        if arg is not None:
            operand = source._inputs[(arg, "full", source.shape)]
            value.append(f"y = y {symbol} {{{operand.name}}}")
    # eager's statistics (jitgrad/eager/ops/nn_ops.py): eager's mean, and for
    # float16/float32 the variance rounded to the input's dtype before eps is added, so an
    # overflowing sum or variance gives eager's NaN or 0 (fuzz seed 693123), not a finite
    # row from the float64 statistics
    variance = f"{t}(sq / count)" if _narrow_float(source) else "sq / count"
    return _Program([*_SQUARES_STATE, ("mean_t", t), ("rstd_t", t)], [
        *_squares_steps(),
        _code(f"mean_t = {t}({_eager_mean(source, 'count')})",
              f"rstd_t = {t}(1.0 / math.sqrt({variance} + scalars[1]))"),
        _normalizing_pass(source, value)])


def _cross_entropy_kind(source: _Source) -> _Program:
    """Row variant only: the picked logit is read at the label's offset in the row."""
    t = _typed(source)
    full = [op for op in source.strided if op.space == "full"]
    target = source._inputs[(source.reduction.args[1], "reduced", (source.shape[0],))]
    picked = {op.name: f"{op.name}[b_{op.name} + label * s_{op.name}]" for op in full}
    weight = "table0[label]" if source.reduction.args[2] is not None else f"{t}(1.0)"
    final = [f"label = {{{target.name}}}",
             f"loss = {t}(0.0)",
             f"w = {t}(0.0)",
             "if label != np.int64(scalars[1]):",
             "    if label < 0 or label >= m:",
             "        bad[0] = 1",
             "        bad[1] = label",
             "    else:"]
    final += [f"        {_fill(line, picked)}" for line in source.prologue_body()]
    final += [f"        w = {weight}",
              "        loss = -((v - mx) - lse) * w",
              "{out0} = loss",
              "{out1} = w"]
    return _Program([], [*_max_steps(source, nan_check=False),
                         *_sum_steps(_math(source, "exp", "v - mx"), t),
                         _code(f"lse = {t}(math.log(acc))"), _code(*final)], columns=False)


def _cross_entropy_total(source: _Source) -> list[str]:
    t = _typed(source)
    return ["    mode = scalars[2]",
            "    if mode != 0:",
            "        loss_sum = np.float64(0.0)",
            "        weight_sum = np.float64(0.0)",
            "        for i in range(n_outer_total):",
            "            loss_sum = _accumulate(loss_sum, out0[i])",
            "            weight_sum = _accumulate(weight_sum, out1[i])",
            f"        total[0] = {t}(loss_sum if mode == 1 else loss_sum / weight_sum)"]


_KINDS = {"sum": _sum_kind, "mean": _sum_kind, "var": _var_kind, "std": _var_kind,
          "amax": _extremum_kind, "amin": _extremum_kind, "argmax": _arg_kind,
          "argmin": _arg_kind, "logsumexp": _logsumexp_kind, "softmax": _softmax_kind,
          "log_softmax": _log_softmax_kind, "layer_norm": _layer_norm_kind,
          "cross_entropy": _cross_entropy_kind}
_CROSS_ENTROPY_MODES = {"none": 0, "sum": 1, "mean": 2}
_VARIANTS = ("kernel", "kernel_parallel", "kernel_rows", "kernel_columns",
             "kernel_columns_parallel")


class ReductionKernel:
    """A compiled reduction group: call it with one value per group input.

    Returns the materialized outputs (a Tensor, or a tuple in `group.outputs` order);
    `source` is the kernel module's text, `path` its file in the cache. Raises IndexError
    for a cross-entropy class id outside [0, C) (Note [Reduction kernels]).
    """

    def __init__(self, group: FusionGroup, directory: Path | None = None) -> None:
        self.name = group.name
        self._source = _Source(group)
        self.spec: ReductionSpec = self._source.spec
        self.shape = tuple(group.shape)
        header, body = lower_reduction_group(group)
        self.source = header + body
        self.path = cache.write_kernel(header, body, directory)
        log_kernel(self.name, self.path, self.source)
        module = cache.load_kernel_module(self.path)
        self._kernels = {name: getattr(module, name) for name in _VARIANTS
                         if hasattr(module, name)}
        self._threads = module.THREADS
        self._numel = math.prod(self.shape)
        self._count = math.prod(self.shape[d] for d in self.spec.dims)
        self._kept = [d for d in range(len(self.shape)) if d not in self.spec.dims]
        self._n_output = math.prod(self.shape[d] for d in self._kept)
        self._scalars = self._scalar_params(self._source.reduction)
        # where each kernel argument comes from: (is an output, index among outputs/inputs)
        position = {node: i for i, node in enumerate(group.inputs)}
        outputs = [op for op in self._source.strided if op.name.startswith("out")]
        out_dtype = self._source.dtype if self.spec.kind == "cross_entropy" else None
        self._out_specs = [(op.shape, out_dtype or op.node.meta["val"].dtype.np,
                            dim_order(op.node.meta["val"])
                            if tuple(op.shape) == tuple(op.node.meta["val"].shape) else None)
                           for op in outputs]
        self._slots = [(True, outputs.index(op)) if op in outputs else (False, position[op.node])
                       for op in self._source.strided]
        self._tables = [position[op.node] for op in self._source.operands
                        if op.space == "table"]
        self._plans: dict[tuple, tuple] = {}
        self._launched = False

    def _scalar_params(self, node: Node) -> np.ndarray:
        kind, params = self.spec.kind, node.kwargs
        extra = [0.0, 0.0]
        if kind in ("var", "std"):
            dof = self._count - params["correction"]
            extra = [dof if dof > 0 else 0.0, 1.0 if kind == "std" else 0.0]
        elif kind in ("sum", "mean"):
            extra[0] = 1.0 if kind == "sum" else float(self._count)
        elif kind in ("amax", "amin", "argmax", "argmin"):
            extra[0] = -1.0 if kind in ("amin", "argmin") else 1.0
        elif kind == "layer_norm":
            extra[0] = params["eps"]
        elif kind == "cross_entropy":
            extra = [float(params["ignore_index"]),
                     float(_CROSS_ENTROPY_MODES[params["reduction"]])]
        return np.array([float(self._count), *extra], dtype=np.float64)

    def __call__(self, *values: Any) -> Any:
        """The kernel on Tensors (or numbers): Tensor results (check mode calls this)."""
        results = self.run(*(v._data if isinstance(v, Tensor) else v for v in values))
        if isinstance(results, tuple):
            return tuple(Tensor._make(r) for r in results)
        return Tensor._make(results)

    def run(self, *values: Any) -> Any:
        """The kernel on arrays (or numbers): an array, or a tuple of them (graph
        programs call this, Note [Graph programs] in program.py)."""
        inputs = [np.asarray(v) for v in values]
        outs = [allocate(shape, dtype, order) for shape, dtype, order in self._out_specs]
        arrays = [outs[i] if is_out else inputs[i] for is_out, i in self._slots]
        extra = [np.ascontiguousarray(inputs[i]).reshape(-1) for i in self._tables]
        if self.spec.kind == "cross_entropy":
            extra += [np.zeros(1, self._source.dtype), np.zeros(2, np.int64)]
        if self._n_output and self._launched:
            self._launch(arrays, extra)
        elif self._n_output:  # numba compiles (or loads) it now (Note [Compile status])
            start = time.perf_counter()
            self._launch(arrays, extra)
            self._launched = True
            progress.kernel_launched(time.perf_counter() - start)
        if self.spec.kind == "cross_entropy":
            return self._cross_entropy_result(outs[0], extra[-2], extra[-1])
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _cross_entropy_result(self, rows: np.ndarray, total: np.ndarray,
                              bad: np.ndarray) -> np.ndarray:
        if bad[0]:
            raise IndexError(f"Target {int(bad[1])} is out of bounds.")
        if self._source.reduction.kwargs["reduction"] == "none":
            return rows
        return total.reshape(())

    def _launch(self, arrays: list[np.ndarray], extra: list[np.ndarray]) -> None:
        key = tuple((a.shape, a.strides) for a in arrays)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._plan(arrays)
        *layout, variant = plan
        flats = [a.reshape(-1) if a.flags.c_contiguous else flat_view(a, a.shape)[0]
                 for a in arrays]
        self._kernels[variant](*layout, self._scalars, *flats, *extra)

    def _plan(self, arrays: list[np.ndarray]) -> tuple:
        """(outer_sizes, reduce_sizes, strides, offsets, variant name) for arrays of these
        shapes and strides (see the kernel signature in `lower_reduction_group`)."""
        offsets, steps = [], []
        for op, array in zip(self._source.strided, arrays, strict=True):
            _, offset, step = self._layout(op, array)
            offsets.append(offset)
            steps.append(step)
        kept, dims = self._kept, self.spec.dims
        outer_sizes, outer = coalesce(tuple(self.shape[d] for d in kept),
                                      [[s[d] for d in kept] for s in steps])
        reduce_sizes, reduced = coalesce(tuple(self.shape[d] for d in dims),
                                         [[s[d] for d in dims] for s in steps])
        strides = np.array([o + r for o, r in zip(outer, reduced, strict=True)], np.int64)
        # the column variant when rows are strided but columns are contiguous (x.sum(0))
        full = [k for k, op in enumerate(self._source.strided) if op.space == "full"]
        # (a reduced size of 1 is one read per output element: rows, which a kernel of the
        # group has most likely compiled already)
        columns = ("kernel_columns" in self._kernels and outer_sizes[-1] > 1
                   and reduce_sizes != [1] and not all(reduced[k][-1] == 1 for k in full)
                   and all(outer[k][-1] == 1 for k in full))
        tasks = math.prod(outer_sizes) // (outer_sizes[-1] if columns else 1)
        parallel = self._numel >= PARALLEL_THRESHOLD and self._threads > 1 and tasks > 1
        if parallel:
            variant = "kernel_columns_parallel" if columns else "kernel_parallel"
        elif columns:
            variant = "kernel_columns"
        else:
            constant = {k for k in full if self._source.constant_along_rows(
                self._source.strided[k])}
            dense_rows = reduce_sizes == [1] or all(
                reduced[k][-1] == (0 if k in constant else 1) for k in full)
            one_dim = len(outer_sizes) == 1 and len(reduce_sizes) == 1
            variant = "kernel_rows" if one_dim and dense_rows else "kernel"
        return (np.array(outer_sizes, np.int64), np.array(reduce_sizes, np.int64), strides,
                np.array(offsets, np.int64), variant)

    def _layout(self, op: _Operand, array: np.ndarray) -> tuple[np.ndarray, int, list[int]]:
        """flat_view of `array` with its strides over the iteration shape S."""
        if op.space == "full":
            return flat_view(array, self.shape)
        flat, offset, step = flat_view(array, op.shape)
        dims = self.spec.dims
        if len(op.shape) == len(self.shape):  # keepdim form: reduced dims are 1
            return flat, offset, [0 if d in dims else s for d, s in enumerate(step)]
        it = iter(step)
        return flat, offset, [0 if d in dims else next(it) for d in range(len(self.shape))]
