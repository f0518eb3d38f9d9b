"""`jitgrad.distributions` (torch.distributions): the `Distribution` base class, its
`constraints`, and `Categorical`."""

from jitgrad.distributions import constraints
from jitgrad.distributions.categorical import Categorical
from jitgrad.distributions.distribution import Distribution

__all__ = ["Distribution", "Categorical", "constraints"]
