"""`optimizer.step()` and `optimizer.zero_grad()` inside `jitgrad.compile` (Note [Compiled
optimizer step] in jitgrad/optim/optimizer.py): the update is one captured graph whose new
values are written back into parameters and state; values, versions and state match eager
over several steps; the first call (state created) and the second (state read) compile,
later calls hit the cache.
"""


import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
import jitgrad.nn.functional as F  # noqa: N812 - the PyTorch convention
from jitgrad.trace.runtime import report as report_module
from jitgrad.trace.testing import CountingBackend


@pytest.fixture(autouse=True)
def fresh_caches():
    jg.reset()
    yield
    jg.reset()


OPTIMIZERS = {
    "sgd_momentum": lambda ps: jg.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
    "sgd_nesterov": lambda ps: jg.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True,
                                            maximize=True),
    "sgd_plain": lambda ps: jg.optim.SGD(ps, lr=0.1, weight_decay=0.1),
    "adam": lambda ps: jg.optim.Adam(ps, lr=0.01, weight_decay=0.1),
    "adamw": lambda ps: jg.optim.AdamW(ps, lr=0.01),
    "adamw_amsgrad": lambda ps: jg.optim.AdamW(ps, lr=0.01, amsgrad=True),
    "rmsprop": lambda ps: jg.optim.RMSprop(ps, lr=0.01, weight_decay=0.1),
    "rmsprop_centered_momentum": lambda ps: jg.optim.RMSprop(ps, lr=0.01, momentum=0.9,
                                                             centered=True, maximize=True),
}


def make_params(seed=0):
    rng = np.random.default_rng(seed)
    return [jg.tensor(rng.normal(size=shape).astype(np.float32), requires_grad=True)
            for shape in ((4, 3), (3,), (2, 2))]


def set_grads(params, step):
    rng = np.random.default_rng(100 + step)
    for p in params:
        p.grad = jg.tensor(rng.normal(size=p.shape).astype(np.float32))


def assert_same_state(opt, ref):
    for group, ref_group in zip(opt.param_groups, ref.param_groups, strict=True):
        for p, q in zip(group["params"], ref_group["params"], strict=True):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-6,
                                       atol=1e-7)
            assert p._version == q._version
            state, ref_state = opt.state.get(p, {}), ref.state.get(q, {})
            assert list(state) == list(ref_state)
            for name, value in state.items():
                np.testing.assert_allclose(value.numpy(), ref_state[name].numpy(), rtol=1e-6,
                                           atol=1e-7)
                assert value.dtype == ref_state[name].dtype
                assert value.shape == ref_state[name].shape


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_step_alone_is_one_graph_matching_eager_over_several_steps(name):
    params, ref_params = make_params(), make_params()
    opt, ref = OPTIMIZERS[name](params), OPTIMIZERS[name](ref_params)
    counter = CountingBackend()
    step = jg.compile(opt.step, backend=counter)
    with report_module.recording() as report:
        for i in range(5):
            set_grads(params, i)
            set_grads(ref_params, i)
            assert step() is None
            ref.step()
            assert_same_state(opt, ref)
            if i == 1:
                compiles = counter.compile_count
    assert report.graph_break_count == 0
    # the first call creates the state (SGD without momentum has none); later calls hit
    assert counter.compile_count == compiles == (1 if name == "sgd_plain" else 2)


def test_step_counter_is_a_graph_input_not_a_constant():
    params = make_params()
    opt = jg.optim.Adam(params, lr=0.01)
    set_grads(params, 0)
    step = jg.compile(opt.step, backend="eager")
    step()
    step()
    graph = str(jg.explain(step)().graphs[0])
    assert "state_self_param_groups_0___params___0____step: f32[]" in graph
    assert opt.state[params[0]]["step"].item() == 3.0
    assert opt.state[params[0]]["step"].dtype == jg.float32


