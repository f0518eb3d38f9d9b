"""The numba backend: compiled functions match eager over the op table's pointwise cases.

Forward only (inputs without grad). Tolerances: float32 values within rtol 2e-6 /
atol 1e-6 of eager (kernels compute each op in the op's dtype, as eager does; the math
functions may differ from numpy's by an ulp or two), integer and bool results exactly.
"""

import warnings
from pathlib import Path

import numpy as np
import pytest
from numba.core.errors import NumbaError

import jitgrad as jg
from jitgrad.codegen.autograd import CompiledRegion
from jitgrad.codegen.backend import CompiledGraph, numba_backend
from jitgrad.codegen.fusion import MAX_NODES, find_fusion_groups
from tests.codegen.vectorization import assert_vectorized, optimized_ir, uncached_module
from tests.eager.op_table import OP_CASES

# one kernel each: the suite must stay fast from a cold cache (see tests/codegen/README)
COMPILED_CASES = (
    "add_broadcast", "add_0d", "add_transposed", "sub_broadcast", "rsub_scalar", "mul_scalar",
    "div", "neg", "exp", "log", "tanh", "relu_transposed", "sqrt_0d", "rsqrt", "sigmoid",
    "gelu", "gelu_tanh", "silu", "softplus_beta_threshold", "elu_alpha", "logsigmoid",
    "hardtanh", "leaky_relu_slope", "maximum_broadcast", "minimum_transposed",
    "where_broadcast", "where_scalar_other", "masked_fill", "clamp", "clip_tensor_bounds",
    "gt_floats_transposed", "eq_ints", "logical_and", "logical_not", "cos_strided", "erf",
    "pow_scalar", "floor",
)
CASES = {c.name: c for c in OP_CASES}


def compile_numba(fn, backend=numba_backend, **options):
    """`fn` compiled with `backend` (the numba backend by default) and `options`, and the
    list of what the backend produced (CompiledGraphs, CompiledRegions).

    Compiled entries of earlier tests are dropped first: closures made by `user_function`
    share one code object, and a closed-over function is not guarded yet.
    """
    jg.reset()
    produced = []

    def recording(gm, example_inputs):
        compiled = backend(gm, example_inputs)
        produced.append(compiled)
        return compiled

    return jg.compile(fn, backend=recording, **options), produced


def kernel_copy(x):
    """`x` unchanged, computed by a kernel node: maximum(x, x) keeps the dtype, NaN and -0.0."""
    return jg.maximum(x, x)


def batched(chunks):
    """A function returning the tuple of `fn(*args)` for each fn of each chunk (a list of
    fns), which compiles into a kernel per chunk rather than one per fn.

    Each chunk reads its own `kernel_copy` of the arguments, so the chunk fuses with it into
    one pointwise group (Note [Pointwise fusion]: a node joins the groups it reads; at most
    MAX_NODES nodes a group), and each fn still reads the loaded, dtype-cast elements it
    would read from memory. Eager, the copies change nothing. Numba's compile time grows
    faster than linearly with a kernel's size: five or six cheap ops a kernel compile ~2.5x
    faster than a kernel each, 20 to 40 no faster, and math-library calls (inlined exp,
    tanh, ...) gain nothing: those are best in chunks of one.
    """
    def batch(*args):
        results = []
        for chunk in chunks:
            copies = [kernel_copy(a) for a in args]
            for fn in chunk:
                results.append(fn(*copies))
        return tuple(results)

    return batch


def in_chunks(items, size):
    """`items` as consecutive lists of at most `size`."""
    return [items[k:k + size] for k in range(0, len(items), size)]


def user_function(op, arity):
    """A user's function calling `op` (compiling a library function itself is not the use)."""
    return {1: lambda a: op(a), 2: lambda a, b: op(a, b), 3: lambda a, b, c: op(a, b, c)}[arity]


