"""Resampling, adaptive pooling, non-constant padding and channel dropout of
`jitgrad.nn.functional` (re-exported there: `F.interpolate`, `F.adaptive_avg_pool1d/2d`,
`F.adaptive_max_pool1d/2d`, `F.pad` modes, `F.dropout1d/2d`, `F.prelu`, `F.pixel_shuffle`,
`F.pixel_unshuffle`).

Each is a composite: every index it reads is computed from shapes alone, at call time,
so under `@jitgrad.compile` the indices are constants of the graph and gradients come from
index_select / narrow / mean / amax. Index rules follow PyTorch:

- interpolate "nearest": src = min(floor(dst * scale), in - 1) with scale = 1/scale_factor
  when a scale factor is given, else in/out; "linear"/"bilinear": per dim, src =
  dst * (in-1)/(out-1) with align_corners, else max((dst + 0.5) * scale - 0.5, 0), and the
  two neighbours floor(src), min(floor(src) + 1, in - 1) weighted by the fraction.
- adaptive pooling: output cell i covers [floor(i * in / out), ceil((i + 1) * in / out)).
- pad "reflect" mirrors without repeating the edge, "replicate" repeats it, "circular" wraps.
- pixel_shuffle (Shi et al. 2016, "Real-Time Single Image and Video Super-Resolution"):
  channel c*r*r + i*r + j of (*, C*r*r, H, W) goes to pixel (h*r + i, w*r + j) of channel c;
  pixel_unshuffle is its inverse. Both are a reshape, a permute and a reshape.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jitgrad.eager.ops import joining
from jitgrad.eager.ops.indexing import index_select
from jitgrad.eager.ops.random import dropout_mask
from jitgrad.eager.tensor import Tensor

_PAD_INDEX: dict[str, Callable[[np.ndarray, int], np.ndarray]] = {
    "reflect": lambda i, n: np.abs((i + (n - 1)) % (2 * n - 2) - (n - 1)) if n > 1 else 0 * i,
    "replicate": lambda i, n: np.clip(i, 0, n - 1),
    "circular": lambda i, n: i % n,
}


def _index(values: np.ndarray) -> Tensor:
    return Tensor._make(np.ascontiguousarray(values, dtype=np.int64))


def pad_indexed(input: Tensor, pairs: list[tuple[int, int]], mode: str) -> Tensor:
    """`input` padded by (before, after) pairs of its last dims, by `mode`'s index rule."""
    out = input
    first = input.ndim - len(pairs)
    for k, (before, after) in enumerate(pairs):
        dim, size = first + k, input.shape[first + k]
        if mode == "reflect" and max(before, after) >= size:
            raise RuntimeError(f"Argument #4: Padding size should be less than the "
                               f"corresponding input dimension, but got: padding ({before}, "
                               f"{after}) at dimension {dim} of input {list(input.shape)}")
        if mode == "circular" and max(before, after) > size:
            raise RuntimeError("Padding value causes wrapping around more than once.")
        positions = np.arange(-before, size + after)
        out = index_select(out, dim, _index(_PAD_INDEX[mode](positions, size)))
    return out


def _sizes(input: Tensor, size: Any, scale_factor: Any) -> tuple[list[int], list[float]]:
    """Output sizes and the source-per-destination scales of the spatial dims."""
    spatial = list(input.shape[2:])
    count = len(spatial)
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        out = [int(size)] * count if isinstance(size, int) else [int(s) for s in size]
        return out, [i / o for i, o in zip(spatial, out, strict=True)]
    factors = [float(scale_factor)] * count if isinstance(scale_factor, int | float) else \
        [float(f) for f in scale_factor]
    out = [math.floor(i * f) for i, f in zip(spatial, factors, strict=True)]
    return out, [1.0 / f for f in factors]


