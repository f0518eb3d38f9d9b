"""Custom `jitgrad.autograd.Function`: each behaviour of research/eager_autograd.md §1 row 18
and §4 case 14, with the values and messages measured in PyTorch 2.13."""

import gc
import weakref

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import Function, gradcheck, once_differentiable


def leaf(values, dtype=jg.float64):
    return jg.tensor(values, dtype=dtype, requires_grad=True)


class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        result = x.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return grad_output * result


class Square(Function):
    """§4 case 14 (pytorch#18619): saves its input and its own output."""

    @staticmethod
    def forward(ctx, x):
        y = x**2
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * 2 * y / x


def test_apply_records_one_node_named_after_the_class():
    x = leaf([0.0, 1.0])
    y = Exp.apply(x)
    assert y.grad_fn.name() == "ExpBackward" and type(y.grad_fn).__name__ == "ExpBackward"
    assert y.requires_grad and not y.is_leaf
    assert y.grad_fn.next_functions[0][0] is x.grad_fn or y.grad_fn.next_functions[0][1] == 0
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.0, 1.0]), rtol=1e-12)


def test_forward_runs_with_grad_disabled_and_sees_needs_input_grad():
    seen = {}

    class Probe(Function):
        @staticmethod
        def forward(ctx, x, y):
            seen["grad_enabled"] = jg.is_grad_enabled()
            seen["needs"] = ctx.needs_input_grad
            out = x + y
            seen["out_requires_grad"] = out.requires_grad
            return out

        @staticmethod
        def backward(ctx, g):
            return g, None

    Probe.apply(leaf([1.0, 2.0]), jg.ones(2, dtype=jg.float64))
    assert seen == {"grad_enabled": False, "needs": (True, False), "out_requires_grad": False}
    with jg.no_grad():  # PyTorch still reports which inputs require grad
        out = Probe.apply(leaf([1.0, 2.0]), jg.ones(2, dtype=jg.float64))
    assert seen["needs"] == (True, False)
    assert out.grad_fn is None and not out.requires_grad


def test_no_input_requires_grad_gives_a_plain_result():
    out = Exp.apply(jg.tensor([0.0]))
    assert out.grad_fn is None and not out.requires_grad
    np.testing.assert_array_equal(out.numpy(), [1.0])


def test_double_backward_through_a_saved_output():
    x = jg.tensor(2.0, dtype=jg.float64, requires_grad=True)
    y = Square.apply(x)
    (g,) = jg.autograd.grad(y, x, create_graph=True)
    assert g.item() == 4.0 and g.grad_fn is not None
    (gg,) = jg.autograd.grad(g, x)
    assert gg.item() == 2.0


def test_gradcheck_first_and_second_order():
    x = leaf([0.5, 1.5, -2.0])
    assert gradcheck(Square.apply, (x,))

    @jg.enable_grad()  # gradcheck's finite differences run under no_grad
    def first_derivative(t):
        (g,) = jg.autograd.grad(Square.apply(t).sum(), t, create_graph=True)
        return g

    assert gradcheck(first_derivative, (x,))


def test_saved_output_is_rebuilt_with_the_node_as_grad_fn_and_makes_no_cycle():
    x = leaf([1.0, 2.0])
    y = Square.apply(x)
    node = y.grad_fn
    saved_x, saved_y = node.saved_tensors
    assert saved_x is x
    assert saved_y.grad_fn is node and saved_y.output_nr == 0
    np.testing.assert_array_equal(saved_y.numpy(force=True), [1.0, 4.0])
    ref = weakref.ref(y)
    del y, saved_y
    gc.disable()
    try:
        assert ref() is None, "the node must not keep its own output alive"
    finally:
        gc.enable()


def test_saved_tensor_modified_in_place_raises():
    x = leaf([1.0, 2.0])
    y = Square.apply(x)
    with jg.no_grad():
        x.mul_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_saved_output_modified_in_place_raises():
    x = leaf([1.0, 2.0])
    y = Exp.apply(x)
    with jg.no_grad():
        y.add_(1.0)
    with pytest.raises(RuntimeError, match=r"is at version 1; expected version 0"):
        y.sum().backward()


def test_modified_second_output_is_named_in_the_error():
    class Pair(Function):
        @staticmethod
        def forward(ctx, x):
            a, b = x * 2, x * 3
            ctx.save_for_backward(b)
            return a, b

        @staticmethod
        def backward(ctx, ga, gb):
            (b,) = ctx.saved_tensors
            return ga * 2 + gb * b

    x = leaf([1.0, 2.0, 3.0])
    a, b = Pair.apply(x)
    assert Pair.apply(x)[0].grad_fn.saved_tensors[0].output_nr == 1
    with jg.no_grad():
        b.add_(1.0)
    with pytest.raises(RuntimeError, match=r"\[jitgrad.DoubleTensor \[3\]\].*is at version 1; "
                                           r"expected version 0"):
        (a + b).sum().backward()