def assert_same(compiled, eager):
    assert compiled.dtype == eager.dtype and compiled.shape == eager.shape
    if eager.dtype.is_floating_point:
        np.testing.assert_allclose(compiled.numpy(), eager.numpy(), rtol=2e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(compiled.numpy(), eager.numpy())


@pytest.mark.parametrize("name", COMPILED_CASES)
def test_compiled_matches_eager(name):
    case = CASES[name]
    tensors = case.tensors(case.arrays(np.float32), requires_grad=False)
    fn, produced = compile_numba(user_function(case.fn, len(tensors)))
    assert_same(fn(*tensors), case.fn(*tensors))
    assert isinstance(produced[0], CompiledGraph) and len(produced[0].kernels) == 1


@pytest.mark.parametrize(("name", "calls"), [
    ("gelu_tanh", ["mathlib.tanh_f32("]), ("sigmoid", ["mathlib.sigmoid_f32("]),
    ("pow_scalar", ["mathlib.pow_f32("]), ("rsqrt", ["mathlib.rsqrt_f32("]),
    ("erf", ["mathlib.erf_f32("]), ("cos_strided", ["mathlib.cos_f32("])])
def test_kernels_call_the_vectorizable_math_library(name, calls):
    # libm's math.* calls keep a loop scalar (DESIGN.md, Codegen); mathlib's inline
    case = CASES[name]
    tensors = case.tensors(case.arrays(np.float32), requires_grad=False)
    fn, produced = compile_numba(user_function(case.fn, len(tensors)))
    fn(*tensors)
    source = produced[0].kernels[0].source
    assert all(call in source for call in calls) and "math." not in source.replace(
        "mathlib.", ""), source


def test_dense_inner_loop_loads_and_stores_vectors():
    case = CASES["gelu_tanh"]
    tensors = case.tensors(case.arrays(np.float32), requires_grad=False)
    fn, produced = compile_numba(user_function(case.fn, 1))
    fn(*tensors)
    module = uncached_module(produced[0].kernels[0])
    data = np.linspace(-3, 3, 64, dtype=np.float32)
    want = case.fn(jg.tensor(data)).numpy()
    out = np.empty_like(data)
    layout = np.array([[0, 1], [0, 1]], dtype=np.int64)
    module["kernel"](np.array([1, 64]), layout, np.zeros(2, np.int64), out, data)
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=1e-6)
    assert_vectorized(optimized_ir(module["kernel"]), "float", ("load", "store"))
    flat_out = np.empty_like(data)  # Note [Kernel variants]: the same statements
    module["kernel_flat"](data.size, flat_out, data)
    np.testing.assert_array_equal(flat_out, out)
    assert_vectorized(optimized_ir(module["kernel_flat"]), "float", ("load", "store"))


@pytest.mark.parametrize("layout", ["contiguous", "broadcast", "scalar", "transposed"])
def test_a_launch_takes_the_flat_variant_only_when_every_operand_is_contiguous(layout):
    # Note [Kernel variants]: kernel_flat for C-contiguous operands of the group's size
    # (and 0-d ones); any other layout runs the general kernel; both agree with eager
    rng = np.random.default_rng(5)
    x = jg.tensor(rng.normal(size=(8, 6)).astype(np.float32))
    y = {"contiguous": jg.tensor(rng.normal(size=(8, 6)).astype(np.float32)),
         "broadcast": jg.tensor(rng.normal(size=(6,)).astype(np.float32)),
         "scalar": jg.tensor(np.float32(1.5)),
         "transposed": jg.tensor(rng.normal(size=(6, 8)).astype(np.float32)).t()}[layout]

    def fn(x, y):
        return (x * y + 1.0).tanh()

    compiled, produced = compile_numba(fn)
    np.testing.assert_allclose(compiled(x, y).numpy(), fn(x, y).numpy(), rtol=2e-6, atol=1e-6)
    kernel = produced[0].kernels[0]
    flat = layout in ("contiguous", "scalar")
    assert [flat_launch for _, _, flat_launch in kernel._plans.values()] == [flat]


def _chain(x, y):
    return jg.tanh(x * 2.0 + y).exp() - x


def test_new_shape_reuses_the_kernel_source():
    rng = np.random.default_rng(0)
    fn, produced = compile_numba(_chain)
    results = []
    for shape in ((3, 4), (5, 7), (2, 0)):
        x = jg.tensor(rng.normal(size=shape).astype(np.float32))
        y = jg.tensor(rng.normal(size=shape[-1:]).astype(np.float32))
        results.append((fn(x, y)[0] if isinstance(fn(x, y), tuple) else fn(x, y), _chain(x, y)))
    for compiled, eager in results:
        assert_same(compiled, eager)
    assert len({c.kernels[0].path for c in produced}) == 1


