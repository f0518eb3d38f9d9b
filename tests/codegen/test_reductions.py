"""Reduction kernels (codegen/reductions.py): compiled reductions match eager over dims,
keepdim, layouts, 0-d and empty inputs, with pointwise prologues and epilogues fused.

Tolerances: float32 within rtol 1e-5 / atol 1e-6 of eager (the kernels accumulate sums
in float64 where eager sums float32 pairwise, and softmax multiplies by 1/sum where
eager divides), float64 within rtol 1e-12 / atol 1e-13; indices exactly. NaN where eager
has NaN. One compiled kernel serves every dims/keepdim/layout variant of a kind and
dtype (Note [Reduction kernels]), so these tests compile about two kernels per kind; each
kind also reduces a leading dim of a contiguous input (the column variant).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jitgrad as jg
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use
from jitgrad.codegen import reductions
from tests.codegen.test_backend import compile_numba
from tests.codegen.vectorization import assert_vectorized, optimized_ir, uncached_module

TOLERANCES = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}
DTYPES = [np.float32, np.float64]


def assert_matches(got, want, dtype):
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (
            f"compiled {g.dtype}{list(g.shape)} vs eager {w.dtype}{list(w.shape)}")
        if w.dtype.is_floating_point:
            np.testing.assert_allclose(g.numpy(), w.numpy(), **TOLERANCES[dtype])
        else:
            np.testing.assert_array_equal(g.numpy(), w.numpy())


def user_function(fn):
    """A user's function calling `fn` (a closure over it: compile_numba resets the cache)."""
    return lambda x: fn(x)


def reduction_groups(produced):
    return [g for compiled in produced for g in compiled.fusion_groups
            if g.reduction is not None]


def layouts(dtype):
    """(name, tensor) pairs of shape (3, 4, 5): contiguous, permuted and sliced."""
    rng = np.random.default_rng(0)
    base = rng.standard_normal((5, 4, 3)).astype(dtype)
    wide = rng.standard_normal((3, 8, 5)).astype(dtype)
    return [("contiguous", jg.tensor(np.ascontiguousarray(base.transpose(2, 1, 0)))),
            ("permuted", jg.tensor(base).permute(2, 1, 0)),
            ("sliced", jg.tensor(wide)[:, ::2])]


REDUCTIONS = {
    "sum": [lambda x: x.sum(1), lambda x: x.sum((0, 2), keepdim=True), lambda x: x.sum(),
            lambda x: x.sum(-1), lambda x: x.sum(0)],
    "mean": [lambda x: x.mean(0), lambda x: x.mean((1, 2)), lambda x: x.mean(keepdim=True)],
    "amax": [lambda x: x.amax(1), lambda x: x.amax((0, 2), keepdim=True), lambda x: x.max(),
             lambda x: x.amax(0)],
    "amin": [lambda x: x.amin(2), lambda x: x.min(), lambda x: x.amin((0, 1))],
    "var": [lambda x: x.var(1), lambda x: x.var((0, 2), correction=0, keepdim=True),
            lambda x: x.var(), lambda x: x.var(0)],
    "std": [lambda x: x.std(0), lambda x: x.std(2, correction=2)],
    "logsumexp": [lambda x: x.logsumexp(1), lambda x: x.logsumexp((0, 2), keepdim=True),
                  lambda x: x.logsumexp(0)],
    "max_dim": [lambda x: tuple(x.max(1)), lambda x: tuple(x.max(0, keepdim=True)),
                lambda x: x.argmax(2)],
    "min_dim": [lambda x: tuple(x.min(-1)), lambda x: x.argmin(), lambda x: x.argmin(0)],
    "softmax": [lambda x: x.softmax(0), lambda x: x.softmax(1), lambda x: x.softmax(-1)],
    "log_softmax": [lambda x: x.log_softmax(0), lambda x: x.log_softmax(2)],
    "layer_norm": [lambda x: F.layer_norm(x, (5,)), lambda x: F.layer_norm(x, (4, 5))],
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("kind", REDUCTIONS)
def test_reductions_match_eager_over_dims_and_layouts(kind, dtype):
    for fn in REDUCTIONS[kind]:
        for layout, x in layouts(dtype):
            compiled, produced = compile_numba(user_function(fn))
            try:
                assert_matches(compiled(x), fn(x), dtype)
            except AssertionError as error:
                raise AssertionError(f"{kind} on a {layout} input: {error}") from error
            assert len(reduction_groups(produced)) == 1


@pytest.mark.parametrize("kind", ["sum", "mean", "amax", "var", "logsumexp", "softmax",
                                  "log_softmax", "max_dim"])
def test_0d_inputs(kind):
    x = jg.tensor(np.float32(1.5))
    fn = {"sum": lambda x: x.sum(), "mean": lambda x: x.mean(), "amax": lambda x: x.amax(),
          "var": lambda x: x.var(correction=0), "logsumexp": lambda x: x.logsumexp(0),
          "softmax": lambda x: x.softmax(0), "log_softmax": lambda x: x.log_softmax(0),
          "max_dim": lambda x: x.max(0).values * 2}[kind]
    compiled, _ = compile_numba(user_function(fn))
    assert_matches(compiled(x), fn(x), np.float32)


@pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0")
def test_empty_inputs_follow_eager():
    x = jg.tensor(np.zeros((0, 4), np.float32))
    fns = [lambda x: x.sum(0), lambda x: x.sum(1), lambda x: x.mean(0), lambda x: x.amax(1),
           lambda x: x.softmax(1), lambda x: x.var(0), lambda x: F.layer_norm(x, (4,))]
    for fn in fns:
        compiled, _ = compile_numba(user_function(fn))
        got, want = compiled(x), fn(x)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())  # sum 0, mean/var NaN


