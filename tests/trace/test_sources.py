"""Sources: names, values in a concrete frame, generated expressions, hashing and repr.

Every source is checked three ways against the same frame: `name()` as exact text,
`get(frame)` against the value Python reads directly, and `reconstruct(env)` by
evaluating the generated expression and comparing with `get`.
"""

import builtins
import dataclasses

import pytest

import jitgrad as jg
from jitgrad.trace.capture.sources import (
    AttrSource,
    BuiltinSource,
    CellContentsSource,
    ClosureSource,
    CodeSource,
    FrameValues,
    GlobalSource,
    GradModeSource,
    ItemSource,
    LocalSource,
    TypeSource,
    chain,
    describe,
    render_key,
)

SCALE = 2.5
CONFIG = {"lr": 0.1, 3: "three", (1, "a"): "tuple key"}


def _make_helper(factor):
    def helper(v):
        return v * factor
    return helper


HELPER = _make_helper(4)


class Net:
    def __init__(self):
        self.w = [10, 20, 30]

    def forward(self, x, *rest, scale=1.0, **options):
        return x


def _make_compiled(offset):
    def compiled(self, x, n=3, *args, flag=True, **kwargs):
        return x + offset + SCALE
    return compiled


COMPILED = _make_compiled(7)


class _EvalEnv:
    """A SourceEnv whose expressions are evaluated with `eval` in `namespace`."""

    def __init__(self, fn):
        self.code = fn.__code__
        self.namespace = {"G": fn.__globals__, "B": fn.__builtins__, "C": fn.__closure__}

    def expr(self, source):
        return source.reconstruct(self)

    def const(self, value):
        name = f"k{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def globals_dict(self):
        return "G"

    def builtins_dict(self):
        return "B"

    def closure_cell(self, name):
        return f"C[{self.code.co_freevars.index(name)}]"

    def grad_state(self):
        return self.const(jg.eager.grad_mode.STATE)


NET = Net()
FRAME = FrameValues.bind(COMPILED, (NET, "x-value"), {"extra": 1})
SELF, X = LocalSource("self"), LocalSource("x")

# (source, name(), value Python reads directly)
CASES = [
    (X, "x", "x-value"),
    (LocalSource("n"), "n", 3),
    (LocalSource("args"), "args", ()),
    (LocalSource("kwargs"), "kwargs", {"extra": 1}),
    (ItemSource(LocalSource("kwargs"), "extra"), "kwargs['extra']", 1),
    (GlobalSource("SCALE"), "G['SCALE']", 2.5),
    (ItemSource(GlobalSource("CONFIG"), "lr"), "G['CONFIG']['lr']", 0.1),
    (ItemSource(GlobalSource("CONFIG"), 3), "G['CONFIG'][3]", "three"),
    (ItemSource(GlobalSource("CONFIG"), (1, "a")), "G['CONFIG'][(1, 'a')]", "tuple key"),
    (BuiltinSource("len"), "builtins.len", len),
    (ClosureSource("offset"), "offset", 7),
    (AttrSource(SELF, "w"), "self.w", [10, 20, 30]),
    (ItemSource(AttrSource(SELF, "w"), -1), "self.w[-1]", 30),
    (TypeSource(SELF), "type(self)", Net),
    (AttrSource(TypeSource(SELF), "forward"), "type(self).forward", Net.forward),
    (CodeSource(GlobalSource("HELPER")), "G['HELPER'].__code__", HELPER.__code__),
    (CellContentsSource(GlobalSource("HELPER"), 0, "factor"),
     "G['HELPER'].__closure__[0].cell_contents", 4),
    (GradModeSource(), "jitgrad.is_grad_enabled()", True),
]


@pytest.mark.parametrize("source, name, value", CASES, ids=[c[1] for c in CASES])
def test_name_and_get(source, name, value):
    assert source.name() == name
    got = source.get(FRAME)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("source, name, value", CASES, ids=[c[1] for c in CASES])
def test_reconstructed_expression_evaluates_to_the_same_value(source, name, value):
    env = _EvalEnv(COMPILED)
    expr = source.reconstruct(env)
    assert eval(expr, env.namespace, dict(FRAME.locals)) == value


