"""`jitgrad.special`: the `torch.special` functions jitgrad has, under torch's names.

Each is the jitgrad op of the same meaning (`special.expit` is `sigmoid`, `special.psi`
is `digamma`, `special.gammaln` is `lgamma`), so values and gradients are those ops'.
"""

from __future__ import annotations

from jitgrad.eager.ops.activation import sigmoid as expit
from jitgrad.eager.ops.nn_ops import log_softmax, softmax
from jitgrad.eager.ops.pointwise import (
    erf,
    expm1,
    log1p,
    round,  # noqa: A004 - torch.special.round
)
from jitgrad.eager.ops.pointwise_math import (
    digamma,
    erfc,
    erfinv,
    exp2,
    i0,
    i1,
    logit,
    polygamma,
    sinc,
    xlogy,
)
from jitgrad.eager.ops.pointwise_math import lgamma as gammaln
from jitgrad.eager.ops.reduction import logsumexp

psi = digamma

__all__ = ["expit", "logit", "erf", "erfc", "erfinv", "exp2", "expm1", "log1p", "digamma",
           "psi", "gammaln", "polygamma", "i0", "i1", "sinc", "round", "xlogy", "logsumexp",
           "softmax", "log_softmax"]
