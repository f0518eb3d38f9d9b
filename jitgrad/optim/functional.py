"""The optimizer updates as functions of parameter, gradient and state tensors
(torch.optim's functional `sgd`/`adam`), shared by eager steps and compiled ones.

`sgd(...)`, `adam(...)` and `rmsprop(...)` update their tensors in place. Each
per-parameter formula (`sgd_values`, `adam_values`, `rmsprop_values`) is written once
against an array namespace, like backward formulas (jitgrad/eager/xp.py): on real tensors
it runs on their numpy arrays (`NUMPY`, the fast eager path: no dispatch, no autograd), on
the compiler's traced tensors it runs as tensor ops (`TENSOR`), which the tracer records
into the step's graph and the numba backend fuses into a kernel per parameter. See Note
[Compiled optimizer step] in jitgrad/optim/optimizer.py.

Values follow PyTorch's single-tensor CPU path op by op, including its fused multiply-adds
(`fma`), so eager steps match torch bit for bit on float32 (tests/optim/test_optim.py) and
compiled steps match eager.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from jitgrad.eager.tensor import Tensor
from jitgrad.eager.xp import NUMPY, TENSOR


def is_traced(tensor: Tensor) -> bool:
    """True for the compiler's stand-in of a tensor while a compiled function is traced
    (its FakeTensor class says so); False for every real tensor."""
    # a real tensor's data is almost always a plain ndarray: answered without the failing
    # attribute lookup
    return type(tensor._data) is not np.ndarray and getattr(tensor, "_jitgrad_fake", False)


def fma(x: Any, y: Any, z: Any) -> Any:
    """x * y + z rounded once, as the fused multiply-adds of PyTorch's CPU kernels.

    torch computes `add(y, alpha=x)`, `lerp` and `addcmul` this way (measured against torch
    2.13: bit-identical on float32, where plain numpy differs in ~10% of elements). A
    Python-float `x` is first rounded to z's dtype, as torch converts scalars. For float32
    the product of two float32 numbers is exact in float64, so one float64 multiply-add
    rounded to float32 reproduces the FMA. y and z are numpy arrays (x an array or a
    number) or tensors (x a tensor or a number); float64 operands are computed directly.
    """
    if isinstance(z, np.ndarray):
        if z.dtype != np.float32:
            return x * y + z
        x64: Any = (np.float64(np.float32(x)) if isinstance(x, (int, float))
                    else x.astype(np.float64))
        return (x64 * y + z).astype(np.float32)
    if z._data.dtype != np.float32:
        return x * y + z
    if isinstance(x, (int, float)):
        x64 = float(np.float32(x))
    elif x._weak_scalar:  # a Python number that is a graph input: rounded the same way
        x64 = TENSOR.cast(TENSOR.cast(x, np.float32), np.float64)
    else:
        x64 = TENSOR.cast(x, np.float64)
    return TENSOR.cast(x64 * TENSOR.cast(y, np.float64) + TENSOR.cast(z, np.float64), np.float32)


# ----- SGD ----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, slots=True)
class SGDOptions:
    """SGD's hyperparameters for one group (read once per step, not per parameter)."""

    lr: float
    momentum: float
    dampening: float
    weight_decay: float
    nesterov: bool
    maximize: bool


def sgd_values(xp: Any, param: Any, grad: Any, buffer: Any,
               o: SGDOptions) -> tuple[Any, Any]:
    """(new param, new momentum buffer or None) of one SGD step; see `SGD`'s docstring.

    buffer: the momentum buffer, None on the first step (it starts as a copy of g).
    """
    g = -grad if o.maximize else grad
    if o.weight_decay != 0:
        g = fma(o.weight_decay, param, g)
    new_buffer = None
    if o.momentum != 0:
        if buffer is None:
            new_buffer = xp.clone(g)
        else:
            new_buffer = fma(1 - o.dampening, g, buffer * o.momentum)
        g = fma(o.momentum, new_buffer, g) if o.nesterov else new_buffer
    return fma(-o.lr, g, param), new_buffer


