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
Each kind is a `Program` (reduction_kinds.py): steps (code, or passes over the slice)
whose cross-step locals are its `state`. The row variant (`kernel`) runs the steps once
per output element. When the reduced dims are strided but the innermost kept dim is
contiguous (`x.sum(0)` of a C-contiguous matrix, bias gradients), rows would walk memory
column by column; the column
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
import functools
import math
from pathlib import Path
from typing import Any

import numpy as np

from jitgrad.codegen import cache
from jitgrad.codegen.fusion import FusionGroup, describe_node
from jitgrad.codegen.kernels import (
    PARALLEL_THRESHOLD,
    LaunchedKernel,
    allocate,
    coalesce,
    dim_order,
    flat_view,
    log_kernel,
)
from jitgrad.codegen.reduction_kinds import CROSS_ENTROPY_MODES, KINDS, cross_entropy_total
from jitgrad.codegen.reduction_rules import ReductionSpec
from jitgrad.codegen.reduction_source import (
    REDUCTION_PRELUDE,
    Operand,
    Program,
    ReductionSource,
    Step,
    fill,
)
from jitgrad.trace.ir.graph import Node


def lower_reduction_group(group: FusionGroup, source: ReductionSource) -> tuple[str, str]:
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
    (a flag and the first bad class id). `source` is the group's ReductionSource.
    """
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
    program = KINDS[spec.kind](source)
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
            lines += _setup(source, strided, columns)
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
            lines += cross_entropy_total(source)
        lines.append("")
    return "\n".join(header) + "\n", "\n".join(lines)


def _setup(source: ReductionSource, strided: list[Operand], columns: bool) -> list[str]:
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
    # in the row variants, an input constant along the rows is read once per row (`_pass`)
    full = [op for op in strided if op.space == "full"
            and (columns or not source.constant_along_rows(op))]
    if columns:
        lines += ["    nk = outer_sizes[n_outer - 1]",
                  "    n_blocks = n_outer_total // nk if nk > 0 else 0"]
        lines += [f"    t_{op.name} = strides[{k}, n_outer - 1]" for k, op in enumerate(strided)]
        dense = " and ".join(f"t_{op.name} == 1" for op in full) or "True"
    else:
        dense = " and ".join(f"s_{op.name} == 1" for op in full) or "True"
    lines.append(f"    dense = {dense}")
    return lines


def _rows_setup(strided: list[Operand]) -> list[str]:
    """The setup of `kernel_rows`: one kept dim, one reduced dim (contiguous, or of size 1)."""
    lines = ["    n_outer_total = outer_sizes[0]",
             "    m = reduce_sizes[0]",
             "    count = scalars[0]"]
    return lines + [f"    s_{op.name} = strides[{k}, 1]" for k, op in enumerate(strided)]


def _outer_offsets(strided: list[Operand], columns: bool) -> list[str]:
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


def _row_steps(source: ReductionSource, program: Program, rows: bool = False) -> list[str]:
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
            lines += [fill(line, reduced) for line in step.lines]
    return lines


def _column_steps(source: ReductionSource, program: Program) -> list[str]:
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
                [fill(line, reduced) for line in step.lines], state)]
    return lines


def _per_column(block: list[str], state: list[str]) -> list[str]:
    """`block` (whole statements) for column k: the state locals it reads loaded from
    their `st_` arrays first, those it assigns stored back after (found by parsing it)."""
    used, written = _names_in("\n".join(block))
    return [*(f"{name} = st_{name}[k]" for name in state if name in used), *block,
            *(f"st_{name}[k] = {name}" for name in state if name in written)]


@functools.lru_cache(maxsize=1024)
def _names_in(code: str) -> tuple[frozenset[str], frozenset[str]]:
    """The names `code` reads or writes, and those it assigns (each kernel of a graph over
    symbolic sizes, compiled again per set of sizes, asks for the same blocks)."""
    names = [n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)]
    return frozenset(n.id for n in names), \
        frozenset(n.id for n in names if isinstance(n.ctx, ast.Store))


def _pass_operands(source: ReductionSource, step: Step) -> list[tuple[int, Operand]]:
    return [(k, op) for k, op in enumerate(source.strided) if op.space == "full"
            and (step.writes or op.name.startswith("in"))]


def _row_offsets(operands: list[tuple[int, Operand]]) -> list[str]:
    """c_<operand>: the offsets of row `r` of the reduced elements."""
    lines = ["for r in range(rows):", "    q = r"]
    lines += [f"    c_{op.name} = b_{op.name}" for _, op in operands]
    lines += ["    for d in range(n_reduce - 2, -1, -1):",
              "        size = reduce_sizes[d]",
              "        i = q % size",
              "        q //= size"]
    lines += [f"        c_{op.name} += i * strides[{k}, n_outer + d]" for k, op in operands]
    return lines


def _pass(source: ReductionSource, step: Step) -> list[str]:
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
    # an input constant along the rows (a row's max, a 0-d fill value) is one read per
    # row, which leaves the dense branch to the others (Note [Reduction kernels])
    constant = {op.name for _, op in operands if source.constant_along_rows(op)}
    lines += [f"            row_{op.name} = {op.name}[c_{op.name}]" if op.name in constant else
              f"            row_{op.name} = {op.name}[c_{op.name} + j0:c_{op.name} + j0 + n_j]"
              for _, op in operands]
    lines += [f"            {line}" for line in start]
    lines.append("            for j in range(n_j):")
    dense = {op.name: f"row_{op.name}" if op.name in constant else f"row_{op.name}[j]"
             for _, op in operands} | {"index": "r * m + j0 + j"}
    lines += [f"                {fill(line, dense)}" for line in element]
    lines += [f"            {line}" for line in flush]
    lines.append("        else:")
    lines += [f"            {line}" for line in start]
    lines.append("            for j in range(n_j):")
    strided = {op.name: f"{op.name}[c_{op.name} + (j0 + j) * s_{op.name}]"
               for _, op in operands} | {"index": "r * m + j0 + j"}
    lines += [f"                {fill(line, strided)}" for line in element]
    lines += [f"            {line}" for line in flush]
    return lines


def _dense_row_pass(source: ReductionSource, step: Step) -> list[str]:
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
    lines += [f"        {fill(line, dense)}" for line in element]
    if partial is not None:
        lines.append(f"    {partial[2]} += np.float64({partial[0]})")
    return lines


def _column_pass(source: ReductionSource, step: Step, state: list[str]) -> list[str]:
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
        [fill(line, dense) for line in element], state)]
    lines += ["        else:", "            for k in range(nk):"]
    strided = {op.name: f"{op.name}[e_{op.name} + k * t_{op.name}]"
               for _, op in operands} | {"index": "r * m + jj"}
    lines += [f"                {line}" for line in _per_column(
        [fill(line, strided) for line in element], state)]
    return lines


_VARIANTS = ("kernel", "kernel_parallel", "kernel_rows", "kernel_columns",
             "kernel_columns_parallel")


class ReductionKernel(LaunchedKernel):
    """A compiled reduction group: call it with one value per group input.

    Returns the materialized outputs (a Tensor, or a tuple in `group.outputs` order);
    `source` is the kernel module's text, `path` its file in the cache. Raises IndexError
    for a cross-entropy class id outside [0, C) (Note [Reduction kernels]).
    """

    def __init__(self, group: FusionGroup, directory: Path | None = None) -> None:
        self.name = group.name
        self._source = ReductionSource(group)
        self.spec: ReductionSpec = self._source.spec
        self.shape = tuple(group.shape)
        header, body = lower_reduction_group(group, self._source)
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
                     float(CROSS_ENTROPY_MODES[params["reduction"]])]
        return np.array([float(self._count), *extra], dtype=np.float64)

    def run(self, *values: Any) -> Any:
        """The kernel on arrays (or numbers): an array, or a tuple of them (graph
        programs call this, Note [Graph programs] in program.py)."""
        inputs = [np.asarray(v) for v in values]
        outs = [allocate(shape, dtype, order) for shape, dtype, order in self._out_specs]
        arrays = [outs[i] if is_out else inputs[i] for is_out, i in self._slots]
        extra = [np.ascontiguousarray(inputs[i]).reshape(-1) for i in self._tables]
        if self.spec.kind == "cross_entropy":
            extra += [np.zeros(1, self._source.dtype), np.zeros(2, np.int64)]
        if self._n_output:
            self.launch(self._launch, arrays, extra)
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

    def _layout(self, op: Operand, array: np.ndarray) -> tuple[np.ndarray, int, list[int]]:
        """flat_view of `array` with its strides over the iteration shape S."""
        if op.space == "full":
            return flat_view(array, self.shape)
        flat, offset, step = flat_view(array, op.shape)
        dims = self.spec.dims
        if len(op.shape) == len(self.shape):  # keepdim form: reduced dims are 1
            return flat, offset, [0 if d in dims else s for d, s in enumerate(step)]
        it = iter(step)
        return flat, offset, [0 if d in dims else next(it) for d in range(len(self.shape))]
