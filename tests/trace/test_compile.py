"""@jitgrad.compile end to end: captured graphs, guards, recompiles, fallbacks, explain().

Every test compares compiled with eager (values, dtype, shape, requires_grad) and asserts
graph and recompile counts exactly. Frames with a construct the tracer cannot capture
run eagerly as a whole (a frame outcome, not a graph break) until resume functions land.
"""

import math
import types
import warnings

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
import jitgrad.nn.functional as F  # noqa: N812 - the PyTorch convention
from jitgrad.trace.runtime import entry


def assert_same(compiled, eager):
    assert compiled.shape == eager.shape and compiled.dtype == eager.dtype
    assert compiled.requires_grad == eager.requires_grad
    np.testing.assert_allclose(compiled.detach().numpy(), eager.detach().numpy(), rtol=1e-6)


def x8(seed=0, shape=(8,), requires_grad=False):
    data = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
    return jg.tensor(data, requires_grad=requires_grad)


def relu_affine(x):
    return jg.relu(x * 2 + 1)


def test_one_graph_and_no_recompile_on_second_call():
    report = jg.explain(relu_affine)(x8())
    assert report.graph_count == 1 and report.graph_break_count == 0
    assert report.ops_per_graph == [3]
    compiled = jg.compile(relu_affine)
    x = x8(1)
    assert_same(compiled(x), relu_affine(x))
    assert_same(compiled(x8(2)), relu_affine(x8(2)))


def test_printed_graph_names_ops_shapes_and_lines():
    report = jg.explain(relu_affine)(x8())
    text = str(report.graphs[0])
    assert "call_function[mul]" in text and "call_function[relu]" in text
    assert "f32[8]" in text and "test_compile.py:" in text


class CompileCounter:
    """A backend that counts compiles and runs the graph eagerly."""

    def __init__(self):
        self.compiles = 0

    def __call__(self, gm, example_inputs):
        self.compiles += 1
        return gm


def test_shape_and_dtype_changes_recompile_when_sizes_are_static():
    counter = CompileCounter()
    compiled = jg.compile(lambda x: jg.sin(x) + 1, backend=counter, dynamic=False)
    for shape in [(4,), (5,), (6,), (4,), (5,)]:
        x = x8(shape=shape)
        assert_same(compiled(x), jg.sin(x) + 1)
    assert counter.compiles == 3
    x64 = jg.tensor(np.ones(4), dtype=jg.float64)
    assert_same(compiled(x64), jg.sin(x64) + 1)
    assert counter.compiles == 4


def test_recompile_reason_names_the_failing_guard():
    def f(x):
        return x.cos() * 2

    compiled = jg.compile(f)
    compiled(x8(shape=(4,)))
    from jitgrad.trace.runtime import report as report_module

    with report_module.recording() as output:
        compiled(x8(shape=(5,)))
    assert len(output.recompile_reasons) == 1
    assert "x" in output.recompile_reasons[0] and "5" in output.recompile_reasons[0]


def test_requires_grad_flows_through_the_eager_backend():
    def f(x, w):
        return (x @ w).tanh().sum()

    x, w = x8(shape=(3, 4)), x8(1, shape=(4, 2), requires_grad=True)
    out = jg.compile(f)(x, w)
    out.backward()
    w_eager = x8(1, shape=(4, 2), requires_grad=True)
    f(x, w_eager).backward()
    np.testing.assert_allclose(w.grad.numpy(), w_eager.grad.numpy(), rtol=1e-6)


def test_python_control_flow_on_constants_and_unrolled_loops():
    def f(x, n, flag="a"):
        for i in range(n):
            x = x * 2 + i
        return x + 1 if flag == "a" else x - 1

    compiled = jg.compile(f)
    x = x8()
    assert_same(compiled(x, 3), f(x, 3))
    report = jg.explain(f)(x, 3)
    assert report.ops_per_graph == [7]
    assert_same(compiled(x, 3, flag="b"), f(x, 3, flag="b"))


def helper(t):
    return t * 3 - 1


