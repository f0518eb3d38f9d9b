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
