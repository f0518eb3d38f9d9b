"""Symbolic sizes (Note [Symbolic sizes] in jitgrad/trace/capture/symbolic.py): automatic dynamic,
`dynamic=True/False`, `mark_dynamic`, relation guards, specialization, and the checks that
keep a generic graph from giving a wrong result (Note [Checking a symbolic trace]).

Every test compares compiled with eager on every call, and counts traces exactly
(`compiles`: traces that made a cache entry)."""

import io
import math
import warnings

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
import jitgrad.nn.functional as F  # noqa: N812 - the PyTorch convention
from jitgrad.trace.runtime import entry, report

BACKENDS = ["eager", "numba"]


def cache_of(compiled):
    return entry.cache_of(compiled)


def assert_same(got, want):
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert_same(g, w)
        return
    if not isinstance(want, jg.Tensor):
        assert type(got) is type(want) and got == want
        return
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.requires_grad == want.requires_grad
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5,
                               atol=1e-6)


def rand(*shape, seed=0, requires_grad=False):
    data = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
    return jg.tensor(data, requires_grad=requires_grad)


def run_all(fn, calls, **options):
    """Call fn compiled and eagerly on each argument tuple; return the compiled function."""
    compiled = jg.compile(fn, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning, no recompile-limit warning
        for args in calls:
            assert_same(compiled(*args), fn(*args))
    assert cache_of(compiled).eager_reason is None
    return compiled


def mlp_head(x, w, b):
    batch, features = x.shape
    h = (x @ w + b).relu()
    flat = h.reshape(batch * 2, -1)
    return flat.softmax(-1).sum(0), batch


@pytest.mark.parametrize("backend", BACKENDS)
def test_twelve_batch_sizes_compile_twice_and_stay_compiled(backend):
    w, b = rand(16, 32, seed=1), rand(32, seed=2)
    calls = [(rand(n, 16, seed=n), w, b) for n in (4, 5, 6, 7, 9, 12, 3, 17, 33, 8, 64, 2)]
    compiled = run_all(mlp_head, calls, backend=backend)
    cache = cache_of(compiled)
    assert cache.compiles == 2
    symbolic = cache.entries[0].compiled
    assert symbolic.shape_env.sources[0].name() == "x.shape[0]"
    assert sorted(v for (v,) in symbolic.specializations) == [2, 3, 5, 6, 7, 8, 9, 12, 17,
                                                              33, 64]


def test_the_recompile_says_which_dim_becomes_dynamic():
    compiled = jg.compile(lambda x: x * 2)
    compiled(rand(4, 3))
    with report.recording() as output:
        compiled(rand(5, 3))
    (reason,) = output.recompile_reasons
    assert reason.endswith("x.shape[0]: expected 4, got 5; x.shape[0] becomes dynamic "
                           "(automatic dynamic; `dynamic=True` or `jitgrad.mark_dynamic` "
                           "makes sizes dynamic from the first call)"), reason


def test_the_symbolic_graph_prints_its_sizes_and_guards_check_relations():
    def f(x):
        n, m = x.shape
        if m > 3:
            x = x + 1
        return x.view(n * m).sum(0)

    compiled = run_all(f, [(rand(4, 5),), (rand(6, 7),)], dynamic=True)
    (cache_entry,) = cache_of(compiled).entries
    line = f.__code__.co_firstlineno
    assert str(cache_entry.graph_module.graph).splitlines() == [
        "graph(x: f32[s0, s1]):",
        "  %add     = call_function[add](%x, 1)                                                "
        f"f32[s0, s1]      test_dynamic_shapes.py:{line + 3}",
        "  %reshape = call_function[reshape](%add, shape=((s0 * s1),))                         "
        f"f32[(s0 * s1)]   test_dynamic_shapes.py:{line + 4}",
        "  %sum     = call_function[sum](%reshape, dims=(0,), keepdim=False, out_dtype=None)   "
        f"f32[]            test_dynamic_shapes.py:{line + 4}",
        "  return (%sum,)"]
    assert cache_entry.guard_source.splitlines()[1:] == [
        "type(x) is Tensor and x.dim() == 2 and x.dtype == jitgrad.float32 and not "
        "x.requires_grad and x.is_contiguous()",
        "x.shape[0] >= 2",
        "x.shape[1] >= 2",
        "x.shape[1] > 3                                            # test_dynamic_shapes.py:"
        f"{line + 2}: `if m > 3:`"]
    assert sorted(cache_entry.compiled.specializations) == [(4, 5), (6, 7)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_branch_on_a_size_is_a_guard_and_the_other_side_traces_again(backend):
    def f(x):
        if x.shape[0] > 6:
            return x.sum(0)
        return x.mean(0)

    calls = [(rand(n, 3, seed=n),) for n in (4, 5, 3, 7, 8, 9, 2, 5)]
    compiled = run_all(f, calls, backend=backend)
    # 4 exact, 5 generic (n <= 6), 7 generic (n > 6): the limit is never near
    assert cache_of(compiled).compiles == 3


def test_a_size_used_as_a_python_int_specializes_and_stays_exact():
    def f(x):
        total = x[0]
        for i in range(1, x.shape[0]):  # range() needs a plain int: exact sizes
            total = total + x[i]
        return total

    calls = [(rand(n, 2, seed=n),) for n in (3, 4, 4, 5)]
    compiled = run_all(f, calls)
    assert cache_of(compiled).compiles == 3
    assert "x.shape[0] == 5" in cache_of(compiled).entries[0].guard_source


def test_sizes_returned_or_stored_are_this_calls_sizes():
    class Box:
        pass

    box = Box()

    def f(x):
        n = x.shape[0]
        box.n = n * 2
        return x.sum(), n + 1, x.shape

    compiled = jg.compile(f)
    for n in (4, 5, 6, 9):
        x = rand(n, 2, seed=n)
        got = compiled(x)
        assert_same(got[0], x.sum())
        assert got[1] == n + 1 and type(got[1]) is int
        assert got[2] == jg.Size((n, 2)) and type(got[2]) is jg.Size
        assert box.n == 2 * n and type(box.n) is int
    assert cache_of(compiled).compiles == 2


def test_dynamic_false_keeps_sizes_exact_and_true_starts_symbolic():
    calls = [(rand(n, 3, seed=n),) for n in (4, 5, 6)]
    static = run_all(lambda x: x.cos() * 2, calls, dynamic=False)
    assert cache_of(static).compiles == 3
    dynamic = run_all(lambda x: x.cos() * 3, calls, dynamic=True)
    assert cache_of(dynamic).compiles == 1


def test_mark_dynamic_and_mark_static():
    def f(x):
        return x * 2

    marked = rand(4, 3)
    jg.mark_dynamic(marked, 0)
    compiled = jg.compile(f)
    assert_same(compiled(marked), f(marked))
    assert cache_of(compiled).entries[0].compiled.shape_env.sources[0].name() == "x.shape[0]"
    pinned = rand(4, 3)
    jg.mark_static(pinned, [0, 1])
    compiled = jg.compile(lambda x: x * 3, dynamic=True)
    compiled(pinned)
    assert "x.shape == (4, 3)" in cache_of(compiled).entries[0].guard_source
    with pytest.raises(IndexError, match="dim 2 is out of range for a tensor of 2 dims"):
        jg.mark_dynamic(marked, 2)


def test_a_size_an_op_turns_into_a_constant_is_caught_by_the_check():
    # `x / x.shape[0]` inside a helper the tracer runs for real: the division's divisor is a
    # plain number in the graph, so the generic graph would be wrong at other sizes
    @jg.allow_in_graph
    def mean_rows(x):
        return x.sum(0) / x._data.shape[0]

    calls = [(rand(n, 3, seed=n),) for n in (4, 5, 6, 7, 8)]
    compiled = run_all(lambda x: mean_rows(x * 1), calls)
    assert all(v is not None for v in cache_of(compiled).entries)


@pytest.mark.parametrize("backend", BACKENDS)
def test_slicing_past_the_end_refuses_the_sizes_it_cannot_serve(backend):
    def f(x):
        return x[:, :5] * 2

    calls = [(rand(2, n, seed=n),) for n in (7, 8, 9, 3, 4, 10)]
    run_all(f, calls, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_steps_with_changing_batch_sizes(backend):
    def step(model, x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss

    jg.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    twin = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    twin.load_state_dict(model.state_dict())
    compiled = jg.compile(step, backend=backend)
    for n in (4, 5, 6, 9, 2, 7):
        x = rand(n, 6, seed=n)
        y = jg.tensor(np.arange(n) % 3)
        assert_same(compiled(model, x, y), step(twin, x, y))
        for p, q in zip(model.parameters(), twin.parameters(), strict=True):
            assert_same(p.grad, q.grad)
            p.grad = q.grad = None
    assert cache_of(compiled).compiles == 2


class Attention(nn.Module):
    def __init__(self, width, heads, length):
        super().__init__()
        self.qkv, self.proj, self.heads = nn.Linear(width, 3 * width), nn.Linear(width, width), heads
        self.register_buffer("mask", jg.tril(jg.ones(length, length)).view(1, 1, length, length))

    def forward(self, x):
        batch, steps, width = x.size()
        q, k, v = self.qkv(x).split(width, dim=2)
        q, k, v = (t.view(batch, steps, self.heads, width // self.heads).transpose(1, 2)
                   for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :steps, :steps] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(batch, steps, width))


class TinyGPT(nn.Module):
    def __init__(self, vocab=40, width=16, heads=4, length=48):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(length, width)
        self.ln, self.attn = nn.LayerNorm(width), Attention(width, heads, length)
        self.head = nn.Linear(width, vocab)

    def forward(self, idx):
        _, steps = idx.size()
        x = self.tok(idx) + self.pos(jg.arange(0, steps, dtype=jg.long))
        x = x + self.attn(self.ln(x))
        return self.head(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_decoding_loop_stays_compiled_for_forty_steps(backend):
    jg.manual_seed(0)
    model = TinyGPT().eval()
    compiled = jg.compile(model, backend=backend)
    idx = jg.tensor([[1, 2]])
    with jg.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(40):
            logits = compiled(idx)
            assert_same(logits, model(idx))
            idx = jg.cat((idx, logits[:, -1, :].argmax(-1, keepdim=True)), dim=1)
    cache = cache_of(compiled)
    assert cache.compiles == 2 and cache.eager_reason is None
    assert len(cache.entries[0].compiled.specializations) == 39


def test_a_graph_break_hands_sizes_to_the_resume_function():
    def f(x):
        n = x.shape[0]
        y = x * n
        print("", end="")  # a graph break with the size alive
        return y + n, n

    calls = [(rand(n, 2, seed=n),) for n in (3, 4, 5, 6)]
    compiled = jg.compile(f)
    for args in calls:
        assert_same(compiled(*args), f(*args))
    assert cache_of(compiled).compiles == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_inplace_write_through_a_view_keeps_eagers_version_checks_at_every_size(backend):
    # the specialized graph carries the trace's facts about overwritten values, each
    # naming its writer's copy (fuzz seed 910202: the bump came after the write)
    def f(a):
        v1 = jg.add(a, -1, alpha=2)
        v2 = v1.clone()
        v2.t().clamp_(-1.0, 1.0)
        return jg.maximum(v2.double(), v1.squeeze() + 1)

    compiled = jg.compile(f, backend=backend, dynamic=True)
    for n in (5, 7, 10):
        a = rand(1, n, seed=n, requires_grad=True)
        twin = a.detach().requires_grad_()
        got, want = compiled(a), f(twin)
        assert_same(got, want)
        got.sum().backward()
        want.sum().backward()
        assert_same(a.grad, twin.grad)


def test_strides_read_in_a_symbolic_trace_are_this_calls_strides():
    # fuzz seed 930096: a printed stride() was the traced call's
    seen = []

    def f(a):
        v = a.double() + 1
        seen.append((v.stride(), v.stride(0)))
        jg.graph_break()
        return v.t().contiguous().stride(), v.t().stride()

    compiled = jg.compile(f)
    for n in (4, 6, 9, 13):
        seen.clear()
        got = compiled(rand(n, 3, seed=n))
        assert seen == [((3, 1), 3)] and got == ((n, 1), (1, 3))
    compiled = jg.compile(lambda a: (a * 2).t().stride(), dynamic=True)
    for n in (4, 6, 9):
        assert compiled(rand(3, n)) == (1, n)


# Sizes of tensors made from a dynamic input, read at a graph break: every way of making a
# tensor must carry the input's symbols (a `.detach()` alias carried none, so its numel was
# the trace's, printed for every later size: campaign seed 1017257)
MADE_FROM_INPUT = {
    "detach": "a.detach()", "data": "a.data", "detach_mul": "a.detach() * 2",
    "detach_t": "a.detach().t()", "data_clone": "a.data.clone()", "clone": "a.clone()",
    "t": "a.t()", "reshape": "a.reshape(-1)", "view": "a.view(-1, 1)",
    "contiguous": "a.t().contiguous()", "to_float64": "a.to(jg.float64)", "double": "a.double()",
    "long_float": "a.long().float()", "slice": "a[1:]", "index": "a[0]",
    "unsqueeze": "a.unsqueeze(0)", "expand": "a[:, :1].expand(-1, 3)", "cat": "jg.cat([a, a])",
    "sum": "a.sum(1)", "where": "jg.where(a > 0, a, 0.0)", "zeros_like": "jg.zeros_like(a)",
    "ones": "jg.ones(a.shape[0], 2)", "matmul": "a @ a.t()", "compare": "a > 0",
    "add_int": "a + 1", "rand_like": "jg.rand_like(a)", "new_zeros": "a.new_zeros(a.shape)",
    # ceil((n - start) / step) stayed put from n = 7 to 8, the one probe, and was baked
    # (campaign seed 1031053); a size no expression explains compiles at exact sizes
    "step": "a[::2]", "start_step": "a[1::2]", "step3": "a[2::3]", "stop_step": "a[:-1:2]",
    "start_stop_step": "a[1:-1:3]", "step_t": "a.t()[:, ::2]",
}


@pytest.mark.parametrize("name", sorted(MADE_FROM_INPUT))
def test_sizes_read_at_a_break_follow_each_call(name):
    source = (f"def f(a, sink):\n    v = {MADE_FROM_INPUT[name]}\n"
              "    print(v.shape, v.numel(), v.stride(), file=sink)\n    return a * 1\n")
    namespace = {"jg": jg}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    f = namespace["f"]
    compiled = jg.compile(f, backend="eager")
    got, want = io.StringIO(), io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in (3, 4, 6, 7, 8, 9, 12):
            x = jg.ones(n, 2)
            compiled(x, got)
            f(x, want)
    assert got.getvalue() == want.getvalue()


# A dynamic input dense in another dim order than C (`x.t()`, a permuted batch) gets
# symbols too: its strides are products of its sizes in that order. It got none, so a
# transposed input of a changing batch recompiled per size until the limit, then ran eager.
DENSE_LAYOUTS = {  # shape maker -> the input at batch n
    "t": lambda n: rand(5, n, seed=n).t(),
    "permuted": lambda n: rand(3, n, 4, seed=n).permute(1, 2, 0),
    "batch_last": lambda n: rand(n, 3, 4, seed=n).permute(1, 2, 0),
    "movedim": lambda n: rand(2, 3, n, seed=n).movedim(2, 0),
}


def _layout_program(x):
    y = (x * 2).sum(-1) + x[..., 0]
    return y, x.stride(), y.stride(), x.transpose(0, -1).contiguous().stride(), \
        x.is_contiguous()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layout", sorted(DENSE_LAYOUTS))
def test_a_dense_input_in_any_dim_order_stays_compiled_over_twelve_sizes(backend, layout):
    make = DENSE_LAYOUTS[layout]
    calls = [(make(n),) for n in (4, 5, 6, 7, 9, 12, 3, 17, 33, 8, 64, 2)]
    compiled = run_all(_layout_program, calls, backend=backend)
    assert cache_of(compiled).compiles == 2


def test_a_layout_change_fails_the_dense_order_guard_with_its_reason():
    compiled = jg.compile(lambda x: x * 2, dynamic=True)
    compiled(rand(5, 4).t())
    with report.recording() as output:
        assert_same(compiled(rand(5, 6)), rand(5, 6) * 2)  # C order: another entry
    assert cache_of(compiled).compiles == 2
    (reason,) = output.recompile_reasons
    assert "x.stride() dense in dim order (0, 1): expected True, got False" in reason, reason


SIZE_SCALAR_PROGRAMS = {
    "mul": lambda x: x * x.shape[0], "add": lambda x: x + x.shape[0],
    "rsub": lambda x: x.shape[0] - x, "lt": lambda x: x < x.shape[0],
    "eq": lambda x: x == x.shape[0] + 1, "floor_divide": lambda x: x // (x.shape[0] - 1),
    "maximum": lambda x: jg.clamp(x, max=x.shape[0]),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [jg.int8, jg.uint8, jg.int16, jg.int32])
@pytest.mark.parametrize("name", sorted(SIZE_SCALAR_PROGRAMS))
def test_a_size_used_as_the_scalar_of_a_narrow_integer_tensor_wraps_at_every_size(
        name, dtype, backend):
    """`x * x.shape[0]` of an int8 x: eager wraps the Python int into int8 (600 -> 88), so
    the graph over a size symbol must too, at sizes inside and outside the dtype's range
    (sizes 600 and 70000 raised numpy's OverflowError in the specialization). Where eager
    raises (clamp's bound out of the dtype's range), the compiled call raises the same."""
    program = SIZE_SCALAR_PROGRAMS[name]
    compiled = jg.compile(program, backend=backend)
    for n in (3, 5, 2, 300, 600, 70000):
        x = jg.tensor((np.arange(n) % 7 - 3).astype(dtype.np))
        try:
            want = program(x)
        except Exception as err:  # noqa: BLE001 - eager's error class is the expectation
            with pytest.raises(type(err)):
                compiled(x)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback to eager
            got = compiled(x)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())
