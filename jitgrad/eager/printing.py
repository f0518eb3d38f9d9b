"""`repr(tensor)` in PyTorch's layout, and `set_printoptions`.

The algorithm is torch/_tensor_str.py's, run on the numpy array: one `Formatter` per
tensor picks a common width and a mode from the nonzero finite values (integer-valued
floats print as `1.`; scientific notation when max/min > 1000, max > 1e8 or min < 1e-4);
rows wrap at `linewidth`; beyond `threshold` elements only `edgeitems` rows/values at each
end are shown around `...`; suffixes (`dtype=`, `grad_fn=`, `requires_grad=True`) follow
the values, on a new line when they would pass `linewidth`. jitgrad prints its own names:
`dtype=jitgrad.float64`, `grad_fn=<MulBackward>`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from jitgrad.eager import dtypes

if TYPE_CHECKING:
    from jitgrad.eager.tensor import Tensor


@dataclasses.dataclass
class PrintOptions:
    """The options `set_printoptions` changes (PyTorch's defaults)."""

    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


PRINT_OPTS = PrintOptions()

_PROFILES: dict[str, dict[str, float]] = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80},
}


def set_printoptions(precision: int | None = None, threshold: float | None = None,
                     edgeitems: int | None = None, linewidth: int | None = None,
                     profile: str | None = None, sci_mode: bool | None = None) -> None:
    """Set how tensors print (as `torch.set_printoptions`).

    precision: digits after the point (4); threshold: element count above which the
    output is summarized (1000); edgeitems: items kept at each end when summarizing (3);
    linewidth: characters per line (80); profile: "default", "short" or "full" sets the
    four first; sci_mode: True/False forces scientific notation on/off, None chooses.
    Raises ValueError for an unknown profile.
    """
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"unknown print profile {profile!r}; expected one of "
                             f"{', '.join(_PROFILES)}")
        for name, value in _PROFILES[profile].items():
            setattr(PRINT_OPTS, name, value)
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions() -> dict[str, Any]:
    """The current print options, as keyword arguments for `set_printoptions`."""
    return dataclasses.asdict(PRINT_OPTS)


class Formatter:
    """Formats every element of one tensor with a common width (torch's `_Formatter`)."""

    def __init__(self, values: np.ndarray) -> None:
        self.floating = values.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        if not self.floating:
            for value in values.reshape(-1).tolist():
                self.max_width = max(self.max_width, len(f"{value}"))
            return
        flat = values.reshape(-1)
        nonzero_finite = flat[np.isfinite(flat) & (flat != 0)].astype(np.float64)
        if nonzero_finite.size == 0:
            return
        magnitudes = np.abs(nonzero_finite)
        low, high = float(magnitudes.min()), float(magnitudes.max())
        self.int_mode = bool(np.all(nonzero_finite == np.ceil(nonzero_finite)))
        if PRINT_OPTS.sci_mode is None:
            self.sci_mode = high / low > 1000.0 or high > 1.0e8 or low < 1.0e-4
        else:
            self.sci_mode = PRINT_OPTS.sci_mode
        precision = PRINT_OPTS.precision
        for value in nonzero_finite.tolist():
            if self.sci_mode:
                width = len(f"{value:.{precision}e}")
            elif self.int_mode:
                width = len(f"{value:.0f}") + 1  # the "." that marks a float
            else:
                width = len(f"{value:.{precision}f}")
            self.max_width = max(self.max_width, width)

    def format(self, value: Any) -> str:
        if self.floating:
            if self.sci_mode:
                text = f"{value:{self.max_width}.{PRINT_OPTS.precision}e}"
            elif self.int_mode:
                text = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    text += "."
            else:
                text = f"{value:.{PRINT_OPTS.precision}f}"
        else:
            text = f"{value}"
        return (self.max_width - len(text)) * " " + text


def _summarize(array: np.ndarray) -> bool:
    return array.size > PRINT_OPTS.threshold


