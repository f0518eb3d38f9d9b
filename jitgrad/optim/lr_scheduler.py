"""Learning-rate schedulers (torch.optim.lr_scheduler): StepLR, MultiStepLR, ExponentialLR,
LambdaLR, CosineAnnealingLR, LinearLR, OneCycleLR, and ReduceLROnPlateau (driven by a metric).

A scheduler rewrites `group["lr"]` of its optimizer's groups each time `step()` is called
(once per epoch or per iteration, after `optimizer.step()`). Constructing it performs the
first step (epoch 0). The formulas are PyTorch's recursive ("chainable") forms, so
several schedulers can act on one optimizer, and they give the same floats as PyTorch.
"""

from __future__ import annotations

import math
import types
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from jitgrad.optim.optimizer import Optimizer


class LRScheduler:
    """Base class: `base_lrs` (each group's "initial_lr"), `last_epoch`, `get_last_lr()`.

    Subclasses define `get_lr()`, the new lr of every group at epoch `last_epoch`.
    Raises TypeError for a non-optimizer, KeyError when resuming (last_epoch != -1) an
    optimizer whose groups lack "initial_lr".
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   "when resuming an optimizer")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self.step()

    def get_lr(self) -> list[float]:
        raise NotImplementedError(f"{type(self).__name__} does not implement get_lr")

    def get_last_lr(self) -> list[float]:
        """The lr of each group as set by the last `step()`."""
        return self._last_lr

    def step(self) -> None:
        """Advance one epoch and write the new lr into every param group."""
        self._step_count += 1
        self.last_epoch += 1
        for group, lr in zip(self.optimizer.param_groups, self.get_lr(), strict=True):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _current_lrs(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        """Every attribute but the optimizer."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)


class StepLR(LRScheduler):
    """Multiply the lr by `gamma` every `step_size` epochs: base * gamma^(epoch // step_size)."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current_lrs()
        return [lr * self.gamma for lr in self._current_lrs()]


class MultiStepLR(LRScheduler):
    """Multiply the lr by `gamma` at each epoch listed in `milestones` (gamma^n for a
    milestone listed n times)."""

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return self._current_lrs()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._current_lrs()]


class ExponentialLR(LRScheduler):
    """Multiply the lr by `gamma` every epoch: base * gamma^epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return self._current_lrs()
        return [lr * self.gamma for lr in self._current_lrs()]


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(epoch); one function for all groups or one per group.

    Raises ValueError when a list of functions does not match the number of groups.
    """

    def __init__(self, optimizer: Optimizer,
                 lr_lambda: Callable[[int], float] | list[Callable[[int], float]],
                 last_epoch: int = -1) -> None:
        groups = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != groups:
                raise ValueError(f"Expected {groups} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * groups
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base * fn(self.last_epoch)
                for fn, base in zip(self.lr_lambdas, self.base_lrs, strict=True)]

    def state_dict(self) -> dict[str, Any]:
        """As the base, with each lambda replaced by its `__dict__` if it is a callable object
        (plain functions cannot be saved and become None), as PyTorch does."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else dict(fn.__dict__)
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        saved_lambdas = state.pop("lr_lambdas")
        self.__dict__.update(state)
        for fn, saved in zip(self.lr_lambdas, saved_lambdas, strict=True):
            if saved is not None:
                fn.__dict__.update(saved)


class CosineAnnealingLR(LRScheduler):
    """Cosine from base_lr down to eta_min over T_max epochs, then back up (SGDR without
    restarts; Loshchilov & Hutter 2017): lr = eta_min + (base - eta_min)(1 + cos(pi t / T_max)) / 2.
    """

    def __init__(self, optimizer: Optimizer, T_max: int,  # noqa: N803 - PyTorch's name
                 eta_min: float = 0.0, last_epoch: int = -1) -> None:
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        epoch, t_max, eta_min = self.last_epoch, self.T_max, self.eta_min
        lrs = self._current_lrs()
        if epoch == 0:
            return lrs
        if self._step_count == 1 and epoch > 0:
            return [eta_min + (base - eta_min) * (1 + math.cos(epoch * math.pi / t_max)) / 2
                    for base in self.base_lrs]
        if (epoch - 1 - t_max) % (2 * t_max) == 0:
            return [lr + (base - eta_min) * (1 - math.cos(math.pi / t_max)) / 2
                    for base, lr in zip(self.base_lrs, lrs, strict=True)]
        ratio = ((1 + math.cos(math.pi * epoch / t_max))
                 / (1 + math.cos(math.pi * (epoch - 1) / t_max)))
        return [ratio * (lr - eta_min) + eta_min for lr in lrs]


