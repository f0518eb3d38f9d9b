"""The capture conformance cases of research/dynamo.md §5.12 (ids c01-c30).

Each case runs the same function eagerly and compiled and compares values, dtype, shape,
requires_grad and Python side effects, and asserts the number of graphs compiled per
call and of graph breaks exactly (CompileCounter counts compiles of every frame,
resume functions included).
"""

import warnings

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
from jitgrad.trace.testing import CountingBackend


def same(a, b):
    if isinstance(a, jg.Tensor):
        assert isinstance(b, jg.Tensor)
        assert a.shape == b.shape and a.dtype == b.dtype and a.requires_grad == b.requires_grad
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            same(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            same(a[k], b[k])
    else:
        assert a == b


def t(*shape, seed=0, dtype=np.float32, requires_grad=False):
    data = np.random.default_rng(seed).normal(size=shape).astype(dtype)
    return jg.tensor(data, requires_grad=requires_grad)


def compiles_per_call(fn, calls, backend=None):
    """Run fn compiled on each argument tuple, checking against eager; compiles per call."""
    counter = backend or CountingBackend()
    compiled = jg.compile(fn, backend=counter)
    counts = []
    for args in calls:
        before = counter.compile_count
        same(compiled(*args), fn(*args))
        counts.append(counter.compile_count - before)
    return counts


def test_c01_pointwise_chain_one_graph():
    def f(x):
        return jg.relu(x * 2 + 1)

    assert compiles_per_call(f, [(t(4),), (t(4, seed=1),)]) == [1, 0]


def test_c02_new_shapes_recompile_statically():
    def f(x):
        return jg.sin(x) + 1

    assert compiles_per_call(f, [(t(4),), (t(5),), (t(6),), (t(5),)]) == [1, 1, 1, 0]


def test_c03_new_dtype_recompiles():
    def f(x):
        return jg.cos(x) * 2

    assert compiles_per_call(f, [(t(4),), (t(4, dtype=np.float64),)]) == [1, 1]


def test_c04_requires_grad_change_recompiles():
    def f(x):
        return jg.exp(x)

    assert compiles_per_call(f, [(t(4),), (t(4, requires_grad=True),)]) == [1, 1]


def test_c05_number_specializes_once_then_becomes_a_graph_input():
    def f(x, n):
        return x * n

    x = t(4)
    assert compiles_per_call(f, [(x, 2), (x, 3), (x, 4), (x, 10)]) == [1, 1, 0, 0]
    assert compiles_per_call(f, [(jg.arange(4), 5)]) == [1], "int tensor: new dtype"


def test_c06_string_flags_hit_the_recompile_limit_then_run_eagerly():
    def f(x, flag):
        return x + 1 if flag == "a" else x - 1

    counter = CountingBackend()
    with pytest.warns(UserWarning, match="recompile limit \\(8\\)"):
        counts = compiles_per_call(f, [(t(4), f"s{i}") for i in range(10)], counter)
    assert counts == [1] * 8 + [0, 0]


def helper(x):
    return x * 3


def test_c10_module_level_helper_is_inlined_and_rebinding_recompiles():
    def f(x):
        return helper(helper(x)) - 1

    counter = CountingBackend()
    compiled = jg.compile(f, backend=counter)
    x = t(4)
    same(compiled(x), f(x))
    assert counter.compile_count == 1 and counter.op_count == 3
    global helper
    original = helper
    try:
        helper = lambda y: y + 10  # noqa: E731
        same(compiled(x), f(x))
        assert counter.compile_count == 2
    finally:
        helper = original


def test_c11_closure_over_values_created_inside():
    def f(x):
        k = 3
        tt = jg.ones(4)

        def inner(y):
            return y * k + tt

        return inner(x)

    assert compiles_per_call(f, [(t(4),), (t(4, seed=2),)]) == [1, 0]


G_SCALE = 2.0
G_TENSOR = jg.ones(4)


def test_c12_global_tensor_is_an_input_and_global_number_is_guarded():
    global G_SCALE

    def f(x):
        return x * G_SCALE + G_TENSOR

    counter = CountingBackend()
    compiled = jg.compile(f, backend=counter)
    x = t(4)
    same(compiled(x), f(x))
    G_TENSOR.add_(1.0)
    same(compiled(x), f(x))
    assert counter.compile_count == 1
    G_SCALE = 3.0
    try:
        same(compiled(x), f(x))
        assert counter.compile_count == 2
    finally:
        G_SCALE = 2.0


counter = 0


def test_c13_global_counter_is_unspecialized_after_its_first_change():
    # call 1 compiles with `counter == 0`; call 2 recompiles with `counter` as a graph
    # input (`counter + 1` computed in the graph, the store replayed after it); 3-4 hit.
    global counter
    counter = 0

    def f(x):
        global counter
        counter += 1
        return x + counter

    counter_backend = CountingBackend()
    compiled = jg.compile(f, backend=counter_backend)
    x = t(4)
    counts = []
    for i in range(1, 5):
        before = counter_backend.compile_count
        same(compiled(x), x + i)
        counts.append(counter_backend.compile_count - before)
    assert counter == 4 and type(counter) is int
    assert counts == [1, 1, 0, 0]


def test_c14_list_append_on_a_caller_list_is_replayed_once_per_call():
    def f(x, out):
        out.append(x * 2)
        return x + 1

    x, collected = t(4), []
    report = jg.explain(f)(x, collected)
    assert report.graph_count == 1 and report.graph_break_count == 0
    assert len(collected) == 1
    same(collected[0], x * 2)
    same(jg.compile(f)(x, collected), x + 1)
    assert len(collected) == 2


def test_extra_in_place_update_of_an_input_is_visible_to_the_caller():
    def f(x):
        x += 1
        return x * 2

    x, x_eager = t(4), t(4)
    same(jg.compile(f)(x), f(x_eager))
    same(x, x_eager)


def test_extra_side_effects_around_a_break_keep_program_order(capsys):
    # torchdynamo#329: append before a print, pop after; the list ends as eager leaves it
    def f(x, items):
        items.append(x + 1)
        print("between")
        items.pop(0)
        return x * 2

    items, items_eager = ["first"], ["first"]
    x = t(4)
    same(jg.compile(f)(x, items), f(x, items_eager))
    assert len(items) == len(items_eager) == 1
    same(items[0], items_eager[0])


def test_extra_in_place_method_on_an_input_mutates_the_callers_tensor_once():
    def f(x):
        x.add_(1)
        return x * 2

    x, x_eager = t(4), t(4)
    same(jg.compile(f)(x), f(x_eager))
    same(x, x_eager)


def test_extra_optional_bias_none_or_tensor_compiles_twice():
    def f(x, bias=None):
        y = x * 2
        if bias is not None:
            y = y + bias
        return y

    assert compiles_per_call(f, [(t(4), None), (t(4), t(4, seed=1)), (t(4), None)]) == [1, 1, 0]


def test_extra_shape_arithmetic_recompiles_once_then_is_symbolic():
    def f(x):
        n = x.shape[0]
        return x.reshape(n * 3) / n

    # (2, 3) exact; (4, 3) traces again with x.shape[0] a symbol; (2, 3) finds its exact
    # entry; (5, 3) and (6, 3) reuse the symbolic trace (one backend compile each, for the
    # graph at those sizes: Note [Symbolic sizes])
    counts = compiles_per_call(f, [(t(2, 3),), (t(4, 3),), (t(2, 3),), (t(5, 3),), (t(6, 3),)])
    assert counts == [1, 1, 0, 1, 1]


def test_extra_sequence_repeated_by_a_shape_is_unrolled_in_one_graph():
    def f(x):
        sizes = [x.shape[1]] * x.shape[0]
        pair = 2 * (x,)
        return jg.stack([r * n for r, n in zip(x, sizes, strict=True)], 0) + pair[1], len(sizes)

    assert compiles_per_call(f, [(t(3, 2),), (t(3, 2, seed=1),), (t(4, 2),)]) == [1, 0, 1]
    report = jg.explain(f)(t(3, 2))
    assert report.graph_count == 1 and report.graph_break_count == 0


def test_extra_comparison_of_shape_tuples_is_a_constant_in_one_graph():
    def f(x):
        if tuple(x.shape) != (3, 2) or list(x.shape) < [3, 2]:
            return x * 2
        return x + 1, [x.shape[0]] == [3], (1, 2) >= tuple(x.shape)

    assert compiles_per_call(f, [(t(3, 2),), (t(3, 2, seed=1),), (t(4, 2),)]) == [1, 0, 1]
    report = jg.explain(f)(t(3, 2))
    assert report.graph_count == 1 and report.graph_break_count == 0


def test_extra_decorated_generator_runs_eagerly():
    def gen(x):
        yield x + 1

    compiled = jg.compile(gen)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values = list(compiled(t(4)))
    same(values[0], t(4) + 1)


def test_extra_unknown_library_call_is_a_break():
    import time

    def f(x):
        y = x + 1
        time.perf_counter()
        return y * 2

    report = jg.explain(f)(t(4))
    assert report.graph_count == 2 and report.graph_break_count == 1
    assert report.break_reasons[0].kind == "UNSUPPORTED_CALL"


def test_extra_explicit_graph_break():
    def f(x):
        y = x + 1
        jg.graph_break()
        return y * 2

    report = jg.explain(f)(t(4))
    assert report.graph_count == 2 and report.graph_break_count == 1
    assert report.break_reasons[0].kind == "EXPLICIT_BREAK"
    same(report.result, (t(4) + 1) * 2)


def test_extra_attribute_store_on_an_argument():
    class Box:
        n = 1

    def f(x, box):
        box.n = 5
        return x * box.n

    box = Box()
    same(jg.compile(f)(t(4), box), t(4) * 5)
    assert box.n == 5


def test_extra_changing_loop_bound_runs_between_graphs():
    def f(x, n):
        for _ in range(n):
            x = x + 1
        if n > 2:
            return x * n
        return x

    compiled = jg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in (1, 2, 3, 4, 4):
            same(compiled(t(4), n), f(t(4), n))


def test_c15_loop_over_range_is_unrolled():
    def f(x):
        for i in range(3):
            x = x * 2 + i
        return x

    counter = CountingBackend()
    assert compiles_per_call(f, [(t(4),)], counter) == [1]
    assert counter.op_count == 6


def test_c16_list_length_is_guarded():
    def f(xs):
        total = xs[0] + xs[1]
        if len(xs) > 2:
            total = total + xs[2]
        return total

    counts = compiles_per_call(f, [([t(4), t(4, seed=1)],), ([t(4), t(4, seed=1), t(4, seed=2)],),
                                   ([t(4, seed=3), t(4)],)])
    assert counts == [1, 1, 0]


def test_c17_dict_items_loop_and_keys_guard():
    def f(d):
        acc = 0
        for _k, v in d.items():
            acc = acc + v * 2
        return acc

    two = {"a": t(4), "b": t(4, seed=1)}
    three = {"a": t(4), "b": t(4, seed=1), "c": t(4, seed=2)}
    assert compiles_per_call(f, [(two,), (three,), (two,)]) == [1, 1, 0]


def test_c18_output_structure_is_rebuilt():
    def f(x):
        return {"out": (x + 1, [x * 2, 3]), "n": 5}

    assert compiles_per_call(f, [(t(4),)]) == [1]


class ScaleModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(jg.ones(4))
        self.scale = 2

    def forward(self, x):
        if self.training:
            return x * self.w * self.scale
        return x * self.w


def test_c19_module_attributes_and_parameters_are_guarded():
    model = ScaleModule()
    counter = CountingBackend()
    compiled = jg.compile(model, backend=counter)
    x = t(4)
    same(compiled(x), model(x))
    model.scale = 3
    same(compiled(x), model(x))
    model.w = nn.Parameter(jg.ones(4) * 2)
    same(compiled(x), model(x))
    assert counter.compile_count == 2, "a new Parameter of the same metadata is just an input"
    model.w = nn.Parameter(jg.ones(1))
    same(compiled(x), model(x))
    assert counter.compile_count == 3


def test_c20_training_flag_is_guarded_and_both_entries_are_cached():
    model = ScaleModule()
    counter = CountingBackend()
    compiled = jg.compile(model, backend=counter)
    x = t(4)
    same(compiled(x), model(x))
    model.eval()
    same(compiled(x), model(x))
    model.train()
    same(compiled(x), model(x))
    assert counter.compile_count == 2


def test_c21_no_grad_region_in_one_graph():
    def f(x):
        with jg.no_grad():
            y = x * 2
        return y + x

    x = t(4, requires_grad=True)
    report = jg.explain(f)(x)
    assert report.graph_count == 1 and report.graph_break_count == 0
    out = jg.compile(f)(x)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.ones(4))
    assert jg.is_grad_enabled()