def test_an_empty_max_raises_as_eager():
    x = jg.tensor(np.zeros((0, 4), np.float32))
    with pytest.raises(IndexError) as eager:  # torch 2.13's class for a size-0 reduced dim
        x.amax(0)
    compiled, _ = compile_numba(lambda x: x.amax(0))
    with pytest.raises(IndexError) as got:
        compiled(x)
    assert str(got.value) == str(eager.value)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_layer_norm_with_weight_and_bias(dtype):
    rng = np.random.default_rng(1)
    x = jg.tensor(rng.standard_normal((6, 16)).astype(dtype) * 3 + 1)
    weight = jg.tensor(rng.standard_normal(16).astype(dtype))
    bias = jg.tensor(rng.standard_normal(16).astype(dtype))

    def fn(x, w, b):
        return F.layer_norm(x, (16,), w, b, eps=1e-3), F.layer_norm(x.t(), (6,), bias=None)

    compiled, produced = compile_numba(fn)
    assert_matches(compiled(x, weight, bias), fn(x, weight, bias), dtype)
    assert len(reduction_groups(produced)) == 2


CROSS_ENTROPY = {
    "mean": lambda x, t, w: F.cross_entropy(x * 2.0 + 1.0, t),
    "sum_weighted": lambda x, t, w: F.cross_entropy(x, t, w, reduction="sum"),
    "none_ignore": lambda x, t, w: F.cross_entropy(x.t(), t[:5], ignore_index=1,
                                                    reduction="none"),
    "mean_weighted_ignore": lambda x, t, w: F.cross_entropy(x, t, w, ignore_index=2),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", CROSS_ENTROPY)
def test_cross_entropy_is_one_kernel(name, dtype):
    rng = np.random.default_rng(2)
    x = jg.tensor(rng.standard_normal((8, 5)).astype(dtype) * 4)
    target = jg.tensor(np.array([0, 1, 4, 2, 2, 3, 1, 0]))
    weight = jg.tensor(rng.random(5).astype(dtype) + 0.5)
    fn = CROSS_ENTROPY[name]
    compiled, produced = compile_numba(fn)
    assert_matches(compiled(x, target, weight), fn(x, target, weight), dtype)
    (group,) = reduction_groups(produced)
    assert group.spec.kind == "cross_entropy"
    assert [n.target.name for n in group.nodes][-2:] == ["log_softmax", "nll_loss"]


def test_cross_entropy_all_ignored_is_nan_and_bad_ids_raise():
    x = jg.tensor(np.zeros((3, 4), np.float32))
    ignored = jg.tensor(np.array([-100, -100, -100]))
    compiled, _ = compile_numba(lambda x, t: F.cross_entropy(x, t))
    assert np.isnan(compiled(x, ignored).item())
    with pytest.raises(IndexError, match="Target 7 is out of bounds."):
        compiled(x, jg.tensor(np.array([0, 7, 1])))


def test_prologue_and_epilogue_are_fused():
    rng = np.random.default_rng(3)
    x = jg.tensor(rng.standard_normal((4, 6)).astype(np.float32))
    b = jg.tensor(rng.standard_normal(4).astype(np.float32))

    def fn(x, b):
        return ((x * 2.0).exp().sum(1) / 6.0 + b).log(), (x - 1.0).softmax(0) * x

    compiled, produced = compile_numba(fn)
    assert_matches(compiled(x, b), fn(x, b), np.float32)
    groups = reduction_groups(produced)
    assert [[n.target.name for n in g.nodes] for g in groups] == [
        ["mul", "exp", "sum", "div", "add", "log"], ["sub", "softmax", "mul"]]
    assert all(len(g.outputs) == 1 for g in groups)


def test_prange_twin_above_the_parallel_threshold(monkeypatch):
    monkeypatch.setattr(reductions, "PARALLEL_THRESHOLD", 64)
    rng = np.random.default_rng(4)
    x = jg.tensor(rng.standard_normal((8, 16)).astype(np.float32) * 10)

    def fn(x):
        return x.var(1), x.reshape(2, 4, 16).softmax(1)

    compiled, produced = compile_numba(fn)
    assert_matches(compiled(x), fn(x), np.float32)
    kernels = [k for c in produced for k in c.kernels]
    if kernels[0]._threads > 1:  # var(1): rows; softmax(1) of (2, 4, 16): columns
        assert kernels[0]._kernels["kernel_parallel"].signatures
        assert kernels[1]._kernels["kernel_columns_parallel"].signatures


def test_explain_and_output_code_show_reduction_kernels(caplog):
    jg.reset()
    x = jg.ones(4, 6)
    with caplog.at_level("INFO", logger="jitgrad.output_code"):
        report = jg.explain(jg.compile(lambda x: (x * 2.0).softmax(1), backend="numba"))(x)
    (groups,) = report.fusion_groups
    assert groups[0].startswith("fused_0 [4, 6] reducing dims (1,): mul, softmax -> (%softmax)")
    assert "# jitgrad kernel fused_0 over [4, 6] reducing dims (1,) (softmax): 2 fused " \
           "node(s)" in caplog.text
    assert "#   %mul = mul(%x, 2.0)  f32[4, 6]  test_reductions.py:" in caplog.text
    np.testing.assert_allclose(report.result.numpy(), np.full((4, 6), 1 / 6), rtol=1e-6)
    jg.reset()


def test_leading_dims_reduce_in_the_column_variant():
    rng = np.random.default_rng(6)
    x = jg.tensor(rng.standard_normal((6, 32)).astype(np.float32))

    def fn(x):
        return x.sum(0), x.softmax(0), x.t().var(1)

    compiled, produced = compile_numba(fn)
    assert_matches(compiled(x), fn(x), np.float32)
    kernels = [k for c in produced for k in c.kernels]
    assert len(kernels) == 3 and all(k._kernels["kernel_columns"].signatures for k in kernels)


def test_a_softmax_read_only_by_a_comparison():
    x = jg.tensor(np.random.default_rng(7).standard_normal((5, 8)).astype(np.float32))

    def fn(x):
        return x.softmax(1) > 0.125

    compiled, produced = compile_numba(fn)
    assert_matches(compiled(x), fn(x), np.float32)
    (group,) = reduction_groups(produced)
    assert [n.target.name for n in group.outputs] == ["gt"]


REDUCING = {
    "sum": lambda x, dims, keep: x.sum(dims, keepdim=keep),
    "mean": lambda x, dims, keep: x.mean(dims, keepdim=keep),
    "amax": lambda x, dims, keep: x.amax(dims, keepdim=keep),
    "amin": lambda x, dims, keep: x.amin(dims, keepdim=keep),
    "var": lambda x, dims, keep: x.var(dims, keepdim=keep, correction=0),
    "std": lambda x, dims, keep: x.std(dims, keepdim=keep),
    "logsumexp": lambda x, dims, keep: x.logsumexp(dims, keepdim=keep),
    "softmax": lambda x, dims, keep: x.softmax(dims[0]),
    "log_softmax": lambda x, dims, keep: x.log_softmax(dims[0]),
}


@st.composite
def reductions_of_random_layouts(draw):
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    ndim = len(shape)
    dims = tuple(draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim,
                               unique=True)))
    layout = draw(st.sampled_from(["contiguous", "transposed", "sliced"]))
    return (draw(st.sampled_from(sorted(REDUCING))), shape, dims, draw(st.booleans()), layout,
            draw(st.integers(0, 3)))


@pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0")
@settings(max_examples=40, deadline=None)
@given(case=reductions_of_random_layouts())
def test_random_reductions_match_eager(case):
    """Random shapes (with size-1 dims), dims, keepdim and layouts: one kernel per kind."""
    kind, shape, dims, keep, layout, seed = case
    rng = np.random.default_rng(seed)
    if layout == "transposed":
        x = jg.tensor(rng.standard_normal(shape[::-1]).astype(np.float32)).permute(
            *reversed(range(len(shape))))
    elif layout == "sliced":
        wide = rng.standard_normal(shape[:-1] + (2 * shape[-1],)).astype(np.float32)
        x = jg.tensor(wide)[..., ::2]
    else:
        x = jg.tensor(rng.standard_normal(shape).astype(np.float32))
    fn = REDUCING[kind]
    compiled, produced = compile_numba(lambda x: fn(x, dims, keep))
    with np.errstate(all="ignore"):
        assert_matches(compiled(x), fn(x, dims, keep), np.float32)
    assert len(reduction_groups(produced)) == 1


def test_prologues_with_broadcast_inputs():
    rng = np.random.default_rng(8)
    x = jg.tensor(rng.standard_normal((5, 7)).astype(np.float32))
    row = jg.tensor(rng.standard_normal(7).astype(np.float32))
    col = jg.tensor(rng.standard_normal((5, 1)).astype(np.float32))

    def fn(x, row, col):
        # row broadcasts along the kept dim 0, col along the reduced dim 1 (stride 0 rows)
        return (x * row).sum(0), (x - col).amax(1), (x * row - col).sum(1)

    compiled, produced = compile_numba(fn)
    assert_matches(compiled(x, row, col), fn(x, row, col), np.float32)
    groups = reduction_groups(produced)
    assert [[n.target.name for n in g.nodes] for g in groups] == [
        ["mul", "sum"], ["sub", "amax"], ["mul", "sub", "sum"]]