def _linear_along(x: Tensor, dim: int, out_size: int, scale: float,
                  align_corners: bool) -> Tensor:
    size = x.shape[dim]
    dst = np.arange(out_size, dtype=np.float64)
    if align_corners:
        src = dst * ((size - 1) / (out_size - 1)) if out_size > 1 else 0 * dst
    else:
        src = np.maximum((dst + 0.5) * scale - 0.5, 0.0)
    low = np.minimum(np.floor(src).astype(np.int64), size - 1)
    high = np.minimum(low + 1, size - 1)
    shape = [1] * x.ndim
    shape[dim] = out_size
    weight = Tensor._make((src - low).reshape(shape).astype(x._data.dtype))
    a, b = index_select(x, dim, _index(low)), index_select(x, dim, _index(high))
    return a + (b - a) * weight


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None,
                mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    """Resize the spatial dims of (N, C, *spatial): nearest, linear (1-D) or bilinear (2-D).

    Raises ValueError for both or neither of size and scale_factor, NotImplementedError
    for other modes and antialias.
    """
    if mode not in ("nearest", "linear", "bilinear") or antialias:
        raise NotImplementedError(f"interpolate: mode={mode!r} (antialias={antialias}) is not "
                                  "implemented by jitgrad; use 'nearest', 'linear' or "
                                  "'bilinear'")
    if mode == "nearest" and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    out_sizes, scales = _sizes(input, size, scale_factor)
    if recompute_scale_factor:
        scales = [i / o for i, o in zip(input.shape[2:], out_sizes, strict=True)]
    x = input
    for k, (out_size, scale) in enumerate(zip(out_sizes, scales, strict=True)):
        dim = 2 + k
        if mode == "nearest":
            src = np.minimum(np.floor(np.arange(out_size) * scale).astype(np.int64),
                             input.shape[dim] - 1)
            x = index_select(x, dim, _index(src))
        else:
            x = _linear_along(x, dim, out_size, scale, bool(align_corners))
    return x


