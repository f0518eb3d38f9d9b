"""Compiled regions in training: joint forward/backward graphs compose with eager autograd.

Every test compares with the same program run eagerly. Tolerances (issue 5): float32
gradients within rtol 1e-5 of eager's (atol 1e-6 near zero), float64 within 1e-10.
"""

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use
from jitgrad.codegen.autograd import CompiledRegion
from tests.codegen.test_backend import compile_numba

TOLERANCES = {jg.float32: (1e-5, 1e-6), jg.float64: (1e-10, 1e-12)}


def leaves(rng, dtype, *shapes, scale=1.0):
    return [jg.tensor((rng.normal(size=s) * scale).astype(dtype.name if hasattr(dtype, "name")
                                                          else dtype), requires_grad=True)
            for s in shapes]


def assert_grads_match(compiled_leaves, eager_leaves, dtype):
    rtol, atol = TOLERANCES[dtype]
    for c, e in zip(compiled_leaves, eager_leaves, strict=True):
        assert c.grad is not None and e.grad is not None
        np.testing.assert_allclose(c.grad.numpy(), e.grad.numpy(), rtol=rtol, atol=atol)


def clone_leaves(tensors):
    return [t.detach().clone().requires_grad_() for t in tensors]


def mlp_loss(x, target, w1, b1, w2, b2):
    h = F.relu(x @ w1 + b1)
    return F.cross_entropy(h @ w2 + b2, target)


def attention_block(x, ln_w, ln_b, w_qkv, w_out):
    """layer_norm -> qkv -> causal softmax attention -> GELU(out projection) + residual."""
    T, C = x.shape[-2], x.shape[-1]
    h = F.layer_norm(x, (C,), ln_w, ln_b)
    q, k, v = (h @ w_qkv).split(C, dim=-1)
    att = (q @ k.transpose(-2, -1)) * (1.0 / C ** 0.5)
    mask = jg.tril(jg.ones(T, T)) == 0
    att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
    return x + F.gelu((att @ v) @ w_out)


def embedding_loss(ids, table, w):
    return (F.embedding(ids, table) @ w).tanh().sum()


@pytest.mark.parametrize("dtype", [jg.float32, jg.float64], ids=["float32", "float64"])
def test_mlp_with_cross_entropy(dtype):
    rng = np.random.default_rng(0)
    params = leaves(rng, dtype, (8, 16), (16,), (16, 5), (5,), scale=0.5)
    x = jg.tensor(rng.normal(size=(6, 8))).to(dtype)
    target = jg.tensor(rng.integers(0, 5, size=6))
    fn, produced = compile_numba(mlp_loss)
    compiled_params = clone_leaves(params)
    loss = fn(x, target, *compiled_params)
    loss.backward()
    eager = mlp_loss(x, target, *params)
    eager.backward()
    rtol, atol = TOLERANCES[dtype]
    np.testing.assert_allclose(loss.item(), eager.item(), rtol=rtol)
    assert_grads_match(compiled_params, params, dtype)
    assert loss.grad_fn.name() == "CompiledFunctionBackward"
    assert any(isinstance(p, CompiledRegion) for p in produced)


@pytest.mark.parametrize("dtype", [jg.float32], ids=["float32"])  # float64: MLP, embedding
def test_attention_block(dtype):
    rng = np.random.default_rng(1)
    x_data = rng.normal(size=(2, 4, 8))
    params = leaves(rng, dtype, (8,), (8,), (8, 24), (8, 8), scale=0.4)
    with jg.no_grad():
        params[0].add_(1.0)
    fn, produced = compile_numba(attention_block)
    x = jg.tensor(x_data).to(dtype).requires_grad_()
    x_eager = jg.tensor(x_data).to(dtype).requires_grad_()
    compiled_params = clone_leaves(params)
    out = fn(x, *compiled_params)
    weights = jg.tensor(rng.normal(size=out.shape)).to(dtype)
    (out * weights).sum().backward()
    (attention_block(x_eager, *params) * weights).sum().backward()
    assert_grads_match([x, *compiled_params], [x_eager, *params], dtype)
    assert any(isinstance(p, CompiledRegion) for p in produced)


@pytest.mark.parametrize("dtype", [jg.float32, jg.float64], ids=["float32", "float64"])
def test_embedding_with_repeated_indices(dtype):
    rng = np.random.default_rng(2)
    table, w = leaves(rng, dtype, (6, 4), (4, 3))
    ids = jg.tensor([[0, 2, 2], [5, 0, 2]])  # 2 three times, 0 twice: their rows accumulate
    fn, produced = compile_numba(embedding_loss)
    compiled = clone_leaves([table, w])
    fn(ids, *compiled).backward()
    embedding_loss(ids, table, w).backward()
    assert_grads_match(compiled, [table, w], dtype)
    assert not compiled[0].grad.numpy()[[1, 3, 4]].any()  # rows never looked up
    assert any(isinstance(p, CompiledRegion) for p in produced)


