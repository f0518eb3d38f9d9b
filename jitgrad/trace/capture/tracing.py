"""One trace of a function call: state shared by the root and inlined Translators.

`trace_function(fn, args, kwargs)` binds the real arguments to the function's
parameters as sourced Vars, runs the Translator under the op recorder, and returns a
`TraceResult`: the Graph (placeholders = tensors read from the frame, in first-use
order), the GuardSet of everything that influenced the trace, and the returned Var
(the structure the caller gets back, rebuilt around the graph's outputs).

Note [Lifted inputs]: every tensor the traced code reads from outside (arguments,
attributes of modules such as parameters, globals, closure cells) becomes a graph
placeholder with a TENSOR_MATCH guard on its source; the same tensor object read through
two sources becomes one placeholder. Tensors created inside the traced code are graph
constants (get_attr), except random ones, which are refused (Unsupported).
"""

from __future__ import annotations

import dataclasses
import sys
import types
from collections import defaultdict
from typing import Any

import numpy as np

from jitgrad.eager.grad_mode import STATE, set_grad_mode
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.breaks.unsupported import BreakKind, Unsupported
from jitgrad.trace.capture.fake import FakeArray, FakeNumber, FakeTensor, number_tensor
from jitgrad.trace.capture.inlining import Inlining, bind_arguments
from jitgrad.trace.capture.recorder import OpRecorder, recording
from jitgrad.trace.capture.side_effects import SideEffects
from jitgrad.trace.capture.sources import (
    AttrSource,
    BuiltinSource,
    ClosureSource,
    GlobalSource,
    GradModeSource,
    ItemSource,
    LocalSource,
    SizeSource,
    Source,
)
from jitgrad.trace.capture.symbolic import ShapeEnv
from jitgrad.trace.capture.translator import Translator
from jitgrad.trace.capture.variables import (
    CellVar,
    ConstVar,
    DictVar,
    GradModeExitVar,
    ListVar,
    ObjectVar,
    TensorVar,
    TupleVar,
    Var,
)
from jitgrad.trace.guards import (
    Guard,
    GuardKind,
    GuardSet,
    KeysMatch,
    LengthMatch,
    SizeRelation,
    TensorMatch,
    dense_order,
)
from jitgrad.trace.ir.graph import Graph


@dataclasses.dataclass(frozen=True)
class SizePolicy:
    """Which input dims a trace makes symbols (Note [Symbolic sizes] in symbolic.py).

    dynamic: dims whose size changed between calls (automatic dynamic); static: dims a
    symbolic trace could not keep generic, traced exactly from then on; everything:
    `compile(dynamic=True)`; never: `compile(dynamic=False)` (no automatic dynamic);
    exact: no symbols, marks included (Note [Checking a symbolic trace]).
    `jitgrad.mark_dynamic(t, d)` / `mark_static(t, d)` mark one tensor's dims.
    Only a tensor dense in some dim order gets symbols (its strides follow from its sizes:
    C order, `x.t()`, any permutation of a contiguous tensor), and only
    at dims of size 2 or more (eager treats sizes 0 and 1 apart).
    """

    dynamic: frozenset[SizeSource] = frozenset()
    static: frozenset[SizeSource] = frozenset()
    everything: bool = False
    never: bool = False
    exact: bool = False  # no symbols at all (the check of a symbolic trace)

    def dims(self, source: Source, tensor: Tensor) -> frozenset[int]:
        if self.exact:
            return frozenset()
        marked = tensor.__dict__.get("_jitgrad_dynamic_dims", ())
        unmarked = tensor.__dict__.get("_jitgrad_static_dims", ())
        shape = tensor._data.shape
        dims = frozenset(
            d for d, n in enumerate(shape)
            if n >= 2 and d not in unmarked and SizeSource(source, d) not in self.static
            and (d in marked or not self.never and (
                self.everything or SizeSource(source, d) in self.dynamic)))
        if dims and dense_order(tensor._data) is None:
            return frozenset()
        return dims


