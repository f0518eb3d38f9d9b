"""The forward/backward split of a captured graph (Note [Joint graphs]), pinned as text.

A change to the partition (what is saved, what is recomputed, which gradients are None),
to a backward formula or to the listing shows here as a diff of the printed graphs.
"""

import numpy as np

import jitgrad as jg
from jitgrad.codegen.joint_graphs import build_joint_graphs
from jitgrad.trace.capture.tracing import trace_function
from jitgrad.trace.capture.variables import tensors_in
from jitgrad.trace.ir.graph_module import GraphModule


def loss_fn(x, w, b):
    h = jg.tanh(x @ w + b)
    return (h * h).mean()


def _joint():
    x = jg.tensor(np.ones((4, 3), np.float32))
    w = jg.tensor(np.ones((3, 2), np.float32), requires_grad=True)
    b = jg.tensor(np.ones(2, np.float32), requires_grad=True)
    traced = trace_function(loss_fn, (x, w, b), {})
    traced.graph.output(tuple(t.fake.output_node() for t in tensors_in(traced.output)))
    return build_joint_graphs(traced.graph, [x, w, b])


def test_the_forward_saves_the_input_and_tanh_and_the_backward_reads_only_those():
    joint = _joint()
    assert str(joint.forward) == FORWARD
    assert str(joint.backward) == BACKWARD
    assert joint.saved == [("input", 0), ("output", 1)]
    assert joint.num_user_outputs == 1 and joint.differentiable == (True,)
    assert joint.grad_inputs == (False, True, True)


def test_the_split_computes_eagers_gradients():
    joint = _joint()
    x = jg.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    w = jg.tensor(np.linspace(0, 1, 6, dtype=np.float32).reshape(3, 2), requires_grad=True)
    b = jg.tensor(np.array([0.5, -0.5], np.float32), requires_grad=True)
    with jg.no_grad():
        loss, tanh = GraphModule(joint.forward)(x, w, b)
        grads = GraphModule(joint.backward)(x, tanh, jg.tensor(np.float32(1.0)))
    expected = loss_fn(x, w, b)
    expected.backward()
    np.testing.assert_allclose(loss.numpy(), expected.detach().numpy(), rtol=1e-6)
    assert grads[0] is None
    np.testing.assert_allclose(grads[1].numpy(), w.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(grads[2].numpy(), b.grad.numpy(), rtol=1e-6)


FORWARD = (
    "graph(x: f32[4, 3], w: f32[3, 2] grad, b: f32[2] grad):\n"
    "  %matmul = call_function[matmul](%x, %w)                         f32[4, 2] grad   test_joint_graphs.py:17\n"
    "  %add    = call_function[add](%matmul, %b)                       f32[4, 2] grad   test_joint_graphs.py:17\n"
    "  %tanh   = call_function[tanh](%add)                             f32[4, 2] grad   test_joint_graphs.py:17\n"
    "  %mul    = call_function[mul](%tanh, %tanh)                      f32[4, 2] grad   test_joint_graphs.py:18\n"
    "  %mean   = call_function[mean](%mul, dims=None, keepdim=False)   f32[] grad       test_joint_graphs.py:18\n"
    "  return (%mean, %tanh)"
)
BACKWARD = (
    "graph(saved_x: f32[4, 3], saved_tanh: f32[4, 2] grad, tangent_0: f32[]):\n"
    "  %reshape   = call_function[reshape](%tangent_0, shape=(1, 1))                      f32[1, 1]   test_joint_graphs.py:18\n"
    "  %div       = call_function[div](%reshape, 8)                                       f32[1, 1]   test_joint_graphs.py:18\n"
    "  %expand    = call_function[expand](%div, shape=(4, 2))                             f32[4, 2]   test_joint_graphs.py:18\n"
    "  %mul_1     = call_function[mul](%expand, %saved_tanh)                              f32[4, 2]   test_joint_graphs.py:18\n"
    "  %mul_2     = call_function[mul](%expand, %saved_tanh)                              f32[4, 2]   test_joint_graphs.py:18\n"
    "  %add_1     = call_function[add](%mul_1, %mul_2)                                    f32[4, 2]   test_joint_graphs.py:18\n"
    "  %mul_3     = call_function[mul](%saved_tanh, %saved_tanh)                          f32[4, 2]   test_joint_graphs.py:17\n"
    "  %sub       = call_function[sub](1, %mul_3)                                         f32[4, 2]   test_joint_graphs.py:17\n"
    "  %mul_4     = call_function[mul](%add_1, %sub)                                      f32[4, 2]   test_joint_graphs.py:17\n"
    "  %sum       = call_function[sum](%mul_4, dims=(0,), keepdim=True, out_dtype=None)   f32[1, 2]   test_joint_graphs.py:17\n"
    "  %reshape_1 = call_function[reshape](%sum, shape=(2,))                              f32[2]      test_joint_graphs.py:17\n"
    "  %permute   = call_function[permute](%saved_x, dims=(1, 0))                         f32[3, 4]   test_joint_graphs.py:17\n"
    "  %matmul_1  = call_function[matmul](%permute, %mul_4)                               f32[3, 2]   test_joint_graphs.py:17\n"
    "  return (None, %matmul_1, %reshape_1)"
)
