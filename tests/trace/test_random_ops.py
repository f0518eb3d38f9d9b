"""Random ops under jitgrad.compile draw from their generator in eager's order.

Factories (rand, randn, randint, randperm, normal), `*_like`, in-place fills and dropout
are captured: impure nodes drawn when the graph runs, never fused or folded (Note [Random
draws are ops]). Other code that draws (weight init in a module built inside the
function, multinomial) breaks the graph and runs eagerly; tracing it leaves every
generator, the default and the user's own, as it was.
"""

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use


def dropout_step(x, w):
    return F.dropout(x @ w, 0.5, True).relu().sum()


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_dropout_in_a_graph_draws_as_eager_does(backend):
    rng = np.random.default_rng(0)
    x = jg.tensor(rng.normal(size=(8, 6)).astype(np.float32))
    w = jg.tensor(rng.normal(size=(6, 5)).astype(np.float32), requires_grad=True)
    compiled = jg.compile(dropout_step, backend=backend)
    report = jg.explain(compiled)
    jg.manual_seed(0)
    eager = [dropout_step(x, w) for _ in range(3)]
    eager[-1].backward()
    eager_grad = w.grad.numpy().copy()
    w.grad = None
    jg.manual_seed(0)
    out = report(x, w)
    assert out.graph_count == 1 and out.graph_break_count == 0
    got = [out.result] + [compiled(x, w) for _ in range(2)]
    for g, e in zip(got, eager, strict=True):
        np.testing.assert_allclose(g.item(), e.item(), rtol=1e-6)
    got[-1].backward()
    np.testing.assert_allclose(w.grad.numpy(), eager_grad, rtol=1e-6)


def noisy(x):
    return (x + jg.randn(3)).sum()


def test_an_uncaptured_random_op_leaves_the_generator_to_the_eager_run():
    x = jg.ones(3)
    jg.manual_seed(1)
    eager = [noisy(x).item() for _ in range(3)]
    jg.manual_seed(1)
    compiled = jg.compile(noisy, backend="eager")
    np.testing.assert_allclose([compiled(x).item() for _ in range(3)], eager, rtol=1e-6)


def draws_everywhere(x, gen):
    a = jg.randn(3)
    b = jg.rand_like(x)
    y = x.clone().uniform_(-1, 1)
    z = jg.randint(0, 5, (3,), generator=gen)
    p = jg.randperm(3).float()
    e = jg.empty(3).exponential_(2.0) + jg.normal(0.5, 2.0, (3,))
    return (x * a + b - y + z + p) * e


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_factories_likes_and_fills_are_captured_and_draw_as_eager(backend):
    gen = jg.Generator()
    x = jg.ones(3, requires_grad=True)
    compiled = jg.compile(draws_everywhere, backend=backend)
    jg.manual_seed(3)
    gen.manual_seed(0)
    report = jg.explain(compiled)(x, gen)
    assert report.graph_count == 1 and report.graph_break_count == 0
    got = [report.result] + [compiled(x, gen) for _ in range(2)]
    jg.manual_seed(3)
    gen.manual_seed(0)
    eager = [draws_everywhere(x, gen) for _ in range(3)]
    for g, e in zip(got, eager, strict=True):
        np.testing.assert_allclose(g.detach().numpy(), e.detach().numpy(), rtol=1e-6)
    got[1].sum().backward()
    compiled_grad, x.grad = x.grad.numpy().copy(), None
    eager[1].sum().backward()
    np.testing.assert_allclose(compiled_grad, x.grad.numpy(), rtol=1e-6)
    jg.manual_seed(3)  # a reseed between calls is seen by the compiled graph too
    gen.manual_seed(0)
    np.testing.assert_allclose(compiled(x, gen).detach().numpy(),
                               eager[0].detach().numpy(), rtol=1e-6)


def noise_from(gen):
    return jg.randn(4, generator=gen)


def test_a_user_generator_is_drawn_from_when_the_graph_runs():
    """It was drawn from once while tracing and the numbers baked into the graph: every call
    returned the first call's noise."""
    gen = jg.Generator().manual_seed(0)
    compiled = jg.compile(noise_from, backend="eager")
    got = [compiled(gen).numpy() for _ in range(3)]
    gen.manual_seed(0)
    eager = [noise_from(gen).numpy() for _ in range(3)]
    np.testing.assert_array_equal(np.stack(got), np.stack(eager))
    other = jg.Generator().manual_seed(0)
    np.testing.assert_array_equal(compiled(other).numpy(), eager[0])  # guarded by identity


def built_inside(x, gen):
    layer = jg.nn.Linear(3, 2)  # its init draws outside a random op
    w = jg.multinomial(jg.ones(3), 2, generator=gen).float()
    return layer(x).sum() + w.sum()


def test_a_draw_outside_a_random_op_is_undone_and_breaks():
    gen = jg.Generator()
    x = jg.ones(2, 3)
    compiled = jg.compile(built_inside, backend="eager")
    jg.manual_seed(5)
    gen.manual_seed(1)
    got = [compiled(x, gen).item() for _ in range(3)]
    after = (jg.get_rng_state().numpy(), gen.get_state().numpy())
    jg.manual_seed(5)
    gen.manual_seed(1)
    eager = [built_inside(x, gen).item() for _ in range(3)]
    np.testing.assert_allclose(got, eager, rtol=1e-6)
    np.testing.assert_array_equal(after[0], jg.get_rng_state().numpy())
    np.testing.assert_array_equal(after[1], gen.get_state().numpy())
    breaks = jg.explain(compiled)(x, gen).break_reasons
    assert breaks and "draws random numbers outside a random op" in str(breaks[0])
