"""Seeded random programs written as Python source, valid under jitgrad and under torch.

`generate(seed, features)` returns a `Program`: the source of `def program(...)` (names
`torch`, `F`, `SINK` and `graph_break` are globals supplied by whoever runs it), a numpy
translation when every statement has one, and the input specs of several calls (new
values, grown sizes, float64 instead of float32, changed Python arguments, NaN/inf).

Validity by construction: each candidate statement is executed by eager jitgrad on the
first call's inputs before it is kept, so shapes, dtypes and broadcasting never need a model
here; a candidate that raises is dropped (or, with feature "error_programs", kept as the
last statement: then compiled code must raise the same class). The other calls are run
eagerly at the end and dropped if they raise.

Rounding cannot flip a result: each variable carries an "exact" flag (inputs, and results of
exact ops such as neg, abs, max, views on exact values); discontinuous ops (comparisons,
sign, floor, argmax, data-dependent branches) and ops with poles (log, sqrt, 1/x) take only
exact operands, others get their safe forms (see tests.fuzz.ops).

Features are named switches (`FEATURES`); the CI test turns off those in `KNOWN_OPEN`
(tests.fuzz.test_fuzz) so that an open bug class never fails CI, one name per class.
"""

import random
import textwrap
import warnings
from dataclasses import dataclass, field

import numpy as np

import jitgrad
from tests.fuzz import blocks, harness, inputs, statements

FEATURES = frozenset({
    "scalars", "zero_dim", "int_inputs", "bool_inputs", "reductions", "layer_norm",
    "cross_entropy", "matmul", "views", "inplace", "inplace_view", "inplace_input",
    "indexing", "index_tensor", "bool_mask", "python_control", "data_branch",
    "graph_break", "item", "no_grad", "enable_grad_in_no_grad", "no_grad_leaf_inplace",
    "layout_queries", "special_values", "empty", "noncontig", "big", "grad",
    "backward_inside", "shape_change", "dtype_change", "bool_arith", "python_float_args",
    "index_oob", "index_empty_grad", "large_constants", "add_alpha_scalar",
    "self_operand", "inplace_empty", "cat_stack", "creation", "error_programs", "float64_inputs",
})


@dataclass
class Program:
    """A generated program: its source, numpy translation, calls and the features it used."""

    seed: int
    source: str
    numpy_source: str | None
    calls: list = field(default_factory=list)
    used: set = field(default_factory=set)
    expect_raise: bool = False
    statements: list = field(default_factory=list)
    numpy_statements: list | None = None
    params: list = field(default_factory=list)
    returns: list = field(default_factory=list)
    narrow_floats: bool = False  # some value was float32/16 while generating (eps_of)

    @property
    def filename(self) -> str:
        return f"fuzz_program_{self.seed}.py"


def render(params, statements, returns) -> str:
    """`def program(params):` with the statements (top-level text) and the return tuple."""
    body = [textwrap.indent(s, "    ") for s in statements]
    ret = "    return (" + "".join(f"{r}, " for r in returns) + ")"
    return "def program(" + ", ".join(params) + "):\n" + "\n".join(body + [ret]) + "\n"


