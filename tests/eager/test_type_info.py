"""finfo/iinfo: every field as torch 2.13 prints it (Python numbers), errors for wrong kinds."""

import pytest

import jitgrad as jg

# dtype -> (bits, eps, max, tiny, resolution), from torch.finfo in torch 2.13
FINFO = {
    jg.float32: (32, 1.1920928955078125e-07, 3.4028234663852886e+38, 1.1754943508222875e-38, 1e-06),
    jg.float64: (64, 2.220446049250313e-16, 1.7976931348623157e+308, 2.2250738585072014e-308,
                 1e-15),
    jg.float16: (16, 0.0009765625, 65504.0, 6.103515625e-05, 0.001),
    jg.bfloat16: (16, 0.0078125, 3.3895313892515355e+38, 1.1754943508222875e-38, 0.01),
}


@pytest.mark.parametrize("dtype", list(FINFO), ids=lambda d: d.name)
def test_finfo_fields_match_torch(dtype):
    info = jg.finfo(dtype)
    bits, eps, max_, tiny, resolution = FINFO[dtype]
    assert (info.bits, info.eps, info.max, info.min) == (bits, eps, max_, -max_)
    assert (info.tiny, info.smallest_normal, info.resolution) == (tiny, tiny, resolution)
    assert info.dtype == dtype.name and type(info.max) is float


def test_finfo_defaults_to_the_default_dtype_and_prints_like_torch():
    assert jg.finfo() == jg.finfo(jg.float32)
    assert repr(jg.finfo(jg.float32)) == (
        "finfo(resolution=1e-06, min=-3.40282e+38, max=3.40282e+38, eps=1.19209e-07, "
        "smallest_normal=1.17549e-38, tiny=1.17549e-38, dtype=float32)")
    scores = jg.zeros(2).masked_fill(jg.tensor([True, False]), jg.finfo(jg.float32).min)
    assert scores.tolist() == [-3.4028234663852886e+38, 0.0]


@pytest.mark.parametrize("dtype, bits, min_, max_", [
    (jg.int64, 64, -9223372036854775808, 9223372036854775807),
    (jg.int32, 32, -2147483648, 2147483647), (jg.int16, 16, -32768, 32767),
    (jg.int8, 8, -128, 127), (jg.uint8, 8, 0, 255),
], ids=lambda v: getattr(v, "name", None))
def test_iinfo_fields_match_torch(dtype, bits, min_, max_):
    info = jg.iinfo(dtype)
    assert (info.bits, info.min, info.max, info.dtype) == (bits, min_, max_, dtype.name)


def test_iinfo_repr_and_wrong_kinds():
    assert repr(jg.iinfo(jg.uint8)) == "iinfo(min=0, max=255, dtype=uint8)"
    with pytest.raises(TypeError, match="requires a floating point input type"):
        jg.finfo(jg.int64)
    with pytest.raises(TypeError, match="jitgrad.bool is not supported by jitgrad.iinfo"):
        jg.iinfo(jg.bool)