def test_c22_break_inside_no_grad_reenters_the_block_in_the_resume_function(capsys):
    def f(x):
        with jg.no_grad():
            y = x * 2
            print("grad enabled:", jg.is_grad_enabled())
            z = y + 1
        return z * x

    x, x_eager = t(4, requires_grad=True), t(4, requires_grad=True)
    report = jg.explain(f)(x)
    assert report.graph_count == 2 and report.graph_break_count == 1
    assert capsys.readouterr().out == "grad enabled: False\n"
    out, expected = jg.compile(f)(x), f(x_eager)
    same(out, expected)
    assert jg.is_grad_enabled()
    out.sum().backward()
    expected.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x_eager.grad.numpy(), rtol=1e-6)


def test_c23_break_inside_try_captures_up_to_the_checkpoint_before_it(capsys):
    def f(x):
        a = x + 1
        b = a * 2
        try:
            c = b - 1
            print("in try")
            d = c * 3
        except ValueError:
            d = c
        return d + 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = jg.explain(f)(t(4))
    assert report.graph_count == 1 and report.ops_per_graph == [2]
    outcomes = [o.outcome for o in report.frame_outcomes]
    assert outcomes == ["compiled", "eager"], "the rest of the frame runs eagerly"
    assert "try block" in report.frame_outcomes[1].reason
    same(report.result, f(t(4)))
    assert capsys.readouterr().out == "in try\n" * 2


