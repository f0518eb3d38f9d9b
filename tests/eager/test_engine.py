"""The autograd engine: one test per behaviour of research/eager_autograd.md §1 and the
regression cases of §4 that concern the engine (values measured in PyTorch 2.13)."""

import gc
import subprocess
import sys
import threading
import weakref

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import grad


def leaf(values, dtype=jg.float64):
    return jg.tensor(values, dtype=dtype, requires_grad=True)


def test_leaf_and_non_leaf():
    x = leaf([1.0, 2.0])
    y = x * 2
    assert x.is_leaf and x.grad_fn is None
    assert not y.is_leaf and y.grad_fn.name() == "MulBackward"
    assert y.requires_grad
    assert jg.tensor([1.0]).is_leaf and not jg.tensor([1.0]).requires_grad


def test_grad_of_non_leaf_warns_and_is_none():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.sum().backward()
    with pytest.warns(UserWarning, match="not a leaf Tensor is being accessed"):
        assert y.grad is None


def test_gradients_accumulate_in_place_across_backwards():
    x = leaf([1.0, 2.0, 3.0])
    (x * x).sum().backward()
    first = x.grad
    np.testing.assert_array_equal(first.numpy(), [2, 4, 6])
    (x * x).sum().backward()
    assert x.grad is first, ".grad keeps its identity: later gradients add in place"
    np.testing.assert_array_equal(x.grad.numpy(), [4, 8, 12])
    assert not x.grad.requires_grad and x.grad.is_leaf


def test_grad_setter_checks_shape_and_dtype():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"assign a gradient of size '\[3\]' to a tensor of size '\[2\]'"):
        x.grad = jg.zeros(3, dtype=jg.float64)
    with pytest.raises(RuntimeError, match="dtype"):
        x.grad = jg.zeros(2)
    x.grad = jg.ones(2, dtype=jg.float64)
    np.testing.assert_array_equal(x.grad.numpy(), [1, 1])


def test_retain_grad_populates_non_leaf_grad():
    x = leaf([1.0, 2.0])
    y = x * 3
    y.retain_grad()
    assert y.retains_grad
    (y * y).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [6.0, 12.0])
    x.retain_grad()  # a no-op on leaves
    assert not x.retains_grad


def test_retain_grad_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has requires_grad=False"):
        jg.ones(2).retain_grad()


def test_requires_grad_rules():
    x = leaf([1.0])
    y = x * 2
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        y.requires_grad = False
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require gradients"):
        jg.tensor([1, 2]).requires_grad_()
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype can require gradients"):
        jg.tensor([1, 2], requires_grad=True)
    z = jg.ones(2) * 2  # computed, but nothing required grad: still a leaf
    assert z.is_leaf and z.requires_grad_() is z and z.requires_grad


def test_integer_outputs_never_require_grad():
    x = leaf([1.5, -2.0])
    assert not x.long().requires_grad
    assert not (x > 0).requires_grad


def test_no_grad_enable_grad_set_grad_enabled_inference_mode():
    x = leaf([1.0])
    with jg.no_grad():
        y = x * 2
        with jg.enable_grad():
            z = x * 2
    assert not y.requires_grad and y.is_leaf and z.requires_grad
    with jg.inference_mode():
        assert not (x * 2).requires_grad
    with jg.set_grad_enabled(False):
        assert not jg.is_grad_enabled()
    assert jg.is_grad_enabled()
    jg.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        jg.set_grad_enabled(True)

    @jg.no_grad()
    def double(t):
        return t * 2

    assert not double(x).requires_grad and jg.is_grad_enabled()


def test_backward_works_inside_no_grad():
    x = leaf([3.0])
    y = x * x
    with jg.no_grad():
        y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [6.0])


def test_grad_mode_is_thread_local():
    seen = []
    with jg.no_grad():
        thread = threading.Thread(target=lambda: seen.append(jg.is_grad_enabled()))
        thread.start()
        thread.join()
    assert seen == [True]


def test_detach_shares_storage_and_version_counter():
    x = leaf([1.0, 2.0])
    d = x.detach()
    assert d.is_leaf and not d.requires_grad
    d.numpy()[0] = 5.0
    assert x.detach().numpy()[0] == 5.0
    d._bump_version()
    assert x._version == 1


def test_second_backward_without_retain_graph_raises():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 8.0])
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()


