"""The reduction kinds (Note [Reduction kernels] in reductions.py): per kind, the
`Program` computing one output element, its state and steps; `KINDS` maps a
ReductionSpec's kind to it.
"""

from __future__ import annotations

from jitgrad.codegen.reduction_source import Program, ReductionSource, Step, fill
from jitgrad.trace.ir.graph import Node


def _writes(source: ReductionSource, results: dict[Node, str]) -> list[str]:
    """The epilogue and output writes of a reducing kind (reduced-space placeholders)."""
    return source.epilogue_body(results, "reduced")


def _typed(source: ReductionSource) -> str:
    return f"np.{source.dtype.name}"


def _math(source: ReductionSource, name: str, argument: str) -> str:
    suffix = {"float32": "f32", "float64": "f64"}[source.dtype.name]
    return f"mathlib.{name}_{suffix}({_typed(source)}({argument}))"


def _code(*lines: str) -> Step:
    return Step(list(lines))


def _max_steps(source: ReductionSource, signed: bool = False, nan_check: bool = True
               ) -> list[Step]:
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
    steps = [_code(f"mx = {t}(-np.inf)"), Step([combine], is_pass=True)]
    if nan_check:
        steps += [_code(f"chk = {t}(0.0)", "has_nan = False"),
                  Step(["chk = _accumulate(chk, v)"], is_pass=True),
                  Step(["has_nan |= v != v"], is_pass=True, condition="chk != chk"),
                  _code("if has_nan:", f"    mx = {t}(np.nan)")]
    return steps


def _max_state(source: ReductionSource, nan_check: bool = True) -> list[tuple[str, str]]:
    state = [("mx", _typed(source))]
    return state + [("chk", _typed(source)), ("has_nan", "np.bool_")] if nan_check else state


def _sum_steps(term: str = "v", partial: str = "np.float64") -> list[Step]:
    """`acc`: the float64 sum of `term` over the slice, from per-block partial sums of
    dtype `partial` (float64 for user-visible sums; the input dtype for sums of exp, whose
    terms lie in [0, 1], as eager's own float32 sums)."""
    return [_code("acc = np.float64(0.0)"),
            Step([f"part = _accumulate(part, {partial}({term}))"], is_pass=True,
                  partial=("part", partial, "acc"))]


def _squares_steps() -> list[Step]:
    """`mean` and `sq` (the sum of squared deviations from it), in float64: two passes."""
    return [*_sum_steps(), _code("mean = acc / count", "sq = np.float64(0.0)"),
            Step(["dev = np.float64(v) - mean", "sq = _accumulate(sq, dev * dev)"], is_pass=True)]


_SQUARES_STATE = [("acc", "np.float64"), ("mean", "np.float64"), ("sq", "np.float64")]


# Kinds that differ only by a runtime scalar share one kernel source (fewer compiles):
# sum/mean divide by scalars[1] (1 or the count), var/std take the square root when
# scalars[2] is set, amin/argmin are amax/argmax of v * scalars[1] (-1: exact, NaN stays).


def _narrow_float(source: ReductionSource) -> bool:
    """Whether eager computes this reduction's float16/float32 statistics in float32."""
    return source.dtype.kind == "f" and source.dtype.itemsize < 8


def _eager_mean(source: ReductionSource, count: str) -> str:
    """eager's mean of the float64 sum `acc` (jitgrad/eager/ops/reduction.py): for
    float16/float32 the sum is rounded to float32 (PyTorch's accumulation type) before the
    division, so an overflowing sum gives inf as eager's does."""
    return f"np.float32(acc) / np.float32({count})" if _narrow_float(source) else \
        f"acc / {count}"


def _sum_kind(source: ReductionSource) -> Program:
    t = _typed(source)
    return Program([("acc", "np.float64")], [
        *_sum_steps(), _code(f"res = {t}({_eager_mean(source, 'scalars[1]')})",
                             *_writes(source, {source.reduction: "res"}))])


def _var_kind(source: ReductionSource) -> Program:
    # eager's corrected two-pass mean (jitgrad/eager/ops/reduction.py): a pass summing the
    # deviations from the first mean corrects its rounding, so equal values give exactly 0
    return Program(_SQUARES_STATE, [
        *_sum_steps(), _code("mean = acc / count", "acc = np.float64(0.0)"),
        Step(["dev = np.float64(v) - mean", "acc = _accumulate(acc, dev)"], is_pass=True),
        _code("mean = mean + acc / count", "sq = np.float64(0.0)"),
        Step(["dev = np.float64(v) - mean", "sq = _accumulate(sq, dev * dev)"], is_pass=True),
        _code("variance = sq / scalars[1]",
              f"res = {_typed(source)}(math.sqrt(variance) if scalars[2] != 0.0 else variance)",
              *_writes(source, {source.reduction: "res"}))])


def _extremum_kind(source: ReductionSource) -> Program:
    t = _typed(source)
    return Program(_max_state(source), [
        *_max_steps(source, signed=True),
        _code(f"res = mx * {t}(scalars[1])", *_writes(source, {source.reduction: "res"}))])


