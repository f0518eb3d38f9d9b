"""Gradient clipping (torch.nn.utils.clip_grad_norm_, clip_grad_value_, and the deprecated
clip_grad_norm).

Both scale or clamp each parameter's `.grad` in place, as PyTorch does under no_grad:
the gradient tensors keep their identity and get their versions bumped.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

import numpy as np

from jitgrad.eager.tensor import Tensor


def _grads(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    return [p._grad for p in params if p._grad is not None]


def _norm_order(norm_type: float | str) -> float:
    return float("inf") if norm_type in ("inf", "Inf") else float(norm_type)


def get_total_norm(tensors: Iterable[Tensor], norm_type: float | str = 2.0,
                   error_if_nonfinite: bool = False) -> Tensor:
    """The p-norm of all tensors taken together, as a 0-d tensor (0. when there are none).

    Dtype: the promoted dtype of the tensors. Raises RuntimeError for a NaN/inf norm when
    `error_if_nonfinite`.
    """
    order = _norm_order(norm_type)
    norms = [np.linalg.vector_norm(t._data, ord=order) for t in tensors]
    if not norms:
        return Tensor._make(np.array(0.0, np.float32))
    total = np.linalg.vector_norm(np.array(norms, dtype=np.result_type(*norms)), ord=order)
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(
            f"The total norm of order {order} for gradients from `parameters` is non-finite, "
            "so it cannot be clipped. To disable this error and scale the gradients by the "
            "non-finite norm anyway, set `error_if_nonfinite=False`")
    return Tensor._make(np.asarray(total))


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float,
                    norm_type: float | str = 2.0, error_if_nonfinite: bool = False) -> Tensor:
    """Scale all gradients together so that their total p-norm is at most `max_norm`.

    Every grad is multiplied by min(1, max_norm / (total + 1e-6)); parameters without a
    grad are skipped. Returns the total norm before clipping (0-d tensor, see
    `get_total_norm`); e.g. grad [3, 4] with max_norm=1 returns 5. and leaves [0.6, 0.8].
    Raises RuntimeError as `get_total_norm`.
    """
    grads = _grads(parameters)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    if grads:
        dtype = total._data.dtype.type
        coef = min(dtype(max_norm) / (total._data + dtype(1e-6)), dtype(1.0))
        for grad in grads:
            grad._data *= coef.astype(grad._data.dtype)
            grad._bump_version()
    return total


def clip_grad_norm(parameters: Tensor | Iterable[Tensor], max_norm: float,
                   norm_type: float | str = 2.0, error_if_nonfinite: bool = False) -> Tensor:
    """Deprecated `clip_grad_norm_` (FutureWarning, as PyTorch): the same clipping."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite)


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float) -> None:
    """Clamp every gradient elementwise into [-clip_value, clip_value], in place."""
    clip_value = float(clip_value)
    for grad in _grads(parameters):
        np.clip(grad._data, -clip_value, clip_value, out=grad._data)
        grad._bump_version()


__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm"]
