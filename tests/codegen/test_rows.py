"""Row groups (Note [Row groups] in fusion.py) and row kernels (codegen/rows.py): chains of
reductions over the same rows, and the pointwise code between them, as one kernel that
matches eager: values, NaN and infinities, layouts, dtypes, gradients.

Tolerances are test_reductions.py's: float32 sums of a row are summed in float32 blocks
where eager sums float32 pairwise, so results differ by rounding.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jitgrad as jg
from jitgrad.codegen import rows
from tests.codegen.test_backend import compile_numba
from tests.codegen.test_reductions import DTYPES, TOLERANCES, assert_matches


def softmax(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def log_softmax(x):
    shifted = x - x.amax(-1, keepdim=True)
    return shifted - shifted.exp().sum(-1, keepdim=True).log()


def variance(x):
    return ((x - x.mean(-1, keepdim=True)) ** 2).mean(-1)


def layer_norm(x):
    centered = x - x.mean(-1, keepdim=True)
    return centered / ((centered * centered).mean(-1, keepdim=True) + 1e-5).sqrt()


def rms_norm(x):
    return x * (x * x).mean(-1, keepdim=True).add(1e-6).rsqrt()


def min_max_scale(x):
    low = x.amin(-1, keepdim=True)
    return (x - low) / (x.amax(-1, keepdim=True) - low)


def logsumexp(x):
    high = x.amax(-1, keepdim=True)
    return ((x - high).exp().sum(-1) + 0.0).log() + high.squeeze(-1)


def three_levels(x):
    centered = x - x.mean(-1, keepdim=True)
    scaled = centered / centered.abs().amax(-1, keepdim=True)
    return scaled - scaled.mean(-1, keepdim=True)


def leading_dims(x):
    # reduces dims (0, 1) of a 3-D x: each row is a column of the data
    return x - x.sum((0, 1), keepdim=True) / 12.0


def all_dims(x):
    # one row: the whole tensor (a 0-d mean read back over x)
    return (x - x.mean()).abs().amax()


def two_outputs(x):
    mean = x.mean(-1, keepdim=True)
    return mean, (x - mean).abs()


PROGRAMS = [softmax, log_softmax, variance, layer_norm, rms_norm, min_max_scale, logsumexp,
            three_levels, leading_dims, all_dims, two_outputs]
CHAINS = {softmax: ["amax", "sum"], log_softmax: ["amax", "sum"], variance: ["mean", "mean"],
          layer_norm: ["mean", "mean"], rms_norm: ["mean"], min_max_scale: ["amin", "amax"],
          logsumexp: ["amax", "sum"], three_levels: ["mean", "amax", "mean"],
          leading_dims: ["sum"], all_dims: ["mean", "amax"], two_outputs: ["mean"]}


def layouts(dtype, rng, scale=3.0):
    """(name, tensor) pairs of shape (3, 4, 6): contiguous, transposed, sliced, expanded."""
    base = (rng.standard_normal((3, 4, 6)) * scale).astype(dtype)
    wide = (rng.standard_normal((3, 4, 12)) * scale).astype(dtype)
    return [("contiguous", jg.tensor(base)),
            ("transposed", jg.tensor(np.ascontiguousarray(base.transpose(2, 1, 0))).permute(
                2, 1, 0)),
            ("sliced", jg.tensor(wide)[:, :, ::2]),
            ("expanded", jg.tensor(base[:1]).expand(3, 4, 6))]


def row_groups(produced):
    return [g for compiled in produced for g in compiled.fusion_groups if g.chain]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_a_composed_reduction_is_one_row_group(program):
    x = jg.tensor(np.random.default_rng(0).standard_normal((3, 4, 6)).astype(np.float32))
    compiled, produced = compile_numba(program)
    assert_matches(compiled(x), program(x), np.float32)
    (group,) = row_groups(produced)
    assert [n.target.name for n in group.chain] == CHAINS[program]
    kernels = [k for c in produced for k in c.kernels]
    assert [type(k) for k in kernels].count(rows.RowKernel) == 1


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_row_kernels_match_eager_on_every_layout(program, dtype):
    rng = np.random.default_rng(1)
    compiled, _ = compile_numba(program)
    for name, x in layouts(dtype, rng):
        got, want = compiled(x), program(x)
        assert_matches(got, want, dtype), name


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_row_kernels_keep_eager_nan_and_infinities(program):
    # rows with a NaN, an inf, a -inf, both infinities, all -inf, and huge values
    data = np.random.default_rng(2).standard_normal((3, 4, 6)).astype(np.float32)
    data[0, 0, 2] = np.nan
    data[0, 1, 5] = np.inf
    data[0, 2, 0] = -np.inf
    data[1, 0, [1, 3]] = [np.inf, -np.inf]
    data[1, 1] = -np.inf
    data[2, 3] = 3e38
    x = jg.tensor(data)
    compiled, _ = compile_numba(program)
    with np.errstate(all="ignore"):
        got, want = compiled(x), program(x)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.isnan(g.numpy()), np.isnan(w.numpy()))
        finite = np.isfinite(w.numpy())
        np.testing.assert_array_equal(g.numpy()[~finite & ~np.isnan(w.numpy())],
                                      w.numpy()[~finite & ~np.isnan(w.numpy())])
        np.testing.assert_allclose(g.numpy()[finite], w.numpy()[finite],
                                   **TOLERANCES[np.float32])


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(PROGRAMS), st.integers(1, 5), st.integers(2, 70),
       st.sampled_from([0.01, 1.0, 1e3]), st.integers(0, 2**32 - 1))
def test_row_kernels_match_eager_on_random_rows(program, n, m, scale, seed):
    data = (np.random.default_rng(seed).standard_normal((n, 2, m)) * scale).astype(np.float32)
    x = jg.tensor(data)
    compiled, _ = compile_numba(program)
    got, want = compiled(x), program(x)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want, strict=True):
        # x - mean cancels: an error of a rounding of the data's magnitude
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6 * scale * 10)


def test_row_groups_need_the_same_rows():
    # `x - x.sum(0)` is a row group over the columns, but the sum over dim 1 of its result
    # reduces other rows; the squeezed mean over dim 1 read back over a square x
    # broadcasts along dim 1, not along its rows, so it is not read inside them
    def fn(x):
        return (x - x.sum(0)).sum(1), x - x.mean(1)

    x = jg.tensor(np.random.default_rng(3).standard_normal((5, 5)).astype(np.float32))
    compiled, produced = compile_numba(fn)
    assert_matches(compiled(x), fn(x), np.float32)
    (group,) = row_groups(produced)
    assert [n.target.name for n in group.nodes] == ["sum", "sub"]
    assert next(iter(group.chain.values())).dims == (0,)


def test_a_weight_over_the_last_dim_and_a_row_input_are_read_in_place():
    def fn(x, w, shift):
        return (x - x.mean(-1, keepdim=True) + shift) * w

    rng = np.random.default_rng(4)
    x, w = (jg.tensor(rng.standard_normal(s).astype(np.float32)) for s in ((6, 9), (9,)))
    shift = jg.tensor(rng.standard_normal((6, 1)).astype(np.float32))
    compiled, produced = compile_numba(fn)
    assert_matches(compiled(x, w, shift), fn(x, w, shift), np.float32)
    (kernel,) = [k for c in produced for k in c.kernels]
    assert [form for _, form, _ in kernel._inputs] == ["rows", "kept", "reduced"]


def test_composed_softmax_trains_as_eager():
    rng = np.random.default_rng(5)
    data = rng.standard_normal((4, 7)).astype(np.float32)
    weights = rng.standard_normal((4, 7)).astype(np.float32)

    def step(x, w):
        return (layer_norm(x) * softmax(x * w)).sum()

    grads = []
    for fn in (step, jg.compile(step, backend="numba")):
        x = jg.tensor(data, requires_grad=True)
        w = jg.tensor(weights, requires_grad=True)
        fn(x, w).backward()
        grads.append((x.grad.numpy(), w.grad.numpy()))
    for got, want in zip(grads[1], grads[0], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_softmax_row_kernel_reads_as_pinned():
    x = jg.tensor(np.ones((2, 8), np.float32))
    compiled, produced = compile_numba(softmax)
    compiled(x)
    (kernel,) = [k for c in produced for k in c.kernels]
    start = kernel.source.index("@njit(**OPTIONS)\ndef kernel")
    body = kernel.source[start:kernel.source.index("\n\n@njit(**OPTIONS, parallel=True)")]
    assert body == '''\
@njit(**OPTIONS)
def kernel(n, m, out0, f0):
    t0 = np.empty(m, np.float32)
    for o in range(n):
        row_out0 = out0[o]
        row_f0 = f0[o]
        a0 = np.float32(-np.inf)
        for j in range(m):
            a0 = _maxnum(a0, row_f0[j])
        h0 = np.float32(0.0)
        for j in range(m):
            h0 = _accumulate(h0, row_f0[j])
        if h0 != h0:
            for j in range(m):
                if row_f0[j] != row_f0[j]:
                    a0 = np.float32(np.nan)
                    break
        red0 = a0
        a1 = np.float64(0.0)
        for j0 in range(0, m, BLOCK):
            n_j = min(BLOCK, m - j0)
            b1 = np.float32(0.0)
            s_row_f0 = row_f0[j0:j0 + n_j]
            s_t0 = t0[j0:j0 + n_j]
            for j in range(n_j):
                p2_0 = np.float32((s_row_f0[j] - red0))
                p2_1 = np.float32(mathlib.exp_f32(np.float32(p2_0)))
                b1 = _accumulate(b1, p2_1)
                s_t0[j] = p2_1
            a1 += np.float64(b1)
        red1 = np.float32(a1)
        for j in range(m):
            p3_0 = np.float32((np.float32(t0[j]) / np.float32(red1)))
            row_out0[j] = p3_0
'''


@pytest.mark.parametrize("program", [softmax, variance, three_levels],
                         ids=lambda p: p.__name__)
def test_the_parallel_variant_computes_what_the_serial_one_does(program):
    # kernel_parallel shares the rows out with prange (taken above PARALLEL_THRESHOLD with
    # several numba threads); run directly on a small input, it gives the serial values
    from jitgrad.codegen import cache

    x = jg.tensor(np.random.default_rng(6).standard_normal((37, 53)).astype(np.float32))
    compiled, produced = compile_numba(program)
    compiled(x)
    (kernel,) = [k for c in produced for k in c.kernels]
    module = cache.load_kernel_module(kernel.path)
    outs = []
    for variant in (module.kernel, module.kernel_parallel):
        rows_out = [np.empty((37, 53) if form == "rows" else 37, dtype)
                    for form, _, dtype, _ in kernel._outputs]
        variant(37, 53, *rows_out, x.numpy())
        outs.append(rows_out)
    for serial, parallel in zip(*outs, strict=True):
        np.testing.assert_array_equal(parallel, serial)
