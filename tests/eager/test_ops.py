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
