"""`Categorical` (torch.distributions.Categorical): a distribution over 0 .. K-1.

Parametrized by `probs` (normalized to sum to 1 over the last dim) or by `logits`
(normalized by their logsumexp); the other is computed on first use: logits =
log(clamp(probs, eps, 1 - eps)), probs = softmax(logits). log_prob gathers the normalized
logits at the value, entropy is -sum(probs * max(logits, finfo.min)), both tensor ops with
gradients (and traced into a graph when validation is off). sample draws with
`multinomial` from jitgrad's generator (so its values differ from torch's stream).
"""

from __future__ import annotations

import math

from jitgrad.distributions import constraints
from jitgrad.distributions.distribution import Distribution, lazy_property
from jitgrad.distributions.utils import logits_to_probs, probs_to_logits
from jitgrad.eager.dtypes import int64
from jitgrad.eager.ops.creation import arange, full
from jitgrad.eager.ops.random import multinomial
from jitgrad.eager.ops.shape import broadcast_tensors
from jitgrad.eager.tensor import Size, Tensor
from jitgrad.eager.type_info import finfo


class Categorical(Distribution):
    """Categorical(probs=...) or Categorical(logits=...), the last dim indexing categories.

    Raises ValueError for both or neither parameter, a 0-d parameter, or (validating)
    probs that are not a simplex / logits with NaN.
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs: Tensor | None = None, logits: Tensor | None = None,
                 validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            self._param = self.probs
        else:
            assert logits is not None, "one of probs and logits is given"
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
            self._param = self.logits
        self._num_events = self._param.size()[-1]
        batch_shape = self._param.size()[:-1] if self._param.dim() > 1 else Size()
        super().__init__(batch_shape, validate_args=validate_args)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    @property
    def support(self) -> constraints.Constraint:
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def mean(self) -> Tensor:
        return full(self._extended_shape(), math.nan, dtype=self.probs.dtype)

    @property
    def variance(self) -> Tensor:
        return full(self._extended_shape(), math.nan, dtype=self.probs.dtype)

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(dim=-1)

    def expand(self, batch_shape: tuple[int, ...]) -> Categorical:
        """The same distribution repeated over `batch_shape` (parameters are expanded views)."""
        new = Categorical.__new__(Categorical)
        param_shape = Size(tuple(batch_shape) + (self._num_events,))
        for name in ("probs", "logits"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name].expand(param_shape)
                new._param = new.__dict__[name]
        new._num_events = self._num_events
        Distribution.__init__(new, Size(batch_shape), validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape: tuple[int, ...] = Size()) -> Tensor:
        """int64 categories of shape sample_shape + batch_shape."""
        sample_shape = Size(sample_shape)
        probs_2d = self.probs.detach().reshape(-1, self._num_events)
        samples_2d = multinomial(probs_2d, math.prod(sample_shape), True).T
        return samples_2d.reshape(self._extended_shape(sample_shape))

    def log_prob(self, value: Tensor) -> Tensor:
        """log P(value), value broadcast against batch_shape (any numeric dtype, truncated)."""
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = broadcast_tensors(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self) -> Tensor:
        logits = self.logits.clamp(min=finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """arange(K) shaped (K, 1, ...) to broadcast against batch_shape (expanded to it)."""
        values = arange(self._num_events, dtype=int64).view(
            (-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values


__all__ = ["Categorical"]
