"""`Conv1d`, `Conv2d`, `ConvTranspose1d`, `ConvTranspose2d` (torch.nn's): learned
cross-correlations and their transposes, over jitgrad.nn.functional_conv.

Weights carry PyTorch's shapes, so state_dicts load both ways: (out, in/groups, *kernel)
for a convolution, (in, out/groups, *kernel) for a transposed one, drawn as PyTorch does
(kaiming_uniform_(a=sqrt(5)) over fan_in = weight.shape[1] * kernel size; bias
U(-1/sqrt(fan_in), 1/sqrt(fan_in))).
"""

from __future__ import annotations

from typing import Any

from jitgrad.eager.ops.creation import empty
from jitgrad.eager.tensor import Tensor
from jitgrad.nn import functional as F  # noqa: N812 - PyTorch's spelling
from jitgrad.nn.functional_conv import _pair, _single
from jitgrad.nn.modules.linear import reset_weight_and_bias
from jitgrad.nn.modules.module import Module
from jitgrad.nn.parameter import Parameter


class _ConvNd(Module):
    """What every convolution module shares: checked options, weight, bias, repr."""

    _dims = 2
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any,
                 padding: Any, dilation: Any, groups: int, bias: bool, padding_mode: str,
                 output_padding: Any = 0, dtype: Any = None) -> None:
        super().__init__()
        name = type(self).__name__
        if padding_mode != "zeros":
            raise NotImplementedError(f"{name}: jitgrad implements padding_mode='zeros' only "
                                      f"(got padding_mode={padding_mode!r}); pad with F.pad")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{'in' if in_channels % groups else 'out'}_channels must be "
                             "divisible by groups")
        size = _pair if self._dims == 2 else (lambda v, n: (_single(v, n),))
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = size(kernel_size, "kernel_size"), size(stride, "stride")
        self.padding = padding if isinstance(padding, str) else size(padding, "padding")
        self.dilation = size(dilation, "dilation")
        self.output_padding = size(output_padding, "output_padding")
        self.padding_mode = padding_mode
        shape = (in_channels, out_channels // groups) if self._transposed else \
            (out_channels, in_channels // groups)
        self.weight = Parameter(empty(*shape, *self.kernel_size, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraw weight and bias from PyTorch's default distribution."""
        reset_weight_and_bias(self.weight, self.bias)

    def extra_repr(self) -> str:
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        zeros = (0,) * self._dims
        if self.padding != zeros:
            text += f", padding={self.padding}"
        if self.dilation != (1,) * self._dims:
            text += f", dilation={self.dilation}"
        if self.output_padding != zeros:
            text += f", output_padding={self.output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        return text


class _Conv(_ConvNd):
    """The public constructor of Conv1d and Conv2d (PyTorch's signature)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, dtype=dtype)


class _ConvTranspose(_ConvNd):
    """The public constructor of ConvTranspose1d and ConvTranspose2d (PyTorch's signature:
    output_padding before groups, dilation after bias)."""

    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, groups: int = 1, bias: bool = True,
                 dilation: Any = 1, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, output_padding, dtype)


class Conv1d(_Conv):
    """(N, in_channels, L) -> (N, out_channels, OL) with F.conv1d."""

    _dims = 1

    def forward(self, input: Tensor) -> Tensor:
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding,
                        self.dilation, self.groups)


class Conv2d(_Conv):
    """(N, in_channels, H, W) -> (N, out_channels, OH, OW) with F.conv2d."""

    def forward(self, input: Tensor) -> Tensor:
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding,
                        self.dilation, self.groups)


class ConvTranspose1d(_ConvTranspose):
    """(N, in_channels, L) -> (N, out_channels, OL) with F.conv_transpose1d."""

    _dims = 1

    def forward(self, input: Tensor) -> Tensor:
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)


class ConvTranspose2d(_ConvTranspose):
    """(N, in_channels, H, W) -> (N, out_channels, OH, OW) with F.conv_transpose2d."""

    def forward(self, input: Tensor) -> Tensor:
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)


__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"]