def test_user_functions_closures_and_comprehensions_are_inlined():
    k = 3

    def inner(t):
        return t + k

    def f(xs):
        return jg.stack([inner(helper(x)) for x in xs])

    xs = [x8(i) for i in range(3)]
    report = jg.explain(f)(xs)
    assert report.graph_count == 1 and report.graph_break_count == 0
    assert_same(jg.compile(f)(xs), f(xs))


def test_containers_and_output_structure_are_rebuilt():
    def f(x, d):
        acc = 0
        for _key, value in d.items():
            acc = acc + value * 2
        return {"out": (x + 1, [x * 2, 3]), "acc": acc, "n": 5}

    x, d = x8(), {"a": x8(1), "b": x8(2)}
    got, want = jg.compile(f)(x, d), f(x, d)
    assert got.keys() == want.keys() and got["n"] == 5 and got["out"][1][1] == 3
    assert_same(got["out"][0], want["out"][0])
    assert_same(got["out"][1][0], want["out"][1][0])
    assert_same(got["acc"], want["acc"])


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(jg.ones(8) * 0.5)
        self.scale = 2
        self.lin = nn.Linear(8, 4)

    def forward(self, x):
        return F.gelu(self.lin(x * self.w * self.scale))


def test_module_parameters_are_graph_inputs_and_attribute_changes_recompile():
    model = Scale()
    compiled = jg.compile(model)
    x = x8(shape=(2, 8))
    assert_same(compiled(x), model(x))
    report = jg.explain(model)(x)
    assert report.graph_count == 1
    model.scale = 3
    assert_same(compiled(x), model(x))
    out = compiled(x).sum()
    out.backward()
    assert model.w.grad is not None and model.lin.weight.grad is not None


def test_no_grad_region_is_captured():
    def f(x):
        with jg.no_grad():
            y = x * 2
        return y + x

    x = x8(requires_grad=True)
    report = jg.explain(f)(x)
    assert report.graph_count == 1 and report.graph_break_count == 0
    out = jg.compile(f)(x)
    assert out.requires_grad and jg.is_grad_enabled()
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.ones(8))


def test_side_effects_break_the_graph_and_run_once_per_call(capsys):
    printed = []

    def f(x):
        y = x + 1
        printed.append("side")
        print("side")
        return y * 2

    compiled = jg.compile(f)
    x = x8()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same(compiled(x), (x + 1) * 2)
        assert_same(compiled(x), (x + 1) * 2)
    assert printed == ["side", "side"] and capsys.readouterr().out == "side\nside\n"
    report = jg.explain(f)(x)
    assert report.graph_count == 2 and report.graph_break_count == 1, "the append is replayed"