@dataclasses.dataclass(frozen=True)
class Mutation:
    """A graph input written in place by the trace: its final value is `fake`'s node, copied
    back into the real tensor after the graph, whose version advances by `writes`."""

    source: Source
    fake: FakeTensor
    writes: int


@dataclasses.dataclass
class TraceResult:
    """A trace: the graph, its guards and inputs, and either the returned Var (`output`)
    or, for a trace stopped at a graph break, the root frame's state there (`stopped_at`)."""

    graph: Graph
    guards: GuardSet
    input_sources: list[Source]
    side_effects: SideEffects
    output: Var | None
    stopped_at: Translator | None = None
    number_sources: frozenset[Source] = frozenset()  # inputs that are Python numbers
    mutations: list[Mutation] = dataclasses.field(default_factory=list)
    shape_env: ShapeEnv = dataclasses.field(default_factory=ShapeEnv)
    # in-place view ops on inputs, (source, name, args, kwargs) in program order per input
    # (Note [In-place view ops] in functionalize.py)
    view_ops: list[tuple[Source, str, tuple, dict]] = dataclasses.field(default_factory=list)


class TraceContext(Inlining):
    """Graph, guards and lifted inputs of one trace (see Note [Lifted inputs])."""

    def __init__(self, fn: types.FunctionType, dynamic_numbers: frozenset[Source],
                 sizes: SizePolicy = SizePolicy()) -> None:
        self.fn = fn
        self.sizes = sizes
        self.shape_env = ShapeEnv(lambda: self.recorder.location)
        self._dynamic_dims: dict[Source, frozenset[int]] = {}
        self.dynamic_numbers = dynamic_numbers  # see Note [Unspecialized numbers]
        self.number_sources: set[Source] = set()
        self.graph = Graph()
        self.guards = GuardSet()
        self.recorder = OpRecorder(self.graph, self.constant_node)
        self.input_sources: list[Source] = []
        self.side_effects = SideEffects()
        self._lifted: dict[int, FakeTensor] = {}
        # one Var per list/dict read from outside, so every read sees the trace's mutations
        self._containers: dict[int, Var] = {}
        self._input_fakes: dict[Source, FakeTensor] = {}
        self._lift_sources: dict[int, Source] = {}
        self._constants: dict[int, FakeTensor] = {}
        self._guarded: set[tuple[GuardKind, Source]] = set()

    # ----- guards ---------------------------------------------------------------------
    def _guard(self, kind: GuardKind, source: Source | None, expected: Any) -> None:
        if source is None or (kind, source) in self._guarded:
            return
        self._guarded.add((kind, source))
        self.guards.add(Guard(kind, source, expected, self.recorder.location))

    def guard_constant(self, var: ConstVar) -> None:
        if var.source is None:
            return
        try:
            self._guard(GuardKind.EQUALS_MATCH, var.source, var.value)
        except TypeError:  # not a plain constant (a dtype, a slice...): its identity
            self._guarded.discard(("EQUALS_MATCH", var.source))
            self._guard(GuardKind.ID_MATCH, var.source, var.value)

    def guard_storage_offsets(self) -> None:
        """A traced `storage_offset()` read: every tensor input's storage offset is guarded
        (views of inputs report offsets that follow theirs)."""
        for source, fake in self._input_fakes.items():
            tensor = fake.storage.input_tensor()
            self.guards.add(Guard(GuardKind.TENSOR_MATCH, source, TensorMatch.of(
                tensor, strides=True, storage_offset=True,
                dynamic=self._dynamic_dims.get(source, frozenset())), self.recorder.location))

    def guard_sizes(self) -> None:
        """The relations between symbolic sizes the trace relied on, and the equalities of
        duck-sized dims, as SIZE_RELATION guards (Note [Symbolic sizes])."""
        env = self.shape_env

        def sized(expr: Any) -> Any:
            if type(expr) is int:
                return expr
            if expr[0] == "sym":
                return ("size", env.sources[expr[1]])
            return (expr[0], sized(expr[1]), sized(expr[2]))

        for source, k in env.aliases:
            self.guards.add(Guard(GuardKind.SIZE_RELATION, source, SizeRelation(
                ("size", source), "==", ("size", env.sources[k]))))
        for (lhs, op, rhs), location in env.relations.items():
            relation = SizeRelation(sized(lhs), op, sized(rhs))
            self.guards.add(Guard(GuardKind.SIZE_RELATION, relation.sources()[-1], relation,
                                  location))

    def guard_identity(self, var: ObjectVar) -> None:
        self._guard(GuardKind.ID_MATCH, var.source, var.value)

    def guard_type(self, var: ObjectVar) -> None:
        self._guard(GuardKind.TYPE_MATCH, var.source, type(var.value))

    # ----- values from outside ------------------------------------------------------------
    def wrap_value(self, value: Any, source: Source | None) -> Var:
        """A Var for a real value read from the frame (VariableBuilder in Dynamo).

        Containers get their length (dicts their keys) guarded here, conservatively; their
        items are wrapped with item sources and guarded when used.
        """
        if isinstance(value, FakeTensor):
            return TensorVar(value)
        if isinstance(value, Tensor) and getattr(value, "_jitgrad_uninitialized", False):
            # a lazy module's parameter has no shape until its first call materializes it
            raise Unsupported(BreakKind.UNINITIALIZED_PARAMETER,
                              "a lazy module's parameter is read "
                              "before its first call gave it a shape",
                              "call the module once before compiling it")
        if isinstance(value, Tensor):
            return TensorVar(self.lift(value, source))
        if type(value) in (int, float) and source in self.dynamic_numbers:
            return TensorVar(self.lift_number(value, source), source=source)
        if isinstance(value, (int, float, bool, str, type(None), complex)):
            return ConstVar(value, source=source)
        if type(value) in (list, dict) and source is not None and id(value) in self._containers:
            # read again (a global list appended to twice): the same Var, holding what the
            # trace wrote so far; reached by another name, the two must stay one object
            known = self._containers[id(value)]
            if known.source != source:
                self._guard(GuardKind.DUPLICATE_INPUT, source, known.source)
            return known
        if type(value) in (tuple, list):
            self._guard(GuardKind.LENGTH_MATCH, source, LengthMatch.of(value))
            items = [self.wrap_value(v, source and ItemSource(source, i))
                     for i, v in enumerate(value)]
            if type(value) is tuple:
                return TupleVar(items, source=source)
            return self._container(value, ListVar(items, source=source))
        if type(value) is dict and all(isinstance(k, (str, int)) for k in value):
            self._guard(GuardKind.DICT_KEYS_MATCH, source, KeysMatch.of(value))
            return self._container(value, DictVar({
                k: self.wrap_value(v, source and ItemSource(source, k))
                for k, v in value.items()}, source=source))
        return ObjectVar(value, source=source)

    def _container(self, value: Any, var: Var) -> Var:
        if var.source is not None:
            self._containers[id(value)] = var
        return var

    def lift(self, tensor: Tensor, source: Source | None) -> FakeTensor:
        """The placeholder for a tensor read from outside (one per tensor object)."""
        fake = self._lifted.get(id(tensor))
        if fake is not None:
            if source is not None and source != self._lift_sources[id(tensor)]:
                # the graph treats both reads as one tensor: they must stay one object
                self._guard(GuardKind.DUPLICATE_INPUT, source, self._lift_sources[id(tensor)])
            return fake
        if source is None:
            fake = self.constant_tensor(tensor)
            fake.storage.outside = True  # see Note [Functionalized in-place ops]
            return fake
        # strides guarded: the trace follows eager's layout decisions (view vs copy, stride())
        dynamic = self.sizes.dims(source, tensor)
        self._guard(GuardKind.TENSOR_MATCH, source, TensorMatch.of(tensor, strides=True,
                                                           dynamic=dynamic))
        node = self.graph.placeholder(_placeholder_name(source))
        fake = FakeTensor.like(node, tensor, tensor._requires_grad)
        if dynamic:
            self._dynamic_dims[source] = dynamic
            fake.__dict__["sym_shape"] = tuple(
                self.shape_env.symbol(SizeSource(source, d), n) if d in dynamic else n
                for d, n in enumerate(tensor._data.shape))
        fake.storage.input = (source, tensor)
        self._lifted[id(tensor)] = fake
        self._input_fakes[source] = fake
        self._lift_sources[id(tensor)] = source
        self.input_sources.append(source)
        return fake

    def lift_number(self, value: int | float, source: Source) -> FakeTensor:
        """A graph input for a number whose value changed between calls.

        Note [Unspecialized numbers]: a Python number read from outside is first a trace
        constant guarded by its value; at a recompile, every such number whose value
        changed (not only the guard that failed first) is marked dynamic, and later traces
        make it a FakeNumber placeholder
        guarded only by its type (the runner passes it as a 0-d tensor). Python arithmetic
        and comparisons on it stay in the graph and compute as Python does (float64/int64,
        bools as ints, ZeroDivisionError checked when the graph runs: `_number_operator` in
        operations.py); other operators (`**`, bit operations) are graph breaks; where a Python
        constant is needed (a loop bound) it is specialized again.
        """
        fake = self._lifted.get(id(source))
        if fake is None:
            self._guard(GuardKind.TYPE_MATCH, source, type(value))
            node = self.graph.placeholder(_placeholder_name(source))
            example = number_tensor(value)
            fake = FakeNumber.of(node, (), example._data.dtype, False)
            fake.__dict__["value"] = value
            self._lifted[id(source)] = fake
            self.input_sources.append(source)
            self.number_sources.add(source)
        return fake

    def constant_tensor(self, tensor: Tensor) -> FakeTensor:
        """A tensor made inside traced code, held by the graph as a get_attr constant."""
        if isinstance(tensor, FakeTensor):
            return tensor
        if isinstance(tensor._data, FakeArray):
            raise Unsupported(BreakKind.DATA_DEPENDENT_OP,
                              "a tensor was built from a traced tensor's "
                              "values", "build it outside the compiled function and pass it in")
        fake = self._constants.get(id(tensor))
        if fake is None:
            if tensor._requires_grad:
                raise Unsupported(BreakKind.UNSUPPORTED_TENSOR, "a tensor that requires grad was "
                                  "created inside the compiled function",
                                  "create it outside and pass it in")
            node = self.graph.get_attr(f"_tensor_constant{len(self._constants)}", tensor)
            fake = FakeTensor.like(node, tensor, False)
            self._constants[id(tensor)] = fake
        return fake

    def constant_node(self, tensor: Tensor) -> Any:
        return self.constant_tensor(tensor).node

    def mutated_inputs(self) -> list[Mutation]:
        """Graph inputs written in place by the trace, in input order (their write-backs).

        Raises Unsupported when a written input shares memory with another input (two
        tensor objects over one array, e.g. `x` and `x.detach()`): the graph would read the
        other one's old values. Checked at trace time only; see Note [Functionalized
        in-place ops] in jitgrad/trace/capture/fake.py.
        """
        found = []
        inputs = [self._input_fakes[s].storage.input_tensor() for s in self.input_sources
                  if s not in self.number_sources]
        for source in self.input_sources:
            if source in self.number_sources:
                continue
            storage = self._input_fakes[source].storage
            if not storage.written:
                continue
            tensor = storage.input_tensor()
            if any(other is not tensor and np.may_share_memory(tensor._data, other._data)
                   for other in inputs):
                raise Unsupported(BreakKind.INPLACE_ON_ALIASED_INPUT, f"in-place write to "
                                  f"{source.name()}, whose memory another input shares",
                                  "pass one tensor once, or clone() one of them")
            # (its in-place view ops bump the real tensor's version when replayed)
            found.append(Mutation(source, self._input_fakes[source],
                                  storage.bumps - len(storage.view_ops)))
        return found

    # ----- tensors read through their sources ---------------------------------------------
    def grad_of(self, var: TensorVar) -> Var:
        """`t.grad` of a graph input `t`: read through the input's source (a lifted tensor,
        TENSOR_MATCH-guarded, or None, guarded when used), or the value this trace stored."""
        source, tensor = self._input_of(var, "Tensor.grad")
        stored = self.side_effects.load_tensor_attr(tensor, "grad")
        if stored is not None:
            return stored
        return self.wrap_value(tensor._grad, AttrSource(source, "grad"))

    def store_grad(self, var: TensorVar, value: Var) -> None:
        """`t.grad = value` on a graph input (None or a tensor): replayed after the graph."""
        source, tensor = self._input_of(var, "`Tensor.grad = ...`")
        if not (isinstance(value, ConstVar) and value.value is None or
                isinstance(value, TensorVar) and not isinstance(value.fake, FakeNumber)):
            raise Unsupported(BreakKind.SIDE_EFFECT, f"`.grad = ` a {type(value).__name__}")
        self.side_effects.store_tensor_attr(tensor, source, "grad", value)

    def tensor_keyed_item(self, mapping: ObjectVar, key: TensorVar) -> Var:
        """`mapping[t]` for a dict keyed by tensors (an optimizer's `self.state[p]`).

        The key must be a graph input; it is guarded to be the same tensor object (ID_MATCH),
        the item's source is `mapping[<key's source>]`. A key missing from a defaultdict(dict)
        gives a new dict, stored into the mapping after the graph (a NOT_PRESENT guard makes
        the next call, which finds it, trace again).
        """
        source, tensor = self._input_of(key, "a dict indexed by a tensor")
        table = mapping.value
        if not isinstance(table, dict) or mapping.source is None:
            raise Unsupported(BreakKind.UNSUPPORTED_VALUE,
                              f"indexing a {type(table).__name__} with "
                              "a tensor")
        self._guard(GuardKind.ID_MATCH, source, tensor)
        stored = self.side_effects.load_item(table, tensor)
        if stored is not None:
            return stored
        item_source = ItemSource(mapping.source, source)
        if tensor in table:
            return self.wrap_value(table[tensor], item_source)
        if not (isinstance(table, defaultdict) and table.default_factory is dict):
            raise Unsupported(BreakKind.USER_ERROR, f"KeyError: {source.name()} is not a key of "
                              f"{mapping.source.name()}")
        self._guard(GuardKind.NOT_PRESENT, item_source, None)
        created = DictVar({})
        self.side_effects.store_item(table, tensor, item_source, created)
        return created

    def _input_of(self, var: TensorVar, what: str) -> tuple[Source, Tensor]:
        storage = var.fake.storage
        if storage.input is None or var.fake.__dict__.get("alias_of") is not None:
            raise Unsupported(BreakKind.UNSUPPORTED_ATTRIBUTE,
                              f"{what} of a tensor computed in the "
                              "compiled function", "read it outside the compiled function")
        return storage.input

    def load_global(self, tx: Translator, name: str) -> Var:
        stored = self.side_effects.load_global(tx.f_globals, name)
        if stored is not None:
            return stored
        if name in tx.f_globals:
            return self.wrap_value(tx.f_globals[name], _global_source(tx, name))
        builtins = tx.f_globals.get("__builtins__", sys.modules["builtins"])
        builtins = builtins if isinstance(builtins, dict) else vars(builtins)
        if name not in builtins:
            raise Unsupported(BreakKind.USER_ERROR, f"name {name!r} is not defined")
        return self.wrap_value(builtins[name], BuiltinSource(name))

    def store_global(self, tx: Translator, name: str, value: Var) -> None:
        """`global name; name = value`: recorded and replayed after the graph."""
        self.side_effects.store_global(tx.f_globals, name, _global_source(tx, name), value)

    # ----- grad mode ----------------------------------------------------------------------
    def enter_grad_mode(self, enabled: bool, previous: bool | None = None) -> GradModeExitVar:
        """A grad-mode `with` block starts; its exit restores `previous` (by default the
        mode found here)."""
        if previous is None:
            previous = STATE.enabled
        self.set_grad_mode(enabled)
        return GradModeExitVar(previous, enabled)

    def exit_grad_mode(self, exit_var: GradModeExitVar) -> Var:
        self.set_grad_mode(exit_var.previous)
        return ConstVar(None)

    def set_grad_mode(self, enabled: bool) -> None:
        """Switch grad mode in the trace (a `set_grad_mode` node marks the region)."""
        if enabled != STATE.enabled:
            node = self.graph.call_function(set_grad_mode, (enabled,))
            if self.recorder.location is not None:
                node.meta["source"] = self.recorder.location
        STATE.enabled = enabled


