"""`Dropout` (torch.nn.Dropout; Srivastava et al. 2014)."""

from __future__ import annotations

from jitgrad.eager.tensor import Tensor
from jitgrad.nn import functional as F  # noqa: N812 - PyTorch's spelling
from jitgrad.nn.modules.module import Module


class Dropout(Module):
    """In training, zero each element with probability p and scale the rest by 1/(1-p).

    In eval mode (`module.eval()`) it returns its input unchanged.
    Raises ValueError unless 0 <= p <= 1.
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


__all__ = ["Dropout"]
