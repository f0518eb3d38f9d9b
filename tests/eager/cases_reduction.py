"""Op cases for reductions, sorting and scans (forward vs numpy, gradcheck in float64).

Inputs of max/min/sort/median cases are drawn from a continuous distribution, so ties
(whose gradients follow PyTorch's conventions, tested by value in tests/eager/
test_reduction.py) have probability zero and finite differences are valid.
"""

import numpy as np

import jitgrad as jg
from tests.eager.op_table import Arg, OpCase

A = Arg((3, 4))
A3 = Arg((2, 3, 4))
T = Arg((3, 4), layout="transposed")
S = Arg((3, 4), layout="strided")
SCALAR = Arg(())
POSITIVE = Arg((3, 4), 0.5, 1.5)


def _lse(a, axis, keepdims=False):
    m = np.max(a, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def _zero_column(a):
    """`a` with column 1 zeroed (a jitgrad Tensor), to test zero-aware gradients."""
    return a * jg.tensor([1.0, 0.0, 1.0, 1.0], dtype=a.dtype)


def _sorted_desc(a, axis):
    return -np.sort(-a, axis=axis)


CASES = [
    OpCase("sum_axis_alias", lambda a: jg.sum(a, axis=0, keepdims=True),
           lambda a: a.sum(0, keepdims=True), (A,)),
    OpCase("prod_all", jg.prod, np.prod, (POSITIVE,)),
    OpCase("prod_dim", lambda a: a.prod(1), lambda a: a.prod(1), (A,)),
    OpCase("prod_dims_keepdim_transposed", lambda a: a.prod((0, -1), keepdim=True),
           lambda a: a.prod((0, 2), keepdims=True), (A3,)),
    OpCase("prod_with_zero", lambda a: _zero_column(a).prod(1),
           lambda a: (a * np.array([1, 0, 1, 1], a.dtype)).prod(1), (A,)),
    OpCase("prod_0d", jg.prod, np.prod, (SCALAR,)),
    OpCase("amax_dim", lambda a: a.amax(1), lambda a: a.max(1), (A,)),
    OpCase("amax_all_strided", jg.amax, np.max, (S,)),
    OpCase("amin_dims_keepdim", lambda a: jg.amin(a, (0, 2), keepdim=True),
           lambda a: a.min((0, 2), keepdims=True), (A3,)),
    OpCase("max_all", jg.max, np.max, (A,)),
    OpCase("min_all_transposed", lambda a: a.min(), np.min, (T,)),
    OpCase("max_dim", lambda a: tuple(jg.max(a, 1)), lambda a: (a.max(1), a.argmax(1)), (A,)),
    OpCase("max_dim_keepdim_transposed", lambda a: tuple(a.max(0, keepdim=True)),
           lambda a: (a.max(0, keepdims=True), a.argmax(0, keepdims=True)), (T,)),
    OpCase("min_dim_neg", lambda a: tuple(a.min(-1)), lambda a: (a.min(-1), a.argmin(-1)), (A3,)),
    OpCase("max_dim_0d", lambda a: a.max(0).values, lambda a: a, (SCALAR,)),
    OpCase("max_binary", lambda a, b: jg.max(a, b), np.maximum, (A, Arg((4,)))),
    OpCase("argmax_dim", lambda a: a.argmax(1), lambda a: a.argmax(1), (A,), differentiable=False),
    OpCase("argmin_all_keepdim", lambda a: a.argmin(keepdim=True),
           lambda a: np.asarray(a.argmin()).reshape(1, 1), (A,), differentiable=False),
    OpCase("median_all", jg.median, lambda a: np.sort(a, axis=None)[(a.size - 1) // 2], (A,)),
    OpCase("median_dim", lambda a: tuple(a.median(1)),
           lambda a: (np.sort(a, 1)[:, 1], np.argsort(a, 1)[:, 1]), (A,)),
    OpCase("var_all", jg.var, lambda a: a.var(ddof=1), (A,)),
    OpCase("var_dim_biased", lambda a: a.var(1, unbiased=False), lambda a: a.var(1), (A,)),
    OpCase("var_correction_keepdim_transposed", lambda a: a.var(0, keepdim=True, correction=2),
           lambda a: a.var(0, ddof=2, keepdims=True), (T,)),
    OpCase("std_dim", lambda a: a.std(1), lambda a: a.std(1, ddof=1), (A,)),
    OpCase("std_dims_strided", lambda a: jg.std(a, (0, 1)), lambda a: a.std(ddof=1), (S,)),
    OpCase("var_mean", lambda a: jg.var_mean(a, 1), lambda a: (a.var(1, ddof=1), a.mean(1)), (A,)),
    OpCase("std_mean", lambda a: jg.std_mean(a, 0), lambda a: (a.std(0, ddof=1), a.mean(0)), (A,)),
    OpCase("logsumexp_dim", lambda a: jg.logsumexp(a, 1), lambda a: _lse(a, 1), (A,)),
    OpCase("logsumexp_dims_keepdim", lambda a: a.logsumexp((0, 2), keepdim=True),
           lambda a: _lse(a, (0, 2), True), (A3,)),
    OpCase("logsumexp_0d", lambda a: jg.logsumexp(a, 0), lambda a: a, (SCALAR,)),
    OpCase("norm_all", lambda a: a.norm(), lambda a: np.sqrt((a * a).sum()), (A,)),
    OpCase("norm_p1_dim", lambda a: a.norm(1, dim=1), lambda a: np.abs(a).sum(1), (A,)),
    OpCase("norm_p3_transposed", lambda a: jg.norm(a, 3, dim=0, keepdim=True),
           lambda a: (np.abs(a) ** 3).sum(0, keepdims=True) ** (1 / 3), (T,)),
    OpCase("norm_p_half", lambda a: a.norm(0.5), lambda a: (np.abs(a) ** 0.5).sum() ** 2,
           (Arg((3, 4), 0.5, 2.0),)),
    OpCase("vector_norm_inf", lambda a: jg.linalg.vector_norm(a, float("inf"), dim=1),
           lambda a: np.abs(a).max(1), (A,)),
    OpCase("vector_norm_neg_inf", lambda a: jg.linalg.vector_norm(a, -float("inf")),
           lambda a: np.abs(a).min(), (A,)),
    OpCase("vector_norm_0", lambda a: jg.linalg.vector_norm(a, 0, dim=1),
           lambda a: (a != 0).sum(1).astype(a.dtype), (A,)),
    OpCase("linalg_norm", lambda a: jg.linalg.norm(a), lambda a: np.linalg.norm(a), (A,)),
    OpCase("sort", lambda a: tuple(a.sort()), lambda a: (np.sort(a, -1), np.argsort(a, -1)), (A,)),
    OpCase("sort_desc_dim0_strided", lambda a: tuple(jg.sort(a, 0, descending=True)),
           lambda a: (_sorted_desc(a, 0), np.argsort(-a, 0, kind="stable")), (S,)),
    OpCase("argsort", lambda a: a.argsort(1, descending=True),
           lambda a: np.argsort(-a, 1, kind="stable"), (A,), differentiable=False),
    OpCase("topk", lambda a: tuple(a.topk(2)),
           lambda a: (_sorted_desc(a, -1)[:, :2], np.argsort(-a, -1)[:, :2]), (A,)),
    OpCase("topk_smallest_dim0", lambda a: tuple(jg.topk(a, 2, dim=0, largest=False)),
           lambda a: (np.sort(a, 0)[:2], np.argsort(a, 0)[:2]), (T,)),
    OpCase("cumsum", lambda a: a.cumsum(1), lambda a: a.cumsum(1), (A,)),
    OpCase("cumsum_neg_dim_transposed", lambda a: jg.cumsum(a, -2), lambda a: a.cumsum(0), (T,)),
    OpCase("cumsum_0d", lambda a: a.cumsum(0), lambda a: a, (SCALAR,)),
    OpCase("cumprod", lambda a: a.cumprod(1), lambda a: a.cumprod(1), (A,)),
    OpCase("cumprod_dim0_3d", lambda a: jg.cumprod(a, 0), lambda a: a.cumprod(0), (A3,)),
    OpCase("cumprod_with_zero", lambda a: _zero_column(a).cumprod(1),
           lambda a: (a * np.array([1, 0, 1, 1], a.dtype)).cumprod(1), (A,)),
    OpCase("any_dim", lambda a: (a > 0).any(1), lambda a: (a > 0).any(1), (A,),
           differentiable=False),
    OpCase("all_all", lambda a: jg.all(a > -1.5), lambda a: np.all(a > -1.5), (A,),
           differentiable=False),
    OpCase("count_nonzero", lambda a: jg.count_nonzero(a > 0, dim=0),
           lambda a: np.count_nonzero(a > 0, axis=0), (A,), differentiable=False),
]
