"""Row kernels for softmax, log_softmax and layer_norm over the last dim (float32/float64).

Note [Row kernels]: these ops reduce along the last dim of a C-contiguous input and then
write every element of the row, so each kernel walks one row at a time while it sits in
cache: a max (or mean) pass, a pass that accumulates exp(x - max) (or the squared
deviations), and a pass that writes the row. The forms are the stable ones of the eager
forwards in jitgrad/eager/ops/nn_ops.py: softmax and log_softmax subtract the row max
(an all -inf row gives NaN, as eager and PyTorch), layer_norm centres the row before
squaring (two-pass variance, biased, eps inside the sqrt). log_softmax stores x - max
first and subtracts log(sum) in a second loop, so fastmath's reassociation cannot fold
the two subtractions into x - (max + log(sum)), which loses digits for rows of large
values. Sums are accumulated in the input dtype (vectorized partial sums; float32 stays
within ~1e-6 relative of eager's pairwise numpy sums at these row lengths).

The kernels are one module per dtype (the template names mathlib's exp/log for it),
written through the kernel cache (Note [Kernel cache]: the file name hashes the code and
mathlib.py's source, so a changed math library is a new compile, never a stale one).
The wrapper (`RowKernel.__call__`) allocates the output with numpy; above
PARALLEL_THRESHOLD elements, with more than one numba thread, a `prange` variant shares
the rows out. A call the kernels do not cover (another dim, a non-contiguous or integer
input, a weight of another dtype, an input requiring grad with grad mode on) runs the
eager op instead, so a RowKernel is always correct where its OpDef is.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

import numpy as np

from jitgrad.codegen import cache
from jitgrad.codegen.kernels import FASTMATH, PARALLEL_THRESHOLD
from jitgrad.eager.grad_mode import STATE
from jitgrad.eager.ops.registry import OPS, OpDef
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.graph import Node

ROW_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})

_TEMPLATE = '''\
import math

import numpy as np
from numba import config as numba_config
from numba import njit, prange

from jitgrad.codegen import mathlib

FASTMATH = {fastmath}
OPTIONS = dict(cache=True, error_model="numpy", fastmath=FASTMATH, nogil=True)
THREADS = numba_config.NUMBA_NUM_THREADS
_row = njit(inline="always", error_model="numpy", fastmath=FASTMATH)


@_row
def _row_max(x):
    # numpy's maximum.reduce: a NaN anywhere makes the max NaN
    m = x[0]
    for j in range(1, x.shape[0]):
        v = x[j]
        m = v if (v > m or v != v) else m
    return m


@_row
def _softmax_row(x, out):
    m = _row_max(x)
    s = np.{dtype}(0.0)
    for j in range(x.shape[0]):
        e = mathlib.exp_{suffix}(x[j] - m)
        out[j] = e
        s += e
    r = np.{dtype}(1.0) / s  # s is in [1, n] or NaN, so no reciprocal edge cases
    for j in range(x.shape[0]):
        out[j] = out[j] * r


@_row
def _log_softmax_row(x, out):
    m = _row_max(x)
    s = np.{dtype}(0.0)
    for j in range(x.shape[0]):
        d = x[j] - m
        out[j] = d
        s += mathlib.exp_{suffix}(d)
    log_sum = mathlib.log_{suffix}(s)
    for j in range(x.shape[0]):  # a second loop: see Note [Row kernels]
        out[j] = out[j] - log_sum


@_row
def _layer_norm_row(x, weight, bias, has_weight, has_bias, eps, out):
    n = x.shape[0]
    s = np.{dtype}(0.0)
    for j in range(n):
        s += x[j]
    mean = s / np.{dtype}(n)
    q = np.{dtype}(0.0)
    for j in range(n):
        c = x[j] - mean
        q += c * c
    rstd = np.{dtype}(1.0) / math.sqrt(q / np.{dtype}(n) + eps)
    for j in range(n):
        v = (x[j] - mean) * rstd
        if has_weight:
            v = v * weight[j]
        if has_bias:
            v = v + bias[j]
        out[j] = v


@njit(**OPTIONS)
def softmax(x, out):
    for i in range(x.shape[0]):
        _softmax_row(x[i], out[i])


@njit(**OPTIONS, parallel=True)
def softmax_parallel(x, out):
    for i in prange(x.shape[0]):
        _softmax_row(x[i], out[i])


@njit(**OPTIONS)
def log_softmax(x, out):
    for i in range(x.shape[0]):
        _log_softmax_row(x[i], out[i])


@njit(**OPTIONS, parallel=True)
def log_softmax_parallel(x, out):
    for i in prange(x.shape[0]):
        _log_softmax_row(x[i], out[i])


@njit(**OPTIONS)
def layer_norm(x, weight, bias, has_weight, has_bias, eps, out):
    for i in range(x.shape[0]):
        _layer_norm_row(x[i], weight, bias, has_weight, has_bias, eps, out[i])


@njit(**OPTIONS, parallel=True)
def layer_norm_parallel(x, weight, bias, has_weight, has_bias, eps, out):
    for i in prange(x.shape[0]):
        _layer_norm_row(x[i], weight, bias, has_weight, has_bias, eps, out[i])
'''


def row_kernel_source(dtype: np.dtype) -> str:
    """The kernel module for `dtype` (float32 or float64): see Note [Row kernels].

    It defines softmax(x, out), log_softmax(x, out) and layer_norm(x, weight, bias,
    has_weight, has_bias, eps, out), each with a `_parallel` twin; x and out are
    C-contiguous (rows, n) arrays of `dtype`, weight and bias (n,) arrays (any length
    when the flag says absent), eps a float of `dtype`.
    """
    assert dtype in ROW_DTYPES, f"row kernels are float32/float64, not {dtype}"
    suffix = {"float32": "f32", "float64": "f64"}[dtype.name]
    fastmath = "{" + ", ".join(repr(f) for f in FASTMATH) + "}"
    return _TEMPLATE.format(dtype=dtype.name, suffix=suffix, fastmath=fastmath)


@functools.cache
def row_kernel_module(dtype: np.dtype) -> ModuleType:
    """The imported kernel module for `dtype` (written to the kernel cache once)."""
    header = f"# jitgrad row kernels (softmax, log_softmax, layer_norm) in {dtype.name}\n"
    return cache.load_kernel_module(cache.write_kernel(header, row_kernel_source(dtype)))


class RowKernel:
    """A wrapper-graph callee running `op` (softmax, log_softmax or layer_norm) on the row
    kernels; it takes the OpDef's arguments (`(x, dims=...)` or `(x, weight, bias,
    normalized_ndim=..., eps=...)`) and returns a Tensor of x's shape and dtype.

    Calls the kernels do not cover run `op` eagerly (see Note [Row kernels]).
    """

    def __init__(self, op: OpDef) -> None:
        self.op = op
        self.__name__ = f"row_{op.name}"  # the wrapper's generated code names its callees

    def __call__(self, x: Any, *operands: Any, **params: Any) -> Tensor:
        rows = self._rows(x, operands, params)
        if rows is None:
            return self.op(x, *operands, **params)
        data = x._data
        out = np.empty(data.shape, data.dtype)
        if data.size:
            n = data.size // rows
            self._launch(data.reshape(rows, n), operands, params, out.reshape(rows, n))
        return Tensor._make(out)

    def _rows(self, x: Any, operands: tuple, params: dict) -> int | None:
        """The number of rows the kernel sees, or None when this call stays eager."""
        if not isinstance(x, Tensor) or (x.requires_grad and STATE.enabled):
            return None
        data = x._data
        if data.dtype not in ROW_DTYPES or not data.flags.c_contiguous or data.ndim == 0:
            return None
        if self.op.name == "layer_norm":
            if not all(_kernel_operand(t, data.dtype) for t in operands if t is not None):
                return None
            row = int(np.prod(data.shape[data.ndim - params["normalized_ndim"]:],
                              dtype=np.int64))
            return data.size // row if row else None
        if params["dims"] != (data.ndim - 1,):
            return None
        return data.size // data.shape[-1] if data.shape[-1] else None

    def _launch(self, x: np.ndarray, operands: tuple, params: dict, out: np.ndarray) -> None:
        module = row_kernel_module(x.dtype)
        parallel = x.size >= PARALLEL_THRESHOLD and x.shape[0] > 1 and module.THREADS > 1
        name = self.op.name + ("_parallel" if parallel else "")
        kernel = getattr(module, name)
        if self.op.name != "layer_norm":
            kernel(x, out)
            return
        weight, bias = operands
        absent = np.zeros(1, x.dtype)
        kernel(x, absent if weight is None else weight._data.reshape(-1),
               absent if bias is None else bias._data.reshape(-1),
               weight is not None, bias is not None, x.dtype.type(params["eps"]), out)


def _kernel_operand(t: Any, dtype: np.dtype) -> bool:
    """Whether weight/bias `t` can be read by the kernel as a flat array of `dtype`."""
    return isinstance(t, Tensor) and t._data.dtype == dtype and t._data.flags.c_contiguous \
        and not (t.requires_grad and STATE.enabled)


ROW_OPS = ("softmax", "log_softmax", "layer_norm")
_ROW_KERNELS = {OPS[name]: RowKernel(OPS[name]) for name in ROW_OPS}


def row_kernel_for(node: Node) -> RowKernel | None:
    """The RowKernel replacing graph node `node` in the wrapper, or None to keep its OpDef.

    Chosen when the node's recorded output (meta "val") is float32/float64 and, for
    softmax/log_softmax, the reduced dim is the last one; layout is checked per call.
    """
    kernel = _ROW_KERNELS.get(node.target) if node.op == "call_function" else None
    if kernel is None:
        return None
    val = node.meta.get("val")
    if not isinstance(val, Tensor) or val.dtype.np not in ROW_DTYPES or val.ndim == 0:
        return None
    if kernel.op.name != "layer_norm" and node.kwargs.get("dims") != (val.ndim - 1,):
        return None
    return kernel