@pytest.mark.parametrize(("name", "element", "instructions"), [
    ("sum", "double", ("fadd",)),  # the float64 accumulator of float32 data
    ("softmax", "float", ("fadd", "store")),  # the float32 partial sums of exp, the writes
    ("var", "double", ("fadd",)),  # the sums of squared deviations
])
def test_row_kernels_vectorize_with_reassoc_on_accumulators_only(name, element, instructions):
    # only `_accumulate` carries reassoc (Note [Reduction kernels]): it must be enough
    data = np.random.default_rng(9).standard_normal((4, 1024)).astype(np.float32)
    fn = {"sum": lambda x: x.sum(1), "softmax": lambda x: x.softmax(1),
          "var": lambda x: x.var(1)}[name]
    compiled, produced = compile_numba(fn)
    compiled(jg.tensor(data))
    kernel = produced[0].kernels[0]
    module = uncached_module(kernel)
    want = fn(jg.tensor(data)).numpy()
    *layout, variant = kernel._plan([np.empty(want.shape, np.float32), data])
    assert variant == "kernel_rows", "a contiguous row takes the rows variant"
    for name in ("kernel_rows", "kernel"):  # the general row variant's dense branch too
        out = np.empty(want.shape, np.float32)
        module[name](*layout, kernel._scalars, out.reshape(-1), data.reshape(-1))
        np.testing.assert_allclose(out, want, **TOLERANCES[np.float32])
        assert_vectorized(optimized_ir(module[name]), element, instructions)


@pytest.mark.parametrize(("layout", "variant"), [
    ("contiguous", "kernel_rows"), ("sliced_rows", "kernel_rows"),
    ("size_one_rows", "kernel_rows"), ("two_kept_dims", "kernel"),
    ("transposed", "kernel_columns")])
