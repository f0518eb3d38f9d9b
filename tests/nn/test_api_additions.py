"""PixelShuffle/PixelUnshuffle, MaxPool1d/AvgPool1d, ParameterDict, the deprecated init
aliases and clip_grad_norm, against numpy and values printed by torch 2.13.0 (quoted);
gradients by gradcheck, compiled against eager."""

import warnings

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F  # noqa: N812
from jitgrad import nn
from jitgrad.autograd import gradcheck
from tests.nn.compiled_parity import assert_compiled_matches_eager_in_one_graph

RNG = np.random.default_rng(0)
SIGNAL = jg.tensor([[[1.0, 3.0, 2.0, 5.0, 4.0, 0.0, 7.0]]])


def _pixel_shuffle_numpy(x, r):
    *batch, c, h, w = x.shape
    out = np.empty((*batch, c // (r * r), h * r, w * r), x.dtype)
    for ch in range(c // (r * r)):
        for i in range(r):
            for j in range(r):
                out[..., ch, i::r, j::r] = x[..., ch * r * r + i * r + j, :, :]
    return out


@pytest.mark.parametrize(("shape", "r"), [((1, 8, 2, 2), 2), ((2, 3, 9, 2, 3), 3), ((4, 1, 1), 2)])
def test_pixel_shuffle_matches_the_published_layout_and_unshuffle_inverts_it(shape, r):
    x = RNG.normal(size=shape)
    out = F.pixel_shuffle(jg.tensor(x), r)
    np.testing.assert_array_equal(out.numpy(), _pixel_shuffle_numpy(x, r))
    np.testing.assert_array_equal(F.pixel_unshuffle(out, r).numpy(), x)
    assert nn.PixelShuffle(r)(jg.tensor(x)).shape == out.shape
    assert gradcheck(lambda t: F.pixel_shuffle(t, r), (jg.tensor(x, requires_grad=True),))


def test_pixel_shuffle_values_and_reprs_printed_by_torch():
    assert F.pixel_shuffle(jg.arange(8.0).reshape(1, 4, 1, 2), 2).tolist() == [
        [[[0.0, 2.0, 1.0, 3.0], [4.0, 6.0, 5.0, 7.0]]]]
    assert F.pixel_unshuffle(jg.arange(16.0).reshape(1, 1, 4, 4), 2).reshape(4, 4).tolist() == [
        [0.0, 2.0, 8.0, 10.0], [1.0, 3.0, 9.0, 11.0], [4.0, 6.0, 12.0, 14.0],
        [5.0, 7.0, 13.0, 15.0]]
    assert repr(nn.PixelShuffle(3)) == "PixelShuffle(upscale_factor=3)"
    assert repr(nn.PixelUnshuffle(2)) == "PixelUnshuffle(downscale_factor=2)"


@pytest.mark.parametrize(("call", "pattern"), [
    (lambda: F.pixel_shuffle(jg.ones(4, 2), 2), "at least 3 dimensions, but got input with 2"),
    (lambda: F.pixel_shuffle(jg.ones(1, 3, 2, 2), 2), r"input.size\(-3\)=3 is not divisible by 4"),
    (lambda: F.pixel_shuffle(jg.ones(1, 4, 2, 2), 0), "positive upscale_factor, but got 0"),
    (lambda: F.pixel_unshuffle(jg.ones(1, 1, 3, 4), 2), r"height .* input.size\(-2\)=3"),
    (lambda: F.pixel_unshuffle(jg.ones(1, 1, 4, 3), 2), r"width .* input.size\(-1\)=3"),
    (lambda: F.pixel_unshuffle(jg.ones(1, 1, 4, 4), 0), "positive downscale_factor"),
    (lambda: F.max_pool1d(SIGNAL[0, 0], 2), r"Expected 2D or 3D .* but got:\[7\]"),
    (lambda: F.max_pool1d(SIGNAL, 2, 1, 2), "pad should be at most half"),
    (lambda: F.avg_pool1d(SIGNAL[None], 2), "Expected 2D or 3D"),
])
def test_shape_errors_follow_torch(call, pattern):
    with pytest.raises(RuntimeError, match=pattern):
        call()


def test_pool1d_values_printed_by_torch():
    cases = [
        (F.max_pool1d(SIGNAL, 2), [3.0, 5.0, 4.0]),
        (F.max_pool1d(SIGNAL, 3, 1), [3.0, 5.0, 5.0, 5.0, 7.0]),
        (F.max_pool1d(SIGNAL, 3, 2, 1), [3.0, 5.0, 5.0, 7.0]),
        (F.max_pool1d(SIGNAL, 2, ceil_mode=True), [3.0, 5.0, 4.0, 7.0]),
        (F.max_pool1d(SIGNAL, 2, 1, dilation=2), [2.0, 5.0, 4.0, 5.0, 7.0]),
        (F.max_pool1d(SIGNAL, (2,), (2,)), [3.0, 5.0, 4.0]),
        (F.avg_pool1d(SIGNAL, 2), [2.0, 3.5, 2.0]),
        (nn.MaxPool1d(3, 2, 1)(SIGNAL), [3.0, 5.0, 5.0, 7.0]),
    ]
    for out, expected in cases:
        assert out.shape == (1, 1, len(expected)) and out.reshape(-1).tolist() == expected
    np.testing.assert_allclose(nn.AvgPool1d(3, 2, 1)(SIGNAL).numpy().ravel(),
                               [4 / 3, 10 / 3, 3.0, 7 / 3], rtol=1e-6)
    assert F.max_pool1d(SIGNAL[0], 2).tolist() == [[3.0, 5.0, 4.0]]  # unbatched (C, L)
    assert repr(nn.MaxPool1d(3, 2, 1, 2, ceil_mode=True)) == (
        "MaxPool1d(kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True)")
    assert repr(nn.AvgPool1d(3)) == "AvgPool1d(kernel_size=(3,), stride=(3,), padding=(0,))"


def test_pool1d_gradients():
    x = jg.tensor(RNG.normal(size=(2, 3, 9)), requires_grad=True)
    assert gradcheck(lambda t: F.max_pool1d(t, 3, 2, 1), (x,))
    assert gradcheck(lambda t: F.avg_pool1d(t, 4, 2, 2), (x,))


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_upsampling_and_pooling_layers_compile_in_one_graph(backend):
    jg.manual_seed(0)
    image = nn.Sequential(nn.Conv2d(2, 8, 3, padding=1), nn.PixelShuffle(2), nn.PixelUnshuffle(2))
    x = jg.randn(2, 2, 4, 4)
    assert_compiled_matches_eager_in_one_graph(image, lambda t: (image(t) ** 2).mean(), x,
                                               backend)
    signal = nn.Sequential(nn.Conv1d(3, 4, 3), nn.MaxPool1d(2), nn.AvgPool1d(2, 1))
    s = jg.randn(2, 3, 12)
    assert_compiled_matches_eager_in_one_graph(signal, lambda t: (signal(t) ** 2).mean(), s,
                                               backend)


# ----- ParameterDict --------------------------------------------------------------------

def test_parameter_dict_registers_its_values_as_torch_does():
    plain = jg.zeros(2)
    given = nn.Parameter(jg.ones(2, 3))
    d = nn.ParameterDict({"b": given, "a": plain})
    assert list(d) == ["a", "b"]  # a plain dict's keys are sorted, as in torch 2.13
    assert d["b"] is given and isinstance(d["a"], nn.Parameter) and d["a"].requires_grad
    model = nn.Module()
    model.pd = d
    assert [n for n, _ in model.named_parameters()] == ["pd.a", "pd.b"]
    assert list(model.state_dict()) == ["pd.a", "pd.b"]
    d["c"] = 3
    assert d["c"] == 3 and len(d) == 3 and "c" in d and d.pop("c") == 3
    d.update([("z", jg.ones(1))])
    assert list(d.keys()) == ["a", "b", "z"] and d.get("q", 5) == 5
    assert d.setdefault("w", jg.ones(1)).shape == (1,) and list(d)[-1] == "w"
    assert d.popitem()[0] == "w"
    del d["a"]
    merged = d | {"k": jg.ones(1)}
    assert list(merged) == ["b", "z", "k"] and list(d) == ["b", "z"] and merged["b"] is given
    assert list(d.fromkeys(["p", "q"], jg.ones(1))) == ["p", "q"]
    d.clear()
    assert len(d) == 0 and repr(d) == "ParameterDict()"


def test_parameter_dict_repr_and_errors():
    d = nn.ParameterDict({"x": nn.Parameter(jg.ones(1, dtype=jg.float64)), "n": 3})
    assert repr(d) == ("ParameterDict(\n    (n): Object of type: int\n"
                       "    (x): Parameter containing: [jitgrad.DoubleTensor of size 1]\n)")
    with pytest.raises(TypeError, match="not a string"):
        d[1] = jg.ones(1)
    with pytest.raises(AttributeError):
        d["missing"]
    with pytest.raises(RuntimeError, match="floating point"):
        nn.ParameterDict({"i": jg.ones(2, dtype=jg.int64)})


def test_parameter_dict_trains_with_an_optimizer():
    d = nn.ParameterDict({"w": jg.tensor([1.0, -2.0])})
    opt = jg.optim.SGD(d.parameters(), lr=0.1)
    (d["w"] ** 2).sum().backward()
    opt.step()
    np.testing.assert_allclose(d["w"].tolist(), [0.8, -1.6], rtol=1e-6)


# ----- deprecated aliases ---------------------------------------------------------------

@pytest.mark.parametrize(("old", "new", "args"), [
    ("uniform", "uniform_", (-1.0, 2.0)), ("normal", "normal_", (0.5, 2.0)),
    ("constant", "constant_", (0.25,)), ("eye", "eye_", ()),
    ("xavier_uniform", "xavier_uniform_", ()), ("xavier_normal", "xavier_normal_", ()),
    ("kaiming_uniform", "kaiming_uniform_", ()), ("kaiming_normal", "kaiming_normal_", ()),
    ("orthogonal", "orthogonal_", ()),
])
def test_deprecated_init_aliases_warn_and_fill_as_the_new_names(old, new, args):
    jg.manual_seed(3)
    expected = getattr(nn.init, new)(jg.empty(4, 5), *args)
    jg.manual_seed(3)
    target = jg.empty(4, 5)
    with pytest.warns(FutureWarning, match=f"`nn.init.{old}` is now deprecated in favor of "
                                           f"`nn.init.{new}`"):
        out = getattr(nn.init, old)(target, *args)
    assert out is target and out.tolist() == expected.tolist()


def test_deprecated_clip_grad_norm_warns_and_clips():
    p = nn.Parameter(jg.zeros(2))
    p.grad = jg.tensor([3.0, 4.0])
    with pytest.warns(FutureWarning, match="clip_grad_norm` is now deprecated"):
        total = nn.utils.clip_grad_norm(p, 1.0)
    assert total.item() == 5.0
    np.testing.assert_allclose(p.grad.tolist(), [0.6, 0.8], rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.utils.clip_grad_norm_(p, 1.0)  # the current name does not warn


# ----- EmbeddingBag ---------------------------------------------------------------------

BAG_WEIGHT = np.arange(15.0).reshape(5, 3) / 7 - 1
BAG_INPUT = [1, 2, 4, 4, 3, 0, 2]
BAG_OFFSETS = [0, 2, 2, 5]  # bags [1, 2], [], [4, 4, 3], [0, 2]


def _embedding_bag_numpy(ids, weight, bags, mode, padding_idx, sample_weights=None):
    out = np.zeros((len(bags), weight.shape[1]))
    for b, (start, end) in enumerate(bags):
        keep = [i for i in range(start, end) if ids[i] != padding_idx]
        if not keep:
            continue
        rows = weight[[ids[i] for i in keep]]
        if sample_weights is not None:
            rows = rows * np.asarray(sample_weights)[keep][:, None]
        out[b] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode]
    return out


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2, 4])
@pytest.mark.parametrize("include_last_offset", [False, True])
def test_embedding_bag_matches_numpy_with_offsets(mode, padding_idx, include_last_offset):
    weight = jg.tensor(BAG_WEIGHT, requires_grad=True)
    offsets = BAG_OFFSETS + [7] if include_last_offset else BAG_OFFSETS
    out = F.embedding_bag(jg.tensor(BAG_INPUT), weight, jg.tensor(offsets), mode=mode,
                          padding_idx=padding_idx, include_last_offset=include_last_offset)
    bags = list(zip(BAG_OFFSETS, BAG_OFFSETS[1:] + [7], strict=True))
    np.testing.assert_allclose(out.detach().numpy(), _embedding_bag_numpy(
        BAG_INPUT, BAG_WEIGHT, bags, mode, padding_idx), rtol=1e-12, atol=1e-15)
    assert gradcheck(lambda w: F.embedding_bag(jg.tensor(BAG_INPUT), w, jg.tensor(offsets),
                                               mode=mode, padding_idx=padding_idx,
                                               include_last_offset=include_last_offset),
                     (weight,))


def test_embedding_bag_gradients_printed_by_torch():
    # torch 2.13: grad of (embedding_bag(...) * arange(12).reshape(4, 3)).sum() wrt weight
    weight = jg.tensor(BAG_WEIGHT, requires_grad=True)
    coef = jg.arange(12.0, dtype=jg.float64).reshape(4, 3)
    expected = {"sum": [[9, 10, 11], [0, 1, 2], [0, 0, 0], [6, 7, 8], [12, 14, 16]],
                "mean": [[9, 10, 11], [0, 1, 2], [0, 0, 0], [2, 7 / 3, 8 / 3], [4, 14 / 3, 16 / 3]],
                "max": [[9, 10, 11], [0, 1, 2], [0, 0, 0], [0, 0, 0], [6, 7, 8]]}
    for mode, grad in expected.items():
        weight.grad = None
        out = F.embedding_bag(jg.tensor(BAG_INPUT), weight, jg.tensor(BAG_OFFSETS), mode=mode,
                              padding_idx=2)
        (out * coef).sum().backward()
        np.testing.assert_allclose(weight.grad.numpy(), grad, rtol=1e-12)


def test_embedding_bag_per_sample_weights_match_torch():
    weight = jg.tensor(BAG_WEIGHT, requires_grad=True)
    psw = jg.tensor([1.0, 2.0, 0.5, -1.0, 3.0, 1.0, 2.0], dtype=jg.float64, requires_grad=True)
    out = F.embedding_bag(jg.tensor(BAG_INPUT), weight, jg.tensor(BAG_OFFSETS), mode="sum",
                          per_sample_weights=psw)
    bags = list(zip(BAG_OFFSETS, BAG_OFFSETS[1:] + [7], strict=True))
    np.testing.assert_allclose(out.detach().numpy(), _embedding_bag_numpy(
        BAG_INPUT, BAG_WEIGHT, bags, "sum", None, psw.tolist()), rtol=1e-12, atol=1e-15)
    out.sum().backward()  # torch 2.13's gradients
    np.testing.assert_allclose(weight.grad.numpy(), [[1] * 3, [1] * 3, [4] * 3, [3] * 3,
                                                     [-0.5] * 3], rtol=1e-12)
    np.testing.assert_allclose(psw.grad.numpy(), [-1.28571429, 0.0, 2.57142857, 2.57142857,
                                                  1.28571429, -2.57142857, 0.0], atol=1e-8)


@pytest.mark.parametrize(("call", "error", "pattern"), [
    (lambda w: F.embedding_bag(jg.tensor(BAG_INPUT), w), ValueError,
     "offsets has to be a 1D Tensor but got None"),
    (lambda w: F.embedding_bag(jg.tensor([[1, 2]]), w, jg.tensor([0])), ValueError,
     "if input is 2D, then offsets has to be None"),
    (lambda w: F.embedding_bag(jg.tensor([1]), w, jg.tensor([0]), mode="min"), ValueError,
     "mode has to be one of sum, mean or max"),
    (lambda w: F.embedding_bag(jg.tensor(BAG_INPUT), w, jg.tensor([1, 2])), RuntimeError,
     r"offsets\[0\] has to be 0"),
    (lambda w: F.embedding_bag(jg.tensor(BAG_INPUT), w, jg.tensor([0, 9])), RuntimeError,
     r"offsets\[-1\] can not be greater than input's length 7 but got offsets\[-1\] of 9"),
    (lambda w: F.embedding_bag(jg.tensor([7]), w, jg.tensor([0])), RuntimeError,
     "Expected idx >= 0 && idx < num_embeddings but found idx to be 7"),
    (lambda w: F.embedding_bag(jg.tensor([1.0]), w, jg.tensor([0])), RuntimeError,
     "scalar types: Long, Int"),
    (lambda w: F.embedding_bag(jg.tensor([1]), w, jg.tensor([0]), mode="mean",
                               per_sample_weights=jg.ones(1)), NotImplementedError,
     "only supported for mode='sum'"),
    (lambda w: F.embedding_bag(jg.tensor([1]), w, jg.tensor([0]), mode="max",
                               scale_grad_by_freq=True), ValueError,
     "max mode does not support scaling"),
])
def test_embedding_bag_errors_follow_torch(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(jg.tensor(BAG_WEIGHT))


def test_embedding_bag_module_matches_torch_layout():
    jg.manual_seed(0)
    bag = nn.EmbeddingBag(5, 3, mode="mean")
    assert repr(bag) == "EmbeddingBag(5, 3, mode='mean')"
    assert repr(nn.EmbeddingBag(5, 3, padding_idx=1, mode="max")) == (
        "EmbeddingBag(5, 3, mode='max', padding_idx=1)")
    assert list(bag.state_dict()) == ["weight"] and bag.weight.shape == (5, 3)
    assert nn.EmbeddingBag(4, 2, padding_idx=1).weight[1].tolist() == [0.0, 0.0]
    frozen = nn.EmbeddingBag.from_pretrained(jg.tensor(BAG_WEIGHT), mode="sum")
    assert not frozen.weight.requires_grad
    out = frozen(jg.tensor(BAG_INPUT), jg.tensor(BAG_OFFSETS))
    np.testing.assert_allclose(out.numpy()[2], BAG_WEIGHT[[4, 4, 3]].sum(0), rtol=1e-12)


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_embedding_bag_of_fixed_size_bags_compiles_in_one_graph(backend):
    jg.manual_seed(0)
    bag = nn.EmbeddingBag(6, 4, mode="mean", padding_idx=0)
    ids = jg.tensor([[1, 0, 3], [5, 5, 2]])
    assert_compiled_matches_eager_in_one_graph(bag, lambda t: (bag(t) ** 2).sum(), ids, backend)


# ----- LazyLinear -----------------------------------------------------------------------

def test_lazy_linear_materializes_on_first_call_and_becomes_linear():
    lazy = nn.LazyLinear(3)
    assert repr(lazy) == "LazyLinear(in_features=0, out_features=3, bias=True)"
    assert type(lazy.weight).__name__ == "UninitializedParameter"
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized"):
        _ = lazy.weight.shape
    weight = lazy.weight
    opt = jg.optim.SGD(lazy.parameters(), lr=0.5)  # built before the first call, as torch allows
    x = jg.tensor(RNG.normal(size=(2, 4)), dtype=jg.float32)
    out = lazy(x)
    assert type(lazy) is nn.Linear and lazy.in_features == 4 and lazy.weight is weight
    assert type(weight) is nn.Parameter and weight.shape == (3, 4) and lazy.bias.shape == (3,)
    bound = 1 / 4 ** 0.5  # Linear's default init: U(-1/sqrt(in), 1/sqrt(in))
    assert np.abs(weight.detach().numpy()).max() <= bound
    np.testing.assert_allclose(out.detach().numpy(), x.numpy() @ weight.detach().numpy().T
                               + lazy.bias.detach().numpy(), rtol=1e-6)
    before = weight.detach().numpy().copy()
    out.sum().backward()
    opt.step()
    np.testing.assert_allclose(weight.detach().numpy(), before - 0.5 * x.numpy().sum(0),
                               rtol=1e-6)


def test_lazy_linear_loads_a_state_dict_and_keeps_dtype_and_no_bias():
    source = nn.Linear(4, 3, dtype=jg.float64)
    lazy = nn.LazyLinear(3, dtype=jg.float64)
    lazy.load_state_dict(source.state_dict())
    assert type(lazy) is nn.LazyLinear and lazy.weight.shape == (3, 4)  # as in torch 2.13
    assert lazy.weight.dtype == jg.float64 and lazy.weight.tolist() == source.weight.tolist()
    plain = nn.LazyLinear(2, bias=False)
    assert plain.bias is None and plain(jg.ones(5)).shape == (2,)


def test_lazy_linear_first_compiled_call_breaks_then_later_calls_are_one_graph():
    jg.manual_seed(0)
    model = nn.Sequential(nn.LazyLinear(3), nn.ReLU(), nn.LazyLinear(2))
    x = jg.randn(5, 4)

    def loss(x):
        return model(x).sum()

    first = jg.explain(loss)(x)
    assert [b.kind for b in first.break_reasons] == ["UNINITIALIZED_PARAMETER"]
    again = jg.explain(loss)(x)
    assert again.graph_count == 1 and again.graph_break_count == 0
    np.testing.assert_allclose(jg.compile(loss)(x).item(), loss(x).item(), rtol=1e-6)