def _arg_kind(source: ReductionSource) -> Program:
    t = _typed(source)
    results = {source.reduction: "ix"}
    if source.spec.companion is not None:
        results[source.spec.companion] = "value"
    return Program([("mx", t), ("ix", "np.int64")], [
        _code(f"mx = {t}(-np.inf)", "ix = np.int64(0)"),
        Step([f"w = v * {t}(scalars[1])", "if w > mx or (w != w and mx == mx):", "    mx = w",
               "    ix = {index}"], is_pass=True),
        _code(f"value = mx * {t}(scalars[1])", *_writes(source, results))])


def _logsumexp_kind(source: ReductionSource) -> Program:
    t = _typed(source)
    return Program([*_max_state(source, False), ("shift", t), ("acc", "np.float64")], [
        *_max_steps(source, nan_check=False),
        _code(f"shift = mx if (mx == mx and abs(mx) != np.inf) else {t}(0.0)"),
        *_sum_steps(_math(source, "exp", "v - shift"), t),
        _code(f"res = {t}(math.log(acc) + np.float64(shift))",
              *_writes(source, {source.reduction: "res"}))])


def _normalizing_pass(source: ReductionSource, value: list[str], prologue: bool = True) -> Step:
    """The write pass of softmax/log_softmax/layer_norm: `value` computes `y`."""
    full = {op.name: f"{{{op.name}}}" for op in source.strided} | {"index": "{index}"}
    epilogue = source.epilogue_body({source.reduction: "y"}, "full")
    return Step(value + [fill(line, full) for line in epilogue], is_pass=True, writes=True,
                 prologue=prologue)


def _softmax_kind(source: ReductionSource) -> Program:
    """Three passes: the max; exp(v - max) summed and stored in the first output of the
    input's dtype; the stored values scaled in place (one exp per element), then the
    epilogue. Without such an output (only, say, a bool epilogue is written), the last
    pass recomputes exp(v - max)."""
    t = _typed(source)
    exp = _math(source, "exp", "v - mx")
    first = next((op for op in source.strided if op.name.startswith("out")
                  and op.node.meta["val"].dtype.np == source.dtype), None)
    if first is None:
        store = Step([f"part = _accumulate(part, {exp})"], is_pass=True,
                      partial=("part", t, "acc"))
        write = _normalizing_pass(source, [f"y = {exp} * scale"])
    else:
        store = Step([f"e = {exp}", "part = _accumulate(part, e)", f"{{{first.name}}} = e"],
                      is_pass=True, writes=True, partial=("part", t, "acc"))
        write = _normalizing_pass(source, [f"y = {{{first.name}}} * scale"], prologue=False)
    return Program([*_max_state(source, False), ("acc", "np.float64"), ("scale", t)], [
        *_max_steps(source, nan_check=False), _code("acc = np.float64(0.0)"), store,
        _code(f"scale = {t}(1.0 / acc)"), write])


def _log_softmax_kind(source: ReductionSource) -> Program:
    t = _typed(source)
    return Program([*_max_state(source, False), ("acc", "np.float64"), ("lse", t)], [
        *_max_steps(source, nan_check=False), *_sum_steps(_math(source, "exp", "v - mx"), t),
        _code(f"lse = {t}(math.log(acc))"),
        _normalizing_pass(source, ["y = (v - mx) - lse"])])


def _layer_norm_kind(source: ReductionSource) -> Program:
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
    return Program([*_SQUARES_STATE, ("mean_t", t), ("rstd_t", t)], [
        *_squares_steps(),
        _code(f"mean_t = {t}({_eager_mean(source, 'count')})",
              f"rstd_t = {t}(1.0 / math.sqrt({variance} + scalars[1]))"),
        _normalizing_pass(source, value)])


def _cross_entropy_kind(source: ReductionSource) -> Program:
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
    final += [f"        {fill(line, picked)}" for line in source.prologue_body()]
    final += [f"        w = {weight}",
              "        loss = -((v - mx) - lse) * w",
              "{out0} = loss",
              "{out1} = w"]
    return Program([], [*_max_steps(source, nan_check=False),
                         *_sum_steps(_math(source, "exp", "v - mx"), t),
                         _code(f"lse = {t}(math.log(acc))"), _code(*final)], columns=False)


def cross_entropy_total(source: ReductionSource) -> list[str]:
    t = _typed(source)
    return ["    mode = scalars[2]",
            "    if mode != 0:",
            "        loss_sum = np.float64(0.0)",
            "        weight_sum = np.float64(0.0)",
            "        for i in range(n_outer_total):",
            "            loss_sum = _accumulate(loss_sum, out0[i])",
            "            weight_sum = _accumulate(weight_sum, out1[i])",
            f"        total[0] = {t}(loss_sum if mode == 1 else loss_sum / weight_sum)"]


KINDS = {"sum": _sum_kind, "mean": _sum_kind, "var": _var_kind, "std": _var_kind,
          "amax": _extremum_kind, "amin": _extremum_kind, "argmax": _arg_kind,
          "argmin": _arg_kind, "logsumexp": _logsumexp_kind, "softmax": _softmax_kind,
          "log_softmax": _log_softmax_kind, "layer_norm": _layer_norm_kind,
          "cross_entropy": _cross_entropy_kind}
CROSS_ENTROPY_MODES = {"none": 0, "sum": 1, "mean": 2}
