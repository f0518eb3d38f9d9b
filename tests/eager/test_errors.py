"""Bad input gets a clear error of PyTorch's exception class, naming what clashed and
what to do, raised close to the user's line (no numpy traceback chained on)."""

import numpy as np
import pytest

import jitgrad as jg


def _jitgrad_frames(excinfo) -> int:
    return sum(1 for entry in excinfo.traceback if "/jitgrad/" in str(entry.path))


def test_broadcast_mismatch_names_sizes_and_shapes():
    with pytest.raises(RuntimeError) as excinfo:
        jg.ones(3, 4) + jg.ones(2, 5)
    message = str(excinfo.value)
    assert "the size of tensor a (4) must match the size of tensor b (5) at non-singleton dimension 1" in message
    assert "[3, 4]" in message and "[2, 5]" in message
    assert excinfo.value.__cause__ is None and excinfo.value.__suppress_context__
    assert _jitgrad_frames(excinfo) <= 4


def test_matmul_mismatch_names_inner_dims():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 2x3\)") as excinfo:
        jg.ones(2, 3) @ jg.ones(2, 3)
    assert "inner dims 3 and 2" in str(excinfo.value)
    with pytest.raises(RuntimeError, match="both arguments to matmul need to be at least 1D"):
        jg.matmul(jg.tensor(1.0), jg.ones(2))


def test_requires_grad_on_int_tensor_says_to_convert():
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require gradients") as excinfo:
        jg.arange(3).requires_grad_()
    assert "float()" in str(excinfo.value)
    with pytest.raises(RuntimeError, match="floating point and complex dtype can require gradients"):
        jg.zeros(2, dtype=jg.int64, requires_grad=True)


def test_non_scalar_backward_says_to_pass_gradient():
    y = jg.ones(2, 3, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs") as excinfo:
        y.backward()
    assert "gradient=" in str(excinfo.value) and "[2, 3]" in str(excinfo.value)


def test_numpy_of_tensor_requiring_grad_says_detach():
    with pytest.raises(RuntimeError, match=r"Use tensor.detach\(\).numpy\(\) instead"):
        jg.ones(2, requires_grad=True).numpy()
    np.testing.assert_array_equal(jg.ones(2, requires_grad=True).detach().numpy(), [1, 1])


def test_item_of_multi_element_tensor_says_what_to_do():
    with pytest.raises(RuntimeError, match="a Tensor with 3 elements cannot be converted to Scalar") as excinfo:
        jg.ones(3).item()
    assert "tolist()" in str(excinfo.value)
    assert jg.tensor([2.5]).item() == 2.5


def test_bool_of_multi_element_tensor_is_ambiguous():
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        bool(jg.ones(2))


def test_len_of_0d_tensor():
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(jg.tensor(1.0))


def test_unsupported_dtype_is_named():
    with pytest.raises(TypeError, match="bfloat16 exists for compatibility"):
        jg.zeros(2, dtype=jg.bfloat16)


_HALF = jg.ones(2, dtype=jg.float16)
# name: call taking a dtype argument; before, the missing numpy dtype of bfloat16 silently
# meant float64 (zeros_like, randint, mean, softmax) or no cast at all (sum, cumsum)
UNSUPPORTED_DTYPE_ARGUMENTS = {
    "zeros_like": lambda d: jg.zeros_like(_HALF, dtype=d),
    "ones_like": lambda d: jg.ones_like(_HALF, dtype=d),
    "empty_like": lambda d: jg.empty_like(_HALF, dtype=d),
    "full_like": lambda d: jg.full_like(_HALF, 2.0, dtype=d),
    "rand_like": lambda d: jg.rand_like(_HALF, dtype=d),
    "randn_like": lambda d: jg.randn_like(_HALF, dtype=d),
    "randint_like": lambda d: jg.randint_like(_HALF, 5, dtype=d),
    "randint": lambda d: jg.randint(0, 5, (2,), dtype=d),
    "randperm": lambda d: jg.randperm(3, dtype=d),
    "view": lambda d: jg.ones(2, dtype={2: jg.float16, 8: jg.float64}[d.itemsize]).view(d),
    "sum": lambda d: _HALF.sum(dtype=d),
    "prod": lambda d: _HALF.prod(dtype=d),
    "mean": lambda d: _HALF.mean(dtype=d),
    "cumsum": lambda d: _HALF.cumsum(0, dtype=d),
    "cumprod": lambda d: _HALF.cumprod(0, dtype=d),
    "softmax": lambda d: jg.softmax(_HALF, 0, dtype=d),
    "log_softmax": lambda d: jg.log_softmax(_HALF, 0, dtype=d),
    "vector_norm": lambda d: jg.linalg.vector_norm(_HALF, dtype=d),
}


@pytest.mark.parametrize("name", UNSUPPORTED_DTYPE_ARGUMENTS)
@pytest.mark.parametrize("dtype", [jg.bfloat16, jg.complex64], ids=str)
def test_unsupported_dtype_argument_is_named(name, dtype):
    with pytest.raises(TypeError, match=f"dtype {dtype} exists for compatibility but jitgrad "
                                        "cannot compute with it"):
        UNSUPPORTED_DTYPE_ARGUMENTS[name](dtype)


def test_mean_of_int_tensor():
    with pytest.raises(RuntimeError, match="mean\\(\\): could not infer output dtype"):
        jg.arange(4).mean()


def test_view_of_non_contiguous_tensor():
    t = jg.ones(2, 3).permute(1, 0)
    with pytest.raises(RuntimeError, match="view size is not compatible with input tensor's size and stride"):
        t.view(6)
    assert t.reshape(6).shape == (6,)


def test_reshape_to_wrong_size():
    with pytest.raises(RuntimeError, match=r"shape '\[4, 2\]' is invalid for input of size 6"):
        jg.ones(2, 3).reshape(4, 2)


def test_dim_out_of_range():
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"):
        jg.ones(2, 3).sum(2)
