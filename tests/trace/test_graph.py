"""The graph IR: building, users, names, lint, DCE, the listing, python_code and GraphModule.

Graphs are built by hand from real OpDefs with real Tensors as meta["val"]; printed IR
is compared as exact text, generated code is run and compared with eager results.
"""

import linecache
import operator
import traceback
from collections import namedtuple

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.eager.grad_mode import set_grad_enabled
from jitgrad.eager.ops.registry import OPS, OpDef
from jitgrad.trace.ir.graph import Graph, SourceLocation, describe_value, map_arg
from jitgrad.trace.ir.graph_module import GraphModule
from jitgrad.trace.ir.lint import lint
from jitgrad.trace.ir.python_code import generate_python

MUL, SUM, MATMUL, RELU, SPLIT, ADD = (OPS[n] for n in ("mul", "sum", "matmul", "relu",
                                                       "split", "add"))


def _at(lineno, text=""):
    return SourceLocation("/home/user/project/train.py", lineno, 4, 10, text)


def _mlp_graph():
    """relu(x @ w).sum(1) with vals and source lines, as the translator would record it."""
    rng = np.random.default_rng(0)
    x = jg.tensor(rng.normal(size=(64, 128)).astype(np.float32))
    w = jg.tensor(rng.normal(size=(128, 10)).astype(np.float32), requires_grad=True)
    g = Graph()
    px, pw = g.placeholder("x", x), g.placeholder("w", w)
    mm = g.call_function(MATMUL, (px, pw), name="mm")
    mm.meta.update(val=jg.matmul(x, w), source=_at(12, "mm = x @ w"))
    relu = g.call_function(RELU, (mm,))
    relu.meta.update(val=jg.relu(mm.meta["val"]), source=_at(13))
    loss = g.call_function(SUM, (relu,), {"dims": (1,), "keepdim": False, "out_dtype": None},
                           name="loss")
    loss.meta.update(val=relu.meta["val"].sum(1), source=_at(14))
    g.output((loss,))
    return g, (x, w)


# ----- listing --------------------------------------------------------------------------

def test_listing_is_aligned_with_types_grad_markers_and_file_lines():
    g, _ = _mlp_graph()
    assert str(g) == (
        "graph(x: f32[64, 128], w: f32[128, 10] grad):\n"
        "  %mm   = call_function[matmul](%x, %w)                                         f32[64, 10] grad   train.py:12\n"
        "  %relu = call_function[relu](%mm)                                              f32[64, 10] grad   train.py:13\n"
        "  %loss = call_function[sum](%relu, dims=(1,), keepdim=False, out_dtype=None)   f32[64] grad       train.py:14\n"
        "  return (%loss,)")


def test_listing_drops_empty_columns_and_shows_constants():
    g = Graph()
    a = g.placeholder("a")
    b = g.call_function(MUL, (a, 2.5))
    c = g.call_function(ADD, (b, a), name="c")
    g.output((c, b, None, float("inf")))
    assert str(g) == (
        "graph(a):\n"
        "  %mul = call_function[mul](%a, 2.5)\n"
        "  %c   = call_function[add](%mul, %a)\n"
        "  return (%c, %mul, None, inf)")


def test_listing_of_multi_output_op_getitem_and_get_attr():
    x = jg.arange(20.0).reshape(2, 10)
    g = Graph()
    px = g.placeholder("x", x)
    parts = g.call_function(SPLIT, (px,), {"dim": 1, "sizes": (4, 6)})
    parts.meta["val"] = jg.split(x, [4, 6], dim=1)
    first = g.call_function(operator.getitem, (parts, 0))
    first.meta["val"] = parts.meta["val"][0]
    scale = g.get_attr("scale", jg.tensor(3, dtype=jg.int64))
    out = g.call_function(MUL, (first, scale))
    out.meta["val"] = first.meta["val"] * 3
    g.output((out,))
    assert str(g) == (
        "graph(x: f32[2, 10]):\n"
        "  %split   = call_function[split](%x, dim=1, sizes=(4, 6))   (f32[2, 4], f32[2, 6])\n"
        "  %getitem = call_function[operator.getitem](%split, 0)      f32[2, 4]\n"
        "  %scale   = get_attr[scale]                                 i64[]\n"
        "  %mul     = call_function[mul](%getitem, %scale)            f32[2, 4]\n"
        "  return (%mul,)")