def test_strided_flipped_and_broadcast_inputs():
    rng = np.random.default_rng(1)
    base = rng.normal(size=(6, 8)).astype(np.float32)
    x = jg.from_numpy(base[::-2, 1::3])  # negative and non-unit strides
    y = jg.from_numpy(base[0, :3])
    fn, _ = compile_numba(_chain)
    assert_same(fn(x, y), _chain(x, y))


def test_large_input_runs_the_parallel_variant():
    rng = np.random.default_rng(2)
    x = jg.tensor(rng.normal(size=(1 << 18) + 5).astype(np.float32))
    y = jg.tensor(rng.normal(size=1).astype(np.float32))
    fn, _ = compile_numba(_chain)
    assert_same(fn(x, y), _chain(x, y))


def test_nan_and_inf_propagate_as_in_eager():
    x = jg.tensor(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30], dtype=np.float32))
    fn, _ = compile_numba(lambda a: jg.maximum(a.relu().sigmoid(), a) + jg.clamp(a, -1, 1))
    eager = jg.maximum(x.relu().sigmoid(), x) + jg.clamp(x, -1, 1)
    np.testing.assert_array_equal(fn(x).numpy(), eager.numpy())


@pytest.mark.parametrize("name", COMPILED_CASES)
def test_nan_and_inf_inputs_give_eager_values(name):
    """NaN and ±inf in every float input of each lowered op: the kernel gives eager's
    values, NaN where eager has NaN (the same graphs as above: no new compile)."""
    case = CASES[name]
    arrays = case.arrays(np.float32)
    for a in arrays:
        if a.dtype.kind == "f" and a.size >= 3:
            a.reshape(-1)[:3] = (np.nan, np.inf, -np.inf)
    tensors = case.tensors(arrays, requires_grad=False)
    fn, _ = compile_numba(user_function(case.fn, len(tensors)))
    with np.errstate(all="ignore"):
        eager = case.fn(*tensors)
        compiled = fn(*tensors)
    assert compiled.dtype == eager.dtype
    np.testing.assert_allclose(compiled.numpy(), eager.numpy(), rtol=2e-6, atol=1e-6,
                               equal_nan=True)


def test_inputs_requiring_grad_compile_forward_and_backward():
    x = jg.tensor(np.array([0.5, -1.0, 2.0], dtype=np.float32), requires_grad=True)
    fn, produced = compile_numba(lambda a: (a * a).exp().sum())
    fn(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy() *
                               np.exp(x.detach().numpy() ** 2), rtol=1e-6)
    assert isinstance(produced[0], CompiledRegion)


def test_output_code_log_shows_kernel_header_and_wrapper(caplog):
    x = jg.tensor(np.ones((2, 3), dtype=np.float32))

    def program(a):
        return (a + 1.0).relu().sum(0)

    fn, _ = compile_numba(program)
    with caplog.at_level("INFO", logger="jitgrad.output_code"):
        fn(x)
    text = caplog.text
    line = f"test_backend.py:{program.__code__.co_firstlineno + 1}"
    # the sum takes its pointwise prologue: one reduction kernel (codegen/reductions.py)
    assert "# jitgrad kernel fused_0 over [2, 3] reducing dims (0,) (sum): 3 fused node(s)" \
        in text
    assert "test_backend.py:" in text
    # the program of the graph (Note [Graph programs]), exactly: arrays in, the kernel, a
    # Tensor out
    assert "def forward(a):\n" \
           "    a_data = tensor_data(a)\n" \
           f"    sum = fused_0(a_data); del a_data  # {line}\n" \
           f"    sum_out = tensor_of(sum); del sum  # {line}\n" \
           "    return (sum_out,)\n" in text


def _long_chain(x):
    for _ in range(100):
        x = (x * 1.01).tanh()
    return x


def test_a_long_chain_is_split_into_kernels_of_at_most_max_nodes():
    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    jg.reset()
    jg.compile(_long_chain, backend=capture)(jg.ones(4))
    groups = find_fusion_groups(graphs[0].graph)
    assert len(groups) == 4 and all(len(g.nodes) <= MAX_NODES for g in groups)
    assert sum(len(g.nodes) for g in groups) == 200


