"""Ops that take indices raise eager's (and PyTorch's) exception inside compiled code.

The graph is compiled on valid indices; called again with bad ones it must raise what the
eager call raises, same class and message (Note [Value checks in graphs]: the entry's check
is a `check_values` node run with the graph), then still work on valid ones. The exception
classes are PyTorch 2.13's for the same call.
"""

from typing import NamedTuple

import numpy as np
import pytest

import jitgrad as jg

F = jg.nn.functional


class IndexCase(NamedTuple):
    name: str
    fn: object  # (w: float (4, 3), ids: int64 (4,)) -> tensor
    bad: list  # ids eager refuses
    error: type  # PyTorch's exception class
    good: tuple = (0, 2, 1, 3)


def _w():
    return jg.arange(12.0).reshape(4, 3)


INDEX_CASES = [
    IndexCase("embedding_negative", lambda w, i: F.embedding(i, w), [0, -1, 1, 2], IndexError),
    IndexCase("embedding_high", lambda w, i: F.embedding(i, w), [0, 4, 1, 2], IndexError),
    IndexCase("cross_entropy_negative", lambda w, i: F.cross_entropy(w, i), [0, -1, 1, 2],
              IndexError, (0, 2, 1, 2)),
    IndexCase("cross_entropy_high", lambda w, i: F.cross_entropy(w, i), [0, 5, 1, 2],
              IndexError, (0, 2, 1, 2)),
    IndexCase("cross_entropy_ignored_then_high", lambda w, i: F.cross_entropy(w, i),
              [0, -100, 1, 7], IndexError, (0, -100, 1, 2)),
    IndexCase("cross_entropy_ignore_index", lambda w, i: F.cross_entropy(w, i, ignore_index=3),
              [0, 3, 1, -3], IndexError, (0, 3, 1, 2)),
    IndexCase("nll_loss_high", lambda w, i: F.nll_loss(w.log_softmax(1), i, reduction="sum"),
              [0, 3, 1, 2], IndexError, (0, 2, 1, 2)),
    IndexCase("getitem_high", lambda w, i: w[i], [0, 4, 1, 2], IndexError, (0, -1, 1, -4)),
    IndexCase("getitem_low", lambda w, i: w[i] * 2, [0, -5, 1, 2], IndexError),
    IndexCase("setitem_high", lambda w, i: w.clone().index_put_((i,), jg.tensor(0.0)),
              [0, 4, 1, 2], IndexError),
    IndexCase("gather_negative", lambda w, i: w.gather(1, i.reshape(4, 1) % 8 - 1),
              [0, 0, 1, 2], RuntimeError, (1, 2, 3, 1)),
    IndexCase("scatter_add_high", lambda w, i: w.scatter_add(1, i.reshape(4, 1),
                                                            jg.ones(4, 1)), [0, 3, 1, 2],
              RuntimeError, (0, 2, 1, 2)),
    IndexCase("index_select_negative", lambda w, i: w.index_select(0, i), [0, -1, 1, 2],
              IndexError),
    IndexCase("index_add_high", lambda w, i: w.index_add(0, i, jg.ones(4, 3)), [0, 4, 1, 2],
              RuntimeError),
    IndexCase("take_high", lambda w, i: w.take(i * 3), [0, 4, 1, 2], IndexError),
    IndexCase("one_hot_negative", lambda w, i: F.one_hot(i, 4), [0, -1, 1, 2], RuntimeError),
    IndexCase("bincount_negative", lambda w, i: jg.bincount(i), [0, -1, 1, 2], RuntimeError),
]


def outcome(fn, *args):
    try:
        return fn(*args)
    except (IndexError, RuntimeError) as err:
        return err


def check_case(case, backend, requires_grad=False):
    compiled = jg.compile(case.fn, backend=backend)
    for ids in (case.good, case.bad, case.good):
        w = _w().requires_grad_(requires_grad)
        expected = outcome(case.fn, w, jg.tensor(ids))
        got = outcome(compiled, w, jg.tensor(ids))
        assert isinstance(expected, Exception) == (ids is case.bad)
        if isinstance(expected, Exception):
            assert type(expected) is case.error
            message, _, location = str(got).partition("\n\nfrom user code:\n")
            assert type(got) is type(expected) and message == str(expected)
            assert __file__ in location  # raised at the user's line of the lookup
        else:
            np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize("case", INDEX_CASES, ids=lambda c: c.name)
def test_index_checks_run_in_compiled_code(case):
    check_case(case, "eager")


@pytest.mark.parametrize("case", [c for c in INDEX_CASES if "cross_entropy" in c.name],
                         ids=lambda c: c.name)
def test_target_checks_run_in_compiled_training(case):
    check_case(case, "eager", requires_grad=True)


@pytest.mark.parametrize("backend", ["eager", "numba"])
@pytest.mark.parametrize("shape", [(3, 0, 2), (0, 3), (2, 3), (2, 0)])
@pytest.mark.parametrize("ids", [[5, -2], [1], []])
def test_ids_into_rows_of_no_element_raise_only_where_eager_does(backend, shape, ids):
    # eager never reads ids that select no element (rows of size 0) but refuses any id into
    # a dim of size 0; the compiled lookup, whose ids are a graph input, must do the same
    def lookup(x, i):
        return x[i] * 2

    x, i = jg.zeros(*shape), jg.tensor(ids, dtype=jg.int64)
    expected, got = outcome(lookup, x, i), outcome(jg.compile(lookup, backend=backend), x, i)
    if isinstance(expected, Exception):
        assert type(got) is type(expected)
        assert str(got).partition("\n\nfrom user code:\n")[0] == str(expected)
    else:
        assert tuple(got.shape) == tuple(expected.shape)


def test_an_unused_lookup_still_checks_its_ids():
    def program(x, ids, w):
        F.embedding(ids, w)
        return x * 2

    compiled = jg.compile(program)
    x = jg.ones(2, requires_grad=True)
    compiled(x, jg.tensor([0]), _w())
    with pytest.raises(IndexError, match="index out of range in self"):
        compiled(x, jg.tensor([-3]), _w())


def test_integer_division_by_zero_in_compiled_code():
    def program(x, y):
        return x // y, x % y

    compiled = jg.compile(program)
    x = jg.tensor([5, 7])
    compiled(x, jg.tensor([2, 3]))
    with pytest.raises(RuntimeError, match="ZeroDivisionError: integer division by zero"):
        compiled(x, jg.tensor([2, 0]))


def test_take_along_dim_counts_negative_indices_from_the_end():
    x = jg.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(jg.take_along_dim(x, jg.tensor([[-1], [0], [-4]]), 1)
                                  .numpy().ravel(), [3.0, 4.0, 8.0])
