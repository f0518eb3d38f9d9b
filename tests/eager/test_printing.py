"""`repr(tensor)` against the exact strings PyTorch 2.13 prints for the same values
(`torch.` renamed `jitgrad.`, node names without torch's trailing 0)."""

import numpy as np
import pytest

import jitgrad as jg

CASES = [
    ('floats', lambda: jg.tensor([1.5, 2.25, -3.0]),
     'tensor([ 1.5000,  2.2500, -3.0000])'),
    ('integral_floats', lambda: jg.tensor([1., 2., -3.]),
     'tensor([ 1.,  2., -3.])'),
    ('ints', lambda: jg.tensor([1, -20, 300]),
     'tensor([  1, -20, 300])'),
    ('bools', lambda: jg.tensor([True, False]),
     'tensor([ True, False])'),
    ('scalar', lambda: jg.tensor(3.5),
     'tensor(3.5000)'),
    ('scalar_int', lambda: jg.tensor(7),
     'tensor(7)'),
    ('scalar_integral', lambda: jg.tensor(2.),
     'tensor(2.)'),
    ('small', lambda: jg.tensor([1e-5, 1.0]),
     'tensor([1.0000e-05, 1.0000e+00])'),
    ('large', lambda: jg.tensor([1e9, 1.0]),
     'tensor([1.0000e+09, 1.0000e+00])'),
    ('ratio', lambda: jg.tensor([123456.7, 0.5]),
     'tensor([1.2346e+05, 5.0000e-01])'),
    ('ratio_int', lambda: jg.tensor([100000., 1.]),
     'tensor([1.0000e+05, 1.0000e+00])'),
    ('nonfinite', lambda: jg.tensor([float('nan'), float('inf'), -float('inf'), 1.5]),
     'tensor([   nan,    inf,   -inf, 1.5000])'),
    ('nonfinite_int', lambda: jg.tensor([float('nan'), 1., -float('inf')]),
     'tensor([nan, 1., -inf])'),
    ('zeros', lambda: jg.zeros(3),
     'tensor([0., 0., 0.])'),
    ('neg_zero', lambda: jg.tensor([-0., 1.]),
     'tensor([-0., 1.])'),
    ('matrix', lambda: jg.tensor([[1.5, -2.0], [3.25, 4.0]]),
     'tensor([[ 1.5000, -2.0000],\n        [ 3.2500,  4.0000]])'),
    ('int_matrix', lambda: jg.tensor([[1, 2, 3], [40, 50, 60]]),
     'tensor([[ 1,  2,  3],\n        [40, 50, 60]])'),
    ('cube', lambda: jg.arange(8.).reshape(2, 2, 2),
     'tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]])'),
    ('f64', lambda: jg.tensor([1.5, 2.0], dtype=jg.float64),
     'tensor([1.5000, 2.0000], dtype=jitgrad.float64)'),
    ('i32', lambda: jg.tensor([1, 2], dtype=jg.int32),
     'tensor([1, 2], dtype=jitgrad.int32)'),
    ('u8', lambda: jg.tensor([1, 2], dtype=jg.uint8),
     'tensor([1, 2], dtype=jitgrad.uint8)'),
    ('f16', lambda: jg.tensor([1.5, 2.0], dtype=jg.float16),
     'tensor([1.5000, 2.0000], dtype=jitgrad.float16)'),
    ('empty', lambda: jg.tensor([]),
     'tensor([])'),
    ('empty_2d', lambda: jg.zeros(0, 3),
     'tensor([], size=(0, 3))'),
    ('empty_int', lambda: jg.zeros(0, dtype=jg.int64),
     'tensor([], dtype=jitgrad.int64)'),
    ('requires_grad', lambda: jg.tensor([1., 2.], requires_grad=True),
     'tensor([1., 2.], requires_grad=True)'),
    ('grad_fn', lambda: jg.tensor([1., 2.], requires_grad=True) * 2,
     'tensor([2., 4.], grad_fn=<MulBackward>)'),
    ('grad_fn_f64', lambda: jg.tensor([1., 2.], dtype=jg.float64, requires_grad=True).exp(),
     'tensor([2.7183, 7.3891], dtype=jitgrad.float64, grad_fn=<ExpBackward>)'),
    ('long_row', lambda: jg.arange(30.) / 7,
     ('tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429,\n'
      '        1.2857, 1.4286, 1.5714, 1.7143, 1.8571, 2.0000, 2.1429, 2.2857, 2.4286,\n'
      '        2.5714, 2.7143, 2.8571, 3.0000, 3.1429, 3.2857, 3.4286, 3.5714, 3.7143,\n'
      '        3.8571, 4.0000, 4.1429])')),
    ('long_int_row', lambda: jg.arange(40),
     ('tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n'
      '        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35,\n'
      '        36, 37, 38, 39])')),
    ('summarized', lambda: jg.arange(2000),
     'tensor([   0,    1,    2,  ..., 1997, 1998, 1999])'),
    ('summarized_float', lambda: jg.arange(1001.) / 4,
     'tensor([  0.0000,   0.2500,   0.5000,  ..., 249.5000, 249.7500, 250.0000])'),
    ('summarized_matrix', lambda: jg.arange(1100.).reshape(100, 11),
     ('tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 8.0000e+00, 9.0000e+00,\n'
      '         1.0000e+01],\n'
      '        [1.1000e+01, 1.2000e+01, 1.3000e+01,  ..., 1.9000e+01, 2.0000e+01,\n'
      '         2.1000e+01],\n'
      '        [2.2000e+01, 2.3000e+01, 2.4000e+01,  ..., 3.0000e+01, 3.1000e+01,\n'
      '         3.2000e+01],\n'
      '        ...,\n'
      '        [1.0670e+03, 1.0680e+03, 1.0690e+03,  ..., 1.0750e+03, 1.0760e+03,\n'
      '         1.0770e+03],\n'
      '        [1.0780e+03, 1.0790e+03, 1.0800e+03,  ..., 1.0860e+03, 1.0870e+03,\n'
      '         1.0880e+03],\n'
      '        [1.0890e+03, 1.0900e+03, 1.0910e+03,  ..., 1.0970e+03, 1.0980e+03,\n'
      '         1.0990e+03]])')),
    ('wide_suffix', lambda: jg.arange(18., dtype=jg.float64) / 7,
     ('tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429,\n'
      '        1.2857, 1.4286, 1.5714, 1.7143, 1.8571, 2.0000, 2.1429, 2.2857, 2.4286],\n'
      '       dtype=jitgrad.float64)')),
    ('sci_matrix', lambda: jg.tensor([[1e-6, 2.0], [3.0, 4e5]]),
     'tensor([[1.0000e-06, 2.0000e+00],\n        [3.0000e+00, 4.0000e+05]])'),
    ('big_ints_float', lambda: jg.tensor([123456789., 1.]),
     'tensor([1.2346e+08, 1.0000e+00])'),
    ('large_neg', lambda: jg.tensor([-1234.5, 0.001]),
     'tensor([-1.2345e+03,  1.0000e-03])'),
]


