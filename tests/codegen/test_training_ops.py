"""Gradients through compiled regions match eager, over the op table's differentiable cases.

Each case runs `fn(*inputs)` compiled on inputs that require grad (the joint
forward/backward graphs of jitgrad/codegen/joint_graphs.py), and eagerly; the loss is
sum_k (out_k * w_k).sum() with fixed random weights w_k, computed eagerly after the
region so its backward receives non-trivial output gradients.
- Every differentiable case, float32 and float64: the joint graphs run as GraphModules
  (eager ops), which checks the traced backward of every op without a numba compile each.
- One case per family of lowered ops in float32, six in float64: the joint graphs run as
  numba kernels (the suite must stay fast from a cold kernel cache; each lowering is
  checked against eager over the whole op table by test_op_table.py, and backward graphs
  are made of the same ops).
Tolerances (issue 5): float32 gradients within rtol 1e-5 of eager's, float64 within
1e-10 (atol 1e-6 / 1e-12 for gradients near zero).
"""

import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.codegen.autograd import CompiledRegion, compile_region
from jitgrad.codegen.backend import CompiledGraph, numba_backend
from jitgrad.trace.breaks.unsupported import Unsupported
from jitgrad.trace.ir.graph_module import GraphModule
from tests.codegen.test_backend import compile_numba
from tests.eager.op_table import OP_CASES

TOLERANCES = {np.float32: (1e-5, 1e-6), np.float64: (1e-10, 1e-12)}
CASES = [(case, d) for case in OP_CASES if case.differentiable for d in case.dtypes]
BY_NAME = {case.name: case for case in OP_CASES}
# one case per family of lowered ops (a kernel compile each way costs about a second)
KERNEL_CASES = [(BY_NAME[n], np.float32) for n in (
    "add_broadcast", "sub_broadcast", "mul_scalar", "div", "exp", "log", "tanh", "sigmoid",
    "gelu", "gelu_tanh", "silu", "softplus_beta_threshold", "logsigmoid", "maximum_broadcast",
    "where_broadcast", "clamp", "erf", "pow_scalar", "cos_strided", "relu_transposed")]
KERNEL_CASES += [(BY_NAME[n], np.float64) for n in ("div", "tanh", "gelu", "erf", "pow_scalar",
                                                     "softplus_beta_threshold")]


def graph_module_backend(gm, example_inputs):
    """The joint graphs run as GraphModules (eager ops): a CompiledRegion without kernels."""
    try:
        return compile_region(gm.graph, example_inputs, GraphModule)
    except Unsupported:
        return gm.forward


# cases whose graph is not compiled for training, with the reason: they must still give
# eager's gradients (the captured graph runs with eager autograd, or the frame eagerly)
NOT_COMPILED = {
    "nll_loss_weighted": "the class weights are indexed by the traced target inside the "
                         "loss, a value-dependent index the graph cannot hold",
}


def user_function(op, arity):
    """A user's function calling `op` with `arity` tensors (a fixed arity: the tracer lifts
    positional parameters, not a *args tuple)."""
    return {1: lambda a: op(a), 2: lambda a, b: op(a, b), 3: lambda a, b, c: op(a, b, c),
            4: lambda a, b, c, d: op(a, b, c, d)}[arity]


def _as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def loss_and_grads(outputs, inputs, seed=1):
    """sum_k (out_k * w_k).sum() over float outputs, and its gradients for `inputs`."""
    rng = np.random.default_rng(seed)
    loss = None
    for out in _as_list(outputs):
        if not isinstance(out, jg.Tensor) or not out.requires_grad:
            continue
        w = jg.tensor(rng.uniform(0.5, 1.5, size=out.shape).astype(out.detach().numpy().dtype))
        term = (out * w).sum()
        loss = term if loss is None else loss + term
    grads = jg.autograd.grad(loss, inputs, allow_unused=True)
    return loss, grads


def check_case(case, np_dtype, backend):
    arrays = case.arrays(np_dtype)
    eager_inputs = case.tensors(arrays, requires_grad=True)
    wanted = [t for t in eager_inputs if isinstance(t, jg.Tensor) and t.requires_grad]
    eager_loss, eager_grads = loss_and_grads(case.fn(*eager_inputs), wanted)

    inputs = case.tensors(arrays, requires_grad=True)
    fn, produced = compile_numba(user_function(case.fn, len(inputs)), backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # graph-break fallbacks warn; they must still match
        outputs = fn(*inputs)
    loss, grads = loss_and_grads(outputs, [t for t in inputs
                                           if isinstance(t, jg.Tensor) and t.requires_grad])
    rtol, atol = TOLERANCES[np_dtype]
    np.testing.assert_allclose(loss.detach().numpy(), eager_loss.detach().numpy(),
                               rtol=rtol, atol=atol)
    for g, e in zip(grads, eager_grads, strict=True):
        if g is None and e is not None:
            # an input the graph never reads gets None (as torch.compile's), where eager
            # autograd may send zeros through an op that overwrote it (copy_)
            assert not e.numpy().any()
            continue
        assert (g is None) == (e is None)
        if e is not None:
            assert g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=rtol, atol=atol)
    # a backend falls back to the captured graph's own forward (eager autograd through it)
    # when it cannot build the backward; a graph without differentiable outputs compiles
    # without a region
    fallbacks = [c for c in produced if not isinstance(c, (CompiledRegion, CompiledGraph,
                                                           GraphModule))]
    if case.name in NOT_COMPILED:
        assert fallbacks, f"{case.name} now compiles for training: update NOT_COMPILED"
    else:
        assert produced and not fallbacks, "a graph ran with eager autograd"


@pytest.mark.parametrize(("case", "np_dtype"), CASES,
                         ids=[f"{c.name}-{np.dtype(d).name}" for c, d in CASES])
def test_joint_graphs_match_eager(case, np_dtype):
    check_case(case, np_dtype, graph_module_backend)


@pytest.mark.parametrize(("case", "np_dtype"), KERNEL_CASES,
                         ids=[f"{c.name}-{np.dtype(d).name}" for c, d in KERNEL_CASES])
def test_compiled_kernels_match_eager(case, np_dtype):
    check_case(case, np_dtype, numba_backend)
