"""Row kernels: a row group's reductions, and the pointwise code around them, in one loop
over the output elements (Note [Row groups] in fusion.py).

Note [Row kernels]: a row group iterates over S, its reductions' input shape, split into
the kept dims (n output elements, the *rows*) and the reduced dims (m elements per row).
The wrapper (`RowKernel.run`) hands every operand over in one of three forms, so the
kernel source depends only on the group's ops and dtypes: a value over the rows as a
C-contiguous (n, m) array, kept dims first (a view when the value already lies that way,
else a copy); a value constant along the reduced dims (a row's mean, a 0-d tensor) as n
contiguous elements; a value constant along the kept dims (a weight over the last dim)
as m contiguous elements. So each row is one contiguous slice that LLVM vectorizes.

For each row the kernel makes one pass over the row per *level* of the chain: a
reduction's level is one more than the highest level among the reductions it reads
(through members), so `x.amax(-1)` is level 1 and the sum of `exp(x - max)` level 2. A
pass computes the members over the rows that its level's reductions read and updates
their accumulators; between passes, the members over the kept elements (`sum / n`, `max
+ eps`) are computed once per row. A member over the rows is written out in the first
pass where every value it reads is known (a pass after the last level when it reads the
last level's results: softmax's division). A member computed in one pass and read in a
later one is recomputed from the row, except one whose own expression calls the math
library (`exp`): it is stored in a scratch row of m elements in the first pass and read
back after, so a composed softmax computes each exp once. Accumulation is eager's:
sum/mean in float64 (only the add into the accumulator carries `reassoc`, Note
[Reduction kernels] in reductions.py), the result rounded as eager's op rounds it;
amax/amin with llvm.maxnum/minnum beside a running sum that turns NaN when a NaN (or
infinities of both signs) was seen, and a rescan of that row for a NaN then, so NaN
propagates as numpy's maximum.reduce. Above PARALLEL_THRESHOLD elements, with several rows
and numba threads, the prange twin `kernel_parallel` shares the rows out (each row
allocates its own scratch rows there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from jitgrad.codegen import cache
from jitgrad.codegen.fusion import FusionGroup, describe_node
from jitgrad.codegen.kernels import (
    PARALLEL_THRESHOLD,
    LaunchedKernel,
    allocate,
    dim_order,
    log_kernel,
    node_statements,
)
from jitgrad.codegen.reduction_rules import ReductionSpec
from jitgrad.codegen.reduction_source import REDUCTION_PRELUDE
from jitgrad.trace.ir.graph import Node


@dataclass(frozen=True)
class _Operand:
    """One array argument of a row kernel: `form` is "rows" ((n, m)), "kept" ((n,)) or
    "reduced" ((m,)), see Note [Row kernels]; `shape` what the value is broadcast to
    before it is laid out in that form."""

    name: str
    node: Node
    form: str
    shape: tuple[int, ...]


class RowSource:
    """The layout of one row group: its operands, levels and passes (see `lower_row_group`)."""

    def __init__(self, group: FusionGroup) -> None:
        self.group = group
        self.chain: dict[Node, ReductionSpec] = group.chain
        self.shape = tuple(group.shape)
        self.dims = next(iter(self.chain.values())).dims
        self.kept = tuple(d for d in range(len(self.shape)) if d not in self.dims)
        members = set(group.nodes)
        self.full = {n for n in group.nodes if n not in self.chain
                     and tuple(n.meta["val"].shape) == self.shape}
        self.level: dict[Node, int] = {}
        for node in group.nodes:
            base = max((self.level[a] for a in node.all_input_nodes if a in members),
                       default=0)
            self.level[node] = base + 1 if node in self.chain else base
        self.depth = max(self.level[r] for r in self.chain)
        self.operands: list[_Operand] = []
        for k, node in enumerate(group.outputs):
            form = "rows" if node in self.full else "kept"
            self.operands.append(_Operand(f"out{k}", node, form, tuple(node.meta["val"].shape)))
        self._inputs: dict[tuple[Node, str, tuple[int, ...]], _Operand] = {}
        for node in group.nodes:
            for arg in node.all_input_nodes:
                if arg not in members and self._key(arg, node) not in self._inputs:
                    key = self._key(arg, node)
                    prefix = {"rows": "f", "kept": "r", "reduced": "c"}[key[1]]
                    count = sum(op.form == key[1] for op in self._inputs.values())
                    self._inputs[key] = op = _Operand(f"{prefix}{count}", arg, key[1], key[2])
                    self.operands.append(op)

    def _key(self, arg: Node, reader: Node) -> tuple[Node, str, tuple[int, ...]]:
        """(arg, form, the shape it is broadcast to) of outside value `arg` read by member
        `reader`: the reduced input of a reduction and a value varying along both kinds
        of dims are over the rows; a value constant along the reduced dims (or read by a
        member over the kept elements) is kept; one constant along the kept dims, reduced."""
        shape = tuple(getattr(arg.meta.get("val"), "shape", ()))
        keepdim = tuple(1 if d in self.dims else n for d, n in enumerate(self.shape))
        if reader in self.chain:
            return arg, "rows", self.shape
        if reader not in self.full:
            return arg, "kept", tuple(reader.meta["val"].shape)
        if _broadcasts_to(shape, keepdim):
            return arg, "kept", keepdim
        aligned = (1,) * (len(self.shape) - len(shape)) + shape
        if all(aligned[d] == 1 for d in self.kept):
            return arg, "reduced", tuple(n if d in self.dims else 1
                                         for d, n in enumerate(self.shape))
        return arg, "rows", self.shape

    def operand(self, arg: Node, reader: Node) -> _Operand:
        """The input operand through which member `reader` reads outside value `arg`."""
        return self._inputs[self._key(arg, reader)]


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether numpy broadcasts `shape` to exactly `target`."""
    if len(shape) > len(target):
        return False
    aligned = (1,) * (len(target) - len(shape)) + shape
    return all(a in (1, t) for a, t in zip(aligned, target, strict=True))