def test_the_rows_variant_takes_dense_rows_and_reads_row_constants_once(layout, variant):
    # Note [Reduction kernels]: one kept dim and a dense reduced dim take kernel_rows (the
    # row mean broadcast along the reduced dim is a row constant there); kept dims that do
    # not coalesce take the general kernel, strided rows the column variant. (The mean is
    # an input: computed in the graph, it would make a row group, Note [Row groups].)
    rng = np.random.default_rng(11)
    data = rng.normal(size=(6, 40)).astype(np.float32) * 10 + 3
    x = {"contiguous": jg.tensor(data), "sliced_rows": jg.tensor(data)[::2],
         "transposed": jg.tensor(data.T.copy()).t(),
         "size_one_rows": jg.tensor(data[:, :1]),
         "two_kept_dims": jg.tensor(np.concatenate([data, data]).reshape(3, 4, 40))[:, 1:3]
         }[layout]

    def squared_deviations(x, mean):
        return ((x - mean) ** 2).mean(-1)

    mean = x.mean(-1, keepdim=True)
    compiled, produced = compile_numba(squared_deviations)
    assert_matches(compiled(x, mean), squared_deviations(x, mean), np.float32)
    taken = [plan[-1] for c in produced for k in c.kernels
             if isinstance(k, reductions.ReductionKernel) for plan in k._plans.values()]
    assert taken == [variant]


# LLVM's loop vectorizer (llvmlite 0.49, 0.50) aborted the process on maxnum reductions of
# some math library results (fuzz seed 960233: log_softmax(a.cos()) of a bool `a`); a max
# pass over values computed with the math library reduces with a compare and select. The
# functions and inputs that aborted, contiguous and strided, in a max and in a softmax:
ABORTED = [("cos", np.bool_), ("cos", np.float32), ("sin", np.bool_), ("erf", np.float32)]


@pytest.mark.parametrize(("name", "dtype"), ABORTED, ids=lambda v: getattr(v, "__name__", v))
def test_max_reductions_of_math_functions_compile_and_match_eager(name, dtype):
    fn = getattr(jg, name)
    data = np.random.default_rng(0).uniform(0.1, 2.0, (3, 10)).astype(dtype)
    compiled_max, produced = compile_numba(lambda t: fn(t).amax(-1))
    compiled_softmax, _ = compile_numba(lambda t: F.softmax(fn(t), -1))
    for x in (jg.tensor(data), jg.tensor(data)[:, ::2]):
        np.testing.assert_allclose(compiled_max(x).numpy(), fn(x).amax(-1).numpy(), rtol=1e-6)
        np.testing.assert_allclose(compiled_softmax(x).numpy(), F.softmax(fn(x), -1).numpy(),
                                   rtol=1e-5, atol=1e-6)
    assert produced  # the max ran in a compiled kernel


def test_the_general_kernel_reads_row_constants_once_and_stays_dense():
    # attention's masked softmax: a (1, 1, T, T) mask keeps the outer dims from coalescing
    # (the general kernel) and the -inf fill value is 0-d; read once per row, it leaves
    # the other operands the dense branch (it took the strided one: 14 ns per element)
    rng = np.random.default_rng(12)
    scores = jg.tensor(rng.standard_normal((2, 3, 5, 5)).astype(np.float32))
    mask = jg.tensor(np.tril(np.ones((5, 5), np.float32)).reshape(1, 1, 5, 5))
    fill = jg.tensor(np.float32(-np.inf))

    def attention(scores, mask, fill):
        return (scores * 0.5).masked_fill(mask == 0, fill).softmax(-1)

    compiled, produced = compile_numba(attention)
    assert_matches(compiled(scores, mask, fill), attention(scores, mask, fill), np.float32)
    (group,) = reduction_groups(produced)
    kernel = next(k for k in produced[0].kernels if isinstance(k, reductions.ReductionKernel))
    inputs = [scores.numpy(), (mask == 0).numpy(), fill.numpy()]
    *_, variant = kernel._plan([np.empty((2, 3, 5, 5), np.float32), *inputs])
    assert variant == "kernel"
    assert "row_in2 = in2[c_in2]" in kernel.source  # one read of the fill value per row
    dense_check = next(line for line in kernel.source.splitlines()
                       if line.strip().startswith("dense = s_"))
    assert "s_in2" not in dense_check
