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


def test_multi_step_lr_applies_repeated_milestones_as_powers():
    lrs = _lrs(lambda o: lr_scheduler.MultiStepLR(o, milestones=[2, 4, 4], gamma=0.5), 6, lr=0.1)
    assert lrs == [0.1, 0.1, 0.05, 0.05, 0.0125, 0.0125, 0.0125]  # torch 2.13


def test_exponential_lr_matches_torch_floats():
    lrs = _lrs(lambda o: lr_scheduler.ExponentialLR(o, gamma=0.9), 4, lr=0.1)
    assert lrs == [0.1, 0.09000000000000001, 0.08100000000000002, 0.07290000000000002,
                   0.06561000000000002]


def _plateau_lrs(metrics, **kwargs):
    opt = optim.SGD([jg.tensor([1.0], requires_grad=True)], lr=0.1)
    scheduler = lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
    lrs = []
    for value in metrics:
        scheduler.step(value)
        lrs.append(opt.param_groups[0]["lr"])
        assert scheduler.get_last_lr() == [lrs[-1]]
    return lrs, scheduler


def test_reduce_lr_on_plateau_with_patience_cooldown_and_min_lr():
    # torch 2.13, mode="max": lr per step and the counters after the last one
    metrics = [jg.tensor(v) for v in [1.0, 0.9, 0.95, 0.95, 0.95, 0.89, 0.9, 0.9, 0.9, 0.9]]
    lrs, scheduler = _plateau_lrs(metrics, mode="max", patience=1, cooldown=1, factor=0.5,
                                  min_lr=0.02)
    assert lrs == [0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.02, 0.02]
    assert scheduler.num_bad_epochs == 0 and scheduler.cooldown_counter == 0
    assert scheduler.best == 1.0 and scheduler.last_epoch == 10


def test_reduce_lr_on_plateau_defaults_and_absolute_threshold():
    # torch 2.13: the 11th epoch without improvement reduces (patience 10)
    lrs, scheduler = _plateau_lrs([1.0] + [0.9] * 12)
    assert lrs == [0.1] * 12 + [0.010000000000000002] and scheduler.best == 0.9
    lrs, scheduler = _plateau_lrs([1.0, 0.95, 0.85], patience=0, threshold=0.1,
                                  threshold_mode="abs")
    assert lrs == [0.1, 0.010000000000000002, 0.010000000000000002] and scheduler.best == 0.85


@pytest.mark.parametrize("kwargs, message", [
    (dict(factor=1.0), r"^Factor should be < 1\.0\.$"), (dict(mode="avg"), "^mode avg is unknown!$"),
    (dict(threshold_mode="x"), "^threshold mode x is unknown!$"),
    (dict(min_lr=[0, 1]), "^expected 1 min_lrs, got 2$"),
])
def test_reduce_lr_on_plateau_errors_match_torch(kwargs, message):
    opt = optim.SGD([jg.tensor([1.0], requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match=message):
        lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
