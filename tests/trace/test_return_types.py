"""Namedtuple results (torch.return_types: max(dim=...), topk, sort, ...) inside compiled code:
their fields read as attributes while tracing, and a returned one is rebuilt from its
class with real tensors (never the trace's fake tensors)."""

import numpy as np

import jitgrad as jg
from jitgrad.trace.capture.fake import FakeTensor


def test_a_returned_namedtuple_holds_real_tensors():
    x = jg.tensor(np.random.default_rng(0).normal(size=(3, 5)).astype(np.float32))
    result = jg.compile(lambda a: jg.topk(a, 2))(x)
    expected = jg.topk(x, 2)
    assert type(result) is type(expected)
    assert not isinstance(result.values, FakeTensor)
    np.testing.assert_array_equal(result.values.numpy(), expected.values.numpy())
    np.testing.assert_array_equal(result.indices.numpy(), expected.indices.numpy())


def test_fields_read_as_attributes_and_items_in_one_graph():
    x = jg.tensor(np.random.default_rng(1).normal(size=(4, 6)).astype(np.float32))
    report = jg.explain(lambda a: a.max(dim=1).values * 2 + a.max(1)[1])(x)
    assert report.graph_count == 1 and report.graph_break_count == 0
    np.testing.assert_allclose(report.result.numpy(),
                               (x.max(dim=1).values * 2 + x.max(1)[1]).numpy())


def sort_then_break(a):
    result = a.sort(dim=1)
    jg.graph_break()
    return result.values.sum() + result.indices.sum(), result


def test_a_namedtuple_across_a_graph_break():
    x = jg.tensor(np.random.default_rng(2).normal(size=(3, 4)).astype(np.float32))
    total, result = jg.compile(sort_then_break)(x)
    expected_total, expected = sort_then_break(x)
    assert type(result) is type(expected) and not isinstance(result.values, FakeTensor)
    np.testing.assert_allclose(total.numpy(), expected_total.numpy(), rtol=1e-6)