@dataclass
class _Pass:
    """One walk over a row: the reductions it accumulates, the members over the rows it
    computes (`nodes`, in graph order), writes (outputs over the rows) and stores (into
    scratch rows, Note [Row kernels])."""

    reductions: list[Node]
    nodes: list[Node]
    writes: list[Node]
    stores: list[Node]


def plan_passes(source: RowSource) -> tuple[list[_Pass], dict[Node, int]]:
    """The passes of a row group and, for each stored member, the pass that stores it."""
    writes = [op.node for op in source.operands if op.form == "rows" and op.name[:3] == "out"]
    count = max([source.depth] + [source.level[w] + 1 for w in writes])
    reductions = {p: [r for r in source.chain if source.level[r] == p]
                  for p in range(1, count + 1)}
    written = {p: [w for w in writes if source.level[w] + 1 == p] for p in reductions}

    def targets(p: int) -> list[Node]:
        return [source.chain[r].source for r in reductions[p]] + written[p]

    naive = {p: _closure(source, targets(p), set()) for p in reductions}
    stored: dict[Node, int] = {}
    for node in source.group.nodes:
        passes = [p for p in reductions if node in naive[p]]
        if len(passes) > 1 and "mathlib." in "".join(node_statements(
                [node], {a: "a" for a in node.all_input_nodes}, "s")):
            stored[node] = passes[0]
    plan = []
    for p in reductions:
        leaves = {n for n, first in stored.items() if first < p}
        nodes = _closure(source, targets(p), leaves)
        plan.append(_Pass(reductions[p], nodes, written[p],
                          [n for n in nodes if stored.get(n) == p]))
    return plan, stored


def _closure(source: RowSource, targets: list[Node], leaves: set[Node]) -> list[Node]:
    """The members over the rows that computing `targets` needs, in graph order; members in
    `leaves` are read from their scratch rows instead."""
    needed: set[Node] = set()
    stack = [t for t in targets if t in source.full]
    while stack:
        node = stack.pop()
        if node in needed:
            continue
        needed.add(node)
        if node not in leaves:
            stack.extend(a for a in node.all_input_nodes if a in source.full)
    return [n for n in source.group.nodes if n in needed and n not in leaves]