def test_a_kernel_that_fails_to_compile_falls_back_to_eager_ops(monkeypatch):
    x = jg.tensor(np.linspace(-1, 1, 5, dtype=np.float32))
    fn, produced = compile_numba(lambda a: (a * 3.0).sigmoid())

    def failing_launch(arrays):
        raise NumbaError("a typing failure")

    fn(x)
    monkeypatch.setattr(produced[0].kernels[0], "_launch", failing_launch)
    compiled = produced[0]
    compiled.forward = compiled.wrapper.forward  # as if the kernel had never run
    with pytest.warns(RuntimeWarning, match="kernel failed to compile in numba"):
        out = fn(x)
    np.testing.assert_allclose(out.numpy(), (x * 3.0).sigmoid().numpy(), rtol=1e-6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.testing.assert_allclose(fn(x).numpy(), out.numpy())
    assert not caught  # eager ops from now on, warned once


def _tanh_gather(x, idx):
    y = (x * 2.0).tanh()
    return y[idx].sum()


@pytest.mark.parametrize("requires_grad", [False, True])
def test_an_error_in_a_compiled_graph_names_the_users_line(requires_grad):
    jg.reset()
    x = jg.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3),
                  requires_grad=requires_grad)
    compiled = jg.compile(_tanh_gather, backend="numba")
    np.testing.assert_allclose(compiled(x, jg.tensor([3, 0])).detach().numpy(),
                               _tanh_gather(x, jg.tensor([3, 0])).detach().numpy(), atol=1e-6)
    with pytest.raises(IndexError) as excinfo:
        compiled(x, jg.tensor([0, 9]))
    line = _tanh_gather.__code__.co_firstlineno + 2
    assert str(excinfo.value).endswith(
        f'\n\nfrom user code:\n  File "{__file__}", line {line}, in _tanh_gather\n'
        "    return y[idx].sum()\n           ^^^^^^")


def _tanh_chain(a):
    return (a * 2.0).tanh()


def test_fusion_log_lists_each_graphs_fusion_groups(caplog):
    def program(a):
        return (a * 2.0).exp().sum(1), a.t() @ a

    fn, _ = compile_numba(program)
    with caplog.at_level("INFO", logger="jitgrad.fusion"):
        fn(jg.tensor(np.ones((2, 3), dtype=np.float32)))
    line = f"test_backend.py:{program.__code__.co_firstlineno + 1}"
    assert caplog.records[0].getMessage() == (
        "1 fusion group(s)\n"
        "fused_0 [2, 3] reducing dims (1,): mul, exp, sum -> (%sum)\n"
        f"  %mul = mul(%a, 2.0)  f32[2, 3]  {line}\n"
        f"  %exp = exp(%mul)  f32[2, 3]  {line}\n"
        f"  %sum = sum(%exp, dims=(1,), keepdim=False, out_dtype=None)  f32[2]  {line}")


def test_output_code_shows_each_kernel_source_once(caplog, monkeypatch):
    from jitgrad.codegen import kernels

    monkeypatch.setattr(kernels, "_LOGGED", set())
    jg.reset()
    compiled = jg.compile(_tanh_chain, backend="numba")
    with caplog.at_level("INFO", logger="jitgrad.output_code"):
        for rows in (2, 5):  # a new shape recompiles onto the same shape-generic kernel
            a = jg.tensor(np.ones((rows, 3), dtype=np.float32))
            np.testing.assert_allclose(compiled(a).numpy(), _tanh_chain(a).numpy(), rtol=1e-6)
    messages = [r.getMessage() for r in caplog.records]
    sources = [m for m in messages if "\n# jitgrad kernel" in m]
    assert len(sources) == 1 and sources[0].startswith("fused_0 (")
    path = Path(sources[0].split("(", 1)[1].split(")", 1)[0])
    assert messages.count(f"fused_0: the kernel in {path.name} (its source is shown "
                          "above)") == 1
    assert sum(m.startswith("wrapper of 1 kernel(s)") for m in messages) == 2


def _gelu_ish(x, w):
    return ((x @ w) * 0.5).tanh().sum()


