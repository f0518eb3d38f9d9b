"""Reduction rules: per OpDef, what the reduction kernels compute for a call of it.

`REDUCTIONS[op](node)` returns the node's `ReductionSpec` (the kernel program's kind, the
reduced input X and dims, a companion node) or None when the kernels do not cover this
call (another dtype, say); fusion looks reductions up there as it looks pointwise ops up
in `lowering.LOWERINGS` (Note [Reduction fusion] in fusion.py). The kinds name the
programs of reduction_kinds.py (`KINDS`); CHAINED are the kinds a row group chains (Note [Row
groups] in fusion.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from jitgrad.eager.ops.registry import OPS, OpDef
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.ir.graph import Node

REDUCTION_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
# reductions whose output has the input's shape (they normalize along the reduced dims)
NORMALIZING = frozenset({"softmax", "log_softmax", "layer_norm"})
# kinds a row group chains (Note [Row groups] in fusion.py): one accumulator per row each
CHAINED = frozenset({"sum", "mean", "amax", "amin"})


@dataclass(frozen=True)
class ReductionSpec:
    """What a reduction node computes, as the kernels see it (Note [Reduction fusion]).

    kind: the kernel program ("cross_entropy" for nll_loss of a log_softmax; `KINDS` in
    reduction_kinds.py); source: the node whose values are reduced (X; for cross-entropy, the
    log_softmax's input); dims: the reduced dims of X's shape, sorted (all of them for
    dim=None, () for a 0-d X); companion: the take_along of max/min(dim) or the
    log_softmax of cross-entropy, if any.
    """

    kind: str
    source: Node
    dims: tuple[int, ...]
    companion: Node | None = None

    @property
    def normalizing(self) -> bool:
        """Whether the result has X's shape (softmax, log_softmax, layer_norm)."""
        return self.kind in NORMALIZING


# A reduction rule: the ReductionSpec of a node calling its op, or None when this call is
# not one the kernels cover (another dtype, say)
ReductionRule = Callable[[Node], ReductionSpec | None]


def reduction_spec(node: Node) -> ReductionSpec | None:
    """The ReductionSpec of `node` by its op's rule in REDUCTIONS, or None when it is not a
    reduction the kernels cover.

    Covered: a float32/float64 X whose result keeps X's dtype (indices for argmax/argmin),
    layer_norm with absent or same-dtype weight/bias, and nll_loss (any reduction, optional
    class weights) of a log_softmax over dim 1 of an (N, C) X read by nothing else.
    """
    rule = REDUCTIONS.get(node.target) if node.op == "call_function" else None
    return None if rule is None else rule(node)


def _float_source(node: Node) -> Node | None:
    source = node.args[0]
    return source if isinstance(source, Node) and _dtype(source) in REDUCTION_DTYPES else None


def _over_dims(kind: str) -> ReductionRule:
    """The rule of an op reducing `dims` (None: all) to a value of its input's dtype; a
    full max/min is amax/amin over all dims (only their backward formulas differ)."""
    def rule(node: Node) -> ReductionSpec | None:
        source = _float_source(node)
        if source is None or _dtype(node) != _dtype(source):
            return None
        ndim = source.meta["val"].ndim
        dims = node.kwargs["dims"]
        return ReductionSpec(kind, source, () if ndim == 0 else
                             tuple(range(ndim)) if dims is None else tuple(dims))
    return rule


def _arg_extremum(kind: str) -> ReductionRule:
    """argmax/argmin over `dim` (None: all), with the take_along of max/min(dim)."""
    def rule(node: Node) -> ReductionSpec | None:
        source = _float_source(node)
        if source is None:
            return None
        ndim = source.meta["val"].ndim
        if ndim == 0:  # no dims: eager's dim 0 is the value itself
            return ReductionSpec(kind, source, ()) if _dtype(node) == np.dtype(np.int64) \
                else None
        dim = node.kwargs["dim"]
        dims = tuple(range(ndim)) if dim is None else (dim,)
        return ReductionSpec(kind, source, dims, _take_along_of(node, source, dim))
    return rule


def _layer_norm_spec(node: Node) -> ReductionSpec | None:
    source = _float_source(node)
    if source is None or _dtype(node) != _dtype(source) or any(
            a is not None and (not isinstance(a, Node) or _dtype(a) != _dtype(source)
                               or a.meta["val"].ndim != node.kwargs["normalized_ndim"])
            for a in node.args[1:]):
        return None
    ndim = source.meta["val"].ndim
    return ReductionSpec("layer_norm", source,
                         tuple(range(ndim - node.kwargs["normalized_ndim"], ndim)))


def _dtype(node: Any) -> np.dtype | None:
    val = node.meta.get("val") if isinstance(node, Node) else None
    return val.dtype.np if isinstance(val, Tensor) else None


def _take_along_of(argmax: Node, source: Node, dim: int | None) -> Node | None:
    """The take_along(X, argmax, dim) of max/min(dim), if it is among argmax's readers."""
    if dim is None:
        return None
    for user in argmax.users:
        if user.op == "call_function" and user.target is OPS["take_along"] \
                and user.args[:2] == (source, argmax) and user.kwargs.get("dim") == dim:
            return user
    return None


def _cross_entropy_spec(nll: Node) -> ReductionSpec | None:
    log_probs, target, weight = nll.args
    if not (isinstance(log_probs, Node) and log_probs.op == "call_function"
            and log_probs.target is OPS["log_softmax"] and log_probs.kwargs["dims"] == (1,)
            and list(log_probs.users) == [nll]):
        return None
    source = log_probs.args[0]
    if not isinstance(source, Node) or _dtype(source) not in REDUCTION_DTYPES \
            or _dtype(log_probs) != _dtype(source) or source.meta["val"].ndim != 2:
        return None
    if _dtype(target) != np.dtype(np.int64) or (
            weight is not None and (not isinstance(weight, Node)
                                    or _dtype(weight) != _dtype(source))):
        return None
    return ReductionSpec("cross_entropy", source, (1,), log_probs)


REDUCTIONS: dict[OpDef, ReductionRule] = {
    **{OPS[name]: _over_dims(name) for name in ("sum", "mean", "amax", "amin", "var", "std",
                                                "logsumexp", "softmax", "log_softmax")},
    OPS["max"]: _over_dims("amax"), OPS["min"]: _over_dims("amin"),
    OPS["argmax"]: _arg_extremum("argmax"), OPS["argmin"]: _arg_extremum("argmin"),
    OPS["layer_norm"]: _layer_norm_spec, OPS["nll_loss"]: _cross_entropy_spec}
