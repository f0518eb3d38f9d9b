"""Note [Groups too small for a kernel]: with the rule on (the shipped default, which the
other codegen tests turn off: tests/codegen/conftest.py), a pointwise group of one to
three ops over a few elements runs as its ops' numpy forwards, so it computes exactly what
eager computes; larger groups, groups over symbolic sizes and reductions keep their
kernels. The rest of the suite runs with the rule on."""

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import config
from jitgrad.codegen import launch_cost
from jitgrad.trace.runtime import entry


@pytest.fixture(autouse=True)
def rule_on(monkeypatch):
    monkeypatch.setattr(config, "SMALL_GROUPS_AS_NUMPY", True)
    jg.reset()
    yield
    jg.reset()


def compiled_graph(fn, *args, **options):
    compiled = jg.compile(fn, **options)
    result = compiled(*args)
    return result, entry.cache_of(compiled).entries[0].compiled


def group_kinds(compiled):
    """Each group's member names, by how it runs."""
    def names(groups):
        return [[n.name for n in g.nodes] for g in groups]
    return {"kernel": names(compiled.fusion_groups), "numpy": names(compiled.numpy_groups)}


def f32(n):
    return jg.tensor(np.linspace(-2, 2, n, dtype=np.float32))


def test_a_one_op_group_on_8_elements_runs_as_numpy_and_its_program_reads_so():
    def add_one(x):
        return x + 1

    _, compiled = compiled_graph(add_one, f32(8))
    assert compiled.kernels == []
    show = compiled.show()
    assert show == (
        "# fusion groups:\n"
        "(none)\n"
        "# groups run as numpy ops (too small for a kernel):\n"
        f"fused_0 [8]: add -> (%add)\n"
        f"  %add = add(%x, 1)  f32[8]  test_launch_cost.py:{add_one.__code__.co_firstlineno + 1}\n"
        "# wrapper:\n"
        "def forward(x):\n"
        "    x_data = tensor_data(x)\n"
        "    add = add_1(x_data, 1); del x_data  # test_launch_cost.py:"
        f"{add_one.__code__.co_firstlineno + 1}\n"
        "    add_out = tensor_of(add); del add  # test_launch_cost.py:"
        f"{add_one.__code__.co_firstlineno + 1}\n"
        "    return (add_out,)\n")


@pytest.mark.parametrize(("ops", "step", "elements", "kind"), [
    (1, "mul", 1, "numpy"), (1, "mul", 8, "numpy"), (1, "mul", 4096, "numpy"),
    (2, "mul", 4096, "numpy"), (2, "mul", 32768, "kernel"), (3, "mul", 8, "numpy"),
    (3, "mul", 4096, "kernel"), (4, "mul", 1, "kernel"), (1, "tanh", 64, "numpy"),
    (1, "tanh", 512, "kernel"),
])
def test_the_rule_weighs_the_ops_numpy_calls_against_one_launch(ops, step, elements, kind):
    def chain(x):
        for _ in range(ops):
            x = x * 1.5 if step == "mul" else x.tanh()
        return x

    _, compiled = compiled_graph(chain, f32(elements))
    assert {k: len(v) for k, v in group_kinds(compiled).items()} == \
        {"kernel": int(kind == "kernel"), "numpy": int(kind == "numpy")}
    as_numpy = launch_cost.numpy_cost_us([step == "tanh"] * ops, elements) < \
        launch_cost.kernel_cost_us(elements)
    assert as_numpy == (kind == "numpy")


def test_a_symbolic_graph_decides_per_set_of_concrete_sizes_and_reductions_keep_kernels():
    def add_one(x):
        return x + 1

    compiled = jg.compile(add_one, dynamic=True)
    for n in (8, 65536, 16):
        np.testing.assert_array_equal(compiled(f32(n)).numpy(), add_one(f32(n)).numpy())
    symbolic = entry.cache_of(compiled).entries[0].compiled
    assert {sizes: len(graph.kernels) for sizes, graph in symbolic.specializations.items()} \
        == {(8,): 0, (65536,): 1, (16,): 0}

    def total(x):
        return (x + 1).sum()

    _, compiled = compiled_graph(total, f32(8))
    assert group_kinds(compiled) == {"kernel": [["add", "sum"]], "numpy": []}


SPECIALS = np.array([0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 3e38, -3e38, 1e-45,
                     2.0, 0.5], dtype=np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_groups_run_as_numpy_give_eager_bits_on_special_values(dtype):
    def program(x, y):
        a = x * y + x
        b = (x > y) | (a != a)
        return a - y, b, jg.where(b, x, y), abs(x)

    with np.errstate(invalid="ignore"):
        values = SPECIALS.astype(dtype)
    x = jg.tensor(values.reshape(3, 4))
    y = jg.tensor(values[::-1].copy().reshape(3, 4))
    with np.errstate(all="ignore"):
        got, compiled = compiled_graph(program, x, y)
        want = program(x, y)
    assert compiled.kernels == [] and compiled.numpy_groups
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.numpy(), w.numpy())
        assert (np.signbit(g.numpy()) == np.signbit(w.numpy())).all()


def test_a_training_step_with_small_groups_matches_eager():
    """The 0-d loss arithmetic of the joint graphs runs as numpy; the rest as kernels."""
    def run(compile_step):
        jg.manual_seed(0)
        model = jg.nn.Sequential(jg.nn.Linear(6, 16), jg.nn.ReLU(), jg.nn.Linear(16, 3))
        opt = jg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = jg.nn.functional.cross_entropy(model(x), y) * 0.5 + 1.0
            loss.backward()
            opt.step()
            return loss

        step = jg.compile(step) if compile_step else step
        rng = np.random.default_rng(1)
        x = jg.tensor(rng.standard_normal((8, 6)).astype(np.float32))
        y = jg.tensor(rng.integers(0, 3, 8))
        losses = [step(x, y).item() for _ in range(4)]
        return losses, [p.detach().numpy().copy() for p in model.parameters()]

    (eager_losses, eager_params), (losses, params) = run(False), run(True)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-6)
    for p, e in zip(params, eager_params, strict=True):
        np.testing.assert_allclose(p, e, rtol=1e-5, atol=1e-6)


def test_random_small_programs_run_as_numpy_match_eager_exactly():
    """60 random chains of 1-3 pointwise ops on at most 12 elements: each runs without a
    kernel, so its values are eager's, bit for bit."""
    rng = np.random.default_rng(7)
    unary = [lambda v: -v, lambda v: v.exp(), lambda v: v.abs(), lambda v: v.relu(),
             lambda v: v.tanh(), lambda v: v.sigmoid(), lambda v: v * 0.25]
    binary = [lambda v, w: v + w, lambda v, w: v - w, lambda v, w: v * w,
              lambda v, w: v / w, lambda v, w: jg.maximum(v, w)]
    for _ in range(60):
        steps = [(rng.integers(2), rng.integers(7)) for _ in range(rng.integers(1, 4))]

        def program(x, y, steps=steps):
            for kind, index in steps:
                x = binary[index % 5](x, y) if kind else unary[index](x)
            return x

        shape = [(12,), (3, 4), (2, 1, 3), ()][rng.integers(4)]
        x = jg.tensor(rng.choice(SPECIALS, shape).astype(np.float32))
        y = jg.tensor(rng.choice(SPECIALS, shape).astype(np.float32))
        jg.reset()
        with np.errstate(all="ignore"):
            got, compiled = compiled_graph(program, x, y)
            want = program(x, y)
        assert compiled.kernels == []
        np.testing.assert_array_equal(got.numpy(), want.numpy())