class LinearLR(LRScheduler):
    """Scale the lr linearly from start_factor to end_factor over total_iters epochs, then hold.

    Raises ValueError unless 0 < start_factor <= 1 and 0 <= end_factor <= 1.
    """

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5, last_epoch: int = -1) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and "
                             "less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        lrs = self._current_lrs()
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in lrs]
        if self.last_epoch > self.total_iters:
            return lrs
        delta = self.end_factor - self.start_factor
        factor = 1.0 + delta / (self.total_iters * self.start_factor
                                + (self.last_epoch - 1) * delta)
        return [lr * factor for lr in lrs]


class ReduceLROnPlateau:
    """Multiply the lr by `factor` once the metric passed to `step(metric)` has not improved
    for more than `patience` epochs, then wait `cooldown` epochs; never below `min_lr`.

    mode "min" (a loss) or "max" (an accuracy); an improvement must beat the best value by
    `threshold`, relative (threshold_mode "rel") or absolute ("abs"). Reductions smaller
    than `eps` are skipped. Raises ValueError for factor >= 1, an unknown mode, or a list
    of min_lr whose length differs from the number of param groups.
    """

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr: float | list[float] = 0, eps: float = 1e-8) -> None:
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        if mode not in ("min", "max"):
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        groups = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)) and len(min_lr) != groups:
            raise ValueError(f"expected {groups} min_lrs, got {len(min_lr)}")
        self.optimizer = optimizer
        self.factor, self.patience, self.cooldown, self.eps = factor, patience, cooldown, eps
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.min_lrs = list(min_lr) if isinstance(min_lr, (list, tuple)) else [min_lr] * groups
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.last_epoch = 0
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]

    def step(self, metrics: Any) -> None:
        """Record this epoch's metric (a number or 0-d tensor) and reduce the lr if it stalled."""
        current = float(metrics)
        self.last_epoch += 1
        if self._is_better(current):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs during cooldown do not count
        if self.num_bad_epochs > self.patience:
            for group, min_lr in zip(self.optimizer.param_groups, self.min_lrs, strict=True):
                new_lr = max(group["lr"] * self.factor, min_lr)
                if group["lr"] - new_lr > self.eps:
                    group["lr"] = new_lr
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _is_better(self, value: float) -> bool:
        best, threshold = self.best, self.threshold
        if self.mode == "min":
            return value < (best * (1.0 - threshold) if self.threshold_mode == "rel"
                            else best - threshold)
        return value > (best * (1.0 + threshold) if self.threshold_mode == "rel"
                        else best + threshold)

    def get_last_lr(self) -> list[float]:
        """The lr of each group after the last `step()`."""
        return self._last_lr

    def state_dict(self) -> dict[str, Any]:
        """Every attribute but the optimizer."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)


def _per_group(name: str, optimizer: Optimizer, value: Any) -> list[Any]:
    """`value` for each param group: a list/tuple of one per group, or one for all."""
    groups = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != groups:
            raise ValueError(f"expected {groups} values for {name}, got {len(value)}")
        return list(value)
    return [value] * groups


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin 2017, "Super-Convergence"), stepped once per batch.

    The lr rises from max_lr / div_factor to max_lr over the first pct_start of
    total_steps (= epochs * steps_per_epoch when not given), then anneals ("cos" or
    "linear") to initial_lr / final_div_factor; three_phase=True goes back down to the
    initial lr first, then to the minimum. With cycle_momentum, momentum (or Adam's
    beta1) moves inversely between max_momentum and base_momentum.
    Raises ValueError for a missing or non-positive step count, pct_start outside [0, 1],
    an unknown anneal_strategy, cycle_momentum with an optimizer without momentum or
    betas, or stepping beyond total_steps.
    """

    def __init__(self, optimizer: Optimizer, max_lr: float | list[float],
                 total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True,
                 base_momentum: float | list[float] = 0.85,
                 max_momentum: float | list[float] = 0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False,
                 last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        self.total_steps = self._count_steps(total_steps, epochs, steps_per_epoch)
        if not 0 <= pct_start <= 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self.anneal_strategy = anneal_strategy
        self._schedule_phases = self._phases(pct_start, three_phase)
        if last_epoch == -1:
            for group, lr in zip(optimizer.param_groups, _per_group("max_lr", optimizer, max_lr),
                                 strict=True):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self._set_up_momentum(base_momentum, max_momentum, last_epoch)
        super().__init__(optimizer, last_epoch)

    def _count_steps(self, total_steps: int | None, epochs: int | None,
                     steps_per_epoch: int | None) -> int:
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            return total_steps
        if epochs is None or steps_per_epoch is None:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if epochs <= 0 or not isinstance(epochs, int):
            raise ValueError(f"Expected positive integer epochs, but got {epochs}")
        if steps_per_epoch <= 0 or not isinstance(steps_per_epoch, int):
            raise ValueError(f"Expected positive integer steps_per_epoch, but got "
                             f"{steps_per_epoch}")
        return epochs * steps_per_epoch

    def _phases(self, pct_start: float, three_phase: bool) -> list[dict[str, Any]]:
        """(end_step, group keys of the lr and momentum at its start and end) per phase."""
        warmup_end = float(pct_start * self.total_steps) - 1
        if not three_phase:
            return [
                dict(end_step=warmup_end, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=self.total_steps - 1, start_lr="max_lr", end_lr="min_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum")]
        return [
            dict(end_step=warmup_end, start_lr="initial_lr", end_lr="max_lr",
                 start_momentum="max_momentum", end_momentum="base_momentum"),
            dict(end_step=float(2 * pct_start * self.total_steps) - 2, start_lr="max_lr",
                 end_lr="initial_lr", start_momentum="base_momentum", end_momentum="max_momentum"),
            dict(end_step=self.total_steps - 1, start_lr="initial_lr", end_lr="min_lr",
                 start_momentum="max_momentum", end_momentum="max_momentum")]

    def _set_up_momentum(self, base_momentum: Any, max_momentum: Any, last_epoch: int) -> None:
        defaults = self.optimizer.defaults
        if "momentum" not in defaults and "betas" not in defaults:
            raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` "
                             "option enabled")
        self.use_beta1 = "betas" in defaults
        highs = _per_group("max_momentum", self.optimizer, max_momentum)
        lows = _per_group("base_momentum", self.optimizer, base_momentum)
        if last_epoch != -1:
            return
        for high, low, group in zip(highs, lows, self.optimizer.param_groups, strict=True):
            self._write_momentum(group, high)
            group["max_momentum"] = high
            group["base_momentum"] = low

    def _write_momentum(self, group: dict[str, Any], momentum: float) -> None:
        if self.use_beta1:
            group["betas"] = (momentum, *group["betas"][1:])
        else:
            group["momentum"] = momentum

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total steps "
                             f"is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step <= end_step or i == len(self._schedule_phases) - 1:
                    pct = (step - start_step) / (end_step - start_step)
                    lrs.append(self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct))
                    if self.cycle_momentum:
                        self._write_momentum(group, self._anneal(
                            group[phase["start_momentum"]], group[phase["end_momentum"]], pct))
                    break
                start_step = phase["end_step"]
        return lrs

_LRScheduler = LRScheduler

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "LambdaLR",
           "CosineAnnealingLR", "LinearLR", "ReduceLROnPlateau", "OneCycleLR"]