def _summarized_data(array: np.ndarray) -> np.ndarray:
    """The elements that are shown when summarizing (the formatter sees only these)."""
    if array.ndim == 0:
        return array
    edge = PRINT_OPTS.edgeitems
    if array.ndim == 1:
        if array.shape[0] > 2 * edge:
            return np.concatenate((array[:edge], array[-edge:]))
        return array
    if not edge:
        return array[(slice(0, 0),) * array.ndim]
    rows = list(range(array.shape[0]))
    if array.shape[0] > 2 * edge:
        rows = rows[:edge] + rows[-edge:]
    return np.stack([_summarized_data(array[i]) for i in rows])


def _vector_str(array: np.ndarray, indent: int, summarize: bool, formatter: Formatter) -> str:
    element_length = formatter.max_width + 2  # ", " between elements
    per_line = max(1, math.floor((PRINT_OPTS.linewidth - indent) / element_length))
    edge = PRINT_OPTS.edgeitems
    if summarize and not edge:
        data = ["..."]
    elif summarize and array.shape[0] > 2 * edge:
        data = ([formatter.format(v) for v in array[:edge].tolist()] + [" ..."]
                + [formatter.format(v) for v in array[-edge:].tolist()])
    else:
        data = [formatter.format(v) for v in array.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _array_str(array: np.ndarray, indent: int, summarize: bool, formatter: Formatter) -> str:
    if array.ndim == 0:
        return formatter.format(array.item())
    if array.ndim == 1:
        return _vector_str(array, indent, summarize, formatter)
    edge = PRINT_OPTS.edgeitems
    if summarize and array.shape[0] > 2 * edge:
        slices = ([_array_str(array[i], indent + 1, summarize, formatter) for i in range(edge)]
                  + ["..."]
                  + [_array_str(array[i], indent + 1, summarize, formatter)
                     for i in range(array.shape[0] - edge, array.shape[0])])
    else:
        slices = [_array_str(array[i], indent + 1, summarize, formatter)
                  for i in range(array.shape[0])]
    return "[" + ("," + "\n" * (array.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def array_str(array: np.ndarray, indent: int) -> str:
    """The bracketed values of `array` as PyTorch prints them, continuation lines indented."""
    if array.size == 0:
        return "[]"
    summarize = _summarize(array)
    formatter = Formatter(_summarized_data(array) if summarize else array)
    return _array_str(array, indent, summarize, formatter)


def _add_suffixes(text: str, suffixes: list[str], indent: int) -> str:
    parts = [text]
    last_line_length = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_length + len(suffix) + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_length = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_length += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t: Tensor, prefix: str = "tensor(") -> str:
    """PyTorch-style repr: `tensor([1., 2.], requires_grad=True)`.

    Suffixes: `size=` for empty tensors that are not 1-D; `dtype=` unless the dtype is
    the default float dtype, int64 or bool (empty tensors: unless the default float);
    `grad_fn=<Name>` or `requires_grad=True`.
    """
    data = t._data
    indent = len(prefix)
    suffixes = []
    dtype = dtypes.from_numpy_dtype(data.dtype)
    default = dtypes.get_default_dtype()
    if data.size == 0:
        if data.ndim != 1:
            suffixes.append(f"size={tuple(data.shape)}")
        if dtype is not default:
            suffixes.append(f"dtype={dtype!r}")
        body = "[]"
    else:
        if not PRINT_OPTS.edgeitems:
            suffixes.append(f"size={tuple(data.shape)}")
        if dtype not in (default, dtypes.int64, dtypes.bool_):
            suffixes.append(f"dtype={dtype!r}")
        body = array_str(data, indent)
    grad_fn = t.grad_fn
    if grad_fn is not None:
        suffixes.append(f"grad_fn=<{grad_fn.name()}>")
    elif t._requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)


__all__ = ["set_printoptions", "get_printoptions"]
METHODS = {"__repr__": tensor_repr}
