"""`Conv2d` (torch.nn.Conv2d): a learned 2-D cross-correlation."""

from __future__ import annotations

from typing import Any

from jitgrad.eager.ops.creation import empty
from jitgrad.eager.tensor import Tensor
from jitgrad.nn import functional as F  # noqa: N812 - PyTorch's spelling
from jitgrad.nn.functional_conv import _pair
from jitgrad.nn.modules.linear import reset_weight_and_bias
from jitgrad.nn.modules.module import Module
from jitgrad.nn.parameter import Parameter


class Conv2d(Module):
    """(N, in_channels, H, W) -> (N, out_channels, OH, OW) with F.conv2d.

    weight: (out_channels, in_channels, kh, kw), bias: (out_channels,) or None, both
    drawn as PyTorch does (kaiming_uniform_(a=sqrt(5)); bias U(-1/sqrt(fan_in),
    1/sqrt(fan_in)) with fan_in = in_channels * kh * kw).
    Raises NotImplementedError for groups > 1 or padding_mode other than 'zeros'.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if groups != 1 or padding_mode != "zeros":
            raise NotImplementedError(f"Conv2d: jitgrad implements groups=1 with "
                                      f"padding_mode='zeros' only (got groups={groups}, "
                                      f"padding_mode={padding_mode!r})")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride = _pair(stride, "stride")
        self.padding = padding if isinstance(padding, str) else _pair(padding, "padding")
        self.dilation = _pair(dilation, "dilation")
        self.groups = groups
        self.padding_mode = padding_mode
        self.weight = Parameter(empty(out_channels, in_channels, *self.kernel_size, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraw weight and bias from PyTorch's default distribution."""
        reset_weight_and_bias(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding,
                        self.dilation, self.groups)

    def extra_repr(self) -> str:
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding != (0, 0):
            text += f", padding={self.padding}"
        if self.dilation != (1, 1):
            text += f", dilation={self.dilation}"
        if self.bias is None:
            text += ", bias=False"
        return text


__all__ = ["Conv2d"]