def test_graph_that_saves_nothing_can_be_backpropagated_twice():
    # pytorch#13494: add and sum save nothing, so a second backward is allowed
    a = leaf([1.0, 2.0])
    s = a.sum()
    s.backward()
    s.backward()
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 2.0])


def test_backward_twice_with_retain_graph_accumulates():
    # §4 case 8 (micrograd#53): torch gives (2, 2, 10) after the second call
    a, b, d = leaf(3.0), leaf(2.0), leaf(1.0)
    c = a + b
    e = c * d
    e.backward(retain_graph=True)
    e.backward()
    assert (a.grad.item(), b.grad.item(), d.grad.item()) == (2.0, 2.0, 10.0)


def test_fan_out_counts_dependencies():
    # §4 case 7: y = 41, a.grad = 25, b.grad = 19
    a, b = leaf(2.0), leaf(3.0)
    c = a + b
    d = a * b
    e = c + d
    f = c * d
    y = e + f
    y.backward()
    assert y.item() == 41.0
    assert (a.grad.item(), b.grad.item()) == (25.0, 19.0)


def test_x_minus_mean_has_zero_gradient():
    # §4 case 10 (pytorch#107007)
    x = leaf([1.0, 2.0, 3.0, 4.0])
    (x - x.mean()).backward(jg.ones(4, dtype=jg.float64))
    np.testing.assert_allclose(x.grad.numpy(), [0, 0, 0, 0], atol=1e-15)


def test_engine_sums_broadcast_gradients_but_node_call_does_not():
    # §4 case 11 (pytorch#144228)
    x = leaf(np.ones((2, 1)))
    y = leaf(np.ones((2, 3)))
    z = x * y
    gx, gy = z.grad_fn(jg.ones(2, 3, dtype=jg.float64))
    assert gx.shape == (2, 3) and gy.shape == (2, 3)
    z.sum().backward()
    assert x.grad.shape == (2, 1)
    np.testing.assert_array_equal(x.grad.numpy(), [[3.0], [3.0]])


def test_broadcast_gradients_of_both_operands():
    a = leaf(np.ones((3, 1)))
    b = leaf(np.ones((1, 4)))
    (a + b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full((3, 1), 4.0))
    np.testing.assert_array_equal(b.grad.numpy(), np.full((1, 4), 3.0))
    s = leaf(2.0)
    v = leaf([1.0, 2.0, 3.0])
    (s * v).sum().backward()
    assert s.grad.shape == () and s.grad.item() == 6.0


def test_non_scalar_backward_needs_gradient():
    x = leaf([1.0, 2.0])
    y = x * 2
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        y.backward()
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[0\] has a shape of"):
        y.backward(jg.ones(1, dtype=jg.float64))
    y.backward(jg.tensor([1.0, 10.0], dtype=jg.float64))
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 20.0])


def test_float64_gradient_for_float32_output_is_cast():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    (x * 2).backward(jg.tensor([1.0, 1.0], dtype=jg.float64))
    assert x.grad.dtype == jg.float32


def test_backward_of_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and does not have a grad_fn"):
        jg.ones(2).sum().backward()


def test_backward_inputs_accumulates_only_listed_leaves():
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    (x * w).sum().backward(inputs=[x])
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 4.0])
    assert w.grad is None


def test_autograd_grad_does_not_touch_dot_grad():
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    (gx,) = grad((x * w).sum(), x)
    np.testing.assert_array_equal(gx.numpy(), [3.0, 4.0])
    assert x.grad is None and w.grad is None


def test_autograd_grad_with_respect_to_intermediate():
    x = leaf([1.0, 2.0])
    h = x * 3
    y = (h * h).sum()
    (gh,) = grad(y, h)
    np.testing.assert_array_equal(gh.numpy(), [6.0, 12.0])
    assert x.grad is None


def test_autograd_grad_unused_inputs():
    x, unused = leaf([1.0]), leaf([2.0])
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="The differentiated Tensor at index 1 appears to not have been used"):
        grad(y, [x, unused], retain_graph=True)
    gx, gu = grad(y, [x, unused], allow_unused=True, retain_graph=True)
    assert gu is None and gx.item() == 2.0
    gx, gu = grad(y, [x, unused], materialize_grads=True)
    np.testing.assert_array_equal(gu.numpy(), [0.0])


def test_autograd_grad_input_without_grad_raises():
    x = leaf([1.0])
    with pytest.raises(RuntimeError, match="One of the differentiated Tensors does not require grad"):
        grad((x * 2).sum(), jg.ones(1))


