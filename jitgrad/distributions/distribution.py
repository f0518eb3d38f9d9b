"""`Distribution`, the base class of jitgrad.distributions (torch.distributions.Distribution).

Shapes follow PyTorch: a sample has shape sample_shape + batch_shape + event_shape.
Validation (on by default, as PyTorch's `__debug__` default; switched with
`validate_args=` or `Distribution.set_default_validate_args`) checks each given parameter
against `arg_constraints` at construction and each value given to `log_prob` against the
support, raising ValueError with PyTorch's messages. Validation reads tensor values, so in
compiled code it is a graph break; pass validate_args=False to keep log_prob in one graph.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from jitgrad.distributions import constraints
from jitgrad.eager.tensor import Size, Tensor


class lazy_property:  # noqa: N801 - PyTorch's name
    """Computed on first access and then stored on the instance (so `repr` lists it)."""

    def __init__(self, wrapped: Callable[[Any], Any]) -> None:
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__

    def __get__(self, instance: Any, obj_type: Any = None) -> Any:
        if instance is None:
            return self
        value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value


class Distribution:
    """A parametrized probability distribution; subclasses give the formulas."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = True
    arg_constraints: dict[str, constraints.Constraint] = {}

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn validation on or off for distributions made without `validate_args`."""
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape: tuple[int, ...] = Size(),
                 event_shape: tuple[int, ...] = Size(),
                 validate_args: bool | None = None) -> None:
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            self._validate_parameters()

    def _validate_parameters(self) -> None:
        for param, constraint in self.arg_constraints.items():
            if param not in self.__dict__ and isinstance(getattr(type(self), param, None),
                                                         lazy_property):
                continue  # not given: computed from another parameter when needed
            value = getattr(self, param)
            if not constraint.check(value).all():
                raise ValueError(
                    f"Expected parameter {param} ({type(value).__name__} of shape "
                    f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                    f"{constraint!r}, but found invalid values:\n{value}")

    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    # The abstract part of torch's interface: each distribution overrides what it has, and
    # the rest raises NotImplementedError exactly as torch's base class does (torch's
    # Categorical has no rsample: `Categorical(...).rsample()` raises it there too).

    @property
    def support(self) -> constraints.Constraint:
        raise NotImplementedError

    @property
    def mean(self) -> Tensor:
        raise NotImplementedError

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError(f"{type(self)} does not implement mode")

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def sample(self, sample_shape: tuple[int, ...] = Size()) -> Tensor:
        raise NotImplementedError

    def rsample(self, sample_shape: tuple[int, ...] = Size()) -> Tensor:
        raise NotImplementedError

    def sample_n(self, n: int) -> Tensor:
        """Deprecated `sample((n,))`."""
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.",
                      FutureWarning, stacklevel=2)
        return self.sample(Size((n,)))

    def log_prob(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def entropy(self) -> Tensor:
        raise NotImplementedError

    def enumerate_support(self, expand: bool = True) -> Tensor:
        raise NotImplementedError

    def perplexity(self) -> Tensor:
        """exp(entropy)."""
        return self.entropy().exp()

    def _extended_shape(self, sample_shape: tuple[int, ...] = Size()) -> Size:
        return Size(tuple(sample_shape) + self._batch_shape + self._event_shape)

    def _validate_sample(self, value: Tensor) -> None:
        """Raises ValueError unless value broadcasts with batch_shape + event_shape and lies
        in the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_start = value.dim() - len(self._event_shape)
        if value.size()[event_start:] != self._event_shape:
            raise ValueError(f"The right-most size of value must match event_shape: "
                             f"{value.size()} vs {self._event_shape}.")
        expected = self._batch_shape + self._event_shape
        for i, j in zip(reversed(value.size()), reversed(expected), strict=False):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: "
                                 f"{value.size()} vs {Size(expected)}.")
        if not self.support.check(value).all():
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape "
                f"{tuple(value.shape)}) to be within the support ({self.support!r}) of the "
                f"distribution {self!r}, but found invalid values:\n{value}")

    def __repr__(self) -> str:
        values = {k: self.__dict__[k] for k in self.arg_constraints if k in self.__dict__}
        args = ", ".join(f"{k}: {v if v.numel() == 1 else v.size()}" for k, v in values.items())
        return f"{type(self).__name__}({args})"


__all__ = ["Distribution"]