class Generator:
    """Builds one program statement by statement, validating each with eager jitgrad."""

    def __init__(self, seed: int, features: frozenset):
        self.seed = seed
        self.rng = random.Random(seed)
        self.nrng = np.random.default_rng(seed)
        self.features = features
        self.used: set = set()
        self.narrow_floats = False
        self.statements: list[str] = []
        self.numpy_statements: list[str] | None = []
        self.exact: dict[str, bool] = {}
        self.env: dict = {}
        self.ns = {"torch": jitgrad, "F": jitgrad.nn.functional,
                   "SINK": __import__("io").StringIO(), "graph_break": jitgrad.graph_break}
        self.counter = 0
        self.expect_raise = False
        self.conversions = False

    def on(self, feature: str, p: float) -> bool:
        """Whether to use `feature` now (enabled and drawn with probability p)."""
        return feature in self.features and self.rng.random() < p

    def new_name(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    # ----- variables -----------------------------------------------------------------
    def tensors(self, pred=None) -> list[str]:
        names = [n for n, v in self.env.items() if isinstance(v, jitgrad.Tensor)]
        return [n for n in names if pred is None or pred(self.env[n])]

    def pick(self, pred=None, exact=None) -> str | None:
        names = self.tensors(pred)
        if exact is not None:
            names = [n for n in names if self.exact.get(n) == exact or (exact is False)]
        if not names:
            return None
        weights = [1 + 2 * (i >= len(names) - 3) for i in range(len(names))]
        return self.rng.choices(names, weights)[0]

    def try_add(self, torch_src: str, numpy_src: str | None, exact: dict, feature: str) -> bool:
        """Execute the candidate on eager jitgrad; keep it if it runs (see module notes)."""
        snapshot = dict(self.env)
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                exec(compile(torch_src, "<candidate>", "exec"), self.ns, self.env)
        except Exception:  # any failure means: not a valid candidate
            self.env = snapshot
            if "error_programs" in self.features and self.rng.random() < 0.05:
                self.statements.append(torch_src)
                self.numpy_statements = None
                self.expect_raise = True
                self.used.update({feature, "error_programs"})
            return False
        self.statements.append(torch_src)
        if self.numpy_statements is not None and numpy_src is not None:
            self.numpy_statements.append(numpy_src)
        else:
            self.numpy_statements = None
        self.exact.update(exact)
        self.used.add(feature)
        self.narrow_floats = self.narrow_floats or any(
            isinstance(v, jitgrad.Tensor) and v.dtype.is_floating_point and v.element_size() < 8
            for v in self.env.values())
        return True

    def force_error(self, torch_src: str, feature: str) -> None:
        """Keep a statement eager rejects as the program's last (compiled must raise too)."""
        self.statements.append(torch_src)
        self.numpy_statements = None
        self.expect_raise = True
        self.used.add(feature)


BUILDERS = [
    (statements.unary, 3), (statements.binary, 4), (statements.reduction, 2.5),
    (statements.layer_norm, 0.5), (statements.cross_entropy, 0.4), (statements.matmul, 1),
    (statements.view, 1.5), (statements.index_tensor, 0.7), (statements.bool_mask, 0.2),
    (blocks.inplace, 1), (blocks.inplace_view, 0.7), (blocks.inplace_input, 0.3),
    (blocks.no_grad_leaf_inplace, 0.2), (blocks.grad_mode, 0.5),
    (blocks.python_control, 0.7), (blocks.data_branch, 0.5), (blocks.graph_break, 0.5),
    (blocks.item, 0.3), (blocks.layout_query, 0.2), (blocks.cat_stack, 0.4),
    (blocks.creation, 0.3), (statements.large_constant, 0.3),
]


def plan_arguments(g: Generator) -> tuple[list, list, list]:
    """(parameter names, argument templates, calls) of a new program."""
    big = g.on("big", 0.02)
    if big:
        g.used.add("big")
    templates = [inputs.tensor_template(g, big) for _ in range(g.rng.randint(1, 3))]
    params = ["a", "b", "c"][:len(templates)]
    py = inputs.py_params(g)
    for name in py:
        templates.append({"kind": "py", "name": name})
        params.append(name)
    first = {"sizes": inputs.first_sizes(g, big), "float64": False,
             "special": g.on("special_values", 0.15), "py": py, "value_seed": g.seed * 10}
    if first["special"]:
        g.used.add("special_values")
    return params, templates, [first] + inputs.later_calls(g, first)


def choose_returns(g: Generator) -> list[str]:
    made = [n for n in g.tensors() if n not in g.params]
    returns = made[-g.rng.randint(1, 3):] if made else [g.params[0]]
    mutated = [p for p in g.params if p in g.env and hasattr(g.env[p], "shape")]
    if mutated and g.rng.random() < 0.2:
        returns.append(g.rng.choice(mutated))
    return returns


def backward_inside(g: Generator, returns: list[str]) -> list[str]:
    """Maybe call backward inside the program; returns the (detached) return expressions."""
    losses = [r for r in returns if g.env[r].requires_grad and g.env[r].dtype.is_floating_point]
    if not losses or not g.on("backward_inside", 0.2):
        return returns
    if g.try_add(f"{losses[0]}.sum().backward()", None, {}, "backward_inside"):
        return [f"{r}.detach()" for r in returns]
    return returns


def generate(seed: int, features: frozenset = FEATURES) -> Program:
    """A random valid program for `seed` using only the enabled `features` (module notes)."""
    g = Generator(seed, features)
    g.grad_program = g.on("grad", 0.5)
    params, templates, calls = plan_arguments(g)
    g.params = params
    for name, spec in zip(params, inputs.specs(templates, calls[0]), strict=False):
        g.env[name], _ = harness.materialize(jitgrad, spec)
        g.exact[name] = True
    target = g.rng.randint(2, 9)
    for _ in range(80):
        if len(g.statements) >= target or g.expect_raise:
            break
        g.rng.choices([b for b, _ in BUILDERS], [w for _, w in BUILDERS])[0](g)
    returns = choose_returns(g)
    if not g.expect_raise:
        returns = backward_inside(g, returns)
    numpy_statements = None if g.expect_raise else g.numpy_statements
    program = Program(
        seed=seed, source=render(params, g.statements, returns),
        numpy_source=None if numpy_statements is None else render(params, numpy_statements,
                                                                    returns),
        calls=[inputs.specs(templates, call) for call in calls], used=g.used,
        expect_raise=g.expect_raise, statements=list(g.statements),
        numpy_statements=numpy_statements, params=params, returns=returns,
        narrow_floats=g.narrow_floats)
    if g.grad_program and any(t.get("requires_grad") for t in templates):
        program.used.add("grad")
    return program