def test_listing_hides_addresses_of_objects_without_a_value_repr():
    g = Graph()
    a = g.placeholder("a")
    gen = np.random.default_rng(0)
    n = g.call_function(OPS["normal"], (a, 1.0), {"generator": gen})
    g.output((n,))
    assert str(g).splitlines()[1] == "  %normal = call_function[normal](%a, 1.0, generator=<Generator>)"


@pytest.mark.parametrize("dtype, text", [
    (jg.float16, "f16[2]"), (jg.float32, "f32[2]"), (jg.float64, "f64[2]"),
    (jg.int8, "i8[2]"), (jg.int16, "i16[2]"), (jg.int32, "i32[2]"), (jg.int64, "i64[2]"),
    (jg.uint8, "u8[2]"), (jg.bool, "b8[2]")])
def test_describe_value_short_dtype_names(dtype, text):
    assert describe_value(jg.zeros(2, dtype=dtype)) == text


def test_describe_value_of_scalars_tuples_and_none():
    assert describe_value(jg.zeros((), requires_grad=True)) == "f32[] grad"
    assert describe_value((jg.zeros(1, 3),)) == "(f32[1, 3],)"
    assert describe_value((jg.zeros(2, dtype=jg.int64), None)) == "(i64[2], None)"
    assert describe_value(3) == "int"
    assert describe_value(None) == ""


def test_source_location_prints_basename_and_line():
    loc = SourceLocation("/a/b/model.py", 41, 8, 19, "if loss.item() > 1.0:")
    assert str(loc) == "model.py:41"
    assert (loc.col, loc.end_col, loc.text) == (8, 19, "if loss.item() > 1.0:")


# ----- names -------------------------------------------------------------------------

def test_names_come_from_users_then_targets_and_are_deduplicated():
    g = Graph()
    a = g.placeholder("a")
    names = [g.call_function(MUL, (a, a)).name, g.call_function(MUL, (a, a)).name,
             g.call_function(MUL, (a, a), name="mul_3").name,
             g.call_function(MUL, (a, a)).name, g.call_function(MUL, (a, a)).name,
             g.call_function(MUL, (a, a), name="y").name, g.call_function(MUL, (a, a), name="y").name,
             g.call_function(operator.getitem, ((a,), 0)).name]
    assert names == ["mul", "mul_1", "mul_3", "mul_2", "mul_4", "y", "y_1", "getitem"]


def test_names_are_python_identifiers_that_do_not_shadow_generated_globals():
    g = Graph()
    nodes = [g.placeholder(name) for name in
             ("self.w", "x[0]", "0x", "lambda", "ops", "attrs", "np", "", "ops")]
    assert [n.name for n in nodes] == ["self_w", "x_0_", "_0x", "lambda_", "ops_1", "attrs_1",
                                       "np_1", "_", "ops_2"]
    assert [n.target for n in nodes][:3] == ["self.w", "x[0]", "0x"]


# ----- users and args ----------------------------------------------------------------------

def test_users_follow_args_kwargs_and_nested_structures():
    g = Graph()
    a, b, c = g.placeholder("a"), g.placeholder("b"), g.placeholder("c")
    n = g.call_function(jg.cat, ([a, b],), {"dim": 0})
    m = g.call_function(operator.getitem, (n, (slice(None, c, None), Ellipsis)))
    assert list(a.users) == [n] and list(b.users) == [n] and list(c.users) == [m]
    assert n.all_input_nodes == [a, b] and m.all_input_nodes == [n, c]
    n.args = ([b, b],)
    assert a.users == {} and list(b.users) == [n] and n.all_input_nodes == [b]
    n.kwargs = {"dim": a}
    assert list(a.users) == [n] and n.kwargs == {"dim": a}