def test_autograd_grad_grad_outputs():
    x = leaf([1.0, 2.0])
    (g,) = grad(x * x, x, grad_outputs=jg.tensor([1.0, 0.5], dtype=jg.float64))
    np.testing.assert_array_equal(g.numpy(), [2.0, 2.0])


def test_create_graph_higher_order():
    # d/dx x^3 at 2 = 12, second derivative 12, third 6
    x = leaf(2.0)
    y = x * x * x
    (g1,) = grad(y, x, create_graph=True)
    assert g1.item() == 12.0 and g1.requires_grad and g1.grad_fn is not None
    (g2,) = grad(g1, x, create_graph=True)
    assert g2.item() == 12.0
    (g3,) = grad(g2, x)
    assert g3.item() == 6.0


def test_backward_create_graph_warns_and_grad_has_history():
    x = leaf([1.0, 2.0])
    y = (x * x * x).sum()
    with pytest.warns(UserWarning, match="create a reference cycle"):
        y.backward(create_graph=True)
    assert x.grad.requires_grad
    (x.grad.sum()).backward(inputs=[x])


def test_second_derivative_of_linear_function_raises():
    # §4 case 23 (pytorch#60027)
    x = leaf(1.0)
    (g,) = grad(x * 2, x, create_graph=True)
    assert g.item() == 2.0 and not g.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        grad(g, x, allow_unused=True)


def test_cast_of_leaf_is_non_leaf():
    # §4 case 18 (pytorch#10065)
    w = jg.tensor([1.0, 2.0, 3.0], requires_grad=True).double()
    (w * w).sum().backward()
    assert not w.is_leaf
    with pytest.warns(UserWarning):
        assert w.grad is None


def test_cast_gradient_flows_back_in_original_dtype():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    (x.double() * 3).sum().backward()
    assert x.grad.dtype == jg.float32
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_hidden_state_carried_across_iterations_raises_second_time():
    # §4 case 19: without detach() the second backward reaches freed saved tensors
    w = leaf([0.5, 0.5])
    h = jg.zeros(2, dtype=jg.float64)
    h = (h + 1) * w
    h.sum().backward()
    h2 = (h + 1) * w
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        h2.sum().backward()
    h3 = (h.detach() + 1) * w
    h3.sum().backward()


def test_tensor_hooks_on_leaf_and_non_leaf():
    x = leaf([1.0, 2.0])
    seen = []
    x.register_hook(lambda g: seen.append(("x", g.numpy().tolist())))
    y = x * 3
    handle = y.register_hook(lambda g: g * 10)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [30.0, 30.0])
    assert seen == [("x", [30.0, 30.0])]
    handle.remove()
    x.grad = None
    y2 = x * 3
    y2.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_hook_errors():
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
        jg.ones(2).register_hook(lambda g: g)
    x = leaf([1.0, 2.0])
    y = x * 2
    y.register_hook(lambda g: jg.ones(3, dtype=jg.float64))
    with pytest.raises(RuntimeError, match="has changed the size of value"):
        y.sum().backward()
    x2 = leaf([1.0])
    y2 = x2 * 2
    y2.register_hook(lambda g: "not a tensor")
    with pytest.raises(TypeError, match="hook returned 'str'"):
        y2.sum().backward()