def test_region_inside_eager_computation():
    """eager -> compiled -> eager: gradients flow through all three."""
    rng = np.random.default_rng(3)
    a, b = leaves(rng, jg.float64, (4, 5), (5,))
    ca, cb = clone_leaves([a, b])
    fn, produced = compile_numba(lambda x, bias: (x * 2.0 + bias).tanh())
    loss = (fn(ca.exp(), cb) ** 2).sum()
    loss.backward()
    ((((a.exp()) * 2.0 + b).tanh()) ** 2).sum().backward()
    assert_grads_match([ca, cb], [a, b], jg.float64)
    assert any(isinstance(p, CompiledRegion) for p in produced)


def between(x, w):
    h = (x @ w).sigmoid()
    jg.graph_break()  # the eager code between two compiled regions
    h = h * h.sum()
    return (h.exp() + x.mean()).sum()


def test_eager_region_between_two_compiled_regions():
    rng = np.random.default_rng(4)
    x, w = leaves(rng, jg.float64, (3, 4), (4, 4))
    cx, cw = clone_leaves([x, w])
    fn, produced = compile_numba(between)
    fn(cx, cw).backward()
    between(x, w).backward()
    assert_grads_match([cx, cw], [x, w], jg.float64)
    assert sum(isinstance(p, CompiledRegion) for p in produced) == 2


def test_retain_graph_and_second_backward_error():
    rng = np.random.default_rng(5)
    (x,) = leaves(rng, jg.float64, (3,))
    fn, _ = compile_numba(lambda t: (t.sin() * t).sum())
    loss = fn(x)
    loss.backward(retain_graph=True)
    first = x.grad.clone()
    loss.backward()  # accumulates into x.grad, then frees the saved values
    np.testing.assert_allclose(x.grad.numpy(), 2 * first.numpy(), rtol=1e-12)
    np.testing.assert_allclose(first.numpy(), (np.sin(x.detach().numpy()) + x.detach().numpy()
                                               * np.cos(x.detach().numpy())), rtol=1e-12)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_hooks_on_tensors_outside_the_region():
    rng = np.random.default_rng(6)
    (x,) = leaves(rng, jg.float64, (4,))
    seen = []
    y = x * 3.0  # eager, before the region
    y.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 2.0)
    fn, _ = compile_numba(lambda t: (t * t).sum())
    fn(y).backward()
    np.testing.assert_allclose(seen[0], 2 * y.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), 3.0 * 2.0 * 2 * y.detach().numpy(), rtol=1e-12)


def test_gradients_accumulate_over_calls():
    rng = np.random.default_rng(7)
    (w,) = leaves(rng, jg.float64, (3, 3))
    fn, produced = compile_numba(lambda t, v: (t @ v).relu().sum())
    v = jg.tensor(rng.normal(size=(3, 2)))
    for _ in range(3):
        fn(w, v).backward()
    expected = np.zeros((3, 3))
    for _ in range(3):
        w2 = w.detach().clone().requires_grad_()
        (w2 @ v).relu().sum().backward()
        expected += w2.grad.numpy()
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=1e-12)
    assert len(produced) == 1  # one compile, three calls


def test_create_graph_raises_clear_error():
    (x,) = leaves(np.random.default_rng(8), jg.float64, (3,))
    fn, _ = compile_numba(lambda t: (t.exp() * t).sum())
    with pytest.raises(RuntimeError, match="higher-order gradients.*eager"):
        jg.autograd.grad(fn(x), x, create_graph=True)


def test_saved_input_modified_in_place_raises_like_eager():
    (x,) = leaves(np.random.default_rng(9), jg.float64, (3,))
    y = x * 1.0
    fn, _ = compile_numba(lambda t: (t.exp() * t).sum())
    loss = fn(y)
    with jg.no_grad():
        y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_output_view_of_input_keeps_view_semantics():
    """An output that is a view of an input is rebuilt by eager view ops, so an in-place
    write through it changes the input's history as in eager."""
    rng = np.random.default_rng(10)
    (x,) = leaves(rng, jg.float64, (3, 4))

    def program(run):
        base = x.detach().clone().requires_grad_()
        h = base * 1.0
        view, total = run(h)
        view.mul_(3.0)
        (h.sum() + total).backward()
        return base.grad.numpy()

    fn, _ = compile_numba(lambda t: (t.transpose(0, 1)[1], t.exp().sum()))
    eager = program(lambda t: (t.transpose(0, 1)[1], t.exp().sum()))
    np.testing.assert_allclose(program(fn), eager, rtol=1e-12)