def sgd(params: list[Tensor], grads: list[Tensor], momentum_buffers: list[Tensor | None], *,
        lr: float, momentum: float, dampening: float, weight_decay: float, nesterov: bool,
        maximize: bool) -> list[Tensor | None]:
    """SGD on every parameter, in place; returns the momentum buffers, new ones where
    `momentum_buffers` held None (the first step), all None without momentum.

    momentum_buffers: one per parameter (None: no buffer yet, or no momentum).
    """
    o = SGDOptions(lr, momentum, dampening, weight_decay, nesterov, maximize)
    buffers = []
    for param, grad, buffer in zip(params, grads, momentum_buffers, strict=True):
        if is_traced(param):
            new_param, new_buffer = sgd_values(TENSOR, param, grad, buffer, o)
            param.copy_(new_param)
            if buffer is not None:
                buffer.copy_(new_buffer)
            buffers.append(new_buffer if buffer is None else buffer)
            continue
        new_param, new_buffer = sgd_values(NUMPY, param._data, grad._data,
                                           None if buffer is None else buffer._data, o)
        param._data[...] = new_param
        param._bump_version()
        if buffer is not None:
            buffer._data[...] = new_buffer
            buffer._bump_version()
        elif new_buffer is not None:
            buffer = Tensor._make(new_buffer)
        buffers.append(buffer)
    return buffers


# ----- Adam / AdamW ---------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, slots=True)
class AdamOptions:
    """Adam's hyperparameters for one group (decoupled: AdamW's weight decay)."""

    beta1: float
    beta2: float
    lr: float
    eps: float
    weight_decay: float
    decoupled: bool
    amsgrad: bool
    maximize: bool


def adam_values(xp: Any, param: Any, grad: Any, exp_avg: Any, exp_avg_sq: Any,
                max_exp_avg_sq: Any, step: Any, o: AdamOptions) -> tuple[Any, Any, Any, Any]:
    """(param, exp_avg, exp_avg_sq, max_exp_avg_sq or None) after one Adam step; see `Adam`.

    step: the step count including this step, a Python float (eager) or a float64 0-d
    tensor (traced, so the count is a graph input and not a constant of the graph).
    """
    beta1, beta2, lr = o.beta1, o.beta2, o.lr
    g = -grad if o.maximize else grad
    p = param
    if o.weight_decay != 0:
        if o.decoupled:
            p = p * (1 - lr * o.weight_decay)
        else:
            g = fma(o.weight_decay, p, g)
    exp_avg = fma(1 - beta1, g - exp_avg, exp_avg)  # exp_avg.lerp_(g, 1 - beta1)
    exp_avg_sq = fma((1 - beta2) * g, g, exp_avg_sq * beta2)  # mul_, addcmul_
    step_size = lr / (1 - beta1 ** step)
    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
    if o.amsgrad:
        max_exp_avg_sq = xp.maximum(max_exp_avg_sq, exp_avg_sq)
        denom = xp.sqrt(max_exp_avg_sq) / bias_correction2_sqrt + o.eps
    else:
        denom = xp.sqrt(exp_avg_sq) / bias_correction2_sqrt + o.eps
    p = p + (-step_size * exp_avg) / denom  # addcdiv_(exp_avg, denom, value=-step_size)
    return p, exp_avg, exp_avg_sq, max_exp_avg_sq


def adam(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor],
         exp_avg_sqs: list[Tensor], max_exp_avg_sqs: list[Tensor], state_steps: list[Tensor],
         *, beta1: float, beta2: float, lr: float, eps: float, weight_decay: float,
         decoupled: bool, amsgrad: bool, maximize: bool) -> None:
    """Adam (AdamW with `decoupled`) on every parameter, in place: parameters, moments and
    the float32 0-d step counters. max_exp_avg_sqs: one per parameter with amsgrad, else
    empty."""
    o = AdamOptions(beta1, beta2, lr, eps, weight_decay, decoupled, amsgrad, maximize)
    maxes = max_exp_avg_sqs if amsgrad else [None] * len(params)
    for param, grad, exp_avg, exp_avg_sq, max_sq, step_t in zip(
            params, grads, exp_avgs, exp_avg_sqs, maxes, state_steps, strict=True):
        if is_traced(param):
            step_t.add_(1)
            values = adam_values(TENSOR, param, grad, exp_avg, exp_avg_sq, max_sq,
                                 TENSOR.cast(step_t, np.float64), o)
            _copy_values((param, exp_avg, exp_avg_sq, max_sq), values)
            continue
        _increment(step_t)
        values = adam_values(NUMPY, param._data, grad._data, exp_avg._data, exp_avg_sq._data,
                             None if max_sq is None else max_sq._data, float(step_t._data), o)
        _write_arrays((param, exp_avg, exp_avg_sq, max_sq), values)


