"""Op cases for creation.py's differentiable op: `to_dtype` (a float -> float cast,
here to the same dtype with copy=True so that numpy's f32/f64 runs and gradcheck apply; the
engine casts gradients back to the input's dtype, checked in test_creation.py)."""

from tests.eager.op_table import Arg, OpCase

CASES = [
    OpCase("to_dtype_copy", lambda a: a.to(a.dtype, copy=True), lambda a: a.copy(),
           (Arg((3, 4)),)),
    OpCase("to_dtype_transposed", lambda a: a.to(a.dtype, copy=True), lambda a: a.copy(),
           (Arg((3, 4), layout="transposed"),)),
    OpCase("to_dtype_0d", lambda a: a.to(a.dtype, copy=True), lambda a: a.copy(), (Arg(()),)),
]
