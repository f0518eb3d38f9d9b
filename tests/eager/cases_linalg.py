"""Op cases for matrix products, linear and einsum (forward vs numpy, gradcheck in float64)."""

import numpy as np

import jitgrad as jg
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use
from tests.eager.op_table import Arg, OpCase

M34 = Arg((3, 4))
M45 = Arg((4, 5))


def _linear_ref(x, w, b=None):
    out = x @ w.T
    return out if b is None else out + b


CASES = [
    OpCase("mm", jg.mm, np.matmul, (M34, M45)),
    OpCase("mm_transposed", lambda a, b: a.mm(b), np.matmul,
           (Arg((3, 4), layout="transposed"), Arg((4, 5), layout="strided"))),
    OpCase("bmm", jg.bmm, np.matmul, (Arg((2, 3, 4)), Arg((2, 4, 5)))),
    OpCase("dot", jg.dot, np.dot, (Arg((4,)), Arg((4,), layout="strided"))),
    OpCase("outer", jg.outer, np.outer, (Arg((3,)), Arg((4,)))),
    OpCase("addmm", lambda c, a, b: jg.addmm(c, a, b, beta=0.5, alpha=2.0),
           lambda c, a, b: 0.5 * c + 2.0 * (a @ b), (Arg((5,)), M34, M45)),
    OpCase("addmm_beta0", lambda c, a, b: c.addmm(a, b, beta=0), lambda c, a, b: a @ b,
           (Arg((3, 5)), M34, M45)),
    OpCase("baddbmm", lambda c, a, b: jg.baddbmm(c, a, b, alpha=0.5),
           lambda c, a, b: c + 0.5 * (a @ b), (Arg((3, 5)), Arg((2, 3, 4)), Arg((2, 4, 5)))),
    OpCase("linear", F.linear, _linear_ref, (Arg((2, 4)), Arg((3, 4)), Arg((3,)))),
    OpCase("linear_batched_no_bias", F.linear, _linear_ref, (Arg((2, 3, 4)), Arg((5, 4)))),
    OpCase("linear_1d_transposed_weight", F.linear, _linear_ref,
           (Arg((4,)), Arg((3, 4), layout="transposed"), Arg((3,)))),
    OpCase("einsum_matmul", lambda a, b: jg.einsum("ij,jk->ik", a, b),
           lambda a, b: a @ b, (M34, M45)),
    OpCase("einsum_batched_ellipsis", lambda a, b: jg.einsum("...ij,...jk", a, b),
           lambda a, b: np.einsum("...ij,...jk", a, b), (Arg((2, 3, 4)), Arg((2, 4, 5)))),
    OpCase("einsum_three_operands", lambda a, b, c: jg.einsum("ij,jk,k->i", a, b, c),
           lambda a, b, c: a @ b @ c, (M34, M45, Arg((5,)))),
    OpCase("einsum_diagonal", lambda a: jg.einsum("ii->i", a), np.diagonal, (Arg((3, 3)),)),
    OpCase("einsum_trace", lambda a: jg.einsum("ii", a), np.trace, (Arg((3, 3)),)),
    OpCase("einsum_sum_one_operand", lambda a: jg.einsum("ijk->kj", a),
           lambda a: np.einsum("ijk->kj", a), (Arg((2, 3, 4), layout="strided"),)),
    OpCase("einsum_size1_broadcast", lambda a, b: jg.einsum("i,i", a, b),
           lambda a, b: np.einsum("i,i", a, b), (Arg((3,)), Arg((1,)))),
    OpCase("einsum_outer_list", lambda a, b: jg.einsum("i,j->ij", [a, b]), np.outer,
           (Arg((3,)), Arg((2,)))),
]