def test_c24_break_inside_a_loop_runs_the_frame_eagerly(capsys):
    def f(x):
        for i in range(2):
            x = x + 1
            print(i)
        return x * 2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = jg.explain(f)(t(4))
    assert report.graph_count == 0 and report.graph_break_count == 0
    assert [o.outcome for o in report.frame_outcomes] == ["eager"]
    same(report.result, (t(4) + 2) * 2)
    assert capsys.readouterr().out == "0\n1\n"


def test_c25_calls_with_star_args_keywords_and_defaults():
    def h(a, b=1, *rest, scale=1.0):
        return (a + b) * scale + sum(rest)

    def f(x):
        args = (x, 2, x)
        return h(*args, scale=0.5) + h(x, scale=2.0)

    assert compiles_per_call(f, [(t(4),)]) == [1]


def test_c27_allow_in_graph_function_is_one_node():
    @jg.allow_in_graph
    def opaque(y):
        return y.exp() * 2

    def f(x):
        return opaque(x + 1) - 1

    report = jg.explain(f)(t(4))
    assert report.graph_count == 1
    targets = [n.target for n in report.graphs[0].nodes if n.op == "call_function"]
    assert opaque in targets and len(targets) == 3
    jg.reset()
    assert compiles_per_call(f, [(t(4),)]) == [1]