@pytest.fixture(autouse=True)
def default_print_options():
    jg.set_printoptions(profile="default")
    yield
    jg.set_printoptions(profile="default")
    jg.set_default_dtype(jg.float32)


@pytest.mark.parametrize("make, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_repr_matches_pytorch(make, expected):
    assert repr(make()) == expected


def test_str_is_repr_and_non_contiguous_arrays_print_by_value():
    t = jg.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3).T)
    assert str(t) == repr(t) == "tensor([[0., 3.],\n        [1., 4.],\n        [2., 5.]])"


def test_set_printoptions_precision_threshold_sci_mode_linewidth():
    jg.set_printoptions(precision=2)
    assert repr(jg.tensor([1.12345, 2.0])) == "tensor([1.12, 2.00])"
    jg.set_printoptions(profile="default", threshold=5)
    assert repr(jg.arange(10)) == "tensor([0, 1, 2,  ..., 7, 8, 9])"
    jg.set_printoptions(profile="default", sci_mode=True)
    assert repr(jg.tensor([1.5, 2.0])) == "tensor([1.5000e+00, 2.0000e+00])"
    jg.set_printoptions(profile="default", sci_mode=False)
    assert repr(jg.tensor([1e-5, 1.0])) == "tensor([0.0000, 1.0000])"
    jg.set_printoptions(profile="default", linewidth=40)
    assert repr(jg.arange(12.0) / 3) == ("tensor([0.0000, 0.3333, 0.6667, 1.0000,\n"
                                         "        1.3333, 1.6667, 2.0000, 2.3333,\n"
                                         "        2.6667, 3.0000, 3.3333, 3.6667])")
    jg.set_printoptions(profile="default")
    assert jg.get_printoptions() == {"precision": 4, "threshold": 1000, "edgeitems": 3,
                                     "linewidth": 80, "sci_mode": None}
    with pytest.raises(ValueError, match="unknown print profile 'long'"):
        jg.set_printoptions(profile="long")


def test_dtype_suffix_follows_the_default_dtype():
    jg.set_default_dtype(jg.float64)
    assert repr(jg.tensor([1.5])) == "tensor([1.5000])"
    assert repr(jg.tensor([1.5], dtype=jg.float32)) == "tensor([1.5000], dtype=jitgrad.float32)"
    assert repr(jg.zeros(0)) == "tensor([])"


def test_format_of_0d_tensor_uses_the_value():
    assert f"{jg.tensor(2.5):.2f}" == "2.50"