def test_parameters_without_grad_are_skipped_and_get_no_state():
    params, ref_params = make_params(), make_params()
    opt, ref = jg.optim.Adam(params, lr=0.01), jg.optim.Adam(ref_params, lr=0.01)
    step = jg.compile(opt.step, backend="eager")
    for i in range(3):
        set_grads(params[:2], i)
        set_grads(ref_params[:2], i)
        step()
        ref.step()
    assert params[2] not in opt.state and params[2]._version == 0
    assert_same_state(opt, ref)


def test_changed_hyperparameter_recompiles_with_eager_values():
    params, ref_params = make_params(), make_params()
    opt, ref = jg.optim.SGD(params, lr=0.1), jg.optim.SGD(ref_params, lr=0.1)
    counter = CountingBackend()
    step = jg.compile(opt.step, backend=counter)
    for lr in (0.1, 0.05, 0.05):
        opt.param_groups[0]["lr"] = ref.param_groups[0]["lr"] = lr
        set_grads(params, 0)
        set_grads(ref_params, 0)
        step()
        ref.step()
        assert_same_state(opt, ref)
    assert counter.compile_count == 2


@pytest.mark.parametrize("name", ["sgd_momentum", "adamw"])
def test_learning_rate_from_a_scheduler_becomes_a_graph_input(name):
    params, ref_params = make_params(), make_params()
    opt, ref = OPTIMIZERS[name](params), OPTIMIZERS[name](ref_params)
    schedulers = [jg.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.7) for o in (opt, ref)]
    counter = CountingBackend()
    step = jg.compile(opt.step, backend=counter)
    for i in range(6):
        set_grads(params, i)
        set_grads(ref_params, i)
        step()
        ref.step()
        for scheduler in schedulers:
            scheduler.step()
        assert_same_state(opt, ref)
    # the second call finds the state and a changed lr, which becomes a graph input (Note
    # [Unspecialized numbers]) in that same recompile
    assert counter.compile_count == 2


class NumpySignSGD(jg.optim.Optimizer):
    """An optimizer whose update writes numpy arrays: it cannot be traced."""

    def __init__(self, params, lr):
        super().__init__(params, dict(lr=lr))

    def _update_group(self, group):
        for p in group["params"]:
            if p.grad is not None:
                p._data -= group["lr"] * np.sign(p.grad._data)
                p._bump_version()


def test_an_optimizer_written_on_numpy_runs_eagerly_at_a_break():
    params, ref_params = make_params(), make_params()
    opt, ref = NumpySignSGD(params, lr=0.01), NumpySignSGD(ref_params, lr=0.01)

    def train_step(opt):
        opt.step()
        return 1

    compiled = jg.compile(train_step, backend="eager")
    with report_module.recording() as report:
        for i in range(2):
            set_grads(params, i)
            set_grads(ref_params, i)
            compiled(opt)
            ref.step()
    assert {r.kind for r in report.break_reasons} == {"UNSUPPORTED_ATTRIBUTE"}
    assert_same_state(opt, ref)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_inside_matches_eager(set_to_none):
    params, ref_params = make_params(), make_params()
    opt, ref = jg.optim.SGD(params, lr=0.1), jg.optim.SGD(ref_params, lr=0.1)

    def clear(opt):
        opt.zero_grad(set_to_none=set_to_none)

    set_grads(params, 0)
    set_grads(ref_params, 0)
    grads = [p.grad for p in params]
    with report_module.recording() as report:
        jg.compile(clear, backend="eager")(opt)
    ref.zero_grad(set_to_none=set_to_none)
    assert report.graph_break_count == 0
    for p, q, grad in zip(params, ref_params, grads, strict=True):
        if set_to_none:
            assert p.grad is None and q.grad is None
        else:
            assert p.grad is grad and grad._version == q.grad._version == 1
            np.testing.assert_array_equal(grad.numpy(), np.zeros(p.shape, np.float32))