def lower_row_group(source: RowSource) -> tuple[str, str]:
    """The kernel module computing the row group of `source` (Note [Row kernels]):
    (header, body), as `kernels.lower_group` returns them.

    The module defines `kernel(n, m, <operands>)`: n rows of m elements; operands are the
    outputs (out0, ...: (n, m) over the rows, (n,) over the kept elements), then the
    inputs (f0, ...: (n, m); r0, ...: (n,); c0, ...: (m,)), all C-contiguous; and
    `kernel_parallel`, the same with the rows shared out by prange (compiled on its first
    launch, Note [Kernel variants] in kernels.py).
    """
    group = source.group
    plan, stored = plan_passes(source)
    header = [f"# jitgrad row kernel {group.name} over {list(group.shape)} reducing dims "
              f"{source.dims}: {len(group.nodes)} fused node(s), {len(plan)} pass(es)"]
    header += [f"#   {describe_node(n)}" for n in group.nodes]
    header += [f"# {op.name} = %{op.node.name} ({op.form})" for op in source.operands]
    scratch = {node: f"t{k}" for k, node in enumerate(stored)}
    allocations = [f"{name} = np.empty(m, {_np_type(node)})" for node, name in scratch.items()]
    body = [f"row_{op.name} = {op.name}[o]" for op in source.operands if op.form == "rows"]
    body += [f"x_{op.name} = {op.name}[o]" for op in source.operands
             if op.form == "kept" and not op.name.startswith("out")]
    names: dict[Node, str] = {}
    kept_nodes = [n for n in group.nodes if n not in source.full and n not in source.chain]
    body += _kept_statements(source, kept_nodes, 0, names)
    for p, walk in enumerate(plan, start=1):
        body += _pass_lines(source, walk, p, names, scratch, stored)
        body += _kept_statements(source, kept_nodes, p, names)
    body += [f"{op.name}[o] = {names[op.node]}" for op in source.operands
             if op.form == "kept" and op.name.startswith("out")]
    params = f"n, m, {', '.join(op.name for op in source.operands)}"
    lines = [REDUCTION_PRELUDE, "", "@njit(**OPTIONS)", f"def kernel({params}):",
             *(f"    {line}" for line in allocations), "    for o in range(n):",
             *(f"        {line}" for line in body), "", "",
             "@njit(**OPTIONS, parallel=True)", f"def kernel_parallel({params}):",
             "    for o in prange(n):",  # each row its own scratch rows
             *(f"        {line}" for line in allocations + body), ""]
    return "\n".join(header) + "\n", "\n".join(lines)


def _np_type(node: Node) -> str:
    dtype = node.meta["val"].dtype.np
    return "np.bool_" if dtype.kind == "b" else f"np.{dtype.name}"


def _kept_statements(source: RowSource, kept_nodes: list[Node], level: int,
                     names: dict[Node, str]) -> list[str]:
    """The members over the kept elements of `level`, once per row (their outside inputs
    are the row's `x_r<k>` locals)."""
    nodes = [n for n in kept_nodes if source.level[n] == level]
    for node in nodes:
        for arg in node.all_input_nodes:
            if arg not in source.level:
                names[arg] = f"x_{source.operand(arg, node).name}"
    return node_statements(nodes, names, f"k{level}_")


class _Access:
    """How a pass reads and writes element j of a row-long array (an operand's row, a
    scratch row): directly, or, in a pass summing float32 blocks, through the block's
    slice `s_<array>` (indexed from 0, which numba's loops need to vectorize); `used`
    collects the arrays whose slices the block takes."""

    def __init__(self, blocked: bool) -> None:
        self.blocked = blocked
        self.used: dict[str, None] = {}

    def __call__(self, array: str) -> str:
        if not self.blocked:
            return f"{array}[j]"
        self.used.setdefault(array, None)
        return f"s_{array}[j]"

    def slices(self) -> list[str]:
        return [f"s_{array} = {array}[j0:j0 + n_j]" for array in self.used]


def _element_names(source: RowSource, nodes: list[Node], names: dict[Node, str],
                   scratch: dict[Node, str], stored: dict[Node, int], p: int,
                   reductions: list[Node], at: _Access) -> dict[Node, str]:
    """The expressions members of pass `p` read at element j: kept values by their locals,
    outside values by their operand's element, stored members by their scratch row."""
    local = dict(names)
    for node, name in scratch.items():
        if stored[node] < p:
            local[node] = at(name)
    for node in [*nodes, *reductions]:
        for arg in node.all_input_nodes:
            if arg in source.level:
                continue
            op = source.operand(arg, node)
            local[arg] = f"x_{op.name}" if op.form == "kept" else \
                at(f"row_{op.name}" if op.form == "rows" else op.name)
    return local


