"""In-place arithmetic and copies with nothing to record write straight into the target
(Note [Writing in place] in jitgrad/eager/ops/inplace.py): the values, dtype, version and
errors are those of the functional op written back, and the target keeps its memory."""

import itertools

import numpy as np
import pytest

import jitgrad as jg

OPS = {
    "add": lambda x, y: x.add_(y), "sub": lambda x, y: x.sub_(y), "mul": lambda x, y: x.mul_(y),
    "div": lambda x, y: x.div_(y), "add_alpha": lambda x, y: x.add_(y, alpha=-0.3),
    "sub_alpha_int": lambda x, y: x.sub_(y, alpha=2), "iadd": lambda x, y: x.__iadd__(y),
    "itruediv": lambda x, y: x.__itruediv__(y),
}
FUNCTIONAL = {
    "add": lambda x, y: x.add(y), "sub": lambda x, y: x.sub(y), "mul": lambda x, y: x.mul(y),
    "div": lambda x, y: x.div(y), "add_alpha": lambda x, y: x.add(y, alpha=-0.3),
    "sub_alpha_int": lambda x, y: x.sub(y, alpha=2), "iadd": lambda x, y: x + y,
    "itruediv": lambda x, y: x / y,
}


def _target(dtype, layout):
    base = jg.tensor(np.random.default_rng(0).uniform(-3, 3, (4, 6)), dtype=dtype)
    return {"contiguous": base, "transposed": base.t(), "strided": base[:, ::2]}[layout]


def _operands(x):
    rng = np.random.default_rng(1)
    shape = tuple(x.shape)
    return {
        "int": 3, "float": 0.1, "huge_float": 1e39,
        "same_dtype": jg.tensor(rng.uniform(-2, 2, shape), dtype=x.dtype),
        "row": jg.tensor(rng.uniform(-2, 2, shape[-1:]), dtype=x.dtype),
        "zero_d": jg.tensor(2.5, dtype=x.dtype),
        "float64": jg.tensor(rng.uniform(-2, 2, shape), dtype=jg.float64),
        "int_tensor": jg.tensor(rng.integers(1, 4, shape)),
    }


@pytest.mark.parametrize("grad_mode", [True, False])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
@pytest.mark.parametrize("dtype", [jg.float32, jg.float64, jg.float16])
@pytest.mark.parametrize("op", OPS)
def test_in_place_arithmetic_equals_the_functional_op_written_back(op, dtype, layout, grad_mode):
    for name, y in _operands(_target(dtype, layout)).items():
        x = _target(dtype, layout)
        expected = FUNCTIONAL[op](x, y).to(dtype).numpy()
        pointer, version = x.data_ptr(), x._version
        with jg.set_grad_enabled(grad_mode), np.errstate(all="ignore"):
            out = OPS[op](x, y)
        assert out is x and x.dtype == dtype and x.data_ptr() == pointer, name
        assert x._version == version + 1, name
        np.testing.assert_array_equal(x.numpy(), expected, err_msg=f"{op} {name}")


@pytest.mark.parametrize("op", ["add", "mul"])
def test_in_place_arithmetic_that_records_still_records(op):
    w = jg.ones(3, requires_grad=True)
    x = w * 1.0
    OPS[op](x, jg.full((3,), 2.0))
    assert type(x.grad_fn).__name__ == f"{op.capitalize()}Backward"
    x.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 1.0, 1.0] if op == "add" else [2.0] * 3)


def test_in_place_on_a_no_grad_view_of_a_grad_requiring_base_still_raises():
    base = jg.ones(3, requires_grad=True) * 1.0
    with jg.no_grad():
        view = base[:2]
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
        view.add_(1.0)


@pytest.mark.parametrize("call, error", [
    (lambda: jg.ones(3).expand(2, 3).add_(1.0), "more than one element of the written-to"),
    (lambda: jg.ones(3).add_(jg.ones(2, 3)), "doesn't match the broadcast shape"),
    # fuzz seed 664999: shapes that do not broadcast raised numpy's ValueError
    (lambda: jg.ones(3, 3).add_(jg.ones(2, 3) > 0), "must match the size of tensor b"),
    (lambda: jg.ones(3, 3).mul_(jg.ones(2, 3)), "must match the size of tensor b"),
    (lambda: jg.ones(3, dtype=jg.int64).add_(0.5), "can't be cast to the desired output type"),
])
def test_in_place_errors_are_unchanged(call, error):
    with pytest.raises(RuntimeError, match=error):
        call()


def test_partial_overlap_of_operand_and_target_still_raises():
    x = jg.arange(6.0)
    with pytest.raises(RuntimeError, match="some elements of the input tensor"):
        x[1:].add_(x[:-1])


@pytest.mark.parametrize("dtype, src", list(itertools.product(
    [jg.float32, jg.int64, jg.bool], [2.7, -1, True])))
