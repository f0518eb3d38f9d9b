"""Convolution and pooling of `jitgrad.nn.functional` (re-exported there: `F.conv1d`,
`F.conv2d`, `F.conv_transpose1d`, `F.conv_transpose2d`, `F.max_pool2d`, `F.avg_pool2d`).

Both read the input's sliding windows with the `unfold2d` op (jitgrad/eager/ops/conv.py):
convolution is one matrix product of the windows (N*OH*OW, C*kh*kw) with the weight
(O, C*kh*kw), pooling a max or mean over each window. Gradients come from those ops
(the windows' gradient is added back where each window was read). Output sizes follow
PyTorch: OH = floor((H + 2 ph - dh (kh - 1) - 1) / sh) + 1 (ceil with ceil_mode).
"""

from __future__ import annotations

import math
from typing import Any

from jitgrad.eager.ops import joining, nn_ops
from jitgrad.eager.ops.conv import unfold2d
from jitgrad.eager.tensor import Tensor

Pair = tuple[int, int]


def _pair(value: Any, name: str) -> Pair:
    if isinstance(value, int):
        return (value, value)
    pair = tuple(int(v) for v in value)
    if len(pair) == 1:
        return (pair[0], pair[0])
    if len(pair) != 2:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of 2 "
                           f"values to match the convolution dimensions, but got {name}={value}")
    return pair


def _pad(input: Tensor, rows: Pair, cols: Pair, value: float) -> Tensor:
    """input padded by rows (top, bottom) and cols (left, right) with `value`."""
    if not any(rows + cols):
        return input
    widths = ((0, 0), (0, 0), rows, cols)
    return nn_ops.pad_constant(input, widths, value)


def _batched(input: Tensor, name: str) -> tuple[Tensor, bool]:
    """(4-D input, whether it was an unbatched 3-D one). Raises RuntimeError otherwise."""
    if input.ndim == 3:
        return input.unsqueeze(0), True
    if input.ndim != 4:
        raise RuntimeError(f"{name}: expected 3-D (unbatched) or 4-D (batched) input, but got "
                           f"input of size: {list(input.shape)}")
    return input, False


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """2-D cross-correlation: input (N, C, H, W) or (C, H, W), weight (O, C/groups, kh, kw),
    bias (O,) -> (N, O, OH, OW) (contiguous), in the inputs' dtype.

    padding: int, pair, "valid" (0) or "same" (stride 1; extra row/column at the end
    when the total padding is odd, as PyTorch). With groups > 1 the channels split into
    `groups` independent convolutions whose outputs are concatenated.
    Raises RuntimeError for mismatched channels or shapes, a kernel larger than the
    padded input, or padding="same" with stride > 1.
    """
    x, unbatched = _batched(input, "conv2d")
    if weight.ndim != 4:
        raise RuntimeError(f"conv2d: expected a 4-D weight (out_channels, in_channels, kh, kw), "
                           f"got size {list(weight.shape)}")
    out_channels, group_in, kh, kw = weight.shape
    if x.shape[1] != group_in * groups or out_channels % groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, "
                           f"expected input{list(x.shape)} to have {group_in * groups} "
                           f"channels, but got {x.shape[1]} channels instead")
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    rows, cols = _conv_padding(padding, (kh, kw), stride, dilation)
    padded = _pad(x, rows, cols, 0.0)
    group_out = out_channels // groups
    outs = [_dense_conv(padded[:, g * group_in:(g + 1) * group_in],
                        weight[g * group_out:(g + 1) * group_out], stride, dilation)
            for g in range(groups)]
    out = outs[0] if groups == 1 else joining.cat(outs, 1)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)
    return out.squeeze(0) if unbatched else out


def _dense_conv(x: Tensor, weight: Tensor, stride: Pair, dilation: Pair) -> Tensor:
    """One matrix product of x's windows (N*OH*OW, C*kh*kw) with weight (O, C*kh*kw)."""
    out_channels, in_channels, kh, kw = weight.shape
    patches = unfold2d(x, (kh, kw), stride, dilation)
    n, oh, ow = patches.shape[:3]
    out = patches.reshape(n * oh * ow, in_channels * kh * kw) @ \
        weight.reshape(out_channels, in_channels * kh * kw).t()
    return out.reshape(n, oh, ow, out_channels).permute(0, 3, 1, 2).contiguous()


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-D cross-correlation: input (N, C, L) or (C, L), weight (O, C/groups, k), bias (O,)
    -> (N, O, OL): conv2d over a height-1 image (same padding and error rules)."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"conv1d: expected 2-D (unbatched) or 3-D (batched) input, but got "
                           f"input of size: {list(input.shape)}")
    if weight.ndim != 3:
        raise RuntimeError(f"conv1d: expected a 3-D weight (out_channels, in_channels, k), "
                           f"got size {list(weight.shape)}")
    pad = padding if isinstance(padding, str) else (0, _single(padding, "padding"))
    out = conv2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias,
                 (1, _single(stride, "stride")), pad, (1, _single(dilation, "dilation")), groups)
    return out.squeeze(-2)


