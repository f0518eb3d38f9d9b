"""Objects of user classes made in traced code, namedtuples and super() are traced, not
graph breaks (Note [Objects made in traced code] in jitgrad/trace/user_objects.py):
one graph, eager's values, and an object that leaves the graph is rebuilt as eager's."""

import collections
import dataclasses

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn


@dataclasses.dataclass
class Config:
    scale: float
    shift: float = 1.0
    tags: list = dataclasses.field(default_factory=list)

    def __post_init__(self):
        self.total = self.scale + self.shift


@dataclasses.dataclass(frozen=True)
class Frozen:
    scale: float


class Scaler:
    factor = 10.0

    def __init__(self, k):
        self.k = k

    def apply(self, x):
        return x * self.k + self.factor

    @property
    def double(self):
        return self.k * 2

    @staticmethod
    def offset():
        return 0.5

    @classmethod
    def make(cls, k):
        return cls(k + 1)


class Shifted(Scaler):
    def __init__(self, k, shift):
        super().__init__(k)
        self.shift = shift

    def apply(self, x):
        return super().apply(x) - self.shift


class Plain:
    def __init__(self):
        super().__init__()
        self.n = 3


Pair = collections.namedtuple("Pair", "a b", defaults=(2.0,))


def dataclass_config(x):
    c = Config(2.0)
    c.tags.append(3)
    return x * c.scale + c.shift + c.total + len(c.tags)


def frozen_dataclass(x):
    return x * Frozen(3.0).scale


def methods_and_properties(x):
    s = Scaler(3)
    return s.apply(x) + s.double + s.offset() + Scaler.make(1).k


def subclass_with_super(x):
    return Shifted(2, 0.25).apply(x) + Plain().n


def namedtuple_fields(x):
    p = Pair(x)
    q = Pair(b=3.0, a=x * 2)
    return p.a * p.b + q[0] * q.b


def isinstance_of_a_new_object(x):
    s = Shifted(1, 0.0)
    return x * 2 if isinstance(s, Scaler) else x


PROGRAMS = [dataclass_config, frozen_dataclass, methods_and_properties, subclass_with_super,
            namedtuple_fields, isinstance_of_a_new_object]


@pytest.mark.parametrize("backend", ["eager", "numba"])
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_objects_made_in_traced_code_give_one_graph_and_eagers_values(program, backend):
    jg.reset()
    x = jg.randn(3, requires_grad=True)
    want = program(x)
    (want_grad,) = jg.autograd.grad(want.sum(), x)
    compiled = jg.compile(program, backend=backend, fullgraph=True)
    got = compiled(x)
    (got_grad,) = jg.autograd.grad(got.sum(), x)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(got_grad.numpy(), want_grad.numpy(), rtol=1e-6)
    report = jg.explain(jg.compile(program, backend=backend))(x)
    assert (report.graph_count, report.graph_break_count) == (1, 0)


def test_an_object_returned_from_the_graph_is_rebuilt_with_its_final_attributes():
    def make(x):
        c = Config(2.0, shift=0.5)
        c.out = x * c.scale
        return c

    x = jg.arange(3.0)
    got = jg.compile(make, fullgraph=True)(x)
    assert type(got) is Config and (got.scale, got.shift, got.total) == (2.0, 0.5, 2.5)
    np.testing.assert_array_equal(got.out.numpy(), [0.0, 2.0, 4.0])
    assert got == Config(2.0, 0.5)  # the dataclass's own __eq__ on the rebuilt fields


def test_an_object_stored_on_an_argument_reaches_it():
    class Holder:
        pass

    def keep(holder, x):
        holder.cfg = Config(3.0)
        return x * holder.cfg.scale

    holder = Holder()
    out = jg.compile(keep, fullgraph=True)(holder, jg.ones(2))
    np.testing.assert_array_equal(out.numpy(), [3.0, 3.0])
    assert isinstance(holder.cfg, Config) and holder.cfg.total == 4.0


def test_an_object_alive_at_a_graph_break_is_rebuilt_for_the_resumed_code():
    def split(x):
        s = Scaler(4)
        y = s.apply(x)
        jg.graph_break()
        return y + s.k + s.double

    x = jg.ones(2)
    np.testing.assert_array_equal(jg.compile(split)(x).numpy(), split(x).numpy())


def test_a_returned_namedtuple_keeps_its_class():
    out = jg.compile(lambda x: Pair(x, 4.0), fullgraph=True)(jg.ones(2))
    assert type(out) is Pair and out.b == 4.0


def test_a_module_subclass_calls_its_parents_forward_through_super():
    class Doubled(nn.Linear):
        def forward(self, x):
            return super().forward(x) * 2

    jg.manual_seed(0)
    layer = Doubled(3, 2)
    x = jg.randn(4, 3)
    got = jg.compile(layer, fullgraph=True)(x)
    np.testing.assert_allclose(got.detach().numpy(), layer(x).detach().numpy(), rtol=1e-6)


def test_a_class_with_its_own_getattr_is_not_modelled_and_still_runs_right():
    class Dynamic:
        def __getattr__(self, name):
            return 2.0

    def use(x):
        return x * Dynamic().anything

    report = jg.explain(jg.compile(use))(jg.ones(2))
    np.testing.assert_array_equal(report.result.numpy(), [2.0, 2.0])
    assert report.graph_break_count == 1


def test_a_missing_attribute_raises_eagers_attribute_error():
    def wrong(x):
        return x * Scaler(1).missing

    with pytest.raises(AttributeError, match="'Scaler' object has no attribute 'missing'"):
        jg.compile(wrong)(jg.ones(2))


def test_assigning_a_field_of_a_frozen_dataclass_raises_eagers_error():
    def assign(x):
        f = Frozen(1.0)
        f.scale = 2.0
        return x * f.scale

    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'scale'"):
        jg.compile(assign)(jg.ones(2))
