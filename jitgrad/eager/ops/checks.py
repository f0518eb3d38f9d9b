"""Value checks of ops that take indices (and of Python-number division), as one op.

Note [Value checks in graphs]: an entry function checks the values of its index operand
(class ids, rows, positions) before its op runs: `check_values(index, ...)`. Eagerly the
check runs at once on the array. While a compiler traces, the values are not known, so
the same call records a `check_values` node instead: the graph then runs the same check
on the values it receives, at the same place, and raises the same exception with the same
message (both backends run the node as an extern, through this op's forward). The node
is impure (kept although nothing may read it, never fused) and returns its input, which
the op reads, so the check runs before the op in every schedule.

What a check rejects (`reject`): "outside" — values outside [low, high), except `ignore`;
"zero" — zeros (a divisor); "negative" — values below 0 (an integer power). The message
is a format string over `bad` (the first rejected value in C order), `min` and `max`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jitgrad.eager.ops.registry import apply_op, register
from jitgrad.eager.tensor import Tensor, values_known

ERRORS: dict[str, type[Exception]] = {
    "IndexError": IndexError, "RuntimeError": RuntimeError,
    "ZeroDivisionError": ZeroDivisionError}


def _rejected(values: np.ndarray, reject: str, low: Any, high: Any, ignore: Any) -> np.ndarray:
    if reject == "zero":
        return values == 0
    if reject == "negative":
        return values < 0
    bad = (values < low) | (values >= high)
    return bad if ignore is None else bad & (values != ignore)


def check_array(values: np.ndarray, *, reject: str, error: str, message: str,
                   low: Any = None, high: Any = None, ignore: Any = None) -> np.ndarray:
    """`values` itself; raises ERRORS[error](message) when a value is rejected."""
    bad = _rejected(values, reject, low, high, ignore)
    if bad.any():
        first = values[bad].flat[0].item()
        raise ERRORS[error](message.format(bad=first, min=values.min().item(),
                                           max=values.max().item()))
    return values


CHECK_VALUES = register("check_values", check_array, meta=lambda values, **params: values,
                        impure=True, source="not differentiable (a check)")


def check_values(x: Tensor, *, reject: str, error: str, message: str, **bounds: Any) -> Tensor:
    """`x` after checking its values (see Note [Value checks in graphs]); read the result.

    bounds: `low`, `high` and `ignore` for reject="outside". Raises ERRORS[error] now for
    known values; for a compiler's fake tensor, when the graph runs.
    """
    params = {"reject": reject, "error": error, "message": message, **bounds}
    if values_known(x._data):
        check_array(x._data, **params)
        return x
    return apply_op(CHECK_VALUES, (x,), (x._data,), params)
