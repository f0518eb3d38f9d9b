"""Constraints on distribution parameters and supports (torch.distributions.constraints).

A constraint's `check(value)` returns a bool tensor, True where `value` satisfies it, over
the batch shape (the last `event_dim` dims are reduced); `repr` is PyTorch's, since it
appears in validation messages users search for.
"""

from __future__ import annotations

from jitgrad.eager.tensor import Tensor


class Constraint:
    """A region of valid values; `event_dim` dims on the right form one event. The base is
    abstract, as torch's: every constraint below defines `check`."""

    is_discrete = False
    event_dim = 0

    def check(self, value: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement check")

    def __repr__(self) -> str:
        return type(self).__name__.lstrip("_") + "()"


class _Real(Constraint):
    """Any real number except NaN (infinities are allowed)."""

    def check(self, value: Tensor) -> Tensor:
        return value == value

    def __repr__(self) -> str:
        return "Real()"


class _IndependentConstraint(Constraint):
    """`base` holding for all of the rightmost `reinterpreted_batch_ndims` dims together."""

    def __init__(self, base: Constraint, reinterpreted_batch_ndims: int) -> None:
        self.base_constraint = base
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        self.event_dim = base.event_dim + reinterpreted_batch_ndims

    def check(self, value: Tensor) -> Tensor:
        result = self.base_constraint.check(value)
        for _ in range(self.reinterpreted_batch_ndims):
            result = result.all(-1)
        return result

    def __repr__(self) -> str:
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _Simplex(Constraint):
    """Non-negative vectors (last dim) summing to 1 within 1e-6."""

    event_dim = 1

    def check(self, value: Tensor) -> Tensor:
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)

    def __repr__(self) -> str:
        return "Simplex()"


class _IntegerInterval(Constraint):
    """Integers in [lower_bound, upper_bound]."""

    is_discrete = True

    def __init__(self, lower_bound: int, upper_bound: int) -> None:
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound

    def check(self, value: Tensor) -> Tensor:
        return (value % 1 == 0) & (value >= self.lower_bound) & (value <= self.upper_bound)

    def __repr__(self) -> str:
        return (f"IntegerInterval(lower_bound={self.lower_bound}, "
                f"upper_bound={self.upper_bound})")


real = _Real()
real_vector = _IndependentConstraint(real, 1)
simplex = _Simplex()
independent = _IndependentConstraint
integer_interval = _IntegerInterval

__all__ = ["Constraint", "real", "real_vector", "simplex", "independent", "integer_interval"]
