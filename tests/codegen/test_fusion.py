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


def test_a_reduction_splits_the_chain_and_materializes_its_input():
    groups = groups_of(lambda x: (x.exp().sum(0) + 1.0).log(), X)
    assert [[n.target.name for n in g.nodes] for g in groups] == [["exp"], ["add", "log"]]
    assert [n.target.name for n in groups[0].outputs] == ["exp"]


def test_values_read_outside_the_group_are_materialized():
    def fn(x):
        e = x.exp()
        return (e * 2.0).neg(), e.sum()

    groups = groups_of(fn, X)
    assert [[n.target.name for n in g.nodes] for g in groups] == [["exp", "mul", "neg"]]
    assert [n.target.name for n in groups[0].outputs] == ["exp", "neg"]


def test_a_group_is_not_extended_past_an_extern_reading_it():
    # the kernel runs at its last member: `sum` reads `e` before `mul`, so `mul` starts anew
    def fn(x):
        e = x.exp()
        return e.sum(), (e * 2.0).neg()

    groups = groups_of(fn, X)
    assert [[n.target.name for n in g.nodes] for g in groups] == [["exp"], ["mul", "neg"]]


def test_different_iteration_shapes_are_separate_groups():
    groups = groups_of(lambda x, b: x + b.exp(), X, ROW)
    assert [(g.shape, [n.target.name for n in g.nodes]) for g in groups] == [
        ((4,), ["exp"]), ((3, 4), ["add"])]


def test_group_listing():
    groups = groups_of(lambda x: (x * 2.0).relu(), X)
    lines = str(groups[0]).splitlines()
    assert lines[0] == "fused_0 [3, 4]: mul, relu -> (%relu)"
    assert lines[1].startswith("  %mul = mul(%x, 2.0)  f32[3, 4]  test_fusion.py:")