def test_unresumable_break_runs_the_frame_eagerly_with_one_warning():
    def f(x):
        for _ in range(2):
            x = x + 1
            print("in loop")
        return x

    compiled = jg.compile(f)
    with pytest.warns(UserWarning, match="inside a loop"):
        assert_same(compiled(x8()), x8() + 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same(compiled(x8()), x8() + 2)


def test_fullgraph_raises_before_running_user_code(capsys):
    def f(x):
        y = x + 1
        print("no")
        return y

    with pytest.raises(jg.CompileError) as excinfo:
        jg.compile(f, fullgraph=True)(x8())
    assert capsys.readouterr().out == ""
    message = str(excinfo.value)
    assert "print" in message and "test_compile.py" in message and 'print("no")' in message
    assert isinstance(excinfo.value, RuntimeError)


def test_data_dependent_branch_without_breaks_falls_back_to_eager():
    def f(x):
        y = x * 2
        if y.sum() > 0:
            return jg.relu(y)
        return -y

    compiled = jg.compile(f)
    for sign in (1, -1):
        x = jg.tensor(np.full(4, sign, dtype=np.float32), requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_same(compiled(x), f(x))


def test_disable_switch_and_disabled_functions(monkeypatch):
    @jg.disable
    def eager_only(t):
        return t + 1

    def f(x):
        return eager_only(x * 2)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(jg.compile(f)(x8()), f(x8()))
    from jitgrad import config

    monkeypatch.setattr(config, "DISABLE", True)
    compiled = jg.compile(relu_affine)
    report = jg.explain(compiled)(x8())
    assert report.graph_count == 0 and report.disabled
    assert_same(report.result, relu_affine(x8()))
    disabled = ("Compilation is disabled (JITGRAD_DISABLE=1): the function ran eagerly and "
                "nothing was captured")
    assert str(report) == disabled
    line = relu_affine.__code__.co_firstlineno
    assert jg.show(compiled) == f"# relu_affine (test_compile.py:{line}): no compiled entry " \
        f"({disabled})\n"


def test_a_recompile_reason_names_the_failing_guard_of_every_entry():
    compiled = jg.compile(lambda x, flag: x + 1 if flag == "a" else x - 1)
    compiled(x8(shape=(4,)), "a")
    compiled(x8(shape=(4,)), "b")
    from jitgrad.trace.runtime import report as report_module

    with report_module.recording() as output:
        compiled(x8(shape=(5,)), "c")
    (reason,) = output.recompile_reasons
    assert reason.endswith(": entry 2 of 2: x.shape[0]: expected 4, got 5; "
                           "entry 1 of 2: x.shape[0]: expected 4, got 5; x.shape[0] becomes "
                           "dynamic (automatic dynamic; `dynamic=True` or `jitgrad.mark_dynamic`"
                           " makes sizes dynamic from the first call)"), reason


def test_at_the_recompile_limit_the_compiled_entries_keep_running():
    def f(x, flag):
        return x + 1 if flag == "a" else x - 1

    compiled = jg.compile(f)
    x = x8()
    with pytest.warns(UserWarning, match="its 8 compiled entries keep running for calls whose "
                      "guards hold, other calls run eagerly from now on. Why this call "
                      "matched none: entry 8 of 8: flag: expected 'flag7', got 'flag8'"):
        for i in range(9):
            compiled(x, f"flag{i}")
    from jitgrad.trace.runtime import entry as entry_module

    cache = entry_module.cache_of(compiled)
    hits = sum(e.hits for e in cache.entries)
    assert_same(compiled(x, "flag3"), f(x, "flag3"))
    assert sum(e.hits for e in cache.entries) == hits + 1  # an old entry ran, compiled


def test_recompile_limit_falls_back_to_eager_with_one_warning():
    def f(x, flag):
        return x + 1 if flag == "a" else x - 1

    compiled = jg.compile(f)
    x = x8()
    with pytest.warns(UserWarning, match="recompile limit"):
        for i in range(10):
            assert_same(compiled(x, f"flag{i}"), f(x, f"flag{i}"))


def test_backend_callable_receives_graph_module_and_real_inputs():
    seen = []

    def backend(gm, example_inputs):
        seen.append((gm, [t.shape for t in example_inputs]))
        return gm

    compiled = jg.compile(relu_affine, backend=backend)
    assert_same(compiled(x8()), relu_affine(x8()))
    assert len(seen) == 1 and seen[0][1] == [(8,)]


def test_internal_compiler_error_falls_back_to_eager_with_one_warning():
    def broken_backend(gm, example_inputs):
        raise ZeroDivisionError("backend bug")

    compiled = jg.compile(relu_affine, backend=broken_backend)
    x = x8()
    with pytest.warns(UserWarning, match="internal error ZeroDivisionError: backend bug"):
        assert_same(compiled(x), relu_affine(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same(compiled(x), relu_affine(x))
    with pytest.raises(jg.CompileError, match="internal error"):
        jg.reset()
        jg.compile(relu_affine, backend=broken_backend, fullgraph=True)(x)


def test_user_shape_error_is_raised_at_the_users_line_by_the_eager_run():
    def f(x, y):
        return x + y

    with pytest.raises(RuntimeError, match="must match the size of tensor b") as excinfo:
        jg.compile(f)(x8(shape=(3,)), x8(shape=(4,)))
    assert any(entry.name == "f" for entry in excinfo.traceback)


def test_show_renders_guards_graphs_runner_and_resume_functions():
    @jg.compile
    def f(x):
        y = x * 2
        if y.sum() > 0:
            y = jg.relu(y)
        else:
            y = -y
        return y.mean()

    f(jg.ones(3))
    text = jg.show(f)
    assert "def __jg_run_f(x):" in text and "__out = __graph(x)" in text
    assert "return __resume_in_f_at_" in text and "call_function[relu]" in text
    assert "no compiled entry (it has not been called yet)" in text  # the other branch
    assert "x.shape == (3,)" in text


def test_library_module_forward_reads_its_own_globals_and_does_not_recompile():
    model = nn.Sequential(nn.Linear(8, 4), nn.GELU(), nn.LayerNorm(4))
    counter = CompileCounter()
    compiled = jg.compile(model, backend=counter)
    x = x8(shape=(2, 8))
    for _ in range(3):
        assert_same(compiled(x), model(x))
    assert counter.compiles == 1


def test_one_tensor_through_two_sources_is_guarded_as_one():
    def f(a, b):
        return a * 2 + b

    counter = CompileCounter()
    compiled = jg.compile(f, backend=counter)
    x, y = x8(), x8(1)
    assert_same(compiled(x, x), f(x, x))
    assert_same(compiled(x, y), f(x, y))
    assert counter.compiles == 2


class AttentionBlock(nn.Module):
    """A minGPT-style block: layer norms, causal self-attention with a tril mask buffer,
    GELU MLP and residuals."""

    def __init__(self, n_embd=16, n_head=2, block=4):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                 nn.Linear(4 * n_embd, n_embd))
        self.n_head = n_head
        self.register_buffer("mask", jg.tril(jg.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.attn(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


def test_attention_block_is_one_graph_with_eager_values_and_gradients():
    jg.manual_seed(0)
    model = AttentionBlock()
    x = jg.randn(2, 4, 16)
    report = jg.explain(model)(x)
    assert report.graph_count == 1 and report.graph_break_count == 0
    out, expected = jg.compile(model)(x), model(x)
    assert_same(out, expected)
    out.sum().backward()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    expected.sum().backward()
    for got, want in zip(grads, [p.grad.numpy() for p in model.parameters()], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_long_function_resumes_across_extended_arg_jumps():
    # enough locals and code that the resume prologue's jump needs EXTENDED_ARG
    source = "def f(x):\n" + "".join(f"    v{i} = x + {i}\n" for i in range(150)) + \
        "    print('break')\n    return v149 * 2\n"
    namespace = {}
    exec(compile(source, "<generated>", "exec"), namespace)
    f = namespace["f"]
    report = jg.explain(f)(x8())
    assert report.graph_count == 2 and report.graph_break_count == 1
    assert_same(report.result, (x8() + 149) * 2)


def test_training_step_breaks_at_backward_and_step_and_updates_once():
    jg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    reference = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    reference.load_state_dict(model.state_dict())
    opt = jg.optim.SGD(model.parameters(), lr=0.1)
    opt_ref = jg.optim.SGD(reference.parameters(), lr=0.1)
    x, y = jg.randn(6, 4), jg.tensor([0, 1, 2, 0, 1, 2])

    def step(model, opt, x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    compiled = jg.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            loss = compiled(model, opt, x, y)
            loss_ref = step(reference, opt_ref, x, y)
            np.testing.assert_allclose(loss.item(), loss_ref.item(), rtol=1e-6)
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-6)


def test_values_of_traced_tensors_are_never_baked_into_a_graph():
    # an entry function that reads a traced index's values must not freeze trace-time
    # values: each call must index with its own ids (a mask index runs at a graph break)
    def f(table, idx):
        return table[idx] * 2

    table = x8(shape=(5, 3))
    compiled = jg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mask in ([True, False, True, True, False], [False] * 4 + [True]):
            idx = jg.tensor(mask)
            assert_same(compiled(table, idx), f(table, idx))


def test_row_lookup_with_a_traced_int_tensor_stays_in_the_graph():
    def f(table, idx):
        return table[idx] * 2

    table = x8(shape=(5, 3), requires_grad=True)
    report = jg.explain(f)(table, jg.tensor([0, 1]))
    assert report.graph_count == 1 and report.graph_break_count == 0
    compiled = jg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for ids in ([0, 1, 2], [4, 4, 0], [3, 2, 1]):
            idx = jg.tensor(ids)
            assert_same(compiled(table, idx), f(table, idx))


def test_cross_entropy_is_one_graph_and_its_targets_are_inputs():
    def loss(logits, target):
        return F.cross_entropy(logits, target)

    logits = x8(shape=(4, 3))
    report = jg.explain(loss)(logits, jg.tensor([0, 1, 2, 1]))
    assert report.graph_count == 1 and report.graph_break_count == 0
    compiled = jg.compile(loss)
    for target in ([0, 1, 2, 1], [2, 2, 0, 1]):
        y = jg.tensor(target)
        assert_same(compiled(logits, y), loss(logits, y))


def test_copying_a_traced_tensor_into_a_new_tensor_is_not_a_constant():
    def f(x):
        return jg.tensor(x) * 2

    compiled = jg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in (0, 1):
            assert_same(compiled(x8(seed)), x8(seed) * 2)


def test_embedding_lookup_is_captured_and_follows_new_ids():
    jg.manual_seed(0)
    emb = nn.Embedding(10, 4)

    def f(idx):
        return emb(idx).sum(-1)

    report = jg.explain(f)(jg.tensor([1, 2, 3]))
    assert report.graph_count == 1 and report.graph_break_count == 0
    compiled = jg.compile(f)
    for ids in ([1, 2, 3], [9, 0, 9]):
        idx = jg.tensor(ids)
        assert_same(compiled(idx), f(idx))


def test_closures_over_different_functions_do_not_share_entries():
    def make(op):
        return lambda a, b: op(a, b)

    x, y = x8(0), x8(1)
    added, subtracted = jg.compile(make(jg.add)), jg.compile(make(jg.sub))
    assert_same(added(x, y), x + y)
    assert_same(subtracted(x, y), x - y)


def test_star_args_and_star_kwargs_of_the_compiled_function():
    def f(x, *rest, scale=1.0, **extra):
        total = x * scale
        for t in rest:
            total = total + t
        return total + extra.get("bias", 0)

    report = jg.explain(f)(x8(0), x8(1), x8(2), scale=2.0, bias=1.0)
    assert report.graph_count == 1 and report.graph_break_count == 0
    compiled = jg.compile(f)
    assert_same(compiled(x8(0), x8(1), scale=3.0), f(x8(0), x8(1), scale=3.0))


@jg.no_grad()
def doubled_without_grad(x):
    return x * 2


def test_grad_mode_decorated_functions_compile_in_their_mode():
    # compiled directly (was a NameError in the runner) and called from compiled code
    def caller(x):
        return doubled_without_grad(x) + x

    x = x8(requires_grad=True)
    for fn in (doubled_without_grad, caller):
        report = jg.explain(jg.compile(fn, backend="eager"))(x)
        assert report.graph_count == 1 and report.graph_break_count == 0
        assert_same(report.result, fn(x))
        assert jg.is_grad_enabled()


def test_functions_sharing_code_with_different_defaults_do_not_share_graphs():
    x = jg.arange(4.0)
    for k in (2, 3, 5):
        def scaled(x, k=k):
            return x * k

        np.testing.assert_array_equal(jg.compile(scaled)(x).numpy(), (x * k).numpy())


def test_a_held_code_cache_follows_reassigned_defaults_reset_and_explain():
    """A compiled function holds its code cache between calls (no key built per call);
    reassigning the function's defaults or code, `jitgrad.reset()` and `explain()` (which
    drops the cache) are each seen by the next call."""
    x = jg.arange(4.0)

    def scaled(x, k=2.0):
        return x * k

    compiled = jg.compile(scaled)
    np.testing.assert_array_equal(compiled(x).numpy(), [0, 2, 4, 6])
    scaled.__defaults__ = (3.0,)
    np.testing.assert_array_equal(compiled(x).numpy(), [0, 3, 6, 9])
    held = entry.cache_of(compiled)
    assert held.compiles == 1  # a cache of its own, not a recompile of the first
    jg.reset()
    np.testing.assert_array_equal(compiled(x).numpy(), [0, 3, 6, 9])
    assert entry.cache_of(compiled) is not held and entry.cache_of(compiled).compiles == 1
    assert jg.explain(compiled)(x).graph_count == 1
    np.testing.assert_array_equal(compiled(x).numpy(), [0, 3, 6, 9])
    assert entry.cache_of(compiled).entries[0].hits == 1

    def tenfold(x, k=2.0):
        return x * 10

    scaled.__code__ = tenfold.__code__
    np.testing.assert_array_equal(compiled(x).numpy(), [0, 10, 20, 30])


REGISTRY = []
TABLE = {}


class History:
    def __init__(self):
        self.seen = []


def mutates_outside_containers(history, x):
    REGISTRY.append(3)
    REGISTRY.append(1)
    TABLE["a"] = 1
    TABLE["b"] = len(REGISTRY)
    history.seen.append(1)
    history.seen.append(2)
    return x + len(REGISTRY) + len(TABLE) + len(history.seen)


def test_every_mutation_of_a_list_or_dict_from_outside_is_kept_in_order():
    # new-user report: each read of a global list made a new Var, so only the last
    # append reached the list and len() read inside saw none of them
    history = History()
    out = jg.compile(mutates_outside_containers)(history, jg.zeros(2))
    assert out.tolist() == [6.0, 6.0]
    assert REGISTRY == [3, 1] and TABLE == {"a": 1, "b": 2} and history.seen == [1, 2]
    out = jg.compile(mutates_outside_containers)(history, jg.zeros(2))
    assert out.tolist() == [10.0, 10.0] and REGISTRY == [3, 1, 3, 1] and len(history.seen) == 4


def test_one_list_reached_by_two_names_stays_one_object():
    def append_twice(a, b, x):
        a.append(1)
        b.append(2)
        return x + len(a)

    shared = []
    compiled = jg.compile(append_twice)
    assert compiled(shared, shared, jg.zeros(1)).tolist() == [2.0] and shared == [1, 2]
    first, second = [], []
    assert compiled(first, second, jg.zeros(1)).tolist() == [1.0]  # a guard tells them apart
    assert first == [1] and second == [2]


def test_an_object_used_as_a_constant_is_guarded_by_identity():
    compiled = jg.compile(lambda x, dtype: x.to(dtype))
    x = jg.ones(2)
    assert compiled(x, jg.float16).dtype == jg.float16
    assert compiled(x, jg.float64).dtype == jg.float64  # was float16: the dtype unguarded


def test_requires_grad_on_a_tensor_made_in_the_trace_gives_eagers_leaf():
    def make_leaf(a):
        w = a.detach().requires_grad_()
        return w, (w * 2).sum()

    x = jg.ones(3)
    w, total = jg.compile(make_leaf)(x)
    assert w.requires_grad and w.is_leaf and total.requires_grad
    total.backward()
    assert w.grad.tolist() == [2.0, 2.0, 2.0]


def _countdown(x, n):
    return x if n == 0 else _countdown(x + 1, n - 1)


@pytest.mark.parametrize(("backend", "depth"), [("eager", 200), ("numba", 200), ("eager", 900)])
def test_recursion_goes_as_deep_as_eager(backend, depth):
    # each level through a graph break is a compiled frame of a few Python frames; past
    # config.MAX_NESTED_FRAMES of them the rest runs eagerly, with the room they took
    compiled = jg.compile(lambda x: _countdown(x, depth), backend=backend)
    x = x8(shape=(3,))
    assert_same(compiled(x), _countdown(x, depth))
    assert_same(compiled(x * 2), _countdown(x * 2, depth))


def test_fullgraph_raises_after_another_compile_of_the_function_ran_eagerly():
    # the options are part of the cache key: the frame's "runs eagerly" from the first
    # compile must not make the fullgraph one run eagerly in silence
    def f(x):
        try:
            print("", end="")  # a break inside try cannot be resumed: the frame runs eagerly
        finally:
            pass
        return x + 1

    x = x8()
    with pytest.warns(UserWarning, match="runs eagerly"):
        assert_same(jg.compile(f, backend="eager")(x), x + 1)  # a break: eager from now on
    with pytest.raises(jg.CompileError, match="print"):
        jg.compile(f, backend="eager", fullgraph=True)(x)


class _DoubledLinear(nn.Linear):
    def forward(self, x):
        return super().forward(x) * 2


def test_super_forward_into_a_library_module_guards_that_modules_globals():
    """`super().forward(x)` inlines nn.Linear.forward, whose `F` is a global of
    jitgrad/nn/modules/linear.py: its guards read that module's globals, not the compiled
    function's (which has no `F`: the guard failed, so every call recompiled)."""
    model = _DoubledLinear(4, 3)
    compiled = jg.compile(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for seed in range(10):
            x = jg.tensor(np.random.default_rng(seed).normal(size=(2, 4)).astype(np.float32))
            np.testing.assert_allclose(compiled(x).detach().numpy(),
                                       model(x).detach().numpy(), rtol=1e-6)
    cache = entry.cache_of(compiled)
    assert cache.compiles == 1 and cache.entries[0].hits == 9
    assert "jitgrad.nn.modules.linear.__dict__['F']" in cache.entries[0].guard_source


def test_iterating_a_modules_parameters_and_submodules_stays_in_one_graph():
    """`m.parameters()`, `named_parameters()`, `modules()` walk the module tree with
    `set()`s of ids (module.py): traced as a set of constants and `id()` of the objects the
    trace reached, the walk stays in the graph (it ran the whole frame eagerly), its
    structure is guarded, and a parameter added later recompiles with eager's value."""
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1))

    def regularized(x):
        l2 = sum(p.pow(2).sum() for p in model.parameters())
        names = [name for name, _ in model.named_parameters()]
        return model(x).sum() + 0.1 * l2 + len(names) + len(list(model.modules()))

    x = jg.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    report = jg.explain(regularized)(x)
    assert report.graph_count == 1 and report.graph_break_count == 0, report.break_reasons
    compiled = jg.compile(regularized)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(compiled(x).item(), regularized(x).item(), rtol=1e-6)
        model[2].register_parameter("extra", nn.Parameter(jg.ones(2)))
        np.testing.assert_allclose(compiled(x).item(), regularized(x).item(), rtol=1e-6)
    assert entry.cache_of(compiled).compiles == 2


def test_a_set_of_tensors_in_traced_code_is_refused_with_eagers_result():
    def unique_count(x, y):
        return x * len(set([x, y]))

    x, y = jg.ones(2), jg.ones(2)
    report = jg.explain(unique_count)(x, y)
    assert "set() of values other than constants" in str(report.break_reasons[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(jg.compile(unique_count)(x, y).numpy(), [2.0, 2.0])


def test_a_set_made_in_the_trace_that_leaves_it_runs_eagerly_with_a_fresh_set_per_call():
    """A traced set is the trace's value alone: stored outside, the frame runs eagerly, so
    each call stores a new set as eager does (not one set the caller could mutate)."""
    holder = types.SimpleNamespace()

    def keep_seen(x):
        seen = set()
        seen.add(1)
        holder.seen = seen
        return x + len(seen)

    compiled = jg.compile(keep_seen)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(compiled(jg.ones(2)).numpy(), [2.0, 2.0])
        holder.seen.add(2)
        np.testing.assert_array_equal(compiled(jg.ones(2)).numpy(), [2.0, 2.0])
    assert holder.seen == {1}
