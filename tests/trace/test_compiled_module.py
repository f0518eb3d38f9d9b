"""`jitgrad.compile(module)`: the compiled module keeps the module's attributes, and a
module with hooks the graph cannot run is not inlined (it runs eagerly, hooks and all)."""

import warnings

import numpy as np
import pytest

import jitgrad as jg


def test_a_compiled_module_forwards_attributes_to_the_module():
    model = jg.nn.Sequential(jg.nn.Linear(3, 4), jg.nn.Dropout(0.5))
    compiled = jg.compile(model)
    assert compiled.eval() is compiled and not model.training  # nanoGPT calls model.eval()
    assert all(p is q for p, q in zip(compiled.parameters(), model.parameters(), strict=True))
    assert compiled.state_dict().keys() == model.state_dict().keys()
    x = jg.ones(2, 3)
    np.testing.assert_allclose(compiled(x).detach().numpy(), model(x).detach().numpy())


def test_a_module_with_a_full_backward_hook_runs_its_hook():
    layer = jg.nn.Linear(3, 2)
    seen = []
    layer.register_full_backward_hook(lambda module, grad_in, grad_out: seen.append(
        grad_out[0].numpy().copy()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the frame runs eagerly: say so once, then no more
        out = jg.compile(lambda m, t: m(t).sum())(layer, jg.ones(1, 3, requires_grad=True))
    out.backward()
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], np.ones((1, 2), np.float32))


def test_a_compiled_module_with_its_own_forward_hook_runs_the_hook():
    net = jg.nn.Linear(3, 4)
    net.register_forward_hook(lambda module, inputs, output: output * 0)
    with pytest.warns(UserWarning, match="has forward or backward hooks"):
        out = jg.compile(net)(jg.ones(2, 3))
    assert not out.detach().numpy().any()


def test_module_methods_returning_the_module_return_the_compiled_module():
    model = jg.nn.Sequential(jg.nn.Linear(3, 4), jg.nn.ReLU())
    compiled = jg.compile(model).eval()
    assert isinstance(compiled, jg.compile(model).__class__) and compiled._orig_mod is model
    assert compiled[0] is model[0]
    assert "Linear" in repr(compiled)
    x = jg.ones(2, 3)
    np.testing.assert_allclose(compiled(x).detach().numpy(), model(x).detach().numpy())


def test_torch_compile_options_are_accepted():
    fn = jg.compile(lambda x: x + 1, disable=True)
    assert fn(1) == 2 and not hasattr(fn, "_orig_mod")
    with pytest.warns(UserWarning, match="mode='max-autotune' is accepted"):
        compiled = jg.compile(lambda x: x * 2, mode="max-autotune", backend="eager")
    np.testing.assert_allclose(compiled(jg.ones(2)).numpy(), [2.0, 2.0])


# ----- layers built inside forward (Note [Modules made in traced code]) -------------------


class _PoolOnTheFly(jg.nn.Module):
    """TextCNN's pattern: a pooling layer sized from the input, built and called in forward."""

    def forward(self, x, keep=False):
        pool = jg.nn.MaxPool2d((x.shape[2] - 1, 1))
        out = jg.nn.Softmax(dim=1)(jg.nn.functional.relu(pool(x)))
        return (out, pool) if keep else out


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 2, 6, 3), (3, 1, 2, 2)])
def test_a_parameterless_layer_built_in_forward_compiles_into_the_graph(shape):
    x = jg.tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32),
                  requires_grad=True)
    model = _PoolOnTheFly()
    report = jg.explain(model)(x)
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    compiled = jg.compile(model, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = compiled(x)
    expected = model(x)
    np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-6)
    weights = jg.tensor(np.arange(got.numel(), dtype=np.float32).reshape(got.shape))
    (got * weights).sum().backward()
    compiled_grad, x.grad = x.grad.numpy().copy(), None
    (expected * weights).sum().backward()
    np.testing.assert_allclose(compiled_grad, x.grad.numpy(), rtol=1e-6)


def test_a_layer_built_in_forward_that_leaves_the_graph_is_a_new_object_each_call():
    compiled = jg.compile(_PoolOnTheFly(), backend="eager")
    x = jg.ones(2, 3, 4, 5)
    (_, first), (_, second) = compiled(x, keep=True), compiled(x, keep=True)
    assert type(first) is jg.nn.MaxPool2d and first is not second
    assert first.kernel_size == second.kernel_size == (3, 1)


@pytest.mark.parametrize(("layer", "reason"), [
    (lambda: jg.nn.Linear(3, 2), "draws random numbers"),  # its init
    (lambda: jg.nn.BatchNorm1d(3), "a layer with parameters, buffers or submodules")])
def test_a_layer_with_state_built_in_forward_runs_eagerly_drawing_its_init_once(layer, reason):
    def fn(x):
        return layer()(x).sum()

    x = jg.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    jg.manual_seed(0)
    report = jg.explain(fn)(x)
    assert report.graph_break_count >= 1 and reason in str(report)
    jg.manual_seed(0)
    expected = fn(x)
    jg.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = jg.compile(fn, backend="eager")(x)
    np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy())
    assert jg.rand(1).item() == (jg.manual_seed(0), fn(x), jg.rand(1).item())[2]


# ----- legacy tensor types in traced code (jitgrad/eager/legacy_types.py) -----------------


def _positions_plus_embedding(table, ids, feats):
    # graykode/nlp-tutorial's Transformer: `self.pos_emb(torch.LongTensor([[1, 2, 3, 4, 0]]))`
    positions = jg.LongTensor([[1, 2, 3, 0]])
    scale = jg.FloatTensor([0.5, 2.0, 1.0])
    same = jg.FloatTensor(feats)  # a float32 tensor passes through
    return table[ids] + table[positions] * scale + same, jg.DoubleTensor(2, 3).shape


def test_legacy_type_constructors_compile_into_one_graph():
    table = jg.tensor(np.arange(15, dtype=np.float32).reshape(5, 3), requires_grad=True)
    ids = jg.tensor([[4, 3, 2, 1]])
    feats = jg.ones(1, 4, 3)
    report = jg.explain(_positions_plus_embedding)(table, ids, feats)
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    got, shape = jg.compile(_positions_plus_embedding, backend="eager")(table, ids, feats)
    expected = table.detach().numpy()
    expected = expected[[[4, 3, 2, 1]]] + expected[[[1, 2, 3, 0]]] * [0.5, 2.0, 1.0] + 1
    np.testing.assert_allclose(got.detach().numpy(), expected)
    assert got.dtype == jg.float32 and shape == (2, 3)
    got.sum().backward()
    # each row: once per id in ids (1) plus once per position (the scale)
    np.testing.assert_allclose(table.grad.numpy(), [[0.5, 2, 1], [1.5, 3, 2], [1.5, 3, 2],
                                                    [1.5, 3, 2], [1, 1, 1]])
