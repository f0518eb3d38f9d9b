"""`LayerNorm` (torch.nn.LayerNorm; Ba, Kiros & Hinton 2016)."""

from __future__ import annotations

from typing import Any

from jitgrad.eager.ops.creation import empty
from jitgrad.eager.tensor import Tensor
from jitgrad.nn import functional as F  # noqa: N812 - PyTorch's spelling
from jitgrad.nn import init
from jitgrad.nn.modules.module import Module
from jitgrad.nn.parameter import Parameter


class LayerNorm(Module):
    """Normalize over the trailing `normalized_shape` dims, then scale by weight and add bias.

    y = (x - mean) / sqrt(var + eps) * weight + bias, with the biased variance over the
    last len(normalized_shape) dims of x (shape (*, *normalized_shape)).
    weight starts at ones, bias at zeros; `elementwise_affine=False` has neither,
    `bias=False` keeps only weight.
    """

    def __init__(self, normalized_shape: int | tuple[int, ...] | list[int], eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, dtype=dtype))
            if bias:
                self.bias = Parameter(empty(self.normalized_shape, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """weight = 1, bias = 0."""
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


__all__ = ["LayerNorm"]