def test_c28_fullgraph_error_names_print_and_the_line(capsys):
    def f(x):
        y = x + 1
        print("no")
        return y

    with pytest.raises(jg.CompileError, match="print") as excinfo:
        jg.compile(f, fullgraph=True)(t(4))
    assert 'print("no")' in str(excinfo.value) and "test_conformance.py" in str(excinfo.value)
    assert capsys.readouterr().out == ""


def test_c07_print_breaks_the_graph_and_runs_once_per_call(capsys):
    def f(x):
        y = x + 1
        print("side")
        return y * 2

    x = t(4)
    counter = CountingBackend()  # one backend, so later calls find explain's entries
    report = jg.explain(jg.compile(f, backend=counter))(x)
    assert report.graph_count == 2 and report.graph_break_count == 1
    reason = report.break_reasons[0]
    assert reason.kind == "UNSUPPORTED_CALL" and reason.source_line.strip() == 'print("side")'
    assert compiles_per_call(f, [(x,), (x,)], counter) == [0, 0], "explain compiled both graphs"
    assert capsys.readouterr().out == "side\n" * 5


def test_c08_data_dependent_branch_compiles_each_side_lazily():
    def f(x):
        y = x * 2
        if y.sum() > 0:
            return y + 1
        return y - 1

    positive, negative = t(4).abs(), -t(4).abs()
    assert compiles_per_call(f, [(positive,), (negative,), (positive,), (negative,)]) == \
        [2, 1, 0, 0]
    report = jg.explain(f)(positive)
    assert report.graph_break_count == 1
    assert report.break_reasons[0].kind == "DATA_DEPENDENT_BRANCH"


