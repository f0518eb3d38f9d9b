"""Resampling, adaptive pooling, padding, channel dropout, PReLU and pixel (un)shuffle
modules (torch.nn's),
each a thin module over `jitgrad.nn.functional` (see jitgrad/nn/functional_sampling.py)."""

from __future__ import annotations

from typing import Any

from jitgrad.eager.ops.creation import full
from jitgrad.eager.tensor import Tensor
from jitgrad.nn import functional as F  # noqa: N812 - PyTorch's spelling
from jitgrad.nn.modules.module import Module
from jitgrad.nn.parameter import Parameter


class Upsample(Module):
    """F.interpolate with fixed size or scale_factor, mode and align_corners."""

    def __init__(self, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                 align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)

    def extra_repr(self) -> str:
        what = f"scale_factor={self.scale_factor}" if self.scale_factor is not None else \
            f"size={self.size}"
        return f"{what}, mode='{self.mode}'"


class UpsamplingNearest2d(Upsample):
    """Upsample with mode='nearest'."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, "nearest")


class UpsamplingBilinear2d(Upsample):
    """Upsample with mode='bilinear' and align_corners=True (as PyTorch's)."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, "bilinear", align_corners=True)


class _Adaptive(Module):
    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_Adaptive):
    """Mean over adaptive windows of the last dim."""

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool2d(_Adaptive):
    """Mean over adaptive windows of the last two dims."""

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(input, self.output_size)


class AdaptiveMaxPool1d(_Adaptive):
    """Max over adaptive windows of the last dim."""

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_max_pool1d(input, self.output_size)


class AdaptiveMaxPool2d(_Adaptive):
    """Max over adaptive windows of the last two dims."""

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_max_pool2d(input, self.output_size)


class _Pad(Module):
    """F.pad of the last `_dims` dims with a fixed mode."""

    _dims, _mode = 2, "constant"

    def __init__(self, padding: Any, value: float = 0.0) -> None:
        super().__init__()
        self.padding = (padding,) * (2 * self._dims) if isinstance(padding, int) else \
            tuple(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        if self._mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}" + (f", value={self.value}" if self._mode == "constant" else "")


class ConstantPad1d(_Pad):
    """Pad the last dim with `value`."""

    _dims = 1

    def __init__(self, padding: Any, value: float) -> None:
        super().__init__(padding, value)


class ConstantPad2d(_Pad):
    """Pad the last two dims with `value`."""

    def __init__(self, padding: Any, value: float) -> None:
        super().__init__(padding, value)


class ZeroPad1d(_Pad):
    """Pad the last dim with zeros."""

    _dims = 1


class ZeroPad2d(_Pad):
    """Pad the last two dims with zeros."""


class ReflectionPad1d(_Pad):
    """Pad the last dim by reflection (the edge is not repeated)."""

    _dims, _mode = 1, "reflect"


class ReflectionPad2d(_Pad):
    """Pad the last two dims by reflection (the edge is not repeated)."""

    _mode = "reflect"


class ReplicationPad1d(_Pad):
    """Pad the last dim by repeating its edge."""

    _dims, _mode = 1, "replicate"


class ReplicationPad2d(_Pad):
    """Pad the last two dims by repeating their edges."""

    _mode = "replicate"


class _ChannelDropout(Module):
    _spatial = 2

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input: Tensor) -> Tensor:
        dropout = F.dropout2d if self._spatial == 2 else F.dropout1d
        return dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_ChannelDropout):
    """Zero whole channels of (N, C, L) with probability p in training."""

    _spatial = 1


class Dropout2d(_ChannelDropout):
    """Zero whole channels of (N, C, H, W) with probability p in training."""


class PReLU(Module):
    """max(0, x) + a * min(0, x) with a learned `weight` (num_parameters,) = init."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.num_parameters = num_parameters
        self.weight = Parameter(full((num_parameters,), init, dtype=dtype))

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class PixelShuffle(Module):
    """F.pixel_shuffle: (*, C*r*r, H, W) -> (*, C, H*r, W*r)."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """F.pixel_unshuffle: (*, C, H*r, W*r) -> (*, C*r*r, H, W)."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


__all__ = ["PixelShuffle", "PixelUnshuffle", "Upsample", "UpsamplingNearest2d",
           "UpsamplingBilinear2d", "AdaptiveAvgPool1d",
           "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "ConstantPad1d",
           "ConstantPad2d", "ZeroPad1d", "ZeroPad2d", "ReflectionPad1d", "ReflectionPad2d",
           "ReplicationPad1d", "ReplicationPad2d", "Dropout1d", "Dropout2d", "PReLU"]
