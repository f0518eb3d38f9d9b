"""Every op's shape/dtype rule (`OpDef.infer_meta`) agrees with what its forward produced:
shape, dtype and layout (strides and storage offset, which compiled code reports).

Runs each op-table case and observes every `apply_op` call (through `sys.setprofile`, so
the hot path carries no test hook), then asks the op's rule about the same inputs.
"""

import sys

import numpy as np
import pytest

from jitgrad.eager.ops import registry
from jitgrad.eager.ops.registry import TensorMeta
from jitgrad.eager.tensor import Tensor
from tests.eager.op_table import OP_CASES, OpCase


def _observed_calls(case: OpCase) -> list[tuple]:
    calls = []
    target = registry.apply_op.__code__

    def profiler(frame, event, arg):
        if event == "call" and frame.f_code is target:
            f = frame.f_locals
            calls.append((f["op"], f["arrays"], f["params"]))
        elif event == "return" and frame.f_code is target and calls and len(calls[-1]) == 3:
            calls[-1] = calls[-1] + (arg,)

    arrays = case.arrays(np.float32)
    sys.setprofile(profiler)
    try:
        case.fn(*case.tensors(arrays, requires_grad=False))
    finally:
        sys.setprofile(None)
    return [c for c in calls if len(c) == 4]


def _meta(x):
    if isinstance(x, np.ndarray):
        return TensorMeta.of(x)
    return x


@pytest.mark.parametrize("case", OP_CASES, ids=lambda c: c.name)
def test_shape_dtype_rule_matches_forward(case: OpCase):
    calls = _observed_calls(case)
    assert calls, f"{case.name} ran no registered op"
    for op, arrays, params, result in calls:
        predicted = op.infer_meta(tuple(_meta(a) for a in arrays), params)
        results = result if isinstance(result, tuple) else (result,)
        predicted = (predicted,) if isinstance(predicted, TensorMeta) else predicted
        actual = tuple(TensorMeta.of(r._data) for r in results if isinstance(r, Tensor))
        assert predicted == actual, f"{op.name}: rule says {predicted}, forward made {actual}"