def test_saved_tensors_are_freed_after_backward_unless_retained():
    x = leaf([1.0, 2.0])
    y = Square.apply(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 8.0])
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()
    z = Square.apply(x)
    z.sum().backward()
    with pytest.raises(RuntimeError, match="Specify retain_graph=True"):
        _ = z.grad_fn.saved_tensors


def test_intermediates_and_none_can_be_saved():
    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            square = x * x
            ctx.save_for_backward(square, None)
            return square * x

        @staticmethod
        def backward(ctx, g):
            square, nothing = ctx.saved_tensors
            assert nothing is None
            return 3 * square * g

    x = leaf([1.0, -2.0])
    Cube.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 12.0])


def test_save_for_backward_rejects_non_tensors():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3)
            return x * 2

    with pytest.raises(TypeError, match="argument 1 is of type int"):
        Bad.apply(leaf([1.0]))


def test_ctx_attributes_kwargs_and_non_tensor_inputs():
    class Scale(Function):
        @staticmethod
        def forward(ctx, x, k, *, offset=0.0):
            ctx.k = k
            return x * k + offset

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    x = leaf([1.0, 2.0])
    y = Scale.apply(x, 3.0, offset=1.0)
    np.testing.assert_array_equal(y.detach().numpy(), [4.0, 7.0])
    assert y.grad_fn.k == 3.0 and y.grad_fn.next_functions[1] == (None, 0)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_none_gradient_means_no_gradient_for_that_input():
    class First(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, g):
            return g, None

    a, b = leaf([1.0]), leaf([2.0])
    First.apply(a, b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0])
    assert b.grad is None


class TwoInputs(Function):
    @staticmethod
    def forward(ctx, x, y):
        return x * y


