"""Activation modules (torch.nn.ReLU, GELU, ...): thin wrappers over `jitgrad.nn.functional`.

Each stores its options, calls the functional form in `forward`, and prints its options
the way PyTorch does (`GELU(approximate='none')`, `ReLU(inplace=True)`, `Tanh()`).
`inplace=True` (ReLU, LeakyReLU, SiLU, ELU, SELU, CELU, Threshold, Hardsigmoid, ...)
overwrites the input, as in PyTorch.
"""

from __future__ import annotations

from typing import Any

from jitgrad.eager.tensor import Tensor
from jitgrad.nn import functional as F  # noqa: N812 - PyTorch's spelling
from jitgrad.nn.modules.attention import MultiheadAttention  # torch keeps it here
from jitgrad.nn.modules.module import Module


def _inplace_repr(inplace: bool) -> str:
    return "inplace=True" if inplace else ""


class ReLU(Module):
    """max(x, 0) elementwise; any shape, dtype kept."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return input.relu_() if self.inplace else F.relu(input)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class LeakyReLU(Module):
    """x if x >= 0 else negative_slope * x, elementwise."""

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class GELU(Module):
    """x * Phi(x) elementwise; approximate='tanh' uses the tanh form (Hendrycks & Gimpel 2016)."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """x * sigmoid(x) elementwise (also called swish)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.silu(input, self.inplace)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class ELU(Module):
    """x if x > 0 else alpha * (exp(x) - 1), elementwise (Clevert et al. 2016)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Hardtanh(Module):
    """x clamped to [min_val, max_val] elementwise (gradient 0 outside, and at the bounds)."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return (f"min_val={self.min_val}, max_val={self.max_val}"
                + (", inplace=True" if self.inplace else ""))


class ReLU6(Module):
    """min(max(x, 0), 6) elementwise."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.relu6(input, self.inplace)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta elementwise; x itself where beta * x > threshold."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class LogSigmoid(Module):
    """log(sigmoid(x)) elementwise, computed stably."""

    def forward(self, input: Tensor) -> Tensor:
        return F.logsigmoid(input)


class Tanh(Module):
    """tanh elementwise."""

    def forward(self, input: Tensor) -> Tensor:
        return input.tanh()


class Sigmoid(Module):
    """1 / (1 + exp(-x)) elementwise."""

    def forward(self, input: Tensor) -> Tensor:
        return input.sigmoid()


class Softmax(Module):
    """exp(x) / sum(exp(x)) along `dim`; each slice along `dim` sums to 1."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """log(softmax(x)) along `dim`, computed stably (x - logsumexp(x))."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class _Elementwise(Module):
    """An activation without options other than PyTorch's `inplace` flag; subclasses name
    their `function(input, inplace)` of jitgrad.nn.functional."""

    function: Any

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return type(self).function(input, self.inplace)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class Hardsigmoid(_Elementwise):
    """relu6(x + 3) / 6 elementwise."""

    function = staticmethod(F.hardsigmoid)


class Hardswish(_Elementwise):
    """x relu6(x + 3) / 6 elementwise."""

    function = staticmethod(F.hardswish)


class Mish(_Elementwise):
    """x tanh(softplus(x)) elementwise."""

    function = staticmethod(F.mish)


class SELU(_Elementwise):
    """scale * elu(x, alpha) with the self-normalizing constants (Klambauer et al. 2017)."""

    function = staticmethod(F.selu)


class CELU(Module):
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1)) elementwise."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Threshold(Module):
    """x where x > threshold, else value, elementwise."""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return (f"threshold={self.threshold}, value={self.value}"
                + (", inplace=True" if self.inplace else ""))


class Softsign(Module):
    """x / (1 + |x|) elementwise."""

    def forward(self, input: Tensor) -> Tensor:
        return F.softsign(input)


class Tanhshrink(Module):
    """x - tanh(x) elementwise."""

    def forward(self, input: Tensor) -> Tensor:
        return F.tanhshrink(input)


class Hardshrink(Module):
    """x where |x| > lambd, else 0."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return F.hardshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    """x - lambd above lambd, x + lambd below -lambd, else 0."""

    def forward(self, input: Tensor) -> Tensor:
        return F.softshrink(input, self.lambd)


class Softmin(Softmax):
    """softmax(-x) along `dim`."""

    def forward(self, input: Tensor) -> Tensor:
        return F.softmin(input, self.dim)


class GLU(Module):
    """a * sigmoid(b) for the two halves a, b of the input along `dim`."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


__all__ = ["MultiheadAttention", "ReLU", "LeakyReLU", "GELU", "SiLU", "ELU", "Hardtanh",
           "ReLU6", "Softplus",
           "LogSigmoid", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Hardsigmoid", "Hardswish",
           "Mish", "SELU", "CELU", "Threshold", "Softsign", "Tanhshrink", "Hardshrink",
           "Softshrink", "Softmin", "GLU"]