def _bound_value(var: Var) -> Any:
    """The real value bound to a parameter (`*args` arrive as a tuple, `**kwargs` a dict)."""
    if isinstance(var, TupleVar):
        return tuple(_bound_value(v) for v in var.items)
    if isinstance(var, DictVar):
        return {k: _bound_value(v) for k, v in var.items.items()}
    assert isinstance(var, ConstVar), "the call's arguments are bound as ConstVars"
    return var.value


def _global_source(tx: Translator, name: str) -> Source:
    if tx.global_source is None:
        return GlobalSource(name)
    return ItemSource(tx.global_source, name)


def _placeholder_name(source: Source) -> str:
    name = source.name()
    cleaned = "".join(c if c.isalnum() else "_" for c in name).strip("_")
    return cleaned or "input"


def _mode_outside_blocks(tx: Translator) -> bool:
    """The grad mode the traced frame leaves (or is in at its break) outside any grad-mode
    `with` block still open (their exits on the stack; the resume function re-enters them)."""
    exits = [v for v in tx.stack if isinstance(v, GradModeExitVar)] if tx.stopped else []
    return exits[0].previous if exits else STATE.enabled


def trace_function(fn: types.FunctionType, args: tuple, kwargs: dict[str, Any],
                   stop_at: int | None = None,
                   dynamic_numbers: frozenset[Source] = frozenset(),
                   sizes: SizePolicy = SizePolicy()) -> TraceResult:
    """Trace one call of `fn` (see the module docstring). Raises Unsupported.

    stop_at: the offset of a root-frame instruction to stop before (a graph break found
    by an earlier trace); the result then carries the stopped Translator.
    dynamic_numbers: sources of numbers to take as graph inputs (Note [Unspecialized numbers]).
    sizes: which input dims are symbols (Note [Symbolic sizes]).
    """
    ctx = TraceContext(fn, dynamic_numbers, sizes)
    ctx._guard(GuardKind.GRAD_MODE, GradModeSource(), STATE.enabled)
    code = fn.__code__
    params = bind_arguments(code, tuple(ConstVar(v) for v in fn.__defaults__ or ()),
                            {k: ConstVar(v) for k, v in (fn.__kwdefaults__ or {}).items()},
                            [ConstVar(a) for a in args], {k: ConstVar(v) for k, v in
                                                          kwargs.items()})
    locals_ = {name: ctx.wrap_value(_bound_value(var), LocalSource(name))
               for name, var in params.items()}
    cells = {name: CellVar(contents=ctx.wrap_value(cell.cell_contents, ClosureSource(name)),
                           source=ClosureSource(name))
             for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=True)}
    tx = Translator(ctx, code, fn.__globals__, locals_, cells)
    tx.stop_at = stop_at
    entry_mode = STATE.enabled
    try:
        with recording(ctx.recorder), ctx.shape_env:
            output = tx.run()
            outside = _mode_outside_blocks(tx)
            if outside != entry_mode:  # a bare set_grad_enabled(b): it outlives the call
                ctx.side_effects.set_grad_mode(GradModeSource(), outside)
            if STATE.enabled != entry_mode:  # the graph leaves the mode as it found it
                ctx.set_grad_mode(entry_mode)
    finally:
        if STATE.enabled != entry_mode:
            set_grad_mode(entry_mode)
    ctx.guard_sizes()
    view_ops = [(source, *op) for source, fake in ctx._input_fakes.items()
                for op in fake.storage.view_ops]
    return TraceResult(ctx.graph, ctx.guards, ctx.input_sources, ctx.side_effects, output,
                       tx if tx.stopped else None, frozenset(ctx.number_sources),
                       ctx.mutated_inputs(), ctx.shape_env, view_ops)
