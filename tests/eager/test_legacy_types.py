"""Legacy tensor types (`torch.FloatTensor`, ...), `torch.autograd.Variable` and
`torch.onnx.export`, with PyTorch 2.13's behaviour (checked against torch by hand)."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import Variable

TYPES = [("FloatTensor", np.float32), ("DoubleTensor", np.float64), ("HalfTensor", np.float16),
         ("LongTensor", np.int64), ("IntTensor", np.int32), ("ShortTensor", np.int16),
         ("CharTensor", np.int8), ("ByteTensor", np.uint8), ("BoolTensor", np.bool_)]


@pytest.mark.parametrize(("name", "np_dtype"), TYPES)
def test_legacy_type_constructs_converts_and_checks_instances(name, np_dtype):
    legacy = getattr(jg, name)
    data = legacy([1.7, 0.0, -2.0] if np_dtype != np.uint8 else [1.7, 0.0, 2.0])
    expected = np.array([1.7, 0.0, -2.0] if np_dtype != np.uint8 else [1.7, 0.0, 2.0])
    np.testing.assert_array_equal(data.numpy(), expected.astype(np_dtype))
    assert data.numpy().dtype == np_dtype and isinstance(data, legacy)
    assert legacy(2, 3).shape == (2, 3) and legacy(jg.Size([4])).shape == (4,)
    assert legacy().shape == (0,) and legacy([5]).shape == (1,)
    assert legacy(np.array([1, 0])).numpy().dtype == np_dtype
    converted = jg.tensor([1.0, 0.0]).type(legacy)
    assert converted.numpy().dtype == np_dtype and isinstance(converted, legacy)
    assert jg.tensor([1.0]).type(f"torch.{name}").numpy().dtype == np_dtype
    others = [getattr(jg, n) for n, d in TYPES if d != np_dtype]
    assert not any(isinstance(data, other) for other in others)
    assert legacy.dtype.np == np_dtype and not legacy.is_cuda
    assert repr(legacy) == f"<class 'jitgrad.{name}'>"


def test_legacy_type_of_a_tensor_of_another_dtype_raises_type_error():
    same = jg.ones(2, dtype=jg.int64)
    assert jg.LongTensor(same) is same
    with pytest.raises(TypeError, match=r"LongTensor\(tensor\): expected .*int64, got .*float32"):
        jg.LongTensor(jg.ones(2))


def test_cuda_legacy_types_exist_but_cannot_be_used():
    with pytest.raises(TypeError, match=r"type jitgrad\.cuda\.FloatTensor not available"):
        jg.cuda.FloatTensor(2)
    with pytest.raises(RuntimeError, match="CPU only"):
        jg.ones(2).type(jg.cuda.LongTensor)
    assert not isinstance(jg.ones(2), jg.cuda.FloatTensor)


def test_variable_detaches_shares_data_and_sets_requires_grad():
    x = jg.ones(3)
    v = Variable(x)
    assert v is not x and not v.requires_grad and isinstance(x, Variable)
    v.add_(1)  # shares x's data, as torch's Variable(x) does
    np.testing.assert_array_equal(x.numpy(), [2.0, 2.0, 2.0])
    w = Variable(jg.ones(2), requires_grad=True)
    (w * 3).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 3.0])
    leaf = jg.ones(2, requires_grad=True)
    detached = Variable(leaf * 2)
    assert detached.grad_fn is None and not detached.requires_grad
    assert not isinstance(3, Variable)


def test_variable_rejects_non_tensors_and_warns_on_volatile():
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        Variable([1, 2])
    with pytest.warns(UserWarning, match="volatile was removed"):
        Variable(jg.ones(1), volatile=True)


def test_onnx_export_is_refused_with_the_reason():
    assert not jg.onnx.is_in_onnx_export()
    with pytest.raises(RuntimeError, match=r"^torch\.onnx\.export: jitgrad has no ONNX exporter"):
        jg.onnx.export(jg.nn.Linear(2, 2), jg.ones(1, 2), "model.onnx")


def test_cuda_queries_answer_as_torch_2_13_cpu_build():
    assert jg.cuda.memory_allocated() == 0 and jg.cuda.memory_reserved(0) == 0
    assert jg.cuda.set_device(-1) is None  # a negative index is ignored
    for target in (0, "cuda:1", jg.device("cuda", 1)):
        with pytest.raises(AttributeError, match="CPU only"):
            jg.cuda.set_device(target)
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
        jg.cuda.current_device()
    with jg.cuda.device(-1):
        pass
    with pytest.raises(RuntimeError, match="compiled without CUDA support"):
        with jg.cuda.device(0):
            pass