def test_c09_item_breaks_and_the_value_enters_the_resume_function():
    def f(x):
        s = x.sum().item()
        return x * s

    assert compiles_per_call(f, [(t(4),), (t(4, seed=1),)]) == [2, 0]
    report = jg.explain(f)(t(4))
    assert report.break_reasons[0].kind == "TENSOR_TO_PYTHON"


def test_c26_disabled_callee_breaks_and_is_not_traced():
    traced = []

    @jg.disable
    def eager_only(y):
        traced.append(type(y).__name__)
        return y + 1

    def f(x):
        y = x * 2
        z = eager_only(y)
        return z + 1

    assert compiles_per_call(f, [(t(4),), (t(4),)]) == [2, 0]
    assert set(traced) == {"Tensor"}, "the disabled function only ever saw real tensors"


def inner_with_print(y):
    y = y + 1
    print("inner")
    return y * 2


def test_c29_break_inside_an_inlined_callee_goes_through_the_trampoline(capsys):
    def f(x):
        return inner_with_print(x * 3) - 1

    report = jg.explain(f)(t(4))
    assert report.graph_count == 4 and report.graph_break_count == 2
    assert capsys.readouterr().out == "inner\n"


def test_classic_dynamic_graph_example_has_one_break_and_the_taken_path_in_autograd():
    def f(x):
        y = x * 2
        if y.sum() > 0:
            y = jg.relu(y)
        else:
            y = -y
        return y.mean()

    def backward_names(out):
        names, stack = set(), [out.grad_fn]
        while stack:
            node = stack.pop()
            names.add(node.name())
            stack.extend(n for n, _ in node.next_functions if n is not None)
        return names

    for sign, present, absent in ((1.0, "ReluBackward", "NegBackward"),
                                  (-1.0, "NegBackward", "ReluBackward")):
        jg.reset()
        x = jg.tensor(np.linspace(0.5, 2.0, 4).astype(np.float32) * sign, requires_grad=True)
        x_eager = jg.tensor(x.detach().numpy(), requires_grad=True)
        report = jg.explain(f)(x)
        assert report.graph_count == 2 and report.graph_break_count == 1
        out, expected = jg.compile(f)(x), f(x_eager)
        same(out, expected)
        out.backward()
        expected.backward()
        np.testing.assert_allclose(x.grad.numpy(), x_eager.grad.numpy(), rtol=1e-6)
        names = backward_names(out)
        assert present in names and absent not in names


def test_c30_list_comprehension_is_inlined():
    def f(x):
        return jg.stack([x * i for i in range(3)])

    assert compiles_per_call(f, [(t(4),)]) == [1]
