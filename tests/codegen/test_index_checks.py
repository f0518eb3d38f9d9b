"""Index checks in numba-compiled graphs, forward and training (the eager backend runs the
whole table in tests/trace/test_index_checks.py)."""

import pytest

from tests.trace.test_index_checks import INDEX_CASES, check_case

CASES = {c.name: c for c in INDEX_CASES}


@pytest.mark.parametrize("name", ["embedding_negative", "embedding_high", "getitem_high",
                                  "cross_entropy_high", "nll_loss_high"])
def test_index_checks_run_in_compiled_code(name):
    check_case(CASES[name], "numba")


@pytest.mark.parametrize("name", ["cross_entropy_negative", "cross_entropy_ignored_then_high"])
def test_target_checks_run_in_compiled_training(name):
    check_case(CASES[name], "numba", requires_grad=True)