def test_replace_all_uses_with_moves_every_use():
    g = Graph()
    a, b = g.placeholder("a"), g.placeholder("b")
    m1 = g.call_function(MUL, (a, a))
    m2 = g.call_function(ADD, (a, m1), {"alpha": a})
    out = g.output((a, m2))
    assert a.replace_all_uses_with(b) == [m1, m2, out]
    assert a.users == {} and list(b.users) == [m1, m2, out]
    assert m1.args == (b, b) and m2.args == (b, m1) and m2.kwargs == {"alpha": b}
    assert out.args == (b, m2)
    lint(g)


def test_map_arg_keeps_container_types():
    g = Graph()
    a = g.placeholder("a")
    pair = namedtuple("Pair", "left right")
    value = {"k": [pair(a, 1), jg.Size((2, 3))], "s": slice(a, None, 2)}
    mapped = map_arg(value, lambda n: n.name)
    assert mapped == {"k": [pair("a", 1), (2, 3)], "s": slice("a", None, 2)}
    assert type(mapped["k"][0]) is pair and type(mapped["k"][1]) is jg.Size


def test_placeholders_created_late_still_come_first():
    g = Graph()
    a = g.placeholder("a")
    m = g.call_function(MUL, (a, a))
    b = g.placeholder("b")
    g.output((m, b))
    assert list(g.nodes) == [a, b, m, g.output_node]
    assert g.placeholders == [a, b]
    lint(g)


def test_inserting_before_and_no_append_after_output():
    g = Graph()
    a = g.placeholder("a")
    m = g.call_function(MUL, (a, a))
    out = g.output((m,))
    with pytest.raises(RuntimeError, match=r"cannot append a call_function node \(add\) after the output node"):
        g.call_function(ADD, (m, a))
    with g.inserting_before(out):
        extra = g.call_function(ADD, (m, a), name="extra")
    out.args = (extra,)
    assert [n.name for n in g.nodes] == ["a", "mul", "extra", "output"]
    lint(g)


def test_get_attr_keys_share_equal_objects_and_rename_different_ones():
    g = Graph()
    w, v = jg.ones(2), jg.zeros(2)
    n1, n2, n3 = g.get_attr("w", w), g.get_attr("w", w), g.get_attr("w", v)
    assert (n1.target, n2.target, n3.target) == ("w", "w", "w_1")
    assert (n1.name, n2.name, n3.name) == ("w", "w_1", "w_1_1")
    assert g.attrs == {"w": w, "w_1": v}
    assert n3.meta["val"] is v


# ----- erase and dead-code elimination ---------------------------------------------------------

def test_erase_node_refuses_while_used_and_drops_its_uses():
    g = Graph()
    a = g.placeholder("a")
    m = g.call_function(MUL, (a, a))
    s = g.call_function(SUM, (m,), {"dims": None, "keepdim": False, "out_dtype": None})
    with pytest.raises(RuntimeError, match=r"erase_node: %mul still has users \(%sum\)"):
        g.erase_node(m)
    g.erase_node(s)
    g.erase_node(m)
    assert a.users == {} and [n.name for n in g.nodes] == ["a"]
    with pytest.raises(RuntimeError, match="is not a node of this graph"):
        g.erase_node(m)


def test_dead_code_elimination_keeps_impure_nodes_and_placeholders():
    sample = OpDef("sample", lambda x: x, None, impure=True)  # as a random op is marked
    user_fn_calls = []
    g = Graph()
    a = g.placeholder("a")
    g.placeholder("unused")
    dead1 = g.call_function(MUL, (a, a), name="dead1")
    g.call_function(ADD, (dead1, a), name="dead2")
    g.call_function(operator.getitem, ((a,), 0), name="dead_item")
    g.get_attr("dead_const", jg.ones(1))
    kept = g.get_attr("kept_const", jg.ones(1))
    g.call_function(sample, (a,), name="sample")
    g.call_function(set_grad_enabled, (False,), name="grad_off")
    g.call_function(user_fn_calls.append, (a,), name="opaque")
    live = g.call_function(MUL, (a, kept), name="live")
    g.output((live,))
    assert g.eliminate_dead_code() is True
    assert [n.name for n in g.nodes] == ["a", "unused", "kept_const", "sample", "grad_off",
                                         "opaque", "live", "output"]
    assert list(g.attrs) == ["kept_const"]
    assert g.eliminate_dead_code() is False
    lint(g)