def _adaptive(input: Tensor, output_size: Any, dims: int,
              reduce: Callable[[Tensor, int], Tensor]) -> Tensor:
    sizes = [output_size] * dims if isinstance(output_size, int | None) else list(output_size)
    x = input
    for k, out_size in enumerate(sizes):
        dim = input.ndim - dims + k
        n = input.shape[dim]
        out_size = n if out_size is None else int(out_size)
        starts = [(i * n) // out_size for i in range(out_size)]
        stops = [-(-(i + 1) * n // out_size) for i in range(out_size)]  # ceil division
        x = joining.cat([reduce(x.narrow(dim, a, b - a), dim)
                         for a, b in zip(starts, stops, strict=True)], dim)
    return x


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Mean over adaptive windows of the last two dims: (N, C, H, W) -> (N, C, oh, ow)."""
    return _adaptive(input, output_size, 2, lambda c, d: c.mean(d, keepdim=True))


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """Mean over adaptive windows of the last dim: (N, C, L) -> (N, C, ol)."""
    return _adaptive(input, output_size, 1, lambda c, d: c.mean(d, keepdim=True))


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Tensor:
    """Max over adaptive windows of the last two dims. Raises NotImplementedError for
    return_indices=True."""
    if return_indices:
        raise NotImplementedError("adaptive_max_pool2d: return_indices=True is not "
                                  "implemented by jitgrad")
    return _adaptive(input, output_size, 2, lambda c, d: c.amax(d, keepdim=True))


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Tensor:
    """Max over adaptive windows of the last dim."""
    if return_indices:
        raise NotImplementedError("adaptive_max_pool1d: return_indices=True is not "
                                  "implemented by jitgrad")
    return _adaptive(input, output_size, 1, lambda c, d: c.amax(d, keepdim=True))


def feature_dropout(input: Tensor, p: float, training: bool, inplace: bool,
                    batched: bool = True) -> Tensor:
    """PyTorch's feature dropout: zero each (dim 0, dim 1) slice of `input` with probability
    p, the same draw over all later dims, and scale the rest by 1/(1-p) (training only);
    `batched=False`: each dim-0 slice (an input without its batch dim). Raises ValueError
    unless 0 <= p <= 1."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    kept = 2 if batched else 1
    one_per_feature = input[(slice(None),) * kept + (slice(0, 1),) * (input.ndim - kept)]
    mask = one_per_feature * 0.0 if p == 1.0 else dropout_mask(one_per_feature, p)
    return input.mul_(mask) if inplace else input * mask


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Channel dropout of (N, C, L) or (C, L). Raises RuntimeError for other ranks."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D "
                           "input. Note that dropout1d exists to provide channel-wise dropout "
                           "on inputs with 1 spatial dimension, a channel dimension, and an "
                           "optional batch dimension (i.e. 2D or 3D inputs).")
    return feature_dropout(input, p, training, inplace, batched=input.ndim == 3)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Channel dropout of (N, C, H, W), as PyTorch's: each (n, c) plane zeroed together.
    PyTorch's own rule for other ranks is kept, with its warnings: a 3-D input is read as
    (N, C, L) (not as an unbatched (C, H, W)), and a 2-D one is dropped element-wise."""
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is "
                      "deprecated and will result in an error in a future release. To retain "
                      "the behavior and silence this warning, please use dropout instead. Note "
                      "that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      "spatial dimensions, a channel dimension, and an optional batch "
                      "dimension (i.e. 3D or 4D inputs).", UserWarning, stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that "
                      "channel-wise 1D dropout behavior is desired - input is interpreted as "
                      "shape (N, C, L), where C is the channel dim. This behavior will change "
                      "in a future release to interpret the input as one without a batch "
                      "dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise "
                      "dropout behavior, please switch to using dropout1d instead.",
                      UserWarning, stacklevel=2)
    return feature_dropout(input, p, training, inplace)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """x where x > 0, else weight * x; weight (1,) or one per channel (dim 1). The gradient
    at 0 is weight's, as PyTorch's."""
    if weight.numel() > 1:
        weight = weight.reshape((1, -1) + (1,) * (input.ndim - 2)) if input.ndim > 1 else weight
    return input.where(input > 0, input * weight)


def _check_factor(name: str, kind: str, input: Tensor, factor: int) -> None:
    if input.ndim < 3:
        raise RuntimeError(f"{name} expects input to have at least 3 dimensions, but got input "
                           f"with {input.ndim} dimension(s)")
    if factor <= 0:
        raise RuntimeError(f"{name} expects a positive {kind}, but got {factor}")


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r) for r = upscale_factor.

    Raises RuntimeError for fewer than 3 dims, r <= 0, or channels not divisible by r*r.
    """
    r = int(upscale_factor)
    _check_factor("pixel_shuffle", "upscale_factor", input, r)
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    n = len(batch)
    split = input.reshape(*batch, c // (r * r), r, r, h, w)
    order = (*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return split.permute(order).reshape(*batch, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W) for r = downscale_factor, pixel_shuffle's inverse.

    Raises RuntimeError for fewer than 3 dims, r <= 0, or H, W not divisible by r.
    """
    r = int(downscale_factor)
    _check_factor("pixel_unshuffle", "downscale_factor", input, r)
    *batch, c, h, w = input.shape
    for what, size, dim in (("height", h, -2), ("width", w, -1)):
        if size % r:
            raise RuntimeError(f"pixel_unshuffle expects {what} to be divisible by "
                               f"downscale_factor, but input.size({dim})={size} is not "
                               f"divisible by {r}")
    n = len(batch)
    split = input.reshape(*batch, c, h // r, r, w // r, r)
    order = (*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return split.permute(order).reshape(*batch, c * r * r, h // r, w // r)


def pad_pairs(pad: Sequence[int], ndim: int) -> list[tuple[int, int]]:
    """F.pad's flat (left, right, top, bottom, ...) as (before, after) pairs of the last dims,
    in dim order. Raises RuntimeError for an odd count or more pairs than dims."""
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > ndim:
        raise RuntimeError(f"Padding length must be divisible by 2 and at most twice the number "
                           f"of dims ({ndim}), got {len(pad)}")
    return [(pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)][::-1]


__all__ = ["interpolate", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "dropout1d", "dropout2d", "prelu", "pixel_shuffle",
           "pixel_unshuffle"]