def test_wrong_number_of_gradients():
    class Bad(TwoInputs):
        @staticmethod
        def backward(ctx, g):
            return (g,)

    with pytest.raises(RuntimeError, match=r"^function BadBackward returned an incorrect number "
                                           r"of gradients \(expected 2, got 1\)$"):
        Bad.apply(leaf([1.0, 1.0]), leaf([1.0, 1.0])).sum().backward()

    class TooMany(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    with pytest.raises(RuntimeError, match=r"TooManyBackward returned an incorrect number of "
                                           r"gradients \(expected 1, got 2\)"):
        TooMany.apply(leaf([1.0])).sum().backward()


def test_extra_trailing_none_gradients_are_dropped():
    class Extra(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, None, None

    x = leaf([1.0, 1.0])
    Extra.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_gradient_for_a_non_tensor_input_raises():
    class NonTensor(Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * 2, g

    message = ("returned a gradient different than None at position 2, but the corresponding "
               "forward input was not a Variable")
    with pytest.raises(RuntimeError, match=message):
        NonTensor.apply(leaf([1.0]), 2).sum().backward()


def test_wrong_gradient_shape_and_broadcastable_gradient():
    class BadShape(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return jg.ones(3, dtype=jg.float64)

    message = (r"^Function BadShapeBackward returned an invalid gradient at index 0 - got \[3\] "
               r"but expected shape compatible with \[2\]$")
    with pytest.raises(RuntimeError, match=message):
        BadShape.apply(leaf([1.0, 1.0])).sum().backward()

    class Big(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return jg.ones(3, 2)

    x = leaf([1.0, 1.0])
    Big.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    assert x.grad.dtype == jg.float64  # the float32 gradient is cast to the input's dtype


def test_returned_gradient_does_not_alias_a_saved_input():
    class PassThrough(Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(w)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            (w,) = ctx.saved_tensors
            return w, None

    x = leaf([1.0, 2.0])
    w = jg.tensor([5.0, 6.0], dtype=jg.float64)
    PassThrough.apply(x, w).sum().backward()
    x.grad.add_(1.0)
    np.testing.assert_array_equal(w.numpy(), [5.0, 6.0])


class Multi(Function):
    received = None

    @staticmethod
    def forward(ctx, x):
        return x * 2, 5, x.argmax(), x * 3

    @staticmethod
    def backward(ctx, *grads):
        Multi.received = grads
        return grads[0] + grads[3]


def test_multiple_outputs_and_materialized_gradients():
    x = leaf([1.0, 2.0])
    a, five, index, b = Multi.apply(x)
    assert five == 5
    assert (a.output_nr, b.output_nr) == (0, 3) and a.grad_fn is b.grad_fn
    assert not index.requires_grad and index.dtype == jg.int64
    a.sum().backward()
    ga, gfive, gindex, gb = Multi.received
    np.testing.assert_array_equal(ga.numpy(), [1.0, 1.0])
    assert gfive is None
    assert gindex.dtype == jg.int64 and gindex.shape == () and gindex.item() == 0
    np.testing.assert_array_equal(gb.numpy(), [0.0, 0.0])
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_non_float_outputs_do_not_require_grad():
    class Mixed(Function):
        @staticmethod
        def forward(ctx, x):
            return x > 0, x.long(), x * 1

        @staticmethod
        def backward(ctx, mask, as_long, g):
            assert mask.dtype == jg.bool and not mask.numpy().any()
            assert as_long.dtype == jg.int64
            return g

    x = leaf([1.0, -1.0])
    outs = Mixed.apply(x)
    assert [t.requires_grad for t in outs] == [False, False, True]
    outs[2].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_mark_non_differentiable():
    received = []

    class Split(Function):
        @staticmethod
        def forward(ctx, x):
            a, b = x * 2, x * 3
            ctx.mark_non_differentiable(b)
            return a, b

        @staticmethod
        def backward(ctx, ga, gb):
            received.append(gb)
            return ga

    x = leaf([1.0, 2.0])
    a, b = Split.apply(x)
    assert not b.requires_grad and b.grad_fn is None
    assert a.grad_fn.name() == "SplitBackward"
    a.sum().backward()
    np.testing.assert_array_equal(received[0].numpy(), [0.0, 0.0])


def test_set_materialize_grads_false_passes_none():
    received = []

    class NoMaterialize(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            received.append(gb)
            return ga * 2

    x = leaf([1.0, 2.0])
    a, _ = NoMaterialize.apply(x)
    a.sum().backward()
    assert received == [None]
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


class DoubleInPlace(Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_mark_dirty_rebases_the_input_history():
    x = leaf([1.0, 2.0])
    z = x.clone()
    out = DoubleInPlace.apply(z)
    assert out is z and z.grad_fn.name() == "DoubleInPlaceBackward"
    assert z._version == 1
    np.testing.assert_array_equal(z.detach().numpy(), [2.0, 4.0])
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_mark_dirty_on_a_leaf_that_requires_grad_raises():
    with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad has been used "
                                           "in an in-place operation.$"):
        DoubleInPlace.apply(leaf([1.0]))


def test_mark_dirty_input_must_be_returned():
    class NotReturned(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            return x * 2

    message = "Some elements marked as dirty during the forward method were not returned as output"
    with pytest.raises(RuntimeError, match=message):
        NotReturned.apply(leaf([1.0]).clone())


def test_input_returned_as_is_becomes_a_new_tensor_sharing_storage():
    class Identity(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = leaf([1.0, 2.0])
    y = Identity.apply(x)
    assert y is not x and x.grad_fn is None and y.grad_fn.name() == "IdentityBackward"
    assert y.data_ptr() == x.data_ptr()
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_setup_context_style():
    class Mul(Function):
        @staticmethod
        def forward(a, b):
            return a * b

        @staticmethod
        def setup_context(ctx, inputs, output):
            a, b = inputs
            ctx.save_for_backward(a, b)
            ctx.output_sum = output.sum().item()

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, g * a

    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    y = Mul.apply(a, b)
    assert y.grad_fn.output_sum == 11.0
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 2.0])


class OnceSquare(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def test_once_differentiable_first_order():
    x = leaf([1.0, 3.0])
    OnceSquare.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 6.0])


def test_once_differentiable_raises_when_differentiated_twice():
    x = leaf([1.0, 3.0])
    y = OnceSquare.apply(x)
    (g,) = jg.autograd.grad(y, x, grad_outputs=leaf([1.0, 1.0]), create_graph=True)
    np.testing.assert_array_equal(g.detach().numpy(), [2.0, 6.0])
    assert g.grad_fn.name() == "DelayedError"
    with pytest.raises(RuntimeError, match="trying to differentiate twice a function that was "
                                           "marked with @once_differentiable"):
        g.sum().backward()


def test_once_differentiable_result_has_no_graph_when_nothing_flows_through_it():
    x = leaf([1.0, 3.0])
    (g,) = jg.autograd.grad(OnceSquare.apply(x).sum(), x, create_graph=True)
    np.testing.assert_array_equal(g.numpy(), [2.0, 6.0])
    assert g.grad_fn is None and not g.requires_grad


def test_legacy_instance_call_and_missing_methods():
    with pytest.raises(RuntimeError, match="Legacy autograd function with non-static forward"):
        Exp()(leaf([1.0]))

    class NoBackward(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    with pytest.raises(NotImplementedError, match="You must implement either the backward or vjp"):
        NoBackward.apply(leaf([1.0])).sum().backward()

    class NoForward(Function):
        pass

    with pytest.raises(NotImplementedError, match="You must implement the forward function"):
        NoForward.apply(leaf([1.0]))


def test_float32_function_and_hooks_on_its_node():
    x = jg.tensor([0.0, 1.0], requires_grad=True)
    y = Exp.apply(x)
    assert y.dtype == jg.float32
    seen = []
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: seen.append(grad_inputs[0].numpy()))
    y.sum().backward()
    np.testing.assert_allclose(seen[0], np.exp([0.0, 1.0]).astype(np.float32), rtol=1e-6)
    assert x.grad.dtype == jg.float32
