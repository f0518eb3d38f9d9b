"""Op cases for the first ops of the eager core (arithmetic, exp/log/tanh, sum/mean,
reshape/permute/expand, matmul)."""

import numpy as np

import jitgrad as jg
from tests.eager.op_table import Arg, OpCase

A = Arg((3, 4))
ROW = Arg((4,))
COL = Arg((3, 1))
SCALAR = Arg(())

CASES = [
    OpCase("add", jg.add, np.add, (A, A)),
    OpCase("add_broadcast", jg.add, np.add, (COL, ROW)),
    OpCase("add_0d", jg.add, np.add, (A, SCALAR)),
    OpCase("add_transposed", jg.add, np.add, (Arg((3, 4), layout="transposed"), ROW)),
    OpCase("add_alpha", lambda a, b: jg.add(a, b, alpha=2.5), lambda a, b: a + 2.5 * b, (A, ROW)),
    OpCase("sub_broadcast", jg.sub, np.subtract, (COL, Arg((4,), layout="strided"))),
    OpCase("rsub_scalar", lambda a: 2 - a, lambda a: 2 - a, (A,)),
    OpCase("mul_broadcast", jg.mul, np.multiply, (COL, ROW)),
    OpCase("mul_scalar", lambda a: a * 3.0, lambda a: a * 3.0, (A,)),
    OpCase("div", jg.div, np.divide, (A, Arg((3, 4), 0.5, 2.0))),
    OpCase("rdiv_scalar", lambda a: 1 / a, lambda a: 1 / a, (Arg((3, 4), 0.5, 2.0),)),
    OpCase("neg", jg.neg, np.negative, (A,)),
    OpCase("exp", jg.exp, np.exp, (A,)),
    OpCase("log", jg.log, np.log, (Arg((3, 4), 0.1, 3.0),)),
    OpCase("tanh", jg.tanh, np.tanh, (A,)),
    OpCase("relu", jg.relu, lambda a: np.maximum(a, 0), (A,)),
    OpCase("sum_all", jg.sum, lambda a: np.sum(a), (A,)),
    OpCase("sum_dim", lambda a: jg.sum(a, 1), lambda a: a.sum(1), (A,)),
    OpCase("sum_neg_dims_keepdim", lambda a: a.sum((-1, 0), keepdim=True),
           lambda a: a.sum((-1, 0), keepdims=True), (Arg((2, 3, 4)),)),
    OpCase("sum_0d", jg.sum, np.sum, (SCALAR,)),
    OpCase("mean_dim", lambda a: a.mean(0), lambda a: a.mean(0), (A,)),
    OpCase("mean_all_strided", jg.mean, np.mean, (Arg((3, 4), layout="strided"),)),
    OpCase("reshape", lambda a: a.reshape(2, -1), lambda a: a.reshape(2, -1), (A,)),
    OpCase("reshape_transposed", lambda a: a.reshape(-1), lambda a: a.reshape(-1),
           (Arg((3, 4), layout="transposed"),)),
    OpCase("permute", lambda a: a.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1),
           (Arg((2, 3, 4)),)),
    OpCase("expand", lambda a: a.expand(2, 3, 4), lambda a: np.broadcast_to(a, (2, 3, 4)), (COL,)),
    OpCase("matmul", jg.matmul, np.matmul, (Arg((3, 4)), Arg((4, 5)))),
    OpCase("matmul_batched_broadcast", jg.matmul, np.matmul, (Arg((2, 3, 4)), Arg((4, 5)))),
    OpCase("matmul_vec_mat", jg.matmul, np.matmul, (Arg((4,)), Arg((2, 4, 5)))),
    OpCase("matmul_mat_vec", jg.matmul, np.matmul, (Arg((3, 4)), Arg((4,)))),
    OpCase("matmul_vec_vec", jg.matmul, np.matmul, (Arg((4,)), Arg((4,)))),
]
