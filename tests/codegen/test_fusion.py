"""Fusion decisions on small traced graphs: group counts, members and materialized values.

Grouping needs no compiled kernel, so these tests only trace (backend captures the graph).
"""

import numpy as np

import jitgrad as jg
from jitgrad.codegen.fusion import find_fusion_groups


def groups_of(fn, *inputs):
    jg.reset()
    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm.graph)
        return gm.forward

    jg.compile(fn, backend=capture)(*inputs)
    assert len(graphs) == 1
    return find_fusion_groups(graphs[0])


X = jg.tensor(np.ones((3, 4), dtype=np.float32))
ROW = jg.tensor(np.ones(4, dtype=np.float32))


def test_a_pointwise_chain_is_one_group_with_one_output():
    groups = groups_of(lambda x, b: jg.tanh(x * 2.0 + b).exp().relu(), X, ROW)
    assert [[n.target.name for n in g.nodes] for g in groups] == [
        ["mul", "add", "tanh", "exp", "relu"]]
    assert [n.name for n in groups[0].inputs] == ["x", "b"]
    assert [n.target.name for n in groups[0].outputs] == ["relu"]


def names(groups):
    return [[n.target.name for n in g.nodes] for g in groups]


def test_a_reduction_takes_its_prologue_and_epilogue():
    groups = groups_of(lambda x: (x.exp().sum(0) + 1.0).log(), X)
    assert names(groups) == [["exp", "sum", "add", "log"]]
    (group,) = groups
    assert group.reduction.target.name == "sum" and group.spec.dims == (0,)
    assert group.shape == (3, 4) and [n.target.name for n in group.outputs] == ["log"]
    assert [n.name for n in group.inputs] == ["x"]


def test_values_read_outside_the_group_are_materialized():
    def fn(x):
        e = x.exp()
        return (e * 2.0).neg(), e.sum()

    groups = groups_of(fn, X)
    # exp is read by the sum and by mul: it stays in the pointwise kernel, written once
    assert names(groups) == [["exp", "mul", "neg"], ["sum"]]
    assert [n.target.name for n in groups[0].outputs] == ["exp", "neg"]
    assert [n.target.name for n in groups[1].inputs] == ["exp"]


def test_a_group_is_not_extended_past_an_extern_reading_it():
    # the kernel runs at its last member: `sum` reads `e` before `mul`, so `mul` starts anew
    def fn(x):
        e = x.exp()
        return e.sum(), (e * 2.0).neg()

    groups = groups_of(fn, X)
    assert names(groups) == [["exp"], ["sum"], ["mul", "neg"]]


def test_an_epilogue_needs_the_reduced_shape():
    # x - mean broadcasts the mean back over x: not an epilogue of the mean, whose
    # reduction group would have to write it first; a row group computes both per row
    groups = groups_of(lambda x: (x - x.mean(1, keepdim=True)) * 2.0, X)
    assert names(groups) == [["mean", "sub", "mul"]]
    assert groups[0].reduction is None and list(groups[0].chain) == groups[0].nodes[:1]


def test_max_with_dim_is_one_group_with_its_values():
    groups = groups_of(lambda x: x.abs().max(1).values * 2.0, X)
    assert names(groups) == [["abs", "argmax", "take_along", "mul"]]
    assert [n.target.name for n in groups[0].outputs] == ["mul"]


def test_cross_entropy_is_one_group():
    import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use

    target = jg.tensor(np.array([0, 3, 1]))
    groups = groups_of(lambda x, t: F.cross_entropy(x * 2.0, t), X, target)
    assert names(groups) == [["mul", "log_softmax", "nll_loss"]]
    assert groups[0].spec.kind == "cross_entropy" and groups[0].spec.dims == (1,)


def test_chained_reductions_are_separate_groups():
    groups = groups_of(lambda x: x.sum(1).softmax(0), X)
    assert names(groups) == [["sum"], ["softmax"]]


def test_integer_sums_stay_externs():
    groups = groups_of(lambda x: (x > 0).sum(1), X)
    assert names(groups) == [["gt"]]


def test_different_iteration_shapes_are_separate_groups():
    groups = groups_of(lambda x, b: x + b.exp(), X, ROW)
    assert [(g.shape, [n.target.name for n in g.nodes]) for g in groups] == [
        ((4,), ["exp"]), ((3, 4), ["add"])]


def test_group_listing():
    groups = groups_of(lambda x: (x * 2.0).relu(), X)
    lines = str(groups[0]).splitlines()
    assert lines[0] == "fused_0 [3, 4]: mul, relu -> (%relu)"
    assert lines[1].startswith("  %mul = mul(%x, 2.0)  f32[3, 4]  test_fusion.py:")