def test_fill_and_copy_cast_as_the_functional_form(dtype, src):
    x = jg.zeros(2, 3, dtype=dtype)
    pointer = x.data_ptr()
    x.fill_(src)
    np.testing.assert_array_equal(x.numpy(), np.full((2, 3), src).astype(x.numpy().dtype))
    y = jg.zeros(2, 3, dtype=dtype)
    y.copy_(jg.tensor([src, src, src]))
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    assert x.data_ptr() == pointer and x._version == 1 and y._version == 1
    x.zero_()
    assert not x.numpy().any()


def test_copy_from_a_float_tensor_into_an_int_tensor_truncates():
    x = jg.zeros(4, dtype=jg.int64)
    x.copy_(jg.tensor([1.7, -1.7, 2.5, -0.5]))
    np.testing.assert_array_equal(x.numpy(), [1, -1, 2, 0])


@pytest.mark.parametrize("make, error", [
    (lambda: jg.full((2,), 1e6, dtype=jg.float16), "c10::Half"),
    (lambda: jg.ones(2, dtype=jg.int8).fill_(300), "int8_t"),
    (lambda: jg.ones(2, dtype=jg.float16).masked_fill(jg.tensor([True, False]), 1e6),
     "c10::Half"),
    (lambda: jg.ones(2).fill_(1e39), "float "),
    (lambda: jg.ones(2, dtype=jg.int32).fill_(2 ** 31), "int "),
    (lambda: jg.ones(2, dtype=jg.uint8).fill_(-300), "uint8_t"),
])
def test_a_scalar_that_overflows_the_dtype_raises_torchs_error(make, error):
    # torch 2.13's c10::checked_convert (new-user report: float16 fill_(1e6) filled inf)
    with pytest.raises(RuntimeError, match=f"value cannot be converted to type {error}"):
        make()


def test_scalars_that_fit_convert_as_torch():
    assert jg.ones(2, dtype=jg.uint8).fill_(-1).tolist() == [255, 255]  # wraps, as torch
    assert jg.ones(2, dtype=jg.float16).fill_(float("inf")).tolist() == [np.inf, np.inf]
    assert jg.ones(2, dtype=jg.float16).fill_(65504.0).tolist() == [65504.0, 65504.0]
    assert jg.ones(2, dtype=jg.int64).fill_(2.7).tolist() == [2, 2]
    assert jg.full((2,), True).dtype == jg.bool and jg.full((2,), 3).dtype == jg.int64


@pytest.mark.parametrize("dtype", [jg.float32, jg.float64, jg.float16])
@pytest.mark.parametrize("op", ["add_alpha", "sub_alpha_int"])
def test_a_large_scaled_update_in_blocks_equals_the_functional_op(op, dtype):
    # above one block (2^17 elements) the scaled operand is computed block by block, and
    # the tail block is partial; the values are the functional op's, bit for bit
    rng = np.random.default_rng(2)
    shape = (3, 2**17 // 3 + 1000)
    x = jg.tensor(rng.uniform(-3, 3, shape), dtype=dtype)
    y = jg.tensor(rng.uniform(-3, 3, shape), dtype=dtype)
    want = FUNCTIONAL[op](x, y)
    memory, version = x._data, x._version
    OPS[op](x, y)
    assert x._data is memory and x._version == version + 1
    np.testing.assert_array_equal(x.numpy(), want.numpy())
    same = jg.tensor(rng.uniform(-3, 3, shape), dtype=dtype)
    want = FUNCTIONAL[op](same, same)
    OPS[op](same, same)  # the operand is the target itself
    np.testing.assert_array_equal(same.numpy(), want.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_composite_forwards_in_their_own_buffers_equal_the_formula(dtype):
    # Note [Composite forwards in place] in jitgrad/eager/ops/nn_ops.py: the same ufuncs,
    # bit for bit, and the input is left as it was
    data = (np.random.default_rng(3).standard_normal((5, 9)) * 4).astype(dtype)
    x = jg.tensor(data.copy())
    shifted = data - data.max(-1, keepdims=True)
    e = np.exp(shifted)
    np.testing.assert_array_equal(x.softmax(-1).numpy(), e / e.sum(-1, keepdims=True))
    np.testing.assert_array_equal(x.log_softmax(-1).numpy(),
                                  shifted - np.log(e.sum(-1, keepdims=True)))
    w, b = (np.random.default_rng(4).standard_normal(9).astype(dtype) for _ in range(2))
    centered = data - data.mean(-1, keepdims=True)
    want = centered / np.sqrt((centered * centered).mean(-1, keepdims=True) + 1e-5) * w + b
    got = jg.nn.functional.layer_norm(x, (9,), jg.tensor(w), jg.tensor(b))
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(x.numpy(), data)
