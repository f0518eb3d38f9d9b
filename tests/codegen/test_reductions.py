"""Row kernels (codegen/reductions.py): compiled softmax, log_softmax and layer_norm match eager.

Tolerances: float32 within rtol 1e-5 / atol 1e-6 of eager (sums are accumulated in a
different order: vectorized partial sums vs numpy's pairwise sums; softmax multiplies by
1/sum where eager divides), float64 within rtol 1e-12 / atol 1e-14. NaN where eager has
NaN (an all -inf row). Kernels compiled here: the three ops in float32 and float64, and
softmax/layer_norm's prange twins in float32.
"""

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use
from jitgrad.codegen import reductions
from tests.codegen.test_backend import compile_numba

TOLERANCES = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-14)}


def all_three(x, weight, bias):
    n = x.shape[-1]
    return (F.softmax(x, dim=-1), F.log_softmax(x, dim=-1),
            F.layer_norm(x, (n,), weight, bias, eps=1e-5), F.layer_norm(x, (n,)))


def hard_rows(dtype):
    """Rows of randn, of ±1e4, with some -inf, all -inf, and of equal values."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 16))
    x[1] = rng.choice([-1e4, 1e4], size=16) + rng.standard_normal(16)
    x[2, ::3] = -np.inf
    x[3] = -np.inf
    x[4] = 7.0
    x[5] *= 1e-3
    return x.astype(dtype)


def assert_matches_eager(outputs, expected, dtype):
    for got, want in zip(outputs, expected, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want.numpy(), **TOLERANCES[dtype])


def row_kernel_names(produced):
    return [line.split("= ")[1].split("(")[0] for compiled in produced
            for line in compiled.wrapper.code.splitlines() if "row_" in line]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_kernels_match_eager_on_hard_rows(dtype):
    x = jg.tensor(hard_rows(dtype))
    rng = np.random.default_rng(1)
    weight = jg.tensor(rng.standard_normal(16).astype(dtype))
    bias = jg.tensor(rng.standard_normal(16).astype(dtype))
    compiled, produced = compile_numba(lambda x, w, b: all_three(x, w, b))
    outputs = compiled(x, weight, bias)
    assert row_kernel_names(produced) == ["row_softmax", "row_log_softmax", "row_layer_norm",
                                          "row_layer_norm"]
    assert_matches_eager(outputs, all_three(x, weight, bias), dtype)
    softmax, log_softmax = outputs[0].numpy(), outputs[1].numpy()
    assert np.isnan(softmax[3]).all() and np.isnan(log_softmax[3]).all()
    np.testing.assert_array_equal(softmax[2, ::3], 0.0)
    np.testing.assert_allclose(softmax[[0, 1, 2, 4, 5]].sum(axis=-1), 1.0, rtol=1e-6)


def test_row_kernels_on_a_3d_batch_and_empty_rows():
    rng = np.random.default_rng(2)
    x = jg.tensor(rng.standard_normal((2, 3, 16)).astype(np.float32) * 3 + 1)
    weight = jg.tensor(rng.standard_normal(16).astype(np.float32))
    compiled, _ = compile_numba(lambda x, w: all_three(x, w, None))
    assert_matches_eager(compiled(x, weight), all_three(x, weight, None), np.float32)
    empty = jg.tensor(np.zeros((0, 16), np.float32))
    assert [o.shape for o in compiled(empty, weight)] == [(0, 16)] * 4


def test_layouts_and_dims_the_kernels_do_not_cover_run_eagerly():
    rng = np.random.default_rng(3)
    x = jg.tensor(rng.standard_normal((16, 6)).astype(np.float32))

    def fn(x):
        return F.softmax(x, dim=0), F.log_softmax(x.t(), dim=-1)

    compiled, produced = compile_numba(fn)
    outputs = compiled(x)  # dim 0 stays the eager op; x.t() is not contiguous
    assert row_kernel_names(produced) == ["row_log_softmax"]
    assert_matches_eager(outputs, fn(x), np.float32)


def test_prange_twins_above_the_parallel_threshold(monkeypatch):
    monkeypatch.setattr(reductions, "PARALLEL_THRESHOLD", 64)
    rng = np.random.default_rng(4)
    x = jg.tensor(rng.standard_normal((8, 16)).astype(np.float32) * 10)

    def fn(x):
        return F.softmax(x, dim=-1), F.layer_norm(x, (16,))

    compiled, _ = compile_numba(fn)
    assert_matches_eager(compiled(x), fn(x), np.float32)
    module = reductions.row_kernel_module(np.dtype(np.float32))
    if module.THREADS > 1:
        assert module.softmax_parallel.signatures and module.layer_norm_parallel.signatures