def _pass_lines(source: RowSource, walk: _Pass, p: int, names: dict[Node, str],
                scratch: dict[Node, str], stored: dict[Node, int]) -> list[str]:
    """Pass `p` over one row: accumulators, the loop, the NaN check of amax/amin, and
    the reductions' results as locals `red<k>` (added to `names`)."""
    at = _Access(any(source.chain[r].kind in ("sum", "mean")
                     and _pairwise_in_eager(source.chain[r]) for r in walk.reductions))
    local = _element_names(source, walk.nodes, names, scratch, stored, p, walk.reductions, at)
    element = node_statements(walk.nodes, local, f"p{p}_")
    math_calls = any("mathlib." in line for line in element)
    start: list[str] = []
    block_start: list[str] = []
    update: list[str] = []
    block_end: list[str] = []
    finish: list[str] = []
    for reduction in walk.reductions:
        k = list(source.chain).index(reduction)
        spec = source.chain[reduction]
        value = local[spec.source]
        t = _np_type(reduction)
        if spec.kind in ("sum", "mean"):
            start.append(f"a{k} = np.float64(0.0)")
            if _pairwise_in_eager(spec):
                block_start.append(f"b{k} = {t}(0.0)")
                update.append(f"b{k} = _accumulate(b{k}, {value})")
                block_end.append(f"a{k} += np.float64(b{k})")
            else:
                update.append(f"a{k} = _accumulate(a{k}, np.float64({value}))")
            continue
        high = spec.kind == "amax"
        start.append(f"a{k} = {t}({'-' if high else ''}np.inf)")
        if math_calls:  # see _max_steps in reduction_kinds.py: maxnum of math results aborts LLVM
            update.append(f"a{k} = {value} if {value} {'>' if high else '<'} a{k} else a{k}")
        else:
            update.append(f"a{k} = _{'max' if high else 'min'}num(a{k}, {value})")
        finish += [f"h{k} = {t}(0.0)", *_nan_check(source, reduction, p, k, names, scratch,
                                                    stored)]
    writes = [f"{at(f'row_out{_out_index(source, w)}')} = {local[w]}" for w in walk.writes]
    stores = [f"{at(scratch[s])} = {local[s]}" for s in walk.stores]
    body = element + update + writes + stores
    if at.blocked:
        lines = [*start, "for j0 in range(0, m, BLOCK):", "    n_j = min(BLOCK, m - j0)",
                 *(f"    {line}" for line in block_start + at.slices()),
                 "    for j in range(n_j):", *(f"        {line}" for line in body),
                 *(f"    {line}" for line in block_end)]
    else:
        lines = [*start, "for j in range(m):", *(f"    {line}" for line in body)]
    lines += finish
    for reduction in walk.reductions:
        k = list(source.chain).index(reduction)
        lines.append(f"red{k} = {_result(source, reduction, k)}")
        names[reduction] = f"red{k}"
    return lines


def _nan_check(source: RowSource, reduction: Node, p: int, k: int, names: dict[Node, str],
               scratch: dict[Node, str], stored: dict[Node, int]) -> list[str]:
    """After an amax/amin pass: a walk summing the reduced values into `h<k>`, NaN only if
    one of them is NaN (or infinities of both signs were seen), and then a walk looking
    for a NaN, which makes the result NaN. (In the pass's own loop, the running sum kept
    maxnum from vectorizing: measured 12x slower.) Members stored by the pass are read
    back, others recomputed."""
    spec = source.chain[reduction]
    nodes = _closure(source, [spec.source], {n for n, first in stored.items() if first <= p})
    local = _element_names(source, nodes, names, scratch, stored, p + 1, [reduction],
                           _Access(False))
    element = node_statements(nodes, local, f"n{p}_{k}_")
    value = local[spec.source]
    return ["for j in range(m):", *(f"    {line}" for line in element),
            f"    h{k} = _accumulate(h{k}, {value})",
            f"if h{k} != h{k}:", "    for j in range(m):", *(f"        {line}" for line in element),
            f"        if {value} != {value}:",
            f"            a{k} = {_np_type(reduction)}(np.nan)", "            break"]


def _pairwise_in_eager(spec: ReductionSpec) -> bool:
    """Whether eager sums this float32 reduction in float32 (numpy's pairwise sum: a
    C-contiguous input reduced over its trailing dims, `_sum_accumulator` in
    jitgrad/eager/ops/reduction.py): the kernel then sums blocks of BLOCK elements in
    float32 and adds the blocks in float64, an error of the same order; otherwise eager
    accumulates in float64, and so does the kernel."""
    val = spec.source.meta["val"]
    return val.dtype.np == np.dtype(np.float32) and val.is_contiguous() \
        and spec.dims == tuple(range(val.ndim - len(spec.dims), val.ndim))


