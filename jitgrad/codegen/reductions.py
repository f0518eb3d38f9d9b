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
call (e.g. `x.sum(0)`, `x.sum((1, 2), keepdim=True)` and `x.t().sum()`).

For each output element the kernel makes one or more passes over the reduced elements,
row by row along the innermost reduced dim; a row whose operands all have stride 1 is
sliced out first so the loop vectorizes (Note [Kernel layout]); the prologue is
recomputed in each pass, never stored. Numerically stable forms:
- sums (sum, mean, var, std, layer_norm's statistics, softmax's denominator) accumulate
  in float64, also for float32 inputs, so a float32 sum of 2^24 elements has the error of
  one final rounding (numpy's pairwise float32 sum: a few ulps); float64 accumulates in
  the vectorizer's partial sums (fastmath reassoc), tested against math.fsum;
- var/std are two-pass (mean first, then squared deviations), divided by max(0, N -
  correction) as the eager op (0/0 = NaN, x/0 = inf);
- max/min propagate NaN (`v > m or v != v`), argmax/argmin take the first extremum and
  the first NaN, as numpy and PyTorch;
- softmax, log_softmax, logsumexp and cross-entropy subtract the max (an all -inf slice:
  softmax NaN as eager, logsumexp -inf); log_softmax writes `(x - max) - log(sum)` with
  two exact subtractions (`_sub_exact`: InstCombine turns `(a - b) - c` into `a - (b + c)`
  when the outer subtraction alone allows reassociation), so fastmath cannot fold it into
  `x - (max + log(sum))`, which loses digits for inputs of large magnitude (measured:
  3e-4 absolute error on rows near 1e4 in float32);
- cross-entropy (nll_loss of a log_softmax over the classes of an (N, C) input) computes
  each row's `-(x[t] - max - log(sum)) * w[t]` without materializing the
  log-probabilities, then sums the rows in float64 (mean divides by the summed weights of
  the kept targets, NaN when all are ignored); a class id outside [0, C) raises
  IndexError "Target 7 is out of bounds." as the eager op's check does.
Above PARALLEL_THRESHOLD input elements, with several output elements and more than one
numba thread, the `prange` twin shares the output elements out.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from jitgrad import config
from jitgrad.codegen import cache
from jitgrad.codegen.fusion import FusionGroup, ReductionSpec, describe_node
from jitgrad.codegen.kernels import FASTMATH, PARALLEL_THRESHOLD, coalesce, flat_view
from jitgrad.codegen.lowering import lower_node
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.graph import Node

_LOG = config.logger("output_code")

_PRELUDE = '''\
import math

import numpy as np
from numba import config as numba_config
from numba import njit, prange
from numba.extending import intrinsic

from jitgrad.codegen import mathlib

OPTIONS = dict(cache=True, error_model='numpy', fastmath={fastmath}, nogil=True)
THREADS = numba_config.NUMBA_NUM_THREADS
BLOCK = 4096  # elements per partial sum (Note [Reduction kernels])


@intrinsic
def _sub_exact(typingctx, a, b):
    # a - b with only the "contract" flag: opaque to reassociation (Note [Reduction kernels])
    def codegen(context, builder, signature, args):
        return builder.fsub(args[0], args[1], flags=("contract",))

    return a(a, b), codegen
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
        position = {n: i for i, n in enumerate(group.nodes)}
        core = {group.reduction, spec.companion}
        self.prologue = [n for n in group.nodes if n not in core
                         and position[n] < position[group.reduction]
                         and (spec.companion is None or position[n] < position[spec.companion])]
        self.epilogue = [n for n in group.nodes if n not in core and n not in self.prologue]
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
        lines += _statements(self.prologue, names, "p")
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
        lines += _statements(self.epilogue, names, "e")
        for op in self.strided:
            if op.name.startswith("out"):
                lines.append(f"{{{op.name}}} = {names[op.node]}")
        return lines


def _statements(nodes: list[Node], names: dict[Node, str], prefix: str) -> list[str]:
    lines = []
    for k, node in enumerate(nodes):
        expression = lower_node(node, names)
        assert expression is not None, f"{node!r} was grouped but does not lower"
        dtype = node.meta["val"].dtype.np
        names[node] = f"{prefix}{k}"
        cast = expression if dtype.kind == "b" else f"np.{dtype.name}({expression})"
        lines.append(f"{prefix}{k} = {cast}  # %{node.name}")
    return lines


def lower_reduction_group(group: FusionGroup) -> tuple[str, str]:
    """The kernel module computing reduction `group` (Note [Reduction kernels]): (header,
    body), as `kernels.lower_group` returns them.

    The module defines `kernel(outer_sizes, reduce_sizes, strides, offsets, scalars,
    <operands>)` and `kernel_parallel` (prange over output elements). outer_sizes and
    reduce_sizes are int64 (>= 1 dims each), strides int64 (strided operands, outer dims +
    reduced dims) in elements, offsets int64 (strided operands,), scalars float64 (the
    reduced count, then the kind's parameter: var/std's divisor, layer_norm's eps,
    cross-entropy's ignore_index and reduction code). Operands: out0, ... (outputs), in0,
    ... (inputs), then for cross-entropy table0 (class weights, if any), total (1,) and
    bad (2,) int64 (a flag and the first bad class id).
    """
    source = _Source(group)
    spec = source.spec
    header = [f"# jitgrad kernel {group.name} over {list(group.shape)} reducing dims "
              f"{spec.dims} ({spec.kind}): {len(group.nodes)} fused node(s)"]
    header += [f"#   {describe_node(n)}" for n in group.nodes]
    header += [f"# {op.name} = %{op.node.name} ({op.space})" for op in source.operands]
    strided = source.strided
    params = [op.name for op in source.operands]
    if spec.kind == "cross_entropy":
        params += ["total", "bad"]
    fastmath = "{" + ", ".join(repr(f) for f in FASTMATH) + "}"
    lines = [_PRELUDE.format(fastmath=fastmath)]
    body = _KINDS[spec.kind](source)
    for name, loop, extra in (("kernel", "range", ""),
                              ("kernel_parallel", "prange", ", parallel=True")):
        lines += ["", f"@njit(**OPTIONS{extra})",
                  f"def {name}(outer_sizes, reduce_sizes, strides, offsets, scalars, "
                  f"{', '.join(params)}):"]
        lines += _setup(strided)
        lines.append(f"    for o in {loop}(n_outer_total):")
        lines += _outer_offsets(strided)
        lines += [f"        {line}" for line in body]
        if spec.kind == "cross_entropy":
            lines += _cross_entropy_total(source)
        lines.append("")
    return "\n".join(header) + "\n", "\n".join(lines)


def _setup(strided: list[_Operand]) -> list[str]:
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
    dense = " and ".join(f"s_{op.name} == 1" for op in full) or "True"
    lines.append(f"    dense = {dense}")
    return lines


def _outer_offsets(strided: list[_Operand]) -> list[str]:
    lines = ["        q = o + 0  # a copy: numba refuses to update an alias of the prange index"]
    lines += [f"        b_{op.name} = offsets[{k}]" for k, op in enumerate(strided)]
    lines += ["        for d in range(n_outer - 1, -1, -1):",
              "            size = outer_sizes[d]",
              "            i = q % size",
              "            q //= size"]
    lines += [f"            b_{op.name} += i * strides[{k}, d]" for k, op in enumerate(strided)]
    return lines


def _pass(source: _Source, body: list[str], writes: bool = False,
          partial: tuple[str, str, str] | None = None, prologue: bool = True) -> list[str]:
    """A loop over the reduced elements of output element `o`: the prologue's `v` at each
    (unless `prologue` is False), then `body`.

    writes: the body also reads or writes full-space outputs. Rows are walked in blocks of
    BLOCK elements; partial: (name, dtype, total) makes `name` a per-block partial sum of
    that dtype, set to 0 before each block and added to `total` (float64) after it, so a
    float32 partial's error stays that of BLOCK elements (blocked summation).
    """
    operands = [(k, op) for k, op in enumerate(source.strided) if op.space == "full"
                and (writes or op.name.startswith("in"))]
    lines = ["for r in range(rows):", "    q = r"]
    lines += [f"    c_{op.name} = b_{op.name}" for _, op in operands]
    lines += ["    for d in range(n_reduce - 2, -1, -1):",
              "        size = reduce_sizes[d]",
              "        i = q % size",
              "        q //= size"]
    lines += [f"        c_{op.name} += i * strides[{k}, n_outer + d]" for k, op in operands]
    element = (source.prologue_body() if prologue else []) + body
    start = [] if partial is None else [f"{partial[0]} = {partial[1]}(0.0)"]
    flush = [] if partial is None else [f"{partial[2]} += np.float64({partial[0]})"]
    lines += ["    for j0 in range(0, m, BLOCK):",
              "        n_j = min(BLOCK, m - j0)",
              "        if dense:"]
    lines += [f"            row_{op.name} = {op.name}[c_{op.name} + j0:c_{op.name} + j0 + n_j]"
              for _, op in operands]
    lines += [f"            {line}" for line in start]
    lines.append("            for j in range(n_j):")
    dense = {op.name: f"row_{op.name}[j]" for _, op in operands}
    lines += [f"                {_fill(line, dense)}" for line in element]
    lines += [f"            {line}" for line in flush]
    lines.append("        else:")
    lines += [f"            {line}" for line in start]
    lines.append("            for j in range(n_j):")
    strided = {op.name: f"{op.name}[c_{op.name} + (j0 + j) * s_{op.name}]"
               for _, op in operands}
    lines += [f"                {_fill(line, strided)}" for line in element]
    lines += [f"            {line}" for line in flush]
    return lines


def _fill(line: str, access: dict[str, str]) -> str:
    """`line` with its `{operand}` placeholders replaced by element accesses."""
    return line.format_map(access)


def _reduced_writes(source: _Source, results: dict[Node, str]) -> list[str]:
    access = {op.name: f"{op.name}[b_{op.name}]" for op in source.strided
              if op.space == "reduced"}
    return [_fill(line, access) for line in source.epilogue_body(results, "reduced")]


def _typed(source: _Source) -> str:
    return f"np.{source.dtype.name}"


def _math(source: _Source, name: str, argument: str) -> str:
    suffix = {"float32": "f32", "float64": "f64"}[source.dtype.name]
    return f"mathlib.{name}_{suffix}({_typed(source)}({argument}))"


def _max_pass(source: _Source, smallest: bool = False) -> list[str]:
    """`mx`: the NaN-propagating max (min) of v over the slice.

    `max` and a separate NaN flag vectorize (a select on `v > mx or v != v` does not:
    measured 3.4x slower); the flag makes the result NaN as numpy's maximum.reduce.
    """
    t = _typed(source)
    fn, start = ("min", "np.inf") if smallest else ("max", "-np.inf")
    return [f"mx = {t}({start})", "nan = False",
            *_pass(source, [f"mx = {fn}(mx, v)", "nan |= v != v"]),
            "if nan:", f"    mx = {t}(np.nan)"]


def _sum_pass(source: _Source, total: str = "acc", term: str = "v",
              partial: str = "np.float64") -> list[str]:
    """`total`: the float64 sum of `term` over the slice, from per-block partial sums of
    dtype `partial` (float64 for user-visible sums; the input dtype for sums of exp, whose
    terms lie in [0, 1], as eager's own float32 sums)."""
    return [f"{total} = np.float64(0.0)",
            *_pass(source, [f"part += {partial}({term})"], partial=("part", partial, total))]


def _squares_pass(source: _Source) -> list[str]:
    """`mean` and `sq` (the sum of squared deviations from it), in float64: two passes."""
    return [*_sum_pass(source), "mean = acc / count", "sq = np.float64(0.0)",
            *_pass(source, ["dev = np.float64(v) - mean", "sq += dev * dev"])]


def _sum_kind(source: _Source) -> list[str]:
    return [*_sum_pass(source), f"res = {_typed(source)}(acc)",
            *_reduced_writes(source, {source.reduction: "res"})]


def _mean_kind(source: _Source) -> list[str]:
    return [*_sum_pass(source), f"res = {_typed(source)}(acc / count)",
            *_reduced_writes(source, {source.reduction: "res"})]


def _var_kind(source: _Source) -> list[str]:
    value = "sq / scalars[1]"
    if source.spec.kind == "std":
        value = f"math.sqrt({value})"
    return [*_squares_pass(source), f"res = {_typed(source)}({value})",
            *_reduced_writes(source, {source.reduction: "res"})]


def _extremum_kind(source: _Source) -> list[str]:
    return [*_max_pass(source, source.spec.kind == "amin"), "res = mx",
            *_reduced_writes(source, {source.reduction: "res"})]


def _arg_kind(source: _Source) -> list[str]:
    t = _typed(source)
    smallest = source.spec.kind == "argmin"
    compare = "<" if smallest else ">"
    body = [f"if v {compare} mx or (v != v and mx == mx):", "    mx = v",
            "    ix = r * m + j0 + j"]
    results = {source.reduction: "ix"}
    if source.spec.companion is not None:
        results[source.spec.companion] = "mx"
    return [f"mx = {t}({'np.inf' if smallest else '-np.inf'})", "ix = np.int64(0)",
            *_pass(source, body), *_reduced_writes(source, results)]


def _logsumexp_kind(source: _Source) -> list[str]:
    t = _typed(source)
    return [*_max_pass(source),
            f"shift = mx if (mx == mx and abs(mx) != np.inf) else {t}(0.0)",
            *_sum_pass(source, "acc", _math(source, "exp", "v - shift"), t),
            f"res = {t}(math.log(acc) + np.float64(shift))",
            *_reduced_writes(source, {source.reduction: "res"})]


def _normalizing_pass(source: _Source, value: list[str]) -> list[str]:
    """The write pass of softmax/log_softmax/layer_norm: `value` computes `y` from `v`."""
    full = {op.name: f"{{{op.name}}}" for op in source.strided}
    epilogue = source.epilogue_body({source.reduction: "y"}, "full")
    return _pass(source, value + [_fill(line, full) for line in epilogue], writes=True)


def _softmax_kind(source: _Source) -> list[str]:
    """Three passes: the max; exp(v - max) summed and stored in the first output; the
    stored values scaled in place (one exp per element), then the epilogue."""
    t = _typed(source)
    first = next(op for op in source.strided if op.name.startswith("out"))
    exp = _math(source, "exp", "v - mx")
    store = _pass(source, [f"e = {exp}", "part += e", f"{{{first.name}}} = e"], writes=True,
                  partial=("part", t, "acc"))
    full = {op.name: f"{{{op.name}}}" for op in source.strided}
    epilogue = source.epilogue_body({source.reduction: "y"}, "full")
    scale = _pass(source, [f"y = {{{first.name}}} * scale",
                           *(_fill(line, full) for line in epilogue)],
                  writes=True, prologue=False)
    return [*_max_pass(source), "acc = np.float64(0.0)", *store,
            f"scale = {t}(1.0 / acc)", *scale]


def _log_softmax_kind(source: _Source) -> list[str]:
    t = _typed(source)
    return [*_max_pass(source), *_sum_pass(source, "acc", _math(source, "exp", "v - mx"), t),
            f"lse = {t}(math.log(acc))",
            *_normalizing_pass(source, ["y = _sub_exact(_sub_exact(v, mx), lse)"])]


def _layer_norm_kind(source: _Source) -> list[str]:
    t = _typed(source)
    value = ["y = (v - mean_t) * rstd_t"]
    weight, bias = source.reduction.args[1:]
    for arg, symbol in ((weight, "*"), (bias, "+")):
        if arg is not None:
            operand = source._inputs[(arg, "full", source.shape)]
            value.append(f"y = y {symbol} {{{operand.name}}}")
    return [*_squares_pass(source), f"mean_t = {t}(mean)",
            f"rstd_t = {t}(1.0 / math.sqrt(sq / count + scalars[1]))",
            *_normalizing_pass(source, value)]


def _cross_entropy_kind(source: _Source) -> list[str]:
    t = _typed(source)
    full = [op for op in source.strided if op.space == "full"]
    target = source._inputs[(source.reduction.args[1], "reduced", (source.shape[0],))]
    picked = {op.name: f"{op.name}[b_{op.name} + label * s_{op.name}]" for op in full}
    weight = "table0[label]" if source.reduction.args[2] is not None else f"{t}(1.0)"
    lines = [*_max_pass(source), *_sum_pass(source, "acc", _math(source, "exp", "v - mx"), t),
             f"lse = {t}(math.log(acc))",
             f"label = {target.name}[b_{target.name}]",
             f"loss = {t}(0.0)",
             f"w = {t}(0.0)",
             "if label != np.int64(scalars[1]):",
             "    if label < 0 or label >= m:",
             "        bad[0] = 1",
             "        bad[1] = label",
             "    else:"]
    lines += [f"        {_fill(line, picked)}" for line in source.prologue_body()]
    lines += [f"        w = {weight}",
              "        loss = -_sub_exact(_sub_exact(v, mx), lse) * w",
              "out0[b_out0] = loss",
              "out1[b_out1] = w"]
    return lines


def _cross_entropy_total(source: _Source) -> list[str]:
    t = _typed(source)
    return ["    mode = scalars[2]",
            "    if mode != 0:",
            "        loss_sum = np.float64(0.0)",
            "        weight_sum = np.float64(0.0)",
            "        for i in range(n_outer_total):",
            "            loss_sum += np.float64(out0[i])",
            "            weight_sum += np.float64(out1[i])",
            f"        total[0] = {t}(loss_sum if mode == 1 else loss_sum / weight_sum)"]


_KINDS = {"sum": _sum_kind, "mean": _mean_kind, "var": _var_kind, "std": _var_kind,
          "amax": _extremum_kind, "amin": _extremum_kind, "argmax": _arg_kind,
          "argmin": _arg_kind, "logsumexp": _logsumexp_kind, "softmax": _softmax_kind,
          "log_softmax": _log_softmax_kind, "layer_norm": _layer_norm_kind,
          "cross_entropy": _cross_entropy_kind}
_CROSS_ENTROPY_MODES = {"none": 0, "sum": 1, "mean": 2}


class ReductionKernel:
    """A compiled reduction group: call it with one value per group input.

    Returns the materialized outputs (a Tensor, or a tuple in `group.outputs` order);
    `source` is the kernel module's text, `path` its file in the cache. Raises IndexError
    for a cross-entropy class id outside [0, C) (Note [Reduction kernels]).
    """

    def __init__(self, group: FusionGroup, directory: Path | None = None) -> None:
        self.name = group.name
        self.__name__ = self.name  # the wrapper's generated code names its callees
        self._source = _Source(group)
        self.spec: ReductionSpec = self._source.spec
        self.shape = tuple(group.shape)
        header, body = lower_reduction_group(group)
        self.source = header + body
        self.path = cache.write_kernel(header, body, directory)
        if _LOG.isEnabledFor(logging.INFO):
            _LOG.info("%s (%s)\n%s", self.name, self.path, self.source)
        module = cache.load_kernel_module(self.path)
        self._serial = module.kernel
        self._parallel = module.kernel_parallel
        self._threads = module.THREADS
        self._group_inputs = list(group.inputs)
        self._outputs = list(group.outputs)
        self._numel = math.prod(self.shape)
        self._count = math.prod(self.shape[d] for d in self.spec.dims)
        self._kept = [d for d in range(len(self.shape)) if d not in self.spec.dims]
        self._scalars = self._scalar_params(group.reduction)

    def _scalar_params(self, node: Node) -> np.ndarray:
        kind, params = self.spec.kind, node.kwargs
        extra = [0.0, 0.0]
        if kind in ("var", "std"):
            dof = self._count - params["correction"]
            extra[0] = dof if dof > 0 else 0.0
        elif kind == "layer_norm":
            extra[0] = params["eps"]
        elif kind == "cross_entropy":
            extra = [float(params["ignore_index"]),
                     float(_CROSS_ENTROPY_MODES[params["reduction"]])]
        return np.array([float(self._count), *extra], dtype=np.float64)

    def __call__(self, *values: Any) -> Any:
        by_node = {node: (v._data if isinstance(v, Tensor) else np.asarray(v))
                   for node, v in zip(self._group_inputs, values, strict=True)}
        source = self._source
        cross_entropy = self.spec.kind == "cross_entropy"
        outs = {}
        for op in source.strided:
            if op.name.startswith("out"):
                outs[op.name] = np.empty(op.shape, self._out_dtype(op))
        arrays = [outs[op.name] if op.name in outs else by_node[op.node]
                  for op in source.strided]
        extra = []
        if cross_entropy:
            weight = source.reduction.args[2]
            if weight is not None:
                extra.append(np.ascontiguousarray(by_node[weight]).reshape(-1))
            total, bad = np.zeros(1, source.dtype), np.zeros(2, np.int64)
            extra += [total, bad]
        n_output = math.prod(self.shape[d] for d in self._kept)
        if n_output:
            self._launch(source.strided, arrays, extra)
        if cross_entropy:
            return self._cross_entropy_result(outs["out0"], extra[-2], extra[-1])
        results = [Tensor._make(outs[op.name]) for op in source.strided
                   if op.name.startswith("out")]
        return results[0] if len(results) == 1 else tuple(results)

    def _out_dtype(self, op: _Operand) -> np.dtype:
        if self.spec.kind == "cross_entropy":
            return self._source.dtype
        return op.node.meta["val"].dtype.np

    def _cross_entropy_result(self, rows: np.ndarray, total: np.ndarray,
                              bad: np.ndarray) -> Tensor:
        if bad[0]:
            raise IndexError(f"Target {int(bad[1])} is out of bounds.")
        if self.reduction_mode == "none":
            return Tensor._make(rows)
        return Tensor._make(total.reshape(()))

    @property
    def reduction_mode(self) -> str:
        """cross-entropy's reduction ("none", "sum" or "mean")."""
        return self._source.reduction.kwargs["reduction"]

    def _launch(self, operands: list[_Operand], arrays: list[np.ndarray],
                extra: list[np.ndarray]) -> None:
        flats, offsets, steps = [], [], []
        for op, array in zip(operands, arrays, strict=True):
            flat, offset, step = self._layout(op, array)
            flats.append(flat)
            offsets.append(offset)
            steps.append(step)
        kept, dims = self._kept, self.spec.dims
        outer_sizes, outer = coalesce(tuple(self.shape[d] for d in kept),
                                      [[s[d] for d in kept] for s in steps])
        reduce_sizes, reduced = coalesce(tuple(self.shape[d] for d in dims),
                                         [[s[d] for d in dims] for s in steps])
        strides = np.array([o + r for o, r in zip(outer, reduced, strict=True)], np.int64)
        args = (np.array(outer_sizes, np.int64), np.array(reduce_sizes, np.int64), strides,
                np.array(offsets, np.int64), self._scalars, *flats, *extra)
        parallel = (self._numel >= PARALLEL_THRESHOLD and self._threads > 1
                    and math.prod(outer_sizes) > 1)
        (self._parallel if parallel else self._serial)(*args)

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


def row_kernel_for(node: Node) -> None:
    """The callee replacing graph node `node` in the wrapper: None, the node keeps its op.

    softmax, log_softmax and layer_norm over the last dim used to run on row kernels
    here; they are reduction groups now (Note [Reduction fusion]), whose kernels cover
    every dim and layout, so a node reaching the wrapper as an extern stays eager.
    """
    return None
