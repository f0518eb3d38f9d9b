"""Index checks in numba-compiled graphs, forward and training (the eager backend runs the
whole table in tests/trace/test_index_checks.py)."""

import pytest

import jitgrad as jg
from tests.trace.eager_parity import assert_matches_eager
from tests.trace.test_index_checks import INDEX_CASES, check_case

CASES = {c.name: c for c in INDEX_CASES}


@pytest.mark.parametrize("name", ["embedding_negative", "embedding_high", "getitem_high",
                                  "cross_entropy_high", "nll_loss_high"])
def test_index_checks_run_in_compiled_code(name):
    check_case(CASES[name], "numba")


@pytest.mark.parametrize("name", ["cross_entropy_negative", "cross_entropy_ignored_then_high"])
def test_target_checks_run_in_compiled_training(name):
    check_case(CASES[name], "numba", requires_grad=True)


def rows_of_an_empty_dim(a, table):
    return a[jg.tensor([0, 0, -1, -1])], jg.nn.functional.embedding(jg.tensor([[1, 0]]), table)


@pytest.mark.parametrize("backend", ["eager", "numba"])
@pytest.mark.parametrize("row_shape", [(0,), (0, 3), (2, 0)])
def test_gathered_rows_with_no_elements_get_their_empty_gradients(backend, row_shape):
    # the index backward (an add.at of the gathered rows) must not reshape by -1 then
    def make_inputs():
        return [jg.zeros(1, *row_shape, requires_grad=True),
                jg.zeros(2, *row_shape, requires_grad=True)]

    outcome = assert_matches_eager(rows_of_an_empty_dim, make_inputs, backend)
    assert [state["grad"].shape for state in outcome.inputs] == [(1, *row_shape),
                                                                  (2, *row_shape)]