# ----- RMSprop ----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, slots=True)
class RMSpropOptions:
    """RMSprop's hyperparameters for one group."""

    lr: float
    alpha: float
    eps: float
    weight_decay: float
    momentum: float
    centered: bool
    maximize: bool


def rmsprop_values(xp: Any, param: Any, grad: Any, square_avg: Any, grad_avg: Any,
                   buffer: Any, o: RMSpropOptions) -> tuple[Any, Any, Any, Any]:
    """(param, square_avg, grad_avg or None, momentum buffer or None) after one RMSprop
    step; see `RMSprop`'s docstring."""
    alpha = o.alpha
    g = -grad if o.maximize else grad
    if o.weight_decay != 0:
        g = fma(o.weight_decay, param, g)
    square_avg = fma((1 - alpha) * g, g, square_avg * alpha)  # mul_, addcmul_
    if o.centered:
        grad_avg = fma(1 - alpha, g - grad_avg, grad_avg)  # lerp_(g, 1 - alpha)
        avg = xp.sqrt(fma(-grad_avg, grad_avg, square_avg)) + o.eps
    else:
        avg = xp.sqrt(square_avg) + o.eps
    if o.momentum > 0:
        buffer = buffer * o.momentum + g / avg  # mul_, addcdiv_
        return fma(-o.lr, buffer, param), square_avg, grad_avg, buffer  # add_(buf, alpha=-lr)
    return param + (-o.lr * g) / avg, square_avg, grad_avg, buffer  # addcdiv_(g, avg, value=-lr)


def rmsprop(params: list[Tensor], grads: list[Tensor], square_avgs: list[Tensor],
            grad_avgs: list[Tensor], momentum_buffers: list[Tensor], state_steps: list[Tensor],
            *, lr: float, alpha: float, eps: float, weight_decay: float, momentum: float,
            centered: bool, maximize: bool) -> None:
    """RMSprop on every parameter, in place: parameters, averages, buffers, step counters.
    grad_avgs: one per parameter when centered, else empty; momentum_buffers: one per
    parameter when momentum > 0, else empty."""
    o = RMSpropOptions(lr, alpha, eps, weight_decay, momentum, centered, maximize)
    none = [None] * len(params)
    for param, grad, square_avg, grad_avg, buffer, step_t in zip(
            params, grads, square_avgs, grad_avgs if centered else none,
            momentum_buffers if momentum > 0 else none, state_steps, strict=True):
        tensors = (param, square_avg, grad_avg, buffer)
        if is_traced(param):
            step_t.add_(1)
            _copy_values(tensors, rmsprop_values(TENSOR, param, grad, square_avg, grad_avg,
                                                 buffer, o))
            continue
        _increment(step_t)
        values = rmsprop_values(NUMPY, param._data, grad._data, square_avg._data,
                                None if grad_avg is None else grad_avg._data,
                                None if buffer is None else buffer._data, o)
        _write_arrays(tensors, values)


def _increment(step_t: Tensor) -> None:
    """step_t += 1 on a real float32 0-d step counter."""
    if type(step_t._data) is np.ndarray:
        step_t._data[...] += 1
    else:  # a numpy scalar, as some 0-d op results (e.g. a compiled step's counter) are
        step_t._data = np.array(step_t._data + 1, dtype=step_t._data.dtype)
    step_t._bump_version()


def _write_arrays(tensors: tuple, values: tuple) -> None:
    """Each real tensor (None: absent state) takes its new array in place."""
    for tensor, value in zip(tensors, values, strict=True):
        if tensor is not None:
            tensor._data[...] = value
            tensor._bump_version()


def _copy_values(tensors: tuple, values: tuple) -> None:
    """Each traced tensor (None: absent state) takes its new value (functionalized)."""
    for tensor, value in zip(tensors, values, strict=True):
        if tensor is not None:
            tensor.copy_(value)


__all__ = ["sgd", "adam", "rmsprop"]
