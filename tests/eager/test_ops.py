"""Every op case: forward against numpy (values and dtype), gradients by gradcheck."""

import numpy as np
import pytest

import jitgrad as jg
from tests.eager.op_table import OP_CASES, OpCase


def _as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", OP_CASES, ids=lambda c: c.name)
def test_forward_matches_numpy(case: OpCase, np_dtype):
    if np_dtype not in case.dtypes:
        pytest.skip(f"{case.name} is not defined for {np.dtype(np_dtype).name}")
    arrays = case.arrays(np_dtype)
    outs = _as_list(case.fn(*case.tensors(arrays, requires_grad=False)))
    refs = _as_list(case.ref(*[a.copy() for a in arrays]))
    assert len(outs) == len(refs)
    for out, ref in zip(outs, refs, strict=True):
        ref = np.asarray(ref)
        assert out.shape == ref.shape
        if ref.dtype.kind == "f":
            assert out.dtype.np == np.dtype(np_dtype), f"{out.dtype} for {np.dtype(np_dtype)} inputs"
            rtol = case.rtol if np_dtype == np.float32 else case.rtol64
            np.testing.assert_allclose(out.numpy(), ref, rtol=rtol, atol=case.atol)
        else:
            np.testing.assert_array_equal(out.numpy(), ref)


GRAD_CASES = [c for c in OP_CASES if c.differentiable]


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: c.name)
def test_gradcheck(case: OpCase):
    arrays = case.arrays(np.float64)
    tensors = case.tensors(arrays, requires_grad=True)
    assert any(t.requires_grad for t in tensors), "a differentiable case needs a float input"
    assert jg.autograd.gradcheck(case.fn, tensors, atol=case.gradcheck_atol)


def _first_gradients(case: OpCase, seeds: np.ndarray):
    """x -> d<seeds, case.fn(x)>/dx with create_graph=True (gradgradcheck's function)."""
    def first(*tensors):
        with jg.enable_grad():
            outs = [o for o in _as_list(case.fn(*tensors))
                    if isinstance(o, jg.Tensor) and o.dtype.is_floating_point and o.requires_grad]
            wrt = [t for t in tensors if isinstance(t, jg.Tensor) and t.requires_grad]
            if not outs:
                return ()
            weights = [jg.tensor(seeds[: o.numel()].reshape(o.shape)) for o in outs]
            grads = jg.autograd.grad(outs, wrt, weights, create_graph=True, allow_unused=True)
            return tuple(jg.zeros(t.shape, dtype=t.dtype) if g is None else g
                         for g, t in zip(grads, wrt, strict=True))
    return first


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: c.name)
def test_gradgradcheck(case: OpCase):
    """Second derivatives: the Jacobian of the first gradient (a create_graph backward,
    whose saved outputs must be graph-connected) against its finite differences."""
    tensors = case.tensors(case.arrays(np.float64), requires_grad=True)
    seeds = np.random.default_rng(1).uniform(0.5, 1.5, size=1000)
    assert jg.autograd.gradcheck(_first_gradients(case, seeds), tensors, atol=1e-4)