def test_dead_code_elimination_unlinks_users_and_keeps_a_constant_another_node_reads():
    g = Graph()
    a = g.placeholder("a")
    w = jg.ones(3)
    dead_read = g.get_attr("w", w)
    live_read = g.get_attr("w", w)  # the same constant under the same key
    chain = a
    for i in range(200):  # a long dead chain goes in one call
        chain = g.call_function(MUL, (chain, dead_read), name=f"dead{i}")
    live = g.call_function(ADD, (a, live_read), name="live")
    g.output((live,))
    assert g.eliminate_dead_code() is True
    assert [n.name for n in g.nodes] == ["a", "w_1", "live", "output"]
    assert list(g.attrs) == ["w"] and g.attrs["w"] is w
    assert list(a.users) == [live] and list(live_read.users) == [live]
    lint(g)


def test_node_copy_maps_args_and_keeps_names_constants_and_value_meta():
    g, (x, w) = _mlp_graph()
    g.nodes[2].meta["overwritten"] = ("storage", 1, None)  # a fact of g's eager versions
    copy = Graph()
    copies = {}
    for node in g.nodes:
        copies[node] = copy.node_copy(node, copies.__getitem__)
    assert str(copy) == str(g)
    mm = copies[g.nodes[2]]
    assert mm.args == (copies[g.nodes[0]], copies[g.nodes[1]]) and mm.graph is copy
    assert "overwritten" not in mm.meta and mm.meta["source"] == _at(12, "mm = x @ w")
    lint(copy)
    with copy.inserting_before(copy.output_node):
        const = copy.node_copy(Graph().get_attr("c", w), copies.__getitem__)
    assert copy.attrs["c"] is w and const.meta["val"] is w


# ----- lint ------------------------------------------------------------------------------------

def test_lint_with_meta_finds_a_val_its_op_does_not_give():
    g, _ = _mlp_graph()
    lint(g, meta=True)
    mm, relu = g.nodes[2], g.nodes[3]
    relu.args = (g.nodes[0],)  # rewired to x, f32[64, 128], its val left as relu(mm)'s
    with pytest.raises(RuntimeError, match=r"^graph lint: %relu \(relu\) is described as "
                                           r"f32\[64, 10\], but its op gives f32\[64, 128\] "
                                           r"for its inputs$"):
        lint(g, meta=True)
    lint(g)  # the structure alone is sound
    relu.args = (mm,)
    mm.args = (mm.args[1], mm.args[0])
    with pytest.raises(RuntimeError, match=r"^graph lint: %mm \(matmul\): its op refuses "
                                           r"its inputs' vals: ValueError: matmul: "):
        lint(g, meta=True)


def _small_graph():
    g = Graph()
    a = g.placeholder("a")
    m = g.call_function(MUL, (a, a))
    s = g.call_function(ADD, (m, a))
    out = g.output((s,))
    return g, a, m, s, out


def _corrupt_duplicate_name(g, a, m, s, out):
    s.name = "mul"


def _corrupt_use_before_definition(g, a, m, s, out):
    with g.inserting_before(m):
        g.call_function(MUL, (s, a), name="early")


def _corrupt_placeholder_order(g, a, m, s, out):
    with g.inserting_before(a):
        g.call_function(MUL, (2.0, 3.0), name="first")


def _corrupt_users_of_input(g, a, m, s, out):
    s._args = (m, m)  # bypasses the args setter: a.users still lists s


def _corrupt_missing_user(g, a, m, s, out):
    m.users.pop(s)


def _corrupt_foreign_node(g, a, m, s, out):
    other = Graph()
    s.args = (other.placeholder("z"), a)


def _corrupt_node_graph(g, a, m, s, out):
    m.graph = Graph()


def _corrupt_unknown_op(g, a, m, s, out):
    m.op = "call_method"


def _corrupt_target(g, a, m, s, out):
    m.target = "mul"


