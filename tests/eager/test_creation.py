"""Creation and conversion: dtype inference and factory results as measured in PyTorch 2.13
(research/eager_autograd.md §2.0-§2.1), memory sharing, devices, errors."""

import collections
import warnings

import numpy as np
import pytest

import jitgrad as jg

# (make, dtype, shape, values): each row was printed by the same call in PyTorch 2.13
DTYPE_TABLE = [
    (lambda: jg.tensor(1.5), jg.float32, (), 1.5),
    (lambda: jg.tensor(3), jg.int64, (), 3),
    (lambda: jg.tensor(True), jg.bool, (), True),
    (lambda: jg.tensor([1, 2.5]), jg.float32, (2,), [1.0, 2.5]),
    (lambda: jg.tensor([True, 1]), jg.int64, (2,), [1, 1]),
    (lambda: jg.tensor([True, 1.5]), jg.float32, (2,), [1.0, 1.5]),
    (lambda: jg.tensor([[1, 2], [3, 4]]), jg.int64, (2, 2), [[1, 2], [3, 4]]),
    (lambda: jg.tensor([]), jg.float32, (0,), []),
    (lambda: jg.tensor(np.float64(1.5)), jg.float64, (), 1.5),
    (lambda: jg.tensor(np.float32(1.5)), jg.float32, (), 1.5),
    (lambda: jg.tensor(np.int32(3)), jg.int32, (), 3),
    (lambda: jg.tensor([np.float64(1.0), 2.0]), jg.float64, (2,), [1.0, 2.0]),
    (lambda: jg.tensor([np.int32(3)]), jg.int32, (1,), [3]),
    (lambda: jg.tensor([np.int32(3), np.int64(4)]), jg.int64, (2,), [3, 4]),
    (lambda: jg.tensor([np.float16(1), 2]), jg.float16, (2,), [1.0, 2.0]),
    (lambda: jg.tensor(np.array([1.0, 2.0])), jg.float64, (2,), [1.0, 2.0]),
    (lambda: jg.tensor(np.array([1, 2], dtype=np.int32)), jg.int32, (2,), [1, 2]),
    (lambda: jg.tensor(np.array([True])), jg.bool, (1,), [True]),
    (lambda: jg.tensor(np.array([1, 2], dtype=np.uint8)), jg.uint8, (2,), [1, 2]),
    (lambda: jg.tensor([jg.tensor(1.0, dtype=jg.float64), 2.0]), jg.float64, (2,), [1.0, 2.0]),
    (lambda: jg.tensor([jg.tensor(1, dtype=jg.int32), 2]), jg.int64, (2,), [1, 2]),
    (lambda: jg.tensor([jg.tensor(1.), 2]), jg.float32, (2,), [1.0, 2.0]),
    (lambda: jg.tensor([jg.tensor(True), False]), jg.bool, (2,), [True, False]),
    (lambda: jg.tensor([jg.tensor(1, dtype=jg.int32), jg.tensor(2, dtype=jg.int32)]),
     jg.int32, (2,), [1, 2]),
    (lambda: jg.tensor([[jg.tensor(1.5)], [jg.tensor(2.5)]]), jg.float32, (2, 1), [[1.5], [2.5]]),
    (lambda: jg.tensor([1, 2], dtype=jg.float64), jg.float64, (2,), [1.0, 2.0]),
    (lambda: jg.tensor([1.7, -1.7], dtype=jg.int64), jg.int64, (2,), [1, -1]),
    (lambda: jg.tensor([1, 2], dtype=float), jg.float64, (2,), [1.0, 2.0]),
    (lambda: jg.tensor([1, 2], dtype=int), jg.int64, (2,), [1, 2]),
    (lambda: jg.as_tensor([1, 2]), jg.int64, (2,), [1, 2]),
    (lambda: jg.as_tensor(np.array([1., 2.])), jg.float64, (2,), [1.0, 2.0]),
    (lambda: jg.from_numpy(np.array([1, 2], dtype=np.int16)), jg.int16, (2,), [1, 2]),
    (lambda: jg.zeros(2, 3), jg.float32, (2, 3), [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    (lambda: jg.zeros((2, 3)), jg.float32, (2, 3), [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    (lambda: jg.zeros([2, 3]), jg.float32, (2, 3), [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    (lambda: jg.ones(2, dtype=jg.int64), jg.int64, (2,), [1, 1]),
    (lambda: jg.zeros(()), jg.float32, (), 0.0),
    (lambda: jg.zeros([]), jg.float32, (), 0.0),
    (lambda: jg.full((2,), 3), jg.int64, (2,), [3, 3]),
    (lambda: jg.full((2,), 3.0), jg.float32, (2,), [3.0, 3.0]),
    (lambda: jg.full((2,), True), jg.bool, (2,), [True, True]),
    (lambda: jg.full((), 1.5), jg.float32, (), 1.5),
    (lambda: jg.full((2,), 3, dtype=jg.float64), jg.float64, (2,), [3.0, 3.0]),
    (lambda: jg.zeros_like(jg.ones(2, dtype=jg.int32)), jg.int32, (2,), [0, 0]),
    (lambda: jg.ones_like(jg.ones(2), dtype=jg.float64), jg.float64, (2,), [1.0, 1.0]),
    (lambda: jg.full_like(jg.ones(2, dtype=jg.int64), 2.7), jg.int64, (2,), [2, 2]),
    (lambda: jg.arange(5), jg.int64, (5,), [0, 1, 2, 3, 4]),
    (lambda: jg.arange(1, 4), jg.int64, (3,), [1, 2, 3]),
    (lambda: jg.arange(0, 1, 0.25), jg.float32, (4,), [0.0, 0.25, 0.5, 0.75]),
    (lambda: jg.arange(5.0), jg.float32, (5,), [0.0, 1.0, 2.0, 3.0, 4.0]),
    (lambda: jg.arange(0, 1, 0.1),
     jg.float32, (10,), (np.arange(10) * 0.1).astype(np.float32).tolist()),
    (lambda: jg.arange(5, 0, -2), jg.int64, (3,), [5, 3, 1]),
    (lambda: jg.arange(0, 2.5, dtype=jg.long), jg.int64, (2,), [0, 1]),
    (lambda: jg.arange(jg.tensor(3)), jg.int64, (3,), [0, 1, 2]),
    (lambda: jg.arange(jg.tensor(2.5)), jg.float32, (3,), [0.0, 1.0, 2.0]),
    (lambda: jg.arange(-1.5, 1.5, 1, dtype=jg.int64), jg.int64, (2,), [-1, 0]),
    (lambda: jg.arange(1, 2.5, 0.5), jg.float32, (3,), [1.0, 1.5, 2.0]),
    (lambda: jg.linspace(0, 1, 5), jg.float32, (5,), [0.0, 0.25, 0.5, 0.75, 1.0]),
    (lambda: jg.linspace(-1, 1, 4),
     jg.float32, (4,), [-1.0, -0.3333333134651184, 0.3333333134651184, 1.0]),
    (lambda: jg.linspace(0, 5, 4, dtype=jg.long), jg.int64, (4,), [0, 1, 3, 5]),
    (lambda: jg.linspace(2, 5, 1), jg.float32, (1,), [2.0]),
    (lambda: jg.linspace(0, 1, 0), jg.float32, (0,), []),
    (lambda: jg.linspace(0.1, 0.7, 7),
     jg.float32, (7,), [0.10000000149011612, 0.19999998807907104, 0.29999998211860657,
                        0.4000000059604645, 0.5, 0.6000000238418579, 0.699999988079071]),
    (lambda: jg.linspace(0.5, 5, 4, dtype=jg.int64), jg.int64, (4,), [0, 1, 3, 5]),
    (lambda: jg.linspace(0, 1, 5, dtype=jg.float64), jg.float64, (5,), [0.0, 0.25, 0.5, 0.75, 1.0]),
    (lambda: jg.eye(2), jg.float32, (2, 2), [[1.0, 0.0], [0.0, 1.0]]),
    (lambda: jg.eye(2, 3), jg.float32, (2, 3), [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]),
    (lambda: jg.eye(2, dtype=jg.int64), jg.int64, (2, 2), [[1, 0], [0, 1]]),
    (lambda: jg.ones(2).to(jg.float64), jg.float64, (2,), [1.0, 1.0]),
    (lambda: jg.ones(2).to('cpu'), jg.float32, (2,), [1.0, 1.0]),
    (lambda: jg.ones(2).to('cpu', jg.int32), jg.int32, (2,), [1, 1]),
    (lambda: jg.ones(2).to(jg.ones(1, dtype=jg.int64)), jg.int64, (2,), [1, 1]),
    (lambda: jg.ones(2).to(dtype=jg.float16), jg.float16, (2,), [1.0, 1.0]),
    (lambda: jg.ones(2).to(device='cpu', dtype=jg.float64), jg.float64, (2,), [1.0, 1.0]),
    (lambda: jg.ones(2).double(), jg.float64, (2,), [1.0, 1.0]),
    (lambda: jg.ones(2).long(), jg.int64, (2,), [1, 1]),
    (lambda: jg.ones(2).int(), jg.int32, (2,), [1, 1]),
    (lambda: jg.ones(2).half(), jg.float16, (2,), [1.0, 1.0]),
    (lambda: jg.ones(2).bool(), jg.bool, (2,), [True, True]),
    (lambda: jg.ones(2).byte(), jg.uint8, (2,), [1, 1]),
    (lambda: jg.ones(2).char(), jg.int8, (2,), [1, 1]),
    (lambda: jg.ones(2).short(), jg.int16, (2,), [1, 1]),
    (lambda: jg.tensor([1.5]).type(jg.int64), jg.int64, (1,), [1]),
    (lambda: jg.tensor([1.5]).type('torch.DoubleTensor'), jg.float64, (1,), [1.5]),
    (lambda: jg.tensor([1.5]).type_as(jg.ones(1, dtype=jg.float64)), jg.float64, (1,), [1.5]),
    (lambda: jg.ones(2, dtype=jg.int32).new_zeros(3), jg.int32, (3,), [0, 0, 0]),
    (lambda: jg.ones(2, dtype=jg.int32).new_ones((2, 1)), jg.int32, (2, 1), [[1], [1]]),
    (lambda: jg.ones(2).new_full((2,), 7), jg.float32, (2,), [7.0, 7.0]),
    (lambda: jg.ones(2, dtype=jg.float64).new_tensor([1, 2]), jg.float64, (2,), [1.0, 2.0]),
]


@pytest.mark.parametrize("make, dtype, shape, values", DTYPE_TABLE,
                         ids=[str(i) for i in range(len(DTYPE_TABLE))])
def test_dtype_table(make, dtype, shape, values):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none of these rows warns in PyTorch
        t = make()
    assert t.dtype == dtype and t.shape == shape
    assert t.tolist() == values
    assert not t.requires_grad


def test_empty_factories_have_shape_and_dtype():
    assert jg.empty(2, 3).shape == (2, 3) and jg.empty(2, 3).dtype == jg.float32
    t = jg.empty_like(jg.ones(2, dtype=jg.float16))
    assert t.shape == (2,) and t.dtype == jg.float16


def test_default_dtype_drives_float_creation():
    assert jg.get_default_dtype() == jg.float32
    jg.set_default_dtype(jg.float64)
    try:
        assert jg.tensor([1.5]).dtype == jg.float64
        assert jg.zeros(2).dtype == jg.float64
        assert jg.arange(2.0).dtype == jg.float64
        assert jg.tensor([1, 2]).dtype == jg.int64
        assert jg.tensor(np.float32(1.0)).dtype == jg.float32
    finally:
        jg.set_default_dtype(jg.float32)
    assert jg.tensor([1.5]).dtype == jg.float32
    with pytest.raises(TypeError, match="only floating-point types"):
        jg.set_default_dtype(jg.int64)


def test_tensor_copies_and_from_numpy_shares_memory():
    array = np.array([1.0, 2.0])
    copied, shared, as_t = jg.tensor(array), jg.from_numpy(array), jg.as_tensor(array)
    array[0] = 10.0
    assert copied.tolist() == [1.0, 2.0]
    assert shared.tolist() == [10.0, 2.0] and as_t.tolist() == [10.0, 2.0]
    shared.numpy()[1] = 20.0
    assert array.tolist() == [10.0, 20.0]
    converted = jg.as_tensor(array, dtype=jg.float32)  # another dtype: a converted copy
    array[0] = -1.0
    assert converted.tolist() == [10.0, 20.0] and converted.dtype == jg.float32


def test_as_tensor_of_a_tensor():
    t = jg.tensor([1.0, 2.0])
    assert jg.as_tensor(t) is t
    assert jg.as_tensor(t, dtype=jg.float64).dtype == jg.float64


def test_from_numpy_rejects_non_arrays_and_unsupported_dtypes():
    with pytest.raises(TypeError, match="expected np.ndarray"):
        jg.from_numpy([1, 2])
    with pytest.raises(TypeError, match="can't convert np.ndarray of type <U1"):
        jg.from_numpy(np.array(["a"]))
    with pytest.raises(TypeError, match="from_numpy: dtype jitgrad.complex128 exists for "
                                        "compatibility but jitgrad cannot compute with it"):
        jg.from_numpy(np.array([1j]))


def test_tensor_from_a_tensor_warns_and_copies():
    source = jg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="To copy construct from a tensor"):
        copy = jg.tensor(source)
    assert copy.tolist() == [1.0, 2.0] and not copy.requires_grad and copy.is_leaf
    assert copy.data_ptr() != source.data_ptr()


def test_requires_grad_on_integer_creation_raises_e3b():
    message = "Only Tensors of floating point and complex dtype can require gradients"
    for make in (lambda: jg.tensor([1, 2], requires_grad=True),
                 lambda: jg.zeros(2, dtype=jg.int64, requires_grad=True),
                 lambda: jg.arange(3, requires_grad=True),
                 lambda: jg.full((2,), True, requires_grad=True)):
        with pytest.raises(RuntimeError, match=message):
            make()
    t = jg.zeros(2, 3, requires_grad=True)
    assert t.requires_grad and t.is_leaf


def test_invalid_data_errors():
    with pytest.raises(TypeError, match="new\\(\\): invalid data type 'str'"):
        jg.tensor("a")
    with pytest.raises(TypeError, match="invalid data type 'str'"):
        jg.tensor(["a", "b"])
    with pytest.raises(RuntimeError, match="Could not infer dtype of NoneType"):
        jg.tensor(None)
    with pytest.raises(ValueError, match="rectangular"):
        jg.tensor([[1, 2], [3]])
    with pytest.raises(ValueError, match="only one element tensors can be converted"):
        jg.tensor([jg.tensor([1.0, 2.0]), jg.tensor([3.0, 4.0])])


def test_factory_size_errors():
    with pytest.raises(RuntimeError, match=r"negative dimension -1: \[2, -1\]"):
        jg.zeros(2, -1)
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        jg.arange(0, 5, 0)
    with pytest.raises(RuntimeError, match="upper bound and lower bound inconsistent with step"):
        jg.arange(0, 5, -1)
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        jg.arange(-1.5, 1.5, 0.5, dtype=jg.int64)  # the step truncates to 0, as in PyTorch
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        jg.linspace(2, 5, -1)
    with pytest.raises(RuntimeError, match="n must be greater or equal to 0"):
        jg.eye(-1)


def test_legacy_tensor_constructor():
    t = jg.Tensor([1, 2])
    assert t.dtype == jg.float32 and t.tolist() == [1.0, 2.0]
    assert jg.Tensor(2, 3).shape == (2, 3) and jg.Tensor(2).shape == (2,)
    assert jg.Tensor(jg.Size([2, 3])).shape == (2, 3)
    assert jg.Tensor((2, 3)).tolist() == [2.0, 3.0]
    assert jg.Tensor().shape == (0,)


def test_is_tensor_numel_and_size_argument_forms():
    assert jg.is_tensor(jg.ones(1)) and not jg.is_tensor(np.ones(1)) and not jg.is_tensor(3)
    assert jg.numel(jg.ones(2, 3)) == 6
    assert jg.ones(jg.Size([2, 3])).shape == (2, 3)
    assert jg.zeros(np.int64(2), 3).shape == (2, 3)
    assert jg.ones(2, 3).new_zeros(4).tolist() == [0.0] * 4


def test_type_names_and_conversions():
    assert jg.ones(2).type() == "jitgrad.FloatTensor"
    assert jg.ones(2, dtype=jg.int64).type() == "jitgrad.LongTensor"
    assert jg.ones(2).type("jitgrad.IntTensor").dtype == jg.int32
    with pytest.raises(ValueError, match="invalid type: 'torch.FooTensor'"):
        jg.ones(2).type("torch.FooTensor")
    with pytest.raises(RuntimeError, match="CPU only"):
        jg.ones(2).type("torch.cuda.FloatTensor")


def test_to_returns_self_unless_something_changes():
    t = jg.ones(2)
    assert t.to("cpu") is t and t.to(jg.float32) is t and t.cpu() is t
    assert t.to(jg.device("cpu")) is t and t.to("cpu", non_blocking=True) is t
    copied = t.to(jg.float32, copy=True)
    assert copied is not t and copied.data_ptr() != t.data_ptr()


def test_float_casts_of_a_leaf_are_differentiable_non_leaves():
    w = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    d = w.double()
    assert d.dtype == jg.float64 and not d.is_leaf and d.grad_fn is not None
    (d * d).sum().backward()
    assert w.grad.dtype == jg.float32 and w.grad.tolist() == [2.0, 4.0, 6.0]
    assert not w.long().requires_grad


def test_devices_cpu_only():
    assert jg.device("cpu") == "cpu" and repr(jg.device("cpu")) == "device(type='cpu')"
    assert jg.ones(2).device == jg.device("cpu")
    assert jg.zeros(2, device="cpu").device.type == "cpu"
    assert jg.zeros(2, device=jg.device("cpu")).shape == (2,)
    assert jg.cuda.is_available() is False and jg.cuda.device_count() == 0
    jg.cuda.manual_seed_all(0)  # a no-op without CUDA, as in PyTorch
    for make in (lambda: jg.ones(2).cuda(), lambda: jg.ones(2).to("cuda"),
                 lambda: jg.ones(2).to(jg.device("cuda")), lambda: jg.zeros(2, device="cuda"),
                 lambda: jg.tensor([1.0], device="cuda:0"), lambda: jg.randn(2, device="mps")):
        with pytest.raises(RuntimeError, match="jitgrad runs on the CPU only"):
            make()


@pytest.mark.parametrize("make, argument, kind", [
    (lambda: jg.zeros(4 / 2), "size", "float"),
    (lambda: jg.ones((2, 3.0)), "size", "float"),
    (lambda: jg.empty(3.0), "size", "float"),
    (lambda: jg.full((2.0,), 1), "size", "float"),
    (lambda: jg.randn(2.5), "size", "float"),
    (lambda: jg.rand(2, 1.5), "size", "float"),
    (lambda: jg.randint(0, 5, (2.0,)), "size", "float"),
    (lambda: jg.ones(2).new_zeros(2.0), "size", "float"),
    (lambda: jg.zeros(jg.tensor(3.0)), "size", "Tensor"),
    (lambda: jg.zeros(True), "size", "bool"),
    (lambda: jg.ones(6).view(2.0, 3), "size", "float"),
    (lambda: jg.ones(6).reshape((2, 3.0)), "size", "float"),
    (lambda: jg.ones(1).expand(2.0), "size", "float"),
    (lambda: jg.ones(2, 3).permute(1.0, 0), "dims", "float"),
    (lambda: jg.ones(2).repeat(2.0), "repeats", "float"),
    (lambda: jg.ones(6).split(2.0), "split_size", "float"),
    (lambda: jg.ones(6).split([2.0, 4]), "split_sizes", "float"),
])
def test_non_integer_sizes_raise_type_error_instead_of_truncating(make, argument, kind):
    # torch 2.13: TypeError "...argument 'size' (position 1) must be tuple of ints, not float"
    with pytest.raises(TypeError, match=f"argument '{argument}' must be tuple of ints, but found "
                                        f"element of type {kind} at pos"):
        make()


def test_integer_like_sizes_are_accepted():
    assert jg.zeros(np.int64(3)).shape == (3,)
    assert jg.zeros((jg.tensor(2), 3)).shape == (2, 3)
    assert jg.ones(6).view(jg.tensor(2), np.int32(3)).shape == (2, 3)
    assert jg.zeros(jg.ones(2, 5).shape).shape == (2, 5)
    assert jg.Tensor(np.int64(3)).shape == (3,)


def test_legacy_constructor_rejects_a_lone_float():
    with pytest.raises(TypeError, match=r"new\(\): data must be a sequence \(got float\)"):
        jg.Tensor(2.0)
    assert jg.Tensor([2.0]).tolist() == [2.0] and jg.Tensor(2).shape == (2,)


def test_one_element_tensors_in_a_list_are_scalars():
    # torch 2.13: tensor([tensor([1.]), tensor([2.])]) has shape [2]; numpy arrays keep theirs
    assert jg.tensor([jg.tensor([1.0]), jg.tensor([2.0])]).shape == (2,)
    assert jg.tensor([jg.tensor([[1.0]]), jg.tensor([[2.0]])]).tolist() == [1.0, 2.0]
    assert jg.tensor([[jg.tensor(1.0)], [jg.tensor(2)]]).shape == (2, 1)
    losses = [jg.tensor([0.5], requires_grad=True) * 2 for _ in range(3)]
    assert jg.tensor(losses).tolist() == [1.0, 1.0, 1.0]
    assert jg.tensor([np.array([1.0]), np.array([2.0])]).shape == (2, 1)


def test_is_floating_point_function():
    assert jg.is_floating_point(jg.ones(1)) and jg.is_floating_point(jg.ones(1, dtype=jg.float64))
    assert not jg.is_floating_point(jg.ones(1, dtype=jg.int64))
    assert not jg.is_floating_point(jg.tensor([True]))
    with pytest.raises(TypeError, match=r"argument 'input' \(position 1\) must be Tensor, not float"):
        jg.is_floating_point(1.0)


@pytest.mark.parametrize("factory", ["zeros", "ones", "empty", "rand", "randn"])
def test_size_factories_take_the_size_by_keyword_as_pytorch(factory):
    """`torch.empty(size=(2, 3))`, as PyTorch's *size factories allow; the size given both
    ways is a TypeError."""
    make = getattr(jg, factory)
    for size in ((2, 3), [2, 3]):
        out = make(size=size, dtype=jg.float64)
        assert out.shape == (2, 3) and out.dtype == jg.float64
    assert make(size=()).shape == ()
    with pytest.raises(TypeError, match="size given both positionally and as size="):
        make(2, size=(3,))


def test_tensor_takes_any_sequence_as_pytorch():
    """`torch.tensor(deque(...))`, `torch.tensor(range(3))`: any sequence, with the dtype a
    list of the same items gives; a str stays refused."""
    for data, dtype in ((collections.deque([1.0, 2.0]), jg.float32), (range(3), jg.int64),
                        (collections.deque([[1, 2], [3, 4]]), jg.int64)):
        out = jg.tensor(data)
        want = jg.tensor(list(data))
        assert out.dtype == want.dtype == dtype
        np.testing.assert_array_equal(out.numpy(), want.numpy())
    with pytest.raises(TypeError, match="invalid data type 'str'"):
        jg.tensor("ab")


def test_device_and_layout_flags_are_torchs_for_a_dense_cpu_tensor_and_read_only():
    # each printed by torch 2.13 for torch.ones(2)
    flags = {"is_cpu": True, "is_cuda": False, "is_xpu": False, "is_mps": False,
             "is_meta": False, "is_ipu": False, "is_vulkan": False, "is_mtia": False,
             "is_maia": False, "is_sparse": False, "is_sparse_csr": False,
             "is_quantized": False, "is_nested": False, "is_mkldnn": False}
    for x in (jg.ones(2), jg.nn.Parameter(jg.ones(2)), jg.ones(2)[::2]):
        assert {name: getattr(x, name) for name in flags} == flags
    with pytest.raises(AttributeError, match="attribute 'is_xpu' of 'Tensor' objects is not "
                                             "writable"):
        jg.ones(2).is_xpu = True
