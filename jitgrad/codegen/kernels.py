"""Kernel source for a pointwise `FusionGroup` (`lower_group`) and the `Kernel` that runs it.

`Kernel(group)` of a reduction group returns a `reductions.ReductionKernel` instead (same
call contract; Note [Reduction kernels]), which reuses this module's layout helpers
(`flat_view`, `coalesce`).

Note [Kernel layout]: a kernel is shape-generic. Every operand (outputs first, then
inputs) reaches it as a flat 1-D array over its memory plus an element offset and one
element stride per iteration dimension (0 where it broadcasts, negative where flipped);
the iteration sizes are an argument too. So the source depends only on the group's
ops, dtypes and rank, and a new shape reuses both the source and numba's disk cache.
The Python side (`Kernel.__call__`) allocates outputs with numpy (DESIGN.md: numpy's
allocator is far faster than allocation inside @njit for large buffers), drops size-1
dimensions and coalesces dimensions that are contiguous for every operand (as PyTorch's
TensorIterator does), so a contiguous tensor of any rank runs as one long inner loop.
The inner loop has a dense branch (every operand's inner stride is 1: each operand's row
is sliced out and indexed `row[j]`) that LLVM vectorizes, and a strided branch. Above
PARALLEL_THRESHOLD elements, and when numba has more than one thread (NUMBA_NUM_THREADS),
a `prange` variant splits the outer dimension across threads.

Note [Kernel variants]: numba compiles each function of a kernel module on its first call,
so a variant costs its compile only when a launch takes it. Compile time grows with the
size of the loop nest (numba's typing and lowering are per IR instruction; a compile is
0.2-1 s, the larger part of a cold start), so the layout every operand shares in the
common case gets a variant of its own: `kernel_flat`, one loop over n elements, taken by
a serial launch whose operands are all C-contiguous with the group's element count (or
0-d). It compiles in about half the time of `kernel` (measured: 0.21 s against 0.45 s for
a 4-op float32 group) and computes each element with the same statements. Every other
layout takes `kernel`, whose dense branch covers row broadcasts and sliced rows.

Note [No fast-math in pointwise code]: kernels compile without fast-math flags, so each
element is computed by the operations eager runs, in its order, each rounded as numpy
rounds it. Each flag changed values (numba 0.68 / LLVM 22; tests/codegen/test_fastmath.py
holds the expressions, and fails with any one flag put back): `reassoc` turned
`(x + 1e8) - 1e8` into `x`, `2 * x - x` at inf into inf (eager: NaN) and `x * 10 / 10` at
1e38 into 1e38 (eager: inf); `arcp` multiplied by 0.1 instead of dividing by 10 and, with
`afn`, replaced `1 / sqrt(x)` by an estimate (0.99999994 at 1.0, NaN at -0.0); `nsz` gave
`x + 0.0` at -0.0 the wrong sign; `contract` fused `2 * x - x` into one FMA (finite at
3e38, eager: inf); `afn` expanded `pow(x, -3.0)` into `1 / (x * x * x)` (0 at 1e103,
eager: 1e-309). A map loop vectorizes without any of them: the loop vectorizer needs
`reassoc` only for reductions, which put it on their accumulators alone (Note [Reduction
kernels]); the math library fuses multiply-adds itself where one rounding is part of its
algorithm (Note [Fused multiply-add] in mathlib.py).
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from jitgrad import config
from jitgrad.codegen import cache, progress
from jitgrad.codegen.fusion import FusionGroup, describe_node
from jitgrad.codegen.lowering import lower_node
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.ir.graph import Node

PARALLEL_THRESHOLD = 1 << 17  # elements; below it, threads cost more than they save
MIN_RANK = 2  # kernels loop over at least 2 dims, so a 1-D job can be split for prange

_LOG = config.logger("output_code")


def lower_group(group: FusionGroup) -> tuple[str, str]:
    """The kernel module computing `group` (see Note [Kernel layout]): (header, body).

    The header comment names the fused graph nodes and their user file:line; the body is
    the code, which alone names the cache file (the same code reached from another line
    reuses it, header and all).

    The module defines `kernel(sizes, strides, offsets, out0, ..., in0, ...)` (serial),
    `kernel_parallel` (same arguments, prange over the outer dimension) and
    `kernel_flat(n, out0, ..., in0, ...)` (Note [Kernel variants]); sizes is int64
    (rank,), strides int64 (operands, rank) in elements, offsets int64 (operands,).
    """
    rank = max(MIN_RANK, len(group.shape))
    operands = [f"out{k}" for k in range(len(group.outputs))] + \
               [f"in{k}" for k in range(len(group.inputs))]
    header = [f"# jitgrad kernel {group.name} over {list(group.shape)}: "
              f"{len(group.nodes)} fused node(s)"]
    header += [f"#   {describe_node(n)}" for n in group.nodes]
    header += [f"# out{k} = %{n.name}" for k, n in enumerate(group.outputs)]
    header += [f"# in{k} = %{n.name}" for k, n in enumerate(group.inputs)]
    lines = ["import math", "", "import numpy as np",
             "from numba import config as numba_config", "from numba import njit, prange", "",
             "from jitgrad.codegen import mathlib", "",
             "OPTIONS = dict(cache=True, error_model='numpy', nogil=True)",
             "THREADS = numba_config.NUMBA_NUM_THREADS", ""]
    # 0-d inputs (a step count, a bias correction) are loaded once, outside the loops: their
    # zero strides would otherwise fail the dense check and leave the loop scalar
    scalars = {f"in{k}" for k, node in enumerate(group.inputs)
               if getattr(node.meta.get("val"), "shape", None) == ()}
    invariant, body = _element_body(group, scalars)
    # inputs broadcast along the last dim (a row's max or sum, `x - x.amax(-1, True)`) are
    # loaded once per row in the dense branch, which they would fail too
    rows = {f"in{k}" for k, node in enumerate(group.inputs)
            if f"in{k}" not in scalars and _broadcasts_last_dim(node, group.shape)}
    for name, outer, extra in (("kernel", "range", ""), ("kernel_parallel", "prange",
                                                         ", parallel=True")):
        lines += ["", f"@njit(**OPTIONS{extra})",
                  f"def {name}(sizes, strides, offsets, {', '.join(operands)}):"]
        lines += _loop_nest(rank, len(operands), operands, invariant, body, outer, scalars,
                            rows)
        lines.append("")
    lines += ["", "@njit(**OPTIONS)", f"def kernel_flat(n, {', '.join(operands)}):"]
    lines += _flat_loop(operands, invariant, body, scalars)
    lines.append("")
    return "\n".join(header) + "\n", "\n".join(lines)


def _flat_loop(operands: list[str], invariant: list[str], body: list[str],
               scalars: set[str]) -> list[str]:
    """The loop of `kernel_flat` (Note [Kernel variants]): every operand is n contiguous
    elements, or one element (`scalars`, loaded once)."""
    lines = [f"    c_{op} = {op}[0]" for op in operands if op in scalars]
    elements = {op: f"c_{op}" if op in scalars else f"r_{op}[j]" for op in operands}
    lines += [f"    {line.format(**elements)}" for line in invariant]
    lines += [f"    r_{op} = {op}[:n]" for op in operands if op not in scalars]
    lines.append("    for j in range(n):")
    lines += [f"        {line.format(**elements)}" for line in body]
    return lines


def _element_body(group: FusionGroup, scalars: set[str]) -> tuple[list[str], list[str]]:
    """Statements computing one element, `{in0}` etc. standing for the operands' elements:
    (those that read only 0-d inputs, computed once before the loops; the rest).

    Note [Loop-invariant statements]: a value computed from 0-d inputs alone is the same at
    every element, so it is computed before the loops, as written (the same operations on
    the same values: the same result). Left inside, LLVM's loop unswitching copied the loop
    for each of its invariant branches (the special cases of the math library: relu, three
    tanh and a gelu of a 0-d input took over five minutes to compile, fuzz seed 980112)."""
    names: dict[Node, str] = {}
    invariant_nodes: set[Node] = set()
    invariant, body = [], []
    for k, node in enumerate(group.inputs):
        names[node] = f"x{k}"
        if f"in{k}" in scalars:
            invariant_nodes.add(node)
            invariant.append(f"x{k} = {{in{k}}}")
        else:
            body.append(f"x{k} = {{in{k}}}")
    for node, line in zip(group.nodes, node_statements(group.nodes, names, "v"), strict=True):
        if all(n in invariant_nodes for n in node.all_input_nodes):
            invariant_nodes.add(node)
            invariant.append(line)
        else:
            body.append(line)
    for k, node in enumerate(group.outputs):
        body.append(f"{{out{k}}} = {names[node]}")
    return invariant, body


def node_statements(nodes: list[Node], names: dict[Node, str], prefix: str) -> list[str]:
    """One statement per node, `{prefix}{k} = np.<dtype>(<lowered expression>)`, reading
    the kernel locals in `names` (updated with each node's local).

    No node names: the body is hashed into the kernel's file name, so groups computing the
    same thing from different nodes share one file and one numba compile (DESIGN.md,
    Codegen); the header lists the nodes, in the order of their locals.

    Every value is cast to its node's dtype, bool included: numba computes `b + b` on bools
    as an integer add (2), numpy as a logical or (True), and `np.bool_` gives numpy's value
    to the ops that read it (`(b + b) * 1.0` is 1.0 as in eager)."""
    lines = []
    for k, node in enumerate(nodes):
        expression = lower_node(node, names)
        assert expression is not None, f"{node!r} was grouped but does not lower"
        dtype = node.meta["val"].dtype.np
        names[node] = f"{prefix}{k}"
        cast = "bool_" if dtype.kind == "b" else dtype.name
        lines.append(f"{prefix}{k} = np.{cast}({expression})")
    return lines


def _broadcasts_last_dim(node: Node, shape: tuple[int, ...]) -> bool:
    """Whether the value of `node` is broadcast along the last dim of a group of `shape`."""
    val_shape: tuple[int, ...] = getattr(node.meta.get("val"), "shape", ())
    return bool(val_shape) and bool(shape) and shape[-1] != 1 and val_shape[-1] == 1


def _loop_nest(rank: int, count: int, operands: list[str], invariant: list[str],
               body: list[str], outer: str, scalars: set[str], rows: set[str]) -> list[str]:
    """The loops of a pointwise kernel (Note [Kernel layout]): `scalars` are loaded once,
    with what is computed from them alone (`invariant`, Note [Loop-invariant statements]);
    `rows` (stride 0 along the inner dim at this launch) once per row of the dense branch."""
    lines = [f"    n{d} = sizes[{d}]" for d in range(rank)]
    lines += [f"    s{k}_{d} = strides[{k}, {d}]" for k in range(count) for d in range(rank)]
    lines += [f"    c_{op} = {op}[offsets[{k}]]" for k, op in enumerate(operands)
              if op in scalars]
    lines += [f"    {line.format(**{op: f'c_{op}' for op in scalars})}" for line in invariant]
    inner = rank - 1
    dense = " and ".join([f"s{k}_{inner} == {0 if op in rows else 1}"
                          for k, op in enumerate(operands) if op not in scalars] or ["True"])
    lines.append(f"    dense = {dense}")
    indent = "    "
    previous = [f"offsets[{k}]" for k in range(count)]
    for d in range(inner):
        loop = outer if d == 0 else "range"
        lines.append(f"{indent}for i{d} in {loop}(n{d}):")
        indent += "    "
        for k in range(count):
            lines.append(f"{indent}b{k}_{d} = {previous[k]} + i{d} * s{k}_{d}")
        previous = [f"b{k}_{d}" for k in range(count)]
    # dense rows are sliced first: `row[j]` with j in range(n) is provably non-negative, so
    # numba's negative-index wraparound folds away and the loads stay consecutive (LLVM
    # vectorizes them); `flat[base + j]` keeps a select per element (measured 2x slower)
    lines.append(f"{indent}if dense:")
    lines += [f"{indent}    r_{op} = {op}[{previous[k]}]" if op in rows else
              f"{indent}    r_{op} = {op}[{previous[k]}:{previous[k]} + n{inner}]"
              for k, op in enumerate(operands) if op not in scalars]
    lines.append(f"{indent}    for j in range(n{inner}):")
    elements = {op: f"c_{op}" if op in scalars else f"r_{op}" if op in rows else f"r_{op}[j]"
                for op in operands}
    lines += [f"{indent}        {line.format(**elements)}" for line in body]
    lines.append(f"{indent}else:")
    lines.append(f"{indent}    for j in range(n{inner}):")
    elements = {op: f"c_{op}" if op in scalars else f"{op}[{previous[k]} + j * s{k}_{inner}]"
                for k, op in enumerate(operands)}
    lines += [f"{indent}        {line.format(**elements)}" for line in body]
    return lines


_LOGGED: set[Path] = set()  # kernel files whose source output_code has shown


def log_kernel(name: str, path: Path, source: str) -> None:
    """Show a kernel's source on `output_code` the first time its file is used in this
    process; later groups compiled to the same file get one line naming it."""
    if not _LOG.isEnabledFor(logging.INFO):
        return
    if path in _LOGGED:
        _LOG.info("%s: the kernel in %s (its source is shown above)", name, path.name)
        return
    _LOGGED.add(path)
    _LOG.info("%s (%s)\n%s", name, path, source)


class LaunchedKernel(ABC):
    """What every compiled group shares (Kernel, ReductionKernel, RowKernel): its `run` on
    arrays, called on Tensors, and the first launch, which compiles, timed for the status
    line (Note [Compile status] in progress.py)."""

    _launched = False

    @abstractmethod
    def run(self, *values: Any) -> Any:
        """The kernel on arrays (or numbers): its outputs, an array or a tuple of them."""

    def __call__(self, *values: Any) -> Any:
        """The kernel on Tensors (or numbers): Tensor results (check mode calls this)."""
        results = self.run(*(v._data if isinstance(v, Tensor) else v for v in values))
        if isinstance(results, tuple):
            return tuple(Tensor._make(r) for r in results)
        return Tensor._make(results)

    def launch(self, function: Any, *args: Any) -> None:
        """`function(*args)`: a variant of the kernel; numba compiles (or loads) it at the
        kernel's first launch, which is timed."""
        if self._launched:
            function(*args)
            return
        start = time.perf_counter()
        function(*args)
        self._launched = True
        progress.kernel_launched(time.perf_counter() - start)


class Kernel(LaunchedKernel):
    """A compiled fusion group: call it with one value per group input (Tensors or numbers).

    Returns the materialized outputs: a Tensor, or a tuple of them when the group has
    several. `source` is the kernel module's text, `path` its file in the cache.
    """

    def __new__(cls, group: FusionGroup, directory: Path | None = None) -> Any:
        """A reduction group (`group.reduction` set) gets a reductions.ReductionKernel and a
        row group a rows.RowKernel, which take and return the same values; a pointwise
        group gets a Kernel."""
        if group.chain:  # a row group (Note [Row kernels] in rows.py)
            from jitgrad.codegen.rows import RowKernel
            return RowKernel(group, directory)
        if group.reduction is not None:
            # reductions.py builds on this module's layout helpers, so it is imported here
            from jitgrad.codegen.reductions import ReductionKernel
            return ReductionKernel(group, directory)
        return super().__new__(cls)

    def __init__(self, group: FusionGroup, directory: Path | None = None) -> None:
        self.name = group.name
        self.shape = tuple(group.shape)
        self.rank = max(MIN_RANK, len(self.shape))
        self.numel = int(np.prod(self.shape, dtype=np.int64))
        self.out_dtypes = [n.meta["val"].dtype.np for n in group.outputs]
        self.out_orders = [dim_order(n.meta["val"]) for n in group.outputs]
        header, body = lower_group(group)
        self.source = header + body
        self.path = cache.write_kernel(header, body, directory)
        log_kernel(self.name, self.path, self.source)
        module = cache.load_kernel_module(self.path)
        self._serial = module.kernel
        self._parallel = module.kernel_parallel
        self._flat = module.kernel_flat
        self._scalar_operands = [False] * len(group.outputs) + [
            getattr(n.meta.get("val"), "shape", None) == () for n in group.inputs]
        self._threads = module.THREADS
        self._plans: dict[tuple, tuple] = {}

    def run(self, *values: Any) -> Any:
        """The kernel on arrays (or numbers): an array, or a tuple of them when the group
        has several outputs (graph programs call this, Note [Graph programs] in
        program.py)."""
        outs = [allocate(self.shape, dtype, order)
                for dtype, order in zip(self.out_dtypes, self.out_orders, strict=True)]
        if self.numel:
            self.launch(self._launch, outs + [np.asarray(v) for v in values])
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _launch(self, arrays: list[np.ndarray]) -> None:
        if self.numel < PARALLEL_THRESHOLD or self._threads < 2:
            # a training loop calls a kernel with the same layouts every step: the layout
            # arrays are computed once per (shapes, strides) and only the flat views per call
            key = tuple([(a.shape, a.strides) for a in arrays])
            plan = self._plans.get(key)
            if plan is None:
                plan = self._plans[key] = self._serial_plan(arrays)
            layout, contiguous, flat = plan
            if flat:
                self._flat(self.numel, *[a.reshape(-1) for a in arrays])
                return
            flats = [a.reshape(-1) if c else flat_view(a, self.shape)[0]
                     for a, c in zip(arrays, contiguous, strict=True)]
            self._serial(*layout, *flats)
            return
        flats, offsets, strides = zip(*(flat_view(a, self.shape) for a in arrays), strict=True)
        sizes, strides = coalesce(self.shape, list(strides))
        offsets_array = np.array(offsets, dtype=np.int64)
        if len(sizes) == 1:  # one long loop: split it so prange has rows to share out
            self._launch_split(sizes[0], [s[0] for s in strides], offsets_array, flats)
            return
        self._parallel(*pad_layout(sizes, strides, self.rank), offsets_array, *flats)

    def _serial_plan(self, arrays: list[np.ndarray]) -> tuple[tuple, list[bool], bool]:
        """(sizes, strides, offsets) for the serial kernel, which arrays are contiguous, and
        whether `kernel_flat` computes the launch (Note [Kernel variants])."""
        if len(self._plans) >= 64:  # layouts that keep changing: keep the memo small
            self._plans.clear()
        _, offsets, strides = zip(*(flat_view(a, self.shape) for a in arrays), strict=True)
        sizes, strides = coalesce(self.shape, list(strides))
        layout = (*pad_layout(sizes, strides, self.rank), np.array(offsets, dtype=np.int64))
        contiguous = [a.flags.c_contiguous for a in arrays]
        # with the group's element count, a C-contiguous operand holds the elements in the
        # iteration's order (a broadcast one has fewer); a 0-d operand is read once
        flat = all(c and (a.size == self.numel or (scalar and a.size == 1))
                   for a, c, scalar in zip(arrays, contiguous, self._scalar_operands,
                                           strict=True))
        return layout, contiguous, flat

    def _launch_split(self, n: int, steps: list[int], offsets: np.ndarray,
                      flats: tuple) -> None:
        chunk = max(4096, -(-n // (8 * self._threads)))
        rows = n // chunk
        sizes, strides = pad_layout([rows, chunk], [[s * chunk, s] for s in steps], self.rank)
        self._parallel(sizes, strides, offsets, *flats)
        rest = n - rows * chunk
        if rest:
            tail = offsets + np.array(steps, dtype=np.int64) * (rows * chunk)
            self._serial(*pad_layout([rest], [[s] for s in steps], self.rank), tail, *flats)


def dim_order(value: Any) -> tuple[int, ...] | None:
    """The dims of a node's value from outermost to innermost in memory, None when it is
    C-contiguous: a kernel allocates its output in the layout eager's op gives (PyTorch's
    rule: an output follows its inputs' memory order, so `x.t().exp()` is transposed too)."""
    if not isinstance(value, Tensor) or value._data.ndim < 2 or value.is_contiguous():
        return None
    strides = value.stride()
    return tuple(sorted(range(len(strides)), key=lambda d: -strides[d]))


def allocate(shape: tuple[int, ...], dtype: np.dtype,
             order: tuple[int, ...] | None) -> np.ndarray:
    """An uninitialized array of `shape` laid out in memory by dims `order` (see
    `dim_order`; None: C order)."""
    if order is None:
        return np.empty(shape, dtype)
    return np.empty([shape[d] for d in order], dtype).transpose(np.argsort(order))


def flat_view(array: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, int, list[int]]:
    """A 1-D view over `array`'s memory, the element offset of its first element, and its
    element strides along each dimension of the iteration `shape` (0 where it broadcasts)."""
    itemsize = array.itemsize
    pad = len(shape) - array.ndim
    steps = [0] * pad
    for size, stride, extent in zip(array.shape, array.strides, shape[pad:], strict=True):
        assert stride % itemsize == 0, "tensor strides are whole elements"
        steps.append(0 if size == 1 and extent != 1 else stride // itemsize)
    if array.flags.c_contiguous:
        return array.reshape(-1), 0, steps
    flipped = tuple(slice(None, None, -1) if s < 0 else slice(None) for s in array.strides)
    lowest = array[flipped]
    span_bytes = sum((n - 1) * abs(s) for n, s in zip(array.shape, array.strides, strict=True))
    offset = sum((n - 1) * -s for n, s in zip(array.shape, array.strides, strict=True) if s < 0)
    flat = as_strided(lowest, shape=(span_bytes // itemsize + 1,), strides=(itemsize,))
    return flat, offset // itemsize, steps


def coalesce(shape: tuple[int, ...], strides: list[list[int]]) -> tuple[list[int],
                                                                        list[list[int]]]:
    """Drop size-1 dims and merge neighbours contiguous for every operand.

    Returns (sizes, per-operand strides), at least one dimension.
    """
    sizes: list[int] = []
    merged: list[list[int]] = [[] for _ in strides]
    for d, size in enumerate(shape):
        if size == 1:
            continue
        if sizes and all(m[-1] == s[d] * size for m, s in zip(merged, strides, strict=True)):
            sizes[-1] *= size
            for m, s in zip(merged, strides, strict=True):
                m[-1] = s[d]
            continue
        sizes.append(size)
        for m, s in zip(merged, strides, strict=True):
            m.append(s[d])
    if not sizes:
        return [1], [[0] for _ in strides]
    return sizes, merged


def pad_layout(sizes: list[int], strides: list[list[int]],
               rank: int) -> tuple[np.ndarray, np.ndarray]:
    """sizes/strides as int64 arrays of `rank` dims, padded with leading size-1 dims."""
    pad = rank - len(sizes)
    assert pad >= 0, "coalescing never adds dimensions"
    size_array = np.array([1] * pad + sizes, dtype=np.int64)
    stride_array = np.array([[0] * pad + s for s in strides], dtype=np.int64)
    return size_array, stride_array