def _corrupt_missing_attr(g, a, m, s, out):
    with g.inserting_before(m):
        g.get_attr("c", 1.0)
    del g.attrs["c"]


def _corrupt_second_output(g, a, m, s, out):
    with g.inserting_before(out):
        g.output((m,))


def _corrupt_no_output(g, a, m, s, out):
    out.args = ()
    g.erase_node(out)


LINT_CASES = [
    (_corrupt_duplicate_name, r"two nodes are named %mul"),
    (_corrupt_use_before_definition, r"%early \(node 1\) uses %add before it is defined \(node 3\)"),
    (_corrupt_placeholder_order, r"placeholder %a comes after %first; placeholders must come first"),
    (_corrupt_users_of_input, r"%a.users lists %add, which does not use it"),
    (_corrupt_missing_user, r"%add uses %mul, but %mul.users does not list it"),
    (_corrupt_foreign_node, r"%add uses %z, which is not in this graph"),
    (_corrupt_node_graph, r"%mul belongs to another graph"),
    (_corrupt_unknown_op, r"%mul has unknown op 'call_method'"),
    (_corrupt_target, r"call_function %mul has a target that is not callable: str"),
    (_corrupt_missing_attr, r"get_attr %c reads 'c', which is not in graph.attrs"),
    (_corrupt_second_output, r"output node %output_1 is node 3 of 5"),
    (_corrupt_no_output, r"the graph does not end with an output node"),
]