def test_hook_order_matches_pytorch():
    # §4 case 22: y-hook, y-hook2, node-pre, node-post, x-h1, x-h2, x-post-acc;
    # retain_grad runs after every tensor hook: y.grad = [2, 2]; x.grad = [60, 60]
    order = []
    x = leaf([1.0, 1.0])
    x.register_hook(lambda g: (order.append("x-h1"), g * 10)[1])
    x.register_hook(lambda g: order.append("x-h2"))
    x.register_post_accumulate_grad_hook(lambda t: order.append("x-post-acc"))
    y = x * 3
    y.register_hook(lambda g: order.append("y-hook"))
    y.retain_grad()
    y.register_hook(lambda g: (order.append("y-hook2"), g + 1)[1])
    y.grad_fn.register_prehook(lambda gouts: order.append("node-pre"))
    y.grad_fn.register_hook(lambda gins, gouts: order.append("node-post"))
    y.backward(jg.ones(2, dtype=jg.float64))
    assert order == ["y-hook", "y-hook2", "node-pre", "node-post", "x-h1", "x-h2", "x-post-acc"]
    np.testing.assert_array_equal(y.grad.numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(x.grad.numpy(), [60.0, 60.0])


def test_exceptions_in_hooks_propagate():
    x = leaf([1.0])

    def boom(g):
        raise ValueError("from the hook")

    x.register_hook(boom)
    with pytest.raises(ValueError, match="from the hook"):
        (x * 2).sum().backward()


def test_post_accumulate_hook_only_on_leaves():
    x = leaf([1.0])
    with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on non-leaf tensors"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)


def test_gradients_of_two_leaves_are_not_aliased():
    # add returns its incoming gradient to both inputs; .grad must not share memory
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    (a + b).sum().backward()
    a.grad.numpy()[0] = 100.0
    assert b.grad.numpy()[0] == 1.0
    g = jg.tensor([1.0, 1.0], dtype=jg.float64)
    c = leaf([0.0, 0.0])
    (c + 0).backward(g)
    c.grad.numpy()[0] = 7.0
    assert g.numpy()[0] == 1.0, "the user's gradient tensor is never stored as .grad"


def test_multiple_roots():
    x = leaf([1.0, 2.0])
    y1 = x * 2
    y2 = x * x
    jg.autograd.backward([y1, y2], [jg.ones(2, dtype=jg.float64), jg.ones(2, dtype=jg.float64)])
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 6.0])


def test_next_functions_and_names():
    x = leaf([1.0])
    y = (x * 2).exp()
    assert y.grad_fn.name() == "ExpBackward"
    (mul_fn, nr), = y.grad_fn.next_functions
    assert mul_fn.name() == "MulBackward" and nr == 0
    acc, _ = mul_fn.next_functions[0]
    assert acc.name() == "AccumulateGrad" and acc.variable is x
    assert mul_fn.next_functions[1] == (None, 0)


def test_saved_values_visible_and_freed():
    x = leaf([2.0])
    y = x.exp()
    np.testing.assert_allclose(y.grad_fn._saved_result.detach().numpy(), np.exp([2.0]))
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.grad_fn._saved_result  # noqa: B018


def test_deep_chain_backward_and_free_without_recursion():
    x = leaf([1.0])
    y = x
    for _ in range(100_000):
        y = y * 1.0
    y.backward()
    assert x.grad.item() == 1.0
    ref = weakref.ref(y.grad_fn)
    del y
    assert ref() is None


def test_graph_freed_by_refcount_without_gc():
    gc.disable()
    try:
        x = leaf([1.0, 2.0])
        y = (x * 2).exp()
        node_ref = weakref.ref(y.grad_fn)
        acc_ref = weakref.ref(y.grad_fn.next_functions[0][0].next_functions[0][0])
        del y
        assert node_ref() is None and acc_ref() is None
        out = (x * 3).sum()
        out_ref = weakref.ref(out)
        out.backward()
        del out
        assert out_ref() is None
    finally:
        gc.enable()


def test_log_of_zero_is_silent_like_pytorch():
    # numpy warns on log(0) and 1/0; PyTorch does not. Checked in a fresh interpreter
    # with Python's default warning filters (pytest installs its own).
    code = ("import jitgrad as jg\n"
            "x = jg.tensor([0.0, 1.0], dtype=jg.float64, requires_grad=True)\n"
            "y = x.log()\n"
            "y.backward(jg.ones(2, dtype=jg.float64))\n"
            "print(y.detach().numpy()[0], x.grad.numpy()[0])\n")
    result = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True,
                            text=True, check=True)
    assert result.stdout.split() == ["-inf", "inf"]
    assert "Warning" not in result.stderr, result.stderr


def test_concurrent_backward_into_same_leaf():
    x = leaf([1.0])
    outs = [(x * 2).sum() for _ in range(8)]
    threads = [threading.Thread(target=o.backward) for o in outs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert x.grad.item() == 16.0


def test_operand_saved_only_for_the_gradient_that_needs_it():
    # as PyTorch's mul: `h` is saved only for `c`'s gradient, which nobody needs, so
    # modifying h in place afterwards is fine; modifying `c` (needed for h's gradient) is not
    x = leaf([1.0, 2.0])
    h = x * 1
    c = jg.tensor([3.0, 4.0], dtype=jg.float64)
    y = h * c
    h.add_(1)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 4.0])
    y2 = (x * 1) * c
    c.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y2.sum().backward()