def _single(value: Any, name: str) -> int:
    if isinstance(value, int):
        return value
    values = tuple(int(v) for v in value)
    if len(values) != 1:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of 1 value "
                           f"to match the convolution dimensions, but got {name}={value}")
    return values[0]


def _interleave_zeros(x: Tensor, dim: int, stride: int) -> Tensor:
    """x with stride-1 zeros between neighbours along `dim` (size n -> (n-1)*stride+1)."""
    if stride == 1:
        return x
    size = x.shape[dim]
    spread = nn_ops.pad_constant(x.unsqueeze(dim + 1),
                                 tuple((0, stride - 1) if d == dim + 1 else (0, 0)
                                       for d in range(x.ndim + 1)), 0.0)
    merged = spread.reshape(*x.shape[:dim], size * stride, *x.shape[dim + 1:])
    return merged.narrow(dim, 0, (size - 1) * stride + 1)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                     groups: int = 1, dilation: Any = 1) -> Tensor:
    """The transpose (input gradient) of conv2d: input (N, C, H, W) or (C, H, W), weight
    (C, O/groups, kh, kw), bias (O,) -> (N, O, OH, OW) with
    OH = (H - 1) sh - 2 ph + dh (kh - 1) + output_padding_h + 1.

    Computed as conv2d of the input spread by `stride` (zeros between pixels), padded by
    dh (kh - 1) - ph (+ output_padding at the end), with the kernel flipped and its
    channel axes swapped. Raises RuntimeError when output_padding is not smaller than
    stride or dilation, or when channels do not match.
    """
    x, unbatched = _batched(input, "conv_transpose2d")
    in_channels, group_out, kh, kw = weight.shape
    if x.shape[1] != in_channels or in_channels % groups:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected "
                           f"input{list(x.shape)} to have {in_channels} channels, but got "
                           f"{x.shape[1]} channels instead")
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    pad, extra = _pair(padding, "padding"), _pair(output_padding, "output_padding")
    for e, s, d in zip(extra, stride, dilation, strict=True):
        if e >= max(s, d):
            raise RuntimeError("output padding must be smaller than either stride or dilation, "
                               f"but got output_padding={extra}, stride={stride}, "
                               f"dilation={dilation}")
    spread = _interleave_zeros(_interleave_zeros(x, 2, stride[0]), 3, stride[1])
    edges = [(d * (k - 1) - p, d * (k - 1) - p + e)
             for k, p, d, e in zip((kh, kw), pad, dilation, extra, strict=True)]
    spread = _crop(spread, edges)
    rows, cols = ((max(lo, 0), max(hi, 0)) for lo, hi in edges)
    group_in = in_channels // groups
    kernel = weight.flip((2, 3)).reshape(groups, group_in, group_out, kh, kw) \
        .transpose(1, 2).reshape(groups * group_out, group_in, kh, kw)
    out = conv2d(_pad(spread, rows, cols, 0.0), kernel, bias, 1, 0, dilation, groups)
    return out.squeeze(0) if unbatched else out


def _crop(x: Tensor, edges: list[tuple[int, int]]) -> Tensor:
    """x with -lo/-hi rows and columns cut where an edge's padding is negative."""
    for dim, (lo, hi) in zip((2, 3), edges, strict=True):
        start, stop = max(-lo, 0), x.shape[dim] - max(-hi, 0)
        if start or stop != x.shape[dim]:
            x = x.narrow(dim, start, stop - start)
    return x


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                     groups: int = 1, dilation: Any = 1) -> Tensor:
    """conv_transpose2d over a height-1 image: input (N, C, L) or (C, L), weight
    (C, O/groups, k) -> (N, O, OL)."""
    out = conv_transpose2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias,
                           (1, _single(stride, "stride")), (0, _single(padding, "padding")),
                           (0, _single(output_padding, "output_padding")), groups,
                           (1, _single(dilation, "dilation")))
    return out.squeeze(-2)


