"""Learning-rate schedulers: the lr sequences PyTorch 2.13 produces (measured), state dicts."""

import pytest

import jitgrad as jg
from jitgrad import optim
from jitgrad.optim import lr_scheduler


def _lrs(make_scheduler, steps, lr=1.0):
    """The lr after construction and after each of `steps` (optimizer.step, scheduler.step)."""
    p = jg.tensor([1.0], requires_grad=True)
    opt = optim.SGD([p], lr=lr)
    scheduler = make_scheduler(opt)
    lrs = [scheduler.get_last_lr()[0]]
    for _ in range(steps):
        opt.step()
        scheduler.step()
        lrs.append(scheduler.get_last_lr()[0])
        assert opt.param_groups[0]["lr"] == lrs[-1]
    return lrs


def test_step_lr():
    lrs = _lrs(lambda o: lr_scheduler.StepLR(o, step_size=2, gamma=0.5), 5)
    assert lrs == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]


def test_linear_lr_warms_up_then_holds():
    lrs = _lrs(lambda o: lr_scheduler.LinearLR(o, start_factor=0.25, total_iters=3), 5)
    assert lrs == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]


def test_lambda_lr():
    lrs = _lrs(lambda o: lr_scheduler.LambdaLR(o, lambda epoch: 1 / (epoch + 1)), 3)
    assert lrs == [1.0, 0.5, 1 / 3, 0.25]


def test_cosine_annealing_matches_torch_floats_through_the_restart():
    lrs = _lrs(lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=4, eta_min=0.1), 10)
    torch_values = [0.8681980515339464, 0.55, 0.23180194846605368, 0.1, 0.2318019484660536, 0.55,
                    0.8681980515339467, 1.0000000000000004, 0.8681980515339468, 0.5500000000000004]
    assert lrs[0] == 1.0
    assert lrs[1:] == torch_values


def test_scheduler_sets_initial_lr_and_base_lrs_per_group():
    a = jg.tensor([1.0], requires_grad=True)
    b = jg.tensor([1.0], requires_grad=True)
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.1}], lr=1.0)
    scheduler = lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    assert scheduler.base_lrs == [1.0, 0.1]
    assert [g["initial_lr"] for g in opt.param_groups] == [1.0, 0.1]
    scheduler.step()
    assert scheduler.get_last_lr() == [0.5, 0.05]


def test_lambda_lr_per_group_count_must_match():
    p = jg.tensor([1.0], requires_grad=True)
    opt = optim.SGD([p], lr=1.0)
    with pytest.raises(ValueError, match="Expected 1 lr_lambdas, but got 2"):
        lr_scheduler.LambdaLR(opt, [lambda e: 1.0, lambda e: 2.0])


def test_state_dict_round_trip_resumes_the_schedule():
    p = jg.tensor([1.0], requires_grad=True)
    opt = optim.SGD([p], lr=1.0)
    scheduler = lr_scheduler.CosineAnnealingLR(opt, T_max=5)
    for _ in range(2):
        scheduler.step()
    state = scheduler.state_dict()
    assert "optimizer" not in state and state["last_epoch"] == 2

    opt2 = optim.SGD([p], lr=1.0)
    resumed = lr_scheduler.CosineAnnealingLR(opt2, T_max=5)
    resumed.load_state_dict(state)
    opt2.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
    scheduler.step()
    resumed.step()
    assert resumed.get_last_lr() == scheduler.get_last_lr()


def test_lambda_lr_state_dict_drops_plain_functions():
    p = jg.tensor([1.0], requires_grad=True)
    scheduler = lr_scheduler.LambdaLR(optim.SGD([p], lr=1.0), lambda e: 0.5)
    assert scheduler.state_dict()["lr_lambdas"] == [None]


def test_errors():
    p = jg.tensor([1.0], requires_grad=True)
    opt = optim.SGD([p], lr=1.0)
    with pytest.raises(TypeError, match="list is not an Optimizer"):
        lr_scheduler.StepLR([], step_size=1)
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        lr_scheduler.LinearLR(opt, start_factor=0.0)
    with pytest.raises(KeyError, match="initial_lr"):
        lr_scheduler.StepLR(opt, step_size=1, last_epoch=3)