def _out_index(source: RowSource, node: Node) -> int:
    return next(int(op.name[3:]) for op in source.operands
                if op.node is node and op.name.startswith("out"))


def _result(source: RowSource, reduction: Node, k: int) -> str:
    """The reduction's value from its accumulator, rounded as eager's op rounds it: a
    float32 sum is the float64 sum rounded once; a float32 mean divides the float32 sum
    (PyTorch's accumulation type, jitgrad/eager/ops/reduction.py)."""
    kind, t = source.chain[reduction].kind, _np_type(reduction)
    if kind == "sum":
        return f"{t}(a{k})"
    if kind == "mean":
        if t == "np.float64":
            return f"a{k} / np.float64(m)"
        return f"{t}(np.float32(a{k}) / np.float32(m))"
    return f"a{k}"


class RowKernel(LaunchedKernel):
    """A compiled row group: call it with one value per group input.

    Returns the materialized outputs (a Tensor, or a tuple in `group.outputs` order), as
    `kernels.Kernel` does; `source` is the kernel module's text, `path` its cache file.
    """

    def __init__(self, group: FusionGroup, directory: Path | None = None) -> None:
        self.name = group.name
        source = RowSource(group)
        self.shape = source.shape
        self._perm = (*source.kept, *source.dims)
        self._identity = self._perm == tuple(range(len(self.shape)))
        self._n = math.prod(self.shape[d] for d in source.kept)
        self._m = math.prod(self.shape[d] for d in source.dims)
        header, body = lower_row_group(source)
        self.source = header + body
        self.path = cache.write_kernel(header, body, directory)
        log_kernel(self.name, self.path, self.source)
        module = cache.load_kernel_module(self.path)
        # the prange twin above PARALLEL_THRESHOLD elements, with several rows and threads
        parallel = math.prod(self.shape) >= PARALLEL_THRESHOLD and self._n > 1 \
            and module.THREADS > 1
        self._kernel = module.kernel_parallel if parallel else module.kernel
        position = {node: i for i, node in enumerate(group.inputs)}
        self._inputs = [(position[op.node], op.form, op.shape) for op in source.operands
                        if not op.name.startswith("out")]
        self._outputs = [(op.form, op.shape, op.node.meta["val"].dtype.np,
                          dim_order(op.node.meta["val"]) if op.form == "rows" else None)
                         for op in source.operands if op.name.startswith("out")]

    def run(self, *values: Any) -> Any:
        """The kernel on arrays (or numbers): an array, or a tuple of them (graph programs
        call this, Note [Graph programs] in program.py)."""
        arrays = [self._lay_out(np.asarray(values[i]), form, shape)
                  for i, form, shape in self._inputs]
        outs: list[np.ndarray] = []
        rows: list[np.ndarray] = []
        for form, shape, dtype, order in self._outputs:
            if form == "kept":
                outs.append(np.empty(shape, dtype))
                rows.append(outs[-1].reshape(-1))
            elif order is None and self._identity:
                outs.append(np.empty(shape, dtype))
                rows.append(outs[-1].reshape(self._n, self._m))
            else:  # written as (n, m), then copied into eager's layout
                outs.append(allocate(shape, dtype, order))
                rows.append(np.empty((self._n, self._m), dtype))
        self.launch(self._kernel, self._n, self._m, *rows, *arrays)
        for out, row in zip(outs, rows, strict=True):
            if row.base is not out:
                out.transpose(self._perm)[...] = row.reshape(
                    [self.shape[d] for d in self._perm])
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _lay_out(self, array: np.ndarray, form: str, shape: tuple[int, ...]) -> np.ndarray:
        """`array` in its operand form (Note [Row kernels]): a view when it already lies
        that way, else a C-contiguous copy."""
        if form == "rows":
            if self._identity and array.shape == self.shape and array.flags.c_contiguous:
                return array.reshape(self._n, self._m)
            view = np.broadcast_to(array, self.shape).transpose(self._perm)
            return np.ascontiguousarray(view.reshape(self._n, self._m))
        if array.shape == shape and array.flags.c_contiguous:
            return array.reshape(-1)
        return np.ascontiguousarray(np.broadcast_to(array, shape)).reshape(-1)
