"""Eager jitgrad against PyTorch 2.13 at the edges the eager-vs-torch fuzz campaign found
(tests.fuzz with `--torch`): inf, NaN, zeros and signed zeros, overlap, layouts, wrapping.

Expected values were measured on torch 2.13.0+cpu and are written down here, so the tests
need no torch.
"""

import math

import numpy as np
import pytest

import jitgrad as jg

INF, NAN = math.inf, math.nan


def _grad(x, fn, upstream=None):
    t = jg.tensor(np.array(x, dtype=np.float64), requires_grad=True)
    y = fn(t)
    y.backward(jg.ones_like(y) if upstream is None else jg.tensor(upstream, dtype=jg.float64))
    return t.grad.numpy()


# ----- prod / cumsum / cumprod backward at zeros and infinities ----------------------------

# (input, fn, upstream or None, torch 2.13's gradient)
SCAN_AND_PRODUCT_GRADS = {
    "prod_one_zero_and_inf": ([1.5, 0, INF, 2], lambda t: t.prod(), None, [NAN, INF, 0, NAN]),
    "prod_two_zeros_is_zero": ([0, 0, INF], lambda t: t.prod(), None, [0, 0, 0]),
    "prod_no_zero_divides": ([INF, 2, 3], lambda t: t.prod(), None, [NAN, INF, INF]),
    "prod_dim_zero_elsewhere": ([[2, INF], [0, 3]], lambda t: t.prod(1), None,
                                [[INF, 2], [3, 0]]),
    "prod_dim_no_zero": ([[2, INF], [1, 3]], lambda t: t.prod(1), None, [[INF, NAN], [3, 1]]),
    "prod_dim_two_zeros": ([[0, 0, INF], [1, 2, 3]], lambda t: t.prod(1), None,
                           [[NAN, NAN, 0], [6, 3, 2]]),
    "cumsum_inf_upstream": ([1, 2, 3], lambda t: t.cumsum(0), [1, INF, 1], [INF, INF, 1]),
    "cumprod_inf_after_zero": ([1.5, 0, INF, 0], lambda t: t.cumprod(0), [1, -2, 1, -2],
                               [1, NAN, 0, 0]),
    "cumprod_first_zero_at_0": ([-0.0, -2, -INF, 0, 0], lambda t: t.cumprod(0),
                                [1, -2, 1, -2, 1], [NAN, 0, 0, 0, 0]),
    "cumprod_no_zero_with_inf": ([3, -2, -2, 1.5, 3, -INF], lambda t: t.cumprod(0),
                                 [1, -2, 1, -2, 1, -2], [INF, -INF, -INF, INF, INF, NAN]),
    "cumprod_one_zero": ([2, 0, 3, 4], lambda t: t.cumprod(0), None, [1, 32, 0, 0]),
}


@pytest.mark.parametrize("name", SCAN_AND_PRODUCT_GRADS)
def test_product_and_scan_gradients_match_torch_at_zeros_and_infinities(name):
    x, fn, upstream, expected = SCAN_AND_PRODUCT_GRADS[name]
    np.testing.assert_array_equal(_grad(x, fn, upstream), np.array(expected, dtype=np.float64))
