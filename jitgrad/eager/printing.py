"""`repr(tensor)` in PyTorch's layout: `tensor([1., 2.], requires_grad=True)`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from jitgrad.eager import dtypes

if TYPE_CHECKING:
    from jitgrad.eager.tensor import Tensor

_IMPLIED_DTYPES = ("float32", "int64", "bool")


def _format_array(data: np.ndarray, indent: int) -> str:
    if data.dtype.kind == "f":
        finite = data[np.isfinite(data)]
        integral = finite.size == 0 or bool(np.all(finite == np.round(finite)))
        large = finite.size > 0 and (np.abs(finite).max() >= 1e8 or
                                     0 < np.abs(finite[finite != 0]).min(initial=1) < 1e-4)
        if integral and not large:
            formatter = {"float_kind": lambda v: _float_integral(v)}
        elif large:
            formatter = {"float_kind": lambda v: f"{v:.4e}"}
        else:
            formatter = {"float_kind": lambda v: f"{v:.4f}"}
        return np.array2string(data, separator=", ", prefix=" " * indent, formatter=formatter,
                               threshold=1000, edgeitems=3)
    return np.array2string(data, separator=", ", prefix=" " * indent, threshold=1000, edgeitems=3)


def _float_integral(v: float) -> str:
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.0f}."


def tensor_repr(t: Tensor, prefix: str = "tensor(") -> str:
    """PyTorch-style repr: values (4 decimals), then dtype/grad_fn/requires_grad suffixes."""
    data = t._data
    if data.size == 0:
        body = f"[], size={tuple(data.shape)}" if data.ndim > 1 else "[]"
    else:
        body = _format_array(data, len(prefix))
    suffix = []
    name = dtypes.from_numpy_dtype(data.dtype).name
    if name not in _IMPLIED_DTYPES or (name == "float32" and dtypes.get_default_dtype().name != name):
        suffix.append(f"dtype=jitgrad.{name}")
    if t._grad_fn is not None:
        suffix.append(f"grad_fn=<{t._grad_fn.name()}>")
    elif t._requires_grad:
        suffix.append("requires_grad=True")
    return prefix + ", ".join([body] + suffix) + ")"
