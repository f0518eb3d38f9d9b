"""Comparing a compiled value with eager's: the tolerance model of check mode.

Note [Check tolerance]: a compiled value `c` and eager's value `o` of the same graph node
must have the same structure (tuple length, None-ness), shape and dtype. Integers and
booleans must be equal. Floats must have NaN at the same positions and the same ±inf at
the same positions; on the finite elements the error is measured in one of two tiers:
- tier 1 (every call, cheap): max|c - o| <= ULPS ulps of the value's magnitude, where the
  magnitude is max|o| or, when larger, the largest input of the node (`scale`: a sum
  that cancels to 0, an FMA-contracted `a * b - c`, is judged against what went in);
- tier 2 (only when tier 1 fails): `r`, the same graph run in float64 from the same
  inputs, decides. Compiled code may round differently from numpy (a math-library ulp,
  float64 accumulators, contraction), so it passes when its own error against float64
  is at most MULTIPLIER times eager's plus ULPS ulps: max|c - r| <= MULTIPLIER *
  max|o - r| + ULPS * eps * max(magnitude, max|r|). This is the rule of
  torch._dynamo.utils.same with an fp64_ref (there on the RMSE, here on the max error).
An injected 1e-4 relative error (800 float32 ulps) fails both tiers. Limits: an integer
computed from rounded floats (an argmax over a near-tie, `x > 0.5` at the boundary) may
legitimately differ and is reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from jitgrad.eager.tensor import Tensor

ULPS = 16
MULTIPLIER = 4.0
FLOAT64 = np.dtype(np.float64)


@dataclass(frozen=True)
class Difference:
    """How a compiled value differs from eager's.

    what: "structure", "dtype", "shape", "nan", "inf" or "value"; detail: one line for
    the report; max_abs/max_rel: the largest absolute and relative error against eager
    over the finite elements (NaN when not a numeric difference); index: where the
    largest absolute error is.
    """

    what: str
    detail: str
    max_abs: float = float("nan")
    max_rel: float = float("nan")
    index: tuple[int, ...] = ()


def as_array(value: Any) -> np.ndarray | None:
    """The ndarray of a Tensor or a Python/numpy number; None for anything else."""
    if isinstance(value, Tensor):
        return value._data
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return np.asarray(value)
    return None


def magnitude(value: Any) -> float:
    """max|x| over the finite elements of a float value (0.0 for others), nested too."""
    if isinstance(value, (tuple, list)):
        return max((magnitude(v) for v in value), default=0.0)
    array = as_array(value)
    if array is None or array.dtype.kind != "f" or array.size == 0:
        return 0.0
    finite = np.abs(array[np.isfinite(array)])
    return float(finite.max()) if finite.size else 0.0


def to_float64(value: Any) -> Any:
    """`value` with every floating Tensor in it cast to float64 (for the reference run)."""
    if isinstance(value, Tensor) and value._data.dtype.kind == "f":
        return Tensor._make(value._data.astype(np.float64))
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(to_float64(v) for v in value)
    if isinstance(value, list):
        return [to_float64(v) for v in value]
    return value


def compare(compiled: Any, eager: Any, reference: Any = None,
            scale: float = 0.0) -> Difference | None:
    """None when `compiled` matches `eager` (Note [Check tolerance]), else the Difference.

    reference: the float64 run's value of the same node (tier 2), or None for tier 1
    only; scale: the magnitude of the node's inputs.
    """
    if isinstance(eager, (tuple, list)) or isinstance(compiled, (tuple, list)):
        return _compare_sequences(compiled, eager, reference, scale)
    if (compiled is None) != (eager is None):
        return Difference("structure", f"compiled {_kind(compiled)}, eager {_kind(eager)}")
    c, o = as_array(compiled), as_array(eager)
    if c is None or o is None:
        same = compiled is eager or compiled == eager
        return None if same else Difference("structure", f"compiled {compiled!r}, eager "
                                                         f"{eager!r}")
    if isinstance(compiled, Tensor) != isinstance(eager, Tensor):
        return Difference("structure", f"compiled {_kind(compiled)}, eager {_kind(eager)}")
    if c.dtype != o.dtype:
        return Difference("dtype", f"dtype: compiled {c.dtype}, eager {o.dtype}")
    if c.shape != o.shape:
        return Difference("shape", f"shape: compiled {list(c.shape)}, eager {list(o.shape)}")
    if c.dtype.kind != "f":
        return _compare_exact(c, o)
    return _compare_floats(c, o, as_array(reference), scale)


def _kind(value: Any) -> str:
    if isinstance(value, Tensor):
        return f"a tensor {list(value.shape)}"
    return "None" if value is None else type(value).__name__


def _compare_sequences(compiled: Any, eager: Any, reference: Any,
                       scale: float) -> Difference | None:
    if not (isinstance(compiled, (tuple, list)) and isinstance(eager, (tuple, list))
            and len(compiled) == len(eager)):
        return Difference("structure", f"compiled {_kind(compiled)}, eager {_kind(eager)}")
    references = reference if isinstance(reference, (tuple, list)) else [None] * len(eager)
    for c, o, r in zip(compiled, eager, references, strict=True):
        difference = compare(c, o, r, scale)
        if difference is not None:
            return difference
    return None


def _compare_exact(c: np.ndarray, o: np.ndarray) -> Difference | None:
    unequal = c != o
    if not unequal.any():
        return None
    index = _index(np.argmax(unequal), c.shape)
    return Difference("value", f"{int(unequal.sum())} of {c.size} element(s) differ; first "
                      f"at {_at(c, o, index)}", index=index)


def _compare_floats(c: np.ndarray, o: np.ndarray, r: np.ndarray | None,
                    scale: float) -> Difference | None:
    for what, mask_of in (("nan", np.isnan), ("inf", np.isinf)):
        c_mask, o_mask = mask_of(c), mask_of(o)
        unequal = (c_mask != o_mask) | (c_mask & o_mask & (c != o) if what == "inf" else False)
        if np.any(unequal):
            index = _index(np.argmax(unequal), c.shape)
            return Difference(what, f"{what.upper() if what == 'nan' else what} at different "
                              f"positions: first at {_at(c, o, index)}", index=index)
    finite = np.isfinite(c) & np.isfinite(o)
    error = np.where(finite, np.abs(c.astype(np.float64) - o.astype(np.float64)), 0.0)
    max_abs = float(error.max()) if error.size else 0.0
    eps = float(np.finfo(c.dtype).eps)
    size = max(magnitude(Tensor._make(o)), scale)
    allowed = ULPS * eps * size
    if max_abs <= allowed:
        return None
    against = f"allowed {allowed:.3g} without a float64 reference"
    if r is not None and r.shape == c.shape:
        c_error, allowed = _reference_errors(c, o, r, finite, eps, size)
        if c_error <= allowed:
            return None
        against = f"against float64: compiled {c_error:.3g}, allowed {allowed:.3g}"
    index = _index(int(np.argmax(error)), c.shape)
    nonzero = finite & (o != 0)
    relative = np.where(nonzero, error / np.where(nonzero, np.abs(o), 1.0), 0.0)
    max_rel = float(relative.max()) if relative.size else 0.0
    return Difference("value", f"max abs error {max_abs:.3g}, max rel error {max_rel:.3g} at "
                      f"{_at(c, o, index)} ({against})", max_abs, max_rel, index)


def _reference_errors(c: np.ndarray, o: np.ndarray, r: np.ndarray, finite: np.ndarray,
                      eps: float, size: float) -> tuple[float, float]:
    """Tier 2 of Note [Check tolerance]: compiled's max error against float64, and the
    error allowed."""
    usable = finite & np.isfinite(r)
    r64 = r.astype(np.float64)
    c_error = np.where(usable, np.abs(c.astype(np.float64) - r64), 0.0)
    o_error = np.where(usable, np.abs(o.astype(np.float64) - r64), 0.0)
    size = max(size, magnitude(Tensor._make(r64)))
    allowed = MULTIPLIER * float(o_error.max(initial=0.0)) + ULPS * eps * size
    return float(c_error.max(initial=0.0)), allowed


def _at(c: np.ndarray, o: np.ndarray, index: tuple[int, ...]) -> str:
    """`[2, 3]: compiled 1.0001, eager 1`: one element of both values."""
    return f"{list(index)}: compiled {_element(c[index])}, eager {_element(o[index])}"


def _element(value: Any) -> str:
    item = value.item()
    return f"{item:.8g}" if isinstance(item, float) else repr(item)


def _index(flat: int | np.integer, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(flat), shape)) if shape else ()