@pytest.mark.parametrize("corrupt, message", LINT_CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_lint_names_the_offending_node(corrupt, message):
    graph_and_nodes = _small_graph()
    lint(graph_and_nodes[0])
    corrupt(*graph_and_nodes)
    with pytest.raises(RuntimeError, match=message):
        lint(graph_and_nodes[0])


# ----- python_code -------------------------------------------------------------------------

def test_python_code_is_readable_and_runs_like_eager():
    g, (x, w) = _mlp_graph()
    assert generate_python(g).source == (
        "def forward(x, w):\n"
        "    mm = ops.matmul(x, w)  # train.py:12\n"
        "    relu = ops.relu(mm); del mm  # train.py:13\n"
        "    loss = ops.sum(relu, dims=(1,), keepdim=False, out_dtype=None); del relu  # train.py:14\n"
        "    return (loss,)\n")
    namespace = generate_python(g).globals
    assert (namespace["ops"].matmul, namespace["ops"].relu, namespace["ops"].sum) == (MATMUL, RELU, SUM)
    exec(generate_python(g).source, namespace)
    (loss,) = namespace["forward"](x, w)
    np.testing.assert_allclose(loss.detach().numpy(), jg.relu(x @ w).sum(1).detach().numpy(),
                               rtol=1e-6)


def test_python_code_renders_nested_constants_and_hoists_objects():
    pair = namedtuple("Pair", "lo hi")

    def pick(t, index, bounds, table):
        assert bounds == pair(0, 1) and table == {"k": [1, 2]}
        return t[index]

    g = Graph()
    x = g.placeholder("x")
    gen = jg.Generator().manual_seed(0)  # numpy PCG64(0), as default_rng(0)
    item = g.call_function(pick, (x, (slice(None, 2, None), Ellipsis), pair(0, 1), {"k": [1, 2]}))
    cast = g.call_function(OPS["to_dtype"], (item,), {"np_dtype": np.dtype("float64")})
    noisy = g.call_function(OPS["normal"], (cast, 0.5), {"generator": gen})
    g.call_function(set_grad_enabled, (False,))
    g.output((cast, noisy, float("-inf"), float("nan"), jg.float64, b"raw"))
    code = generate_python(g).source
    assert code == (
        "def forward(x):\n"
        "    pick = pick_1(x, (slice(None, 2, None), ...), Pair(0, 1), {'k': [1, 2]})\n"
        "    to_dtype = ops.to_dtype(pick, np_dtype=np.dtype('float64')); del pick\n"
        "    normal = ops.normal(to_dtype, 0.5, generator=generator)\n"
        "    set_grad_enabled(False)\n"
        "    return (to_dtype, normal, float('-inf'), float('nan'), float64, b'raw')\n")
    namespace = generate_python(g).globals
    assert namespace["pick_1"] is pick and namespace["Pair"] is pair
    assert namespace["generator"] is gen and namespace["float64"] is jg.float64
    assert namespace["set_grad_enabled"] is set_grad_enabled
    exec(code, namespace)
    value = jg.arange(6.0).reshape(3, 2)
    with jg.enable_grad():
        out = namespace["forward"](value)
        assert not jg.is_grad_enabled()
    assert out[0].dtype == jg.float64
    np.testing.assert_array_equal(out[0].numpy(), value.numpy()[:2])
    expected = value.numpy()[:2] + 0.5 * np.random.default_rng(0).standard_normal((2, 2))
    np.testing.assert_allclose(out[1].numpy(), expected, rtol=1e-12)
    assert out[2] == float("-inf") and np.isnan(out[3]) and out[4:] == (jg.float64, b"raw")


def test_python_code_requires_an_output():
    g = Graph()
    g.placeholder("a")
    with pytest.raises(RuntimeError, match=r"no output node; call graph.output\(values\) first"):
        generate_python(g)


# ----- GraphModule ---------------------------------------------------------------------------

def test_graph_module_runs_the_graph_and_shows_code_and_listing():
    g, (x, w) = _mlp_graph()
    gm = GraphModule(g)
    assert gm.code == generate_python(g).source and str(gm) == str(g)
    (loss,) = gm(x, w)
    np.testing.assert_allclose(loss.detach().numpy(), jg.relu(x @ w).sum(1).detach().numpy(),
                               rtol=1e-6)
    filename = gm.forward.__code__.co_filename
    assert filename.startswith("<jitgrad graph forward_") and filename.endswith(">")
    assert gm.forward.__name__ == filename[len("<jitgrad graph "):-1]
    assert repr(gm) == f"GraphModule({gm.forward.__name__}, 6 nodes)"


def test_graph_module_traceback_shows_the_generated_line():
    g = Graph()
    a, b = g.placeholder("a"), g.placeholder("b")
    mm = g.call_function(MATMUL, (a, b), name="mm")
    mm.meta["source"] = _at(7)
    g.output((mm,))
    gm = GraphModule(g)
    with pytest.raises(ValueError) as info:
        gm(jg.ones(2, 3), jg.ones(2, 3))
    text = "".join(traceback.format_exception(info.value))
    assert f'File "{gm.forward.__code__.co_filename}", line 2, in {gm.forward.__name__}\n' \
           "    mm = ops.matmul(a, b)  # train.py:7\n" in text


def test_graph_module_source_leaves_linecache_with_its_function():
    g = Graph()
    a = g.placeholder("a")
    g.output((a,))
    gm = GraphModule(g)
    filename = gm.forward.__code__.co_filename
    assert linecache.getline(filename, 1) == "def forward(a):\n"
    del gm
    assert filename not in linecache.cache


def test_graph_module_attrs_override_and_get_attr_constants():
    g = Graph()
    x = g.placeholder("x")
    scale = g.get_attr("scale", jg.tensor(2.0))
    g.output((g.call_function(MUL, (x, scale)),))
    assert GraphModule(g)(jg.tensor([1.0, 3.0]))[0].tolist() == [2.0, 6.0]
    gm = GraphModule(g, {"scale": jg.tensor(10.0)})
    assert gm(jg.tensor([1.0, 3.0]))[0].tolist() == [10.0, 30.0]
    assert g.attrs["scale"].item() == 2.0


def test_graph_module_lints_and_recompiles_after_a_pass():
    g, a, m, s, out = _small_graph()
    gm = GraphModule(g)
    assert gm(jg.tensor([3.0]))[0].tolist() == [12.0]
    with g.inserting_before(out):
        neg = g.call_function(OPS["neg"], (s,))
    out.replace_input_with(s, neg)
    gm.recompile()
    assert gm(jg.tensor([3.0]))[0].tolist() == [-12.0]
    m.users.clear()
    with pytest.raises(RuntimeError, match="users does not list it"):
        GraphModule(g)