def test_reconstruct_text_goes_through_the_env():
    env = _EvalEnv(COMPILED)
    assert GlobalSource("SCALE").reconstruct(env) == "G['SCALE']"
    assert ClosureSource("offset").reconstruct(env) == "C[0].cell_contents"
    assert BuiltinSource("len").reconstruct(env) == "B['len']"
    assert ItemSource(AttrSource(SELF, "w"), 0).reconstruct(env) == "self.w[0]"
    # a key that is not a literal is a constant of the generated code
    assert ItemSource(X, jg.float32).reconstruct(env) == "x[k3]"
    assert env.namespace["k3"] is jg.float32


def test_grad_mode_source_follows_no_grad():
    with jg.no_grad():
        assert GradModeSource().get(FRAME) is False
    assert GradModeSource().get(FRAME) is True


def test_get_raises_what_python_raises():
    with pytest.raises(AttributeError, match="'Net' object has no attribute 'missing'"):
        AttrSource(SELF, "missing").get(FRAME)
    with pytest.raises(KeyError, match="nope"):
        ItemSource(GlobalSource("CONFIG"), "nope").get(FRAME)
    with pytest.raises(IndexError):
        ItemSource(AttrSource(SELF, "w"), 5).get(FRAME)

    def make_empty_cell():
        late = 0

        def inner():
            return late  # noqa: F821 - a cell of make_empty_cell, emptied by del
        del late  # the cell stays, empty
        return inner

    inner = make_empty_cell()
    frame = FrameValues.bind(inner, (), {})
    with pytest.raises(ValueError, match="empty"):
        ClosureSource("late").get(frame)


def test_sources_hash_and_compare_by_value():
    a = AttrSource(ItemSource(GlobalSource("CONFIG"), "lr"), "real")
    b = AttrSource(ItemSource(GlobalSource("CONFIG"), "lr"), "real")
    assert a == b and hash(a) == hash(b) and a is not b
    assert {a: 1}[b] == 1
    assert LocalSource("x") != GlobalSource("x") != ClosureSource("x")
    assert ItemSource(X, 0) != ItemSource(X, "0")
    assert GradModeSource() == GradModeSource()
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.attr = "imag"


def test_repr_is_deterministic():
    source = CellContentsSource(AttrSource(LocalSource("self"), "act"), 1, "alpha")
    assert repr(source) == ("CellContentsSource(base=AttrSource(base=LocalSource(local_name="
                            "'self'), attr='act'), index=1, var='alpha')")
    assert repr(ItemSource(GlobalSource("d"), "a")) == (
        "ItemSource(base=GlobalSource(global_name='d'), key='a')")
    assert repr(GradModeSource()) == "GradModeSource()"


def test_chain_lists_bases_root_first_and_describe_names_cells():
    source = ItemSource(AttrSource(SELF, "w"), 0)
    assert chain(source) == [SELF, AttrSource(SELF, "w"), source]
    assert chain(X) == [X]
    assert X.base is None and GradModeSource().base is None
    cell = CellContentsSource(GlobalSource("HELPER"), 0, "factor")
    assert describe(cell) == "G['HELPER'].__closure__[0].cell_contents (free variable 'factor')"
    assert describe(AttrSource(SELF, "w")) == "self.w"


def test_render_key_only_for_literals_that_read_back_equal():
    assert render_key("a") == "'a'"
    assert render_key(-3) == "-3"
    assert render_key((1, "b", None)) == "(1, 'b', None)"
    assert render_key(2.5) == "2.5"
    assert render_key(float("inf")) is None
    assert render_key(jg.float32) is None
    assert render_key(True) == "True"


def test_frame_values_bind_like_a_call():
    frame = FrameValues.bind(COMPILED, (NET, 1, 5, "p", "q"), {"flag": False, "z": 9})
    assert frame.locals == {"self": NET, "x": 1, "n": 5, "args": ("p", "q"), "flag": False,
                            "kwargs": {"z": 9}}
    assert frame.globals is COMPILED.__globals__
    assert frame.builtins is builtins.__dict__
    assert list(frame.closure) == ["offset"] and frame.closure["offset"].cell_contents == 7
    with pytest.raises(TypeError, match="missing a required argument: 'x'"):
        FrameValues.bind(COMPILED, (NET,), {})


def test_frame_values_bind_a_bound_method_puts_self_first():
    frame = FrameValues.bind(NET.forward, ("x", "r"), {"mode": 2})
    assert frame.locals == {"self": NET, "x": "x", "rest": ("r",), "scale": 1.0,
                            "options": {"mode": 2}}
    assert frame.closure == {}
