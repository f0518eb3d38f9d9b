"""Op cases for the ops the real programs' API inventory added (issue 6): bincount,
histc, histogram.

unique (whose output size depends on the values, so it has no shape rule) and the
in-place view ops squeeze_/unsqueeze_ (which reshape the tensor an earlier op returned,
which the shape-rule test observes) are checked in tests/realprograms/test_api_additions.py.
"""

import numpy as np

import jitgrad as jg
from tests.eager.op_table import Arg, OpCase

IDS = Arg((9,), 0, 5, kind="index")
WEIGHTS = Arg((9,))


def _histc_ref(a):
    return np.histogram(a, bins=5, range=(-2.0, 2.0))[0].astype(a.dtype)


CASES = [
    OpCase("bincount", lambda i: jg.bincount(i), np.bincount, (IDS,), differentiable=False),
    OpCase("bincount_minlength", lambda i: jg.bincount(i, minlength=8),
           lambda i: np.bincount(i, minlength=8), (IDS,), differentiable=False),
    OpCase("bincount_weights", lambda i, w: jg.bincount(i, w, minlength=7),
           lambda i, w: np.bincount(i, w, minlength=7).astype(w.dtype), (IDS, WEIGHTS)),
    OpCase("bincount_weights_strided", lambda i, w: i.bincount(w),
           lambda i, w: np.bincount(i, w).astype(w.dtype),
           (IDS, Arg((9,), layout="strided"))),
    OpCase("histc", lambda a: jg.histc(a, bins=5, min=-2, max=2), _histc_ref,
           (Arg((4, 6)),), differentiable=False),
    OpCase("histc_data_range_transposed", lambda a: a.histc(bins=3),
           lambda a: np.histogram(a, bins=3)[0].astype(a.dtype),
           (Arg((4, 6), layout="transposed"),), differentiable=False),
    OpCase("histogram_range", lambda a: jg.histogram(a, bins=5, range=(-2.0, 2.0)),
           lambda a: (_histc_ref(a), np.linspace(-2, 2, 6).astype(a.dtype)),
           (Arg((4, 6)),), differentiable=False),
    OpCase("histogram_weighted_density",
           lambda a, w: jg.histogram(a, bins=4, weight=w, density=True).hist,
           lambda a, w: np.histogram(a, bins=4, weights=w, density=True)[0].astype(a.dtype),
           (Arg((12,)), Arg((12,), 0.5, 1.5)), differentiable=False),
]