def _conv_padding(padding: Any, kernel: Pair, stride: Pair, dilation: Pair) -> tuple[Pair, Pair]:
    """((top, bottom), (left, right)) zero padding for conv2d's `padding` argument."""
    if padding == "valid":
        return (0, 0), (0, 0)
    if padding == "same":
        if stride != (1, 1):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        return tuple((t // 2, t - t // 2) for t in totals)  # type: ignore[return-value]
    if isinstance(padding, str):
        raise ValueError(f"Invalid padding string '{padding}', should be one of "
                         "{'valid', 'same'}")
    ph, pw = _pair(padding, "padding")
    return (ph, ph), (pw, pw)


def _pool_windows(input: Tensor, name: str, kernel_size: Any, stride: Any, padding: Any,
                  dilation: Any, ceil_mode: bool, fill: float) -> tuple[Tensor, bool]:
    """Windows (N, OH, OW, C, kh*kw) of the padded input, and whether it was unbatched."""
    x, unbatched = _batched(input, name)
    kernel = _pair(kernel_size, "kernel_size")
    stride = kernel if stride is None or stride == [] else _pair(stride, "stride")
    pad, dilation = _pair(padding, "padding"), _pair(dilation, "dilation")
    for p, k in zip(pad, kernel, strict=True):
        if p > k // 2:
            raise RuntimeError(f"{name}: pad should be at most half of effective kernel size, "
                               f"but got pad={p}, kernel_size={k}")
    extra = [0, 0]
    if ceil_mode:  # a last window that starts inside the input may hang over its end
        for d in range(2):
            size = x.shape[2 + d] + 2 * pad[d]
            span = dilation[d] * (kernel[d] - 1) + 1
            windows = math.ceil((size - span) / stride[d]) + 1
            if (windows - 1) * stride[d] >= x.shape[2 + d] + pad[d]:
                windows -= 1
            extra[d] = max(0, (windows - 1) * stride[d] + span - size)
    padded = _pad(x, (pad[0], pad[0] + extra[0]), (pad[1], pad[1] + extra[1]), fill)
    windows = unfold2d(padded, kernel, stride, dilation)
    n, oh, ow, c = windows.shape[:4]
    return windows.reshape(n, oh, ow, c, kernel[0] * kernel[1]), unbatched


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Tensor:
    """Max over each kh x kw window: (N, C, H, W) or (C, H, W) -> (N, C, OH, OW).

    stride defaults to kernel_size; padding counts as -inf. The gradient goes to the
    first maximal element of each window (row-major), as PyTorch's CPU kernel.
    Raises RuntimeError for padding above half the kernel; NotImplementedError for
    return_indices=True.
    """
    return _max_pool(input, "max_pool2d", kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def _max_pool(input: Tensor, name: str, kernel_size: Any, stride: Any, padding: Any,
              dilation: Any, ceil_mode: bool, return_indices: bool) -> Tensor:
    if return_indices:
        raise NotImplementedError(f"{name}: return_indices=True is not implemented by "
                                  "jitgrad; take the max without indices")
    windows, unbatched = _pool_windows(input, name, kernel_size, stride, padding, dilation,
                                       ceil_mode, -math.inf)
    out = windows.max(-1).values.permute(0, 3, 1, 2).contiguous()
    return out.squeeze(0) if unbatched else out


def _as_image_row(input: Tensor, name: str) -> Tensor:
    """(N, C, L) or (C, L) as a height-1 image (N, C, 1, L) / (C, 1, L) for the 2-D pools."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{name}: Expected 2D or 3D (batch mode) tensor with optional 0 dim "
                           f"batch size for input, but got:{list(input.shape)}")
    return input.unsqueeze(-2)


def _row_args(kernel_size: Any, stride: Any, padding: Any, dilation: Any) -> tuple:
    """The 1-D pool arguments as (1, k) pairs (padding (0, p)); stride None stays None."""
    kernel = _single(kernel_size, "kernel_size")
    step = None if stride is None or stride == [] else (1, _single(stride, "stride"))
    return (1, kernel), step, (0, _single(padding, "padding")), (1, _single(dilation, "dilation"))


def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Tensor:
    """Max over each window of k: (N, C, L) or (C, L) -> (N, C, OL); max_pool2d's rules over
    a height-1 image (stride defaults to kernel_size, padding counts as -inf)."""
    kernel, step, pad, dil = _row_args(kernel_size, stride, padding, dilation)
    out = _max_pool(_as_image_row(input, "max_pool1d"), "max_pool1d", kernel, step or kernel,
                    pad, dil, ceil_mode, return_indices)
    return out.squeeze(-2)


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    """Mean over each window of k: (N, C, L) or (C, L) -> (N, C, OL); avg_pool2d's rules
    (and its NotImplementedError cases) over a height-1 image."""
    kernel, step, pad, _ = _row_args(kernel_size, stride, padding, 1)
    out = _avg_pool(_as_image_row(input, "avg_pool1d"), "avg_pool1d", kernel, step or kernel,
                    pad, ceil_mode, count_include_pad, None)
    return out.squeeze(-2)


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """Mean over each kh x kw window: (N, C, H, W) or (C, H, W) -> (N, C, OH, OW).

    Zero padding counts in the mean (count_include_pad=True, PyTorch's default).
    Raises NotImplementedError for count_include_pad=False with padding, ceil_mode or
    divisor_override (not implemented by jitgrad).
    """
    return _avg_pool(input, "avg_pool2d", kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def _avg_pool(input: Tensor, name: str, kernel_size: Any, stride: Any, padding: Any,
              ceil_mode: bool, count_include_pad: bool, divisor_override: int | None) -> Tensor:
    if ceil_mode or divisor_override is not None or (
            not count_include_pad and _pair(padding, "padding") != (0, 0)):
        raise NotImplementedError(f"{name}: jitgrad implements the default mean only "
                                  "(ceil_mode=False, count_include_pad=True, no "
                                  "divisor_override)")
    windows, unbatched = _pool_windows(input, name, kernel_size, stride, padding, 1, False, 0.0)
    out = windows.mean(-1).permute(0, 3, 1, 2).contiguous()
    return out.squeeze(0) if unbatched else out


__all__ = ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "max_pool2d",
           "avg_pool2d", "max_pool1d", "avg_pool1d"]