@pytest.mark.parametrize("requires_grad", [False, True])
def test_show_holds_guards_graphs_fusion_groups_kernels_and_wrappers(requires_grad):
    jg.reset()
    produced = []

    def backend(gm, example_inputs):
        produced.append(numba_backend(gm, example_inputs))
        return produced[-1]

    x = jg.tensor(np.ones((2, 3), dtype=np.float32), requires_grad=requires_grad)
    w = jg.tensor(np.ones((3, 4), dtype=np.float32))
    compiled = jg.compile(_gelu_ish, backend=backend)
    np.testing.assert_allclose(compiled(x, w).detach().numpy(),
                               _gelu_ish(x, w).detach().numpy(), rtol=1e-6)
    text = jg.show(compiled)
    region = produced[0]
    graphs = [region.forward, region.backward] if requires_grad else [region]
    assert isinstance(region, CompiledRegion) == requires_grad
    assert "# guards:\n" in text and "# runner:\n" in text
    for graph in graphs:
        assert graph.kernels and graph.fusion_groups
        for group in graph.fusion_groups:
            assert f"{group}\n" in text
        for kernel in graph.kernels:
            assert f"# kernel {kernel.name} ({kernel.path.name}):\n{kernel.source}" in text or \
                f"# kernel {kernel.name}: {kernel.path.name}, shown above" in text
        assert f"# wrapper:\n{graph.wrapper.code}" in text
    if requires_grad:
        assert f"# forward graph:\n{region.joint.forward}\n" in text
        assert f"# backward graph:\n{region.joint.backward}\n" in text


def row_broadcasts(x, row, col):
    return (x - row).exp() / (x * 0.5 + row).abs().sqrt() + col, x * row


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
def test_operands_broadcast_along_rows_take_the_dense_branch_and_match_eager(layout):
    rng = np.random.default_rng(4)
    data = rng.normal(size=(6, 40)).astype(np.float32)
    x = {"contiguous": jg.tensor(data), "transposed": jg.tensor(data.T.copy()).t(),
         "sliced": jg.tensor(np.repeat(data, 2, axis=1))[:, ::2]}[layout]
    row = jg.tensor(rng.normal(size=(6, 1)).astype(np.float32))  # one value per row
    col = jg.tensor(rng.normal(size=(40,)).astype(np.float32))
    fn, produced = compile_numba(row_broadcasts)
    for got, want in zip(fn(x, row, col), row_broadcasts(x, row, col), strict=True):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6, atol=1e-6)
    kernel = produced[0].kernels[0]  # out0, in0 = x, in1 = row (stride 0 along rows), in2
    assert "dense = s0_1 == 1 and s1_1 == 1 and s2_1 == 0 and s3_1 == 1" in kernel.source
    serial = uncached_module(kernel)["kernel"]
    out = np.empty((2, 64), np.float32)
    values = np.linspace(0.5, 3, 128, dtype=np.float32).reshape(2, 64)
    rows, cols = np.array([0.25, 2.0], np.float32), np.linspace(-1, 1, 64, dtype=np.float32)
    strides = np.array([[64, 1], [64, 1], [1, 0], [0, 1]], dtype=np.int64)
    serial(np.array([2, 64]), strides, np.zeros(4, np.int64), out.reshape(-1), values.reshape(-1),
           rows, cols)
    expected = row_broadcasts(jg.tensor(values), jg.tensor(rows[:, None]), jg.tensor(cols))[0]
    np.testing.assert_allclose(out, expected.numpy(), rtol=2e-6, atol=1e-6)
    assert_vectorized(optimized_ir(serial), "float", ("load", "store"))


def test_values_computed_from_0d_inputs_alone_are_computed_before_the_loops():
    # Note [Loop-invariant statements] in codegen/kernels.py (fuzz seed 980112: LLVM's
    # loop unswitching copied the loop per invariant branch of the math library)
    compiled, produced = compile_numba(lambda x, s: (jg.tanh(s) * 2 + 1) * x)
    x, s = jg.randn(5), jg.tensor(0.3)
    np.testing.assert_allclose(compiled(x, s).numpy(), ((jg.tanh(s) * 2 + 1) * x).numpy(),
                               rtol=1e-6)
    source = produced[0].kernels[0].source
    assert source[source.index("def kernel_flat"):].splitlines() == [
        "def kernel_flat(n, out0, in0):",
        "    c_in0 = in0[0]",
        "    x0 = c_in0",
        "    v0 = np.float32(mathlib.tanh_f32(np.float32(x0)))",
        "    v1 = np.float32((v0 * np.float32(2.0)))",
        "    v2 = np.float32((v1 + np.float32(1.0)))",
        "    r_out0 = out0[:n]",
        "    for j in range(n):",
        "        r_out0[j] = v2"]
