"""Generators made in compiled code are traced lazily, as CPython runs them (Note
[Generators] in jitgrad/trace/capture/translator.py): generator expressions and generator functions
feeding sum/min/max/sorted/any/all/list/tuple/zip/next and for loops are captured into the
graph, their items are computed in eager's order, and any/all/zip/next stop a generator
where the builtin stops it.
"""

import warnings

import numpy as np
import pytest

import jitgrad as jg


def _items(n, x):
    for k in range(n):
        yield x * (k + 1)


class Blocks:
    """A user class whose __iter__ is a generator function."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for k in range(self.n):  # noqa: UP028 - the loop-and-yield form on purpose
            yield k


BLOCKS = Blocks(3)


def _delegate(x):
    yield x
    yield x * 2
    return 7


def _delegating(x):
    returned = yield from _delegate(x)  # the delegate's items, then its return value
    yield x * returned
    yield from [x + 1, x + 2]


def _endless():
    k = 0
    while True:
        yield k
        k += 1


PROGRAMS = {
    "sum_of_genexpr": lambda x, y: sum(v * 2 for v in (x, y)),
    "min_max_sorted": lambda x, y: (x * min(d for d in x.shape), y * max(d for d in y.shape),
                                    sorted(d * 2 for d in x.shape)),
    "any_all_over_shapes": lambda x, y: (x * any(d > 2 for d in x.shape),
                                         y * all(d > 0 for d in y.shape)),
    "list_tuple_of_genexpr": lambda x, y: (list(v.relu() for v in (x, -x)),
                                           tuple(t + y for t in (x, y))),
    "generator_function": lambda x, y: (list(_items(3, x)), sum(t.sum() for t in _items(4, y))),
    "class_iter_generator": lambda x, y: sum(x * k for k in BLOCKS),
    "for_loop_over_genexpr": lambda x, y: [t + 1 for t in (v.exp() for v in (x, y))],
    "next_with_default": lambda x, y: (next(v * 3 for v in (x, y)), next(iter(()), y)),
    "zip_with_an_endless_generator": lambda x, y: [
        x * k for k, _ in zip(_endless(), "abc", strict=False)],
    "nested_genexpr": lambda x, y: sum(sum(v * k for k in range(2)) for v in (x, y)),
    "yield_from": lambda x, y: list(_delegating(x)),
    "generator_passed_to_a_jitgrad_function": lambda x, y: jg.cat(t * 2 for t in (x, y)),
}


@pytest.mark.parametrize("backend", ["eager", "numba"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_generators_are_captured_in_one_graph_with_eagers_values(name, backend):
    program = PROGRAMS[name]
    x, y = jg.randn(2, 3), jg.randn(2, 3)
    expected = program(x, y)
    got = jg.compile(program, backend=backend, fullgraph=True)(x, y)
    flat_expected, flat_got = _flatten(expected), _flatten(got)
    assert len(flat_expected) == len(flat_got)
    for e, g in zip(flat_expected, flat_got, strict=True):
        if isinstance(e, jg.Tensor):
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6)
        else:
            assert g == e
    report = jg.explain(program)(x, y)
    assert report.graph_count == 1 and report.graph_break_count == 0


def _flatten(value):
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _flatten(v)]
    return [value]


def test_any_and_all_stop_the_generator_where_eager_stops_it():
    def program(x):
        seen = []
        found = any((seen.append(k) or k > 1) for k in range(6))
        checked = []
        every = all((checked.append(k) or k < 2) for k in range(6))
        return x * len(seen), x * len(checked), found, every

    x = jg.ones(3)
    expected = program(x)
    got = jg.compile(program, fullgraph=True)(x)
    assert [float(t.sum()) for t in got[:2]] == [float(t.sum()) for t in expected[:2]] == [9, 9]
    assert got[2:] == expected[2:] == (True, False)


def test_items_are_recorded_in_eagers_order():
    # the generator's ops run between the consumer's, as eager runs them
    def program(x):
        total = x * 0
        for t in (x + k for k in range(3)):
            total = total * 2 + t
        return total

    x = jg.randn(4)
    np.testing.assert_allclose(jg.compile(program, backend="numba", fullgraph=True)(x).numpy(),
                               program(x).numpy(), rtol=1e-6)


def test_an_endless_generator_run_to_its_end_stops_the_trace_not_the_process():
    def program(x):
        return x * sum(_endless())

    with pytest.raises(jg.CompileError, match="more than 100000 instructions"):
        jg.compile(program, fullgraph=True)(jg.ones(2))


def test_a_generator_alive_at_a_graph_break_makes_the_frame_eager_at_the_users_line():
    def program(x):
        return any(t.sum() > 0 for t in (x, -x))  # a tensor's truth: a break inside

    x = jg.ones(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert jg.compile(program)(x) is True
    text = "\n".join(str(w.message) for w in caught)
    assert "a generator made in the compiled function is still alive" in text
    assert f"at {__file__.rsplit('/', 1)[-1]}:" in text and "any(t.sum() > 0" in text


def sorted_by_a_lambda(x):
    xs = [x * 3, x, x * 2]
    ordered = sorted(xs, key=lambda t: t.shape[0] * 0, reverse=True)  # stable: as given
    names = sorted(["bb", "a", "ccc"], key=len, reverse=True)
    smallest = min([(2, x), (1, x * 5), (1, x * 7)], key=lambda pair: pair[0])[1]
    largest = max([1, 5, 3], key=lambda v: -v)
    return ordered[0] + len(names[0]) + smallest + largest + min([], key=abs, default=7)


def test_sorted_min_max_with_a_traced_key_function():
    x = jg.arange(2.0)
    report = jg.explain(jg.compile(sorted_by_a_lambda, fullgraph=True))(x)
    np.testing.assert_array_equal(report.result.numpy(), sorted_by_a_lambda(x).numpy())
    assert (report.graph_count, report.graph_break_count) == (1, 0)
