"""Compiled code equals eager in autograd-visible ways, on the eager backend (capture):
the families of tests/trace/parity_cases.py, compared by tests/trace/eager_parity.py.
tests/codegen/test_training_semantics.py runs the same table on numba."""

import numpy as np
import pytest

import jitgrad as jg
from tests.trace.eager_parity import assert_matches_eager
from tests.trace.parity_cases import (
    GRAD_MODES,
    GRAD_NONENESS,
    OUTER_MODES,
    RETURNED_ALIASES,
    SAVED_WRITE_WORDS,
    SAVED_WRITES,
    UNSEEN_WRITES,
)


def by_name(case):
    return case.name


@pytest.mark.parametrize("case", UNSEEN_WRITES, ids=by_name)
def test_writes_autograd_does_not_see_keep_history(case):
    assert_matches_eager(case.program, case.make_inputs, "eager", **case.options)


@pytest.mark.parametrize("case", RETURNED_ALIASES, ids=by_name)
def test_returned_aliases_match_eager(case):
    assert_matches_eager(case.program, case.make_inputs, "eager", **case.options)


@pytest.mark.parametrize("case", GRAD_NONENESS, ids=by_name)
def test_grad_none_ness_matches_eager(case):
    assert_matches_eager(case.program, case.make_inputs, "eager", **case.options)


# a value saved, then written in place inside the region with grad on: eager's error
# names the tensor's grad_fn at backward time (the in-place op, or AsStrided for a view of
# the written base); the compiled error names the op that produced the saved value
NAMED_BY_THE_PRODUCER = {"intermediate_saved_then_written", "view_saved_then_its_base_written"}


@pytest.mark.parametrize("case", SAVED_WRITES, ids=by_name)
def test_saved_values_written_in_place_raise_as_eager(case):
    assert_matches_eager(case.program, case.make_inputs, "eager", words=SAVED_WRITE_WORDS,
                         same_names=case.name not in NAMED_BY_THE_PRODUCER, **case.options)


@pytest.mark.parametrize("outer", OUTER_MODES)
@pytest.mark.parametrize("case", GRAD_MODES, ids=by_name)
def test_grad_mode_regions_match_eager_under_each_outer_mode(case, outer):
    assert_matches_eager(case.program, case.make_inputs, "eager", outer=OUTER_MODES[outer])


def test_leaf_updated_under_no_grad_stays_the_leaf_with_eager_values():
    def step(x, w):
        with jg.no_grad():
            w.sub_(0.1 * w)
        return (x * w).sum()

    x = jg.tensor(np.arange(3, dtype=np.float32))
    w = jg.tensor(np.ones(3, np.float32), requires_grad=True)
    loss = jg.compile(step)(x, w)
    assert loss.grad_fn is not None and w.is_leaf and w.requires_grad and w._version == 1
    loss.backward()
    np.testing.assert_allclose(w.detach().numpy(), np.full(3, 0.9, np.float32))
    np.testing.assert_array_equal(w.grad.numpy(), np.arange(3, dtype=np.float32))


def test_one_compiled_function_follows_the_grad_mode_of_each_call():
    def f(x):
        with jg.enable_grad():
            a = x * 2.0
        return a, x * 3.0

    compiled = jg.compile(f)
    x = jg.tensor(np.ones(2, np.float32), requires_grad=True)
    for outer in (jg.no_grad, jg.enable_grad, jg.no_grad):
        with outer():
            got, want = compiled(x), f(x)
        assert [t.requires_grad for t in got] == [t.requires_grad for t in want]
    assert [t.requires_grad for t in want] == [True, False]