# ----- a whole training step compiled: forward, loss, zero_grad, backward, step -----

def make_model(seed=0):
    jg.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))


def train_step(model, opt, x, y):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def train_step_zeroed_outside(model, opt, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


@pytest.mark.parametrize("name", ["sgd_momentum", "adam", "adamw"])
def test_full_training_step_compiled_with_numba_matches_eager(name):
    model, reference = make_model(), make_model()
    opt, ref = OPTIMIZERS[name](model.parameters()), OPTIMIZERS[name](reference.parameters())
    rng = np.random.default_rng(1)
    x = jg.tensor(rng.normal(size=(6, 4)).astype(np.float32))
    y = jg.tensor([0, 1, 2, 0, 1, 2])
    counter = CountingBackend("numba")
    compiled = jg.compile(train_step, backend=counter)
    with report_module.recording() as report:
        for i in range(4):
            loss = compiled(model, opt, x, y)
            loss_ref = train_step(reference, ref, x, y)
            np.testing.assert_allclose(loss.item(), loss_ref.item(), rtol=1e-6)
            assert_same_state(opt, ref)
            if i == 0:
                first = (report.graph_count, report.graph_break_count)
            if i == 1:
                compiles = counter.compile_count
    # the forward graph, then the update graph after the break at loss.backward()
    assert first == (2, 1) and report.break_reasons[0].kind == "AUTOGRAD_CALL"
    # the forward graph compiles once (zero_grad sets grads without reading them); the
    # update graph once more on the second call, which finds the optimizer state
    assert counter.compile_count == compiles == 3
    update_groups = report.fusion_groups[-1]
    assert len(update_groups) >= 4  # the update of each parameter is fused
    weight_group = next(g for g in update_groups if "[8, 4]" in g)
    assert "to_dtype" in weight_group and "add" in weight_group  # the fused multiply-adds


def test_zero_grad_outside_the_compiled_step():
    model, reference = make_model(), make_model()
    opt = jg.optim.AdamW(model.parameters(), lr=0.01)
    ref = jg.optim.AdamW(reference.parameters(), lr=0.01)
    x = jg.tensor(np.random.default_rng(2).normal(size=(5, 4)).astype(np.float32))
    y = jg.tensor([0, 1, 2, 1, 0])
    compiled = jg.compile(train_step_zeroed_outside, backend="eager")
    for _ in range(3):
        opt.zero_grad()
        ref.zero_grad()
        loss = compiled(model, opt, x, y)
        np.testing.assert_allclose(loss.item(),
                                   train_step_zeroed_outside(reference, ref, x, y).item(),
                                   rtol=1e-6)
        assert_same_state(opt, ref)


class TorchStyleSGD(jg.optim.Optimizer):
    """A custom optimizer written as PyTorch users write them: in-place updates in a
    `@no_grad()` step, state made on the first step."""

    def __init__(self, params, lr, momentum):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    @jg.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "buf" not in state:
                    state["buf"] = p.grad.clone()
                else:
                    state["buf"].mul_(group["momentum"]).add_(p.grad)
                p.add_(state["buf"], alpha=-group["lr"])


@pytest.mark.parametrize("inside", [True, False], ids=["called_in_compiled", "compiled"])
def test_custom_optimizer_with_no_grad_step_compiles(inside):
    params, ref_params = make_params(), make_params()
    opt, ref = TorchStyleSGD(params, 0.1, 0.9), TorchStyleSGD(ref_params, 0.1, 0.9)
    counter = CountingBackend()
    step = jg.compile(lambda: opt.step(), backend=counter) if inside else \
        jg.compile(opt.step, backend=counter)
    with report_module.recording() as report:
        for i in range(4):
            set_grads(params, i)
            set_grads(ref_params, i)
            step()
            ref.step()
            assert_same_state(opt, ref)
    assert report.graph_break_count == 0 and counter.compile_count == 2
    assert jg.is_grad_enabled()
