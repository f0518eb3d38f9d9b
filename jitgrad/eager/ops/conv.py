"""Sliding windows over the last two dims (`unfold2d`, im2col) and their adjoint
(`fold2d`, col2im): the two ops convolution and pooling are built from.

`unfold2d(x, kernel, stride, dilation)` turns x (N, C, H, W) into the windows
(N, OH, OW, C, kh, kw), a contiguous copy, so that
    conv2d(x, w) = unfold2d(x).reshape(N*OH*OW, C*kh*kw) @ w.reshape(O, C*kh*kw).T
and max_pool2d is a max over the last two dims (jitgrad/nn/functional.py). The gradient
of unfold2d adds every window's gradient back at the positions it was read from, which
is fold2d; the gradient of fold2d reads the windows again, which is unfold2d. Each
formula uses only `xp.unfold2d` / `xp.fold2d`, so create_graph and the compiler see them
as ops. Sizes: OH = (H - dh (kh - 1) - 1) // sh + 1, likewise OW (no padding here:
callers pad first). The array kernels (`unfold_forward`, `fold_forward`) are in
jitgrad/eager/xp.py, which the numpy namespace of the formulas shares.
"""

from __future__ import annotations

from typing import Any

from jitgrad.eager.ops.registry import TensorMeta, apply_op, register
from jitgrad.eager.tensor import Tensor
from jitgrad.eager.xp import Pair, fold_forward, output_size, unfold_forward


def _unfold_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    p = ctx.params
    return (xp.fold2d(g, ctx.input_metadata[0][0], p["kernel"], p["stride"], p["dilation"]),)


def _fold_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    p = ctx.params
    return (xp.unfold2d(g, p["kernel"], p["stride"], p["dilation"]),)


def _unfold_meta(x: TensorMeta, kernel: Pair, stride: Pair, dilation: Pair) -> TensorMeta:
    n, c, h, w = x.shape
    oh = output_size(h, kernel[0], stride[0], dilation[0])
    ow = output_size(w, kernel[1], stride[1], dilation[1])
    return TensorMeta((n, oh, ow, c, kernel[0], kernel[1]), x.dtype)


def _fold_meta(patches: TensorMeta, shape: tuple[int, ...], kernel: Pair, stride: Pair,
               dilation: Pair) -> TensorMeta:
    return TensorMeta(tuple(shape), patches.dtype)


UNFOLD2D = register("unfold2d", unfold_forward, _unfold_backward, meta=_unfold_meta,
                    source="adjoint of reading windows: add each window's gradient back "
                           "where it was read (col2im)")
FOLD2D = register("fold2d", fold_forward, _fold_backward, meta=_fold_meta,
                  source="adjoint of the window sum: read the windows of g (im2col)")


def unfold2d(input: Tensor, kernel: Pair, stride: Pair = (1, 1),
             dilation: Pair = (1, 1)) -> Tensor:
    """Windows of input (N, C, H, W) -> (N, OH, OW, C, kh, kw), a contiguous copy.

    Raises RuntimeError when input is not 4-D or the kernel does not fit.
    """
    x = input._data
    if x.ndim != 4:
        raise RuntimeError(f"unfold2d: expected a 4-D (N, C, H, W) input, got shape "
                           f"{tuple(x.shape)}")
    for d, name in ((0, "height"), (1, "width")):
        if output_size(x.shape[2 + d], kernel[d], stride[d], dilation[d]) < 1:
            span = dilation[d] * (kernel[d] - 1) + 1
            raise RuntimeError(f"Calculated output size is too small: the kernel spans {span} "
                               f"along the {name} but the (padded) input has "
                               f"{x.shape[2 + d]} (input shape {tuple(x.shape)}); use a "
                               "smaller kernel or more padding")
    return apply_op(UNFOLD2D, (input,), (x,),
                    {"kernel": tuple(kernel), "stride": tuple(stride), "dilation": tuple(dilation)})


def fold2d(patches: Tensor, shape: tuple[int, ...], kernel: Pair, stride: Pair = (1, 1),
           dilation: Pair = (1, 1)) -> Tensor:
    """Sum windows (N, OH, OW, C, kh, kw) back into zeros of `shape` (N, C, H, W)."""
    return apply_op(FOLD2D, (patches,), (patches._data,),
                    {"shape": tuple(shape), "kernel": tuple(kernel), "stride": tuple(stride),
                     "dilation": tuple(dilation)})


__all__: list[str] = []
METHODS: dict[str, Any] = {}
