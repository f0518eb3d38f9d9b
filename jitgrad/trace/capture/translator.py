"""The symbolic bytecode interpreter: one handler per CPython 3.11 opcode.

`Translator` walks a code object's instructions (`dis.get_instructions`: caches hidden,
EXTENDED_ARG folded) over a stack of `Var`s (jitgrad/trace/capture/variables.py). Python-level
values known at trace time are computed for real; tensors are `FakeTensor`s, and every op
on them runs the real jitgrad function under the op recorder, which adds graph nodes.
User functions are inlined by a child Translator (`calls.py`). Anything it cannot model
raises `Unsupported`, carrying the user's file:line.

Loops over known iterables are unrolled simply by following the jumps: the instruction
pointer goes back, the iterator Var advances. `MAX_INSTRUCTIONS` caps the work per frame.
"""

from __future__ import annotations

import builtins
import dis
import linecache
import operator
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from jitgrad.trace.breaks.resume import user_function_name
from jitgrad.trace.breaks.unsupported import BreakKind, Unsupported
from jitgrad.trace.bytecode.opcodes import binary_op_symbol, oparg
from jitgrad.trace.capture import calls, operations
from jitgrad.trace.capture.variables import (
    CellVar,
    ConstVar,
    DictVar,
    GeneratorVar,
    GradModeVar,
    IteratorVar,
    ListVar,
    NestedFunctionVar,
    NullVar,
    ObjectVar,
    TupleVar,
    Var,
)
from jitgrad.trace.ir.graph import SourceLocation

if TYPE_CHECKING:
    from jitgrad.trace.capture.tracing import TraceContext

MAX_INSTRUCTIONS = 100_000  # per traced frame, unrolled loops included
MAX_INLINE_DEPTH = 32

# Python's operator for each operator symbol of BINARY_OP / COMPARE_OP / UNARY_*
OPERATORS = {
    "+": operator.add, "&": operator.and_, "//": operator.floordiv, "<<": operator.lshift,
    "@": operator.matmul, "*": operator.mul, "%": operator.mod, "|": operator.or_,
    "**": operator.pow, ">>": operator.rshift, "-": operator.sub, "/": operator.truediv,
    "^": operator.xor, "<": operator.lt, "<=": operator.le, "==": operator.eq,
    "!=": operator.ne, ">": operator.gt, ">=": operator.ge,
    "UNARY_NEGATIVE": operator.neg, "UNARY_POSITIVE": operator.pos,
    "UNARY_INVERT": operator.invert,
}


# Note [Generators]: a generator made in traced code (`sum(v * 2 for v in xs)`, a user
# function that yields, a class whose __iter__ yields) is traced lazily, as CPython runs
# it: calling it makes a Translator for its frame without running it (a GeneratorVar);
# each item its consumer asks for (FOR_ITER, sum/any/all/list/...) runs that frame to its
# next YIELD_VALUE, and the value of the yield expression is None (nothing is sent);
# `yield from` delegates item by item (SEND).
# So its ops are recorded interleaved with the consumer's, in eager's order, and `any` or
# `all` stop the generator where eager stops it. A graph break inside the generator's
# body breaks at the consumer in the compiled frame; a generator still alive at a break
# cannot be rebuilt and makes the frame eager.

V = TypeVar("V", bound=Var)


class Translator:
    """Symbolic execution of one frame (the compiled function or an inlined callee).

    ctx: the TraceContext shared by a whole trace (graph, guards, lifted inputs).
    locals: name -> Var for fast locals; cells: name -> CellVar for cell and free vars.
    """

    def __init__(self, ctx: TraceContext, code: types.CodeType, f_globals: dict[str, Any],
                 locals_: dict[str, Var], cells: dict[str, CellVar], depth: int = 0,
                 global_source: Any = None) -> None:
        self.ctx = ctx
        self.code = code
        self.f_globals = f_globals
        self.locals = locals_
        self.cells = cells
        self.depth = depth
        self.global_source = global_source  # how guards reach this frame's globals
        self.instructions = list(dis.get_instructions(code))
        self.index_of = {ins.offset: i for i, ins in enumerate(self.instructions)}
        self.stack: list[Var] = []
        self.kw_names: tuple[str, ...] = ()
        self.ip = 0
        self.current: dis.Instruction | None = None
        self.return_value: Var | None = None
        self.stop_at: int | None = None  # offset to stop before (a graph break's instruction)
        self.stopped = False
        self.yielded: Var | None = None  # a generator frame's value at its last yield
        self.started = False  # a generator frame has run to its first yield
        self.steps = 0  # instructions executed

    # ----- driver -------------------------------------------------------------------
    def run(self) -> Var | None:
        """Execute until RETURN_VALUE (returns the returned Var) or until `stop_at`
        (returns None with `stopped` set; the stack and locals are the state there)."""
        while self.return_value is None and self.yielded is None:
            self.steps += 1  # a generator's frame counts across its yields (no endless one)
            if self.steps > MAX_INSTRUCTIONS:
                raise Unsupported(BreakKind.LOOP_TOO_LONG,
                                  f"more than {MAX_INSTRUCTIONS} instructions "
                                  "traced in one frame (a long unrolled loop?)",
                                  "move the loop out of the compiled function or shorten it")
            instruction = self.instructions[self.ip]
            self.current = instruction
            if instruction.offset == self.stop_at:
                self.stopped = True
                return None
            self.ip += 1
            if instruction.positions is not None and instruction.positions.lineno is not None:
                self.ctx.recorder.location = self.location()
            handler = getattr(self, instruction.opname, None)
            try:
                if handler is None:
                    raise Unsupported(BreakKind.UNSUPPORTED_OPCODE,
                                      f"opcode {instruction.opname} is "
                                      "not supported by the tracer", "")
                handler(instruction)
            except Unsupported as err:
                if getattr(err, "location", None) is None:  # the innermost frame says where
                    err.location = self.location()
                if self.depth == 0:  # where the compiled frame itself was when it failed
                    err.root_instruction = instruction
                raise
        return self.return_value

    def next_item(self) -> Var | None:
        """Run a generator frame to its next yield (Note [Generators]): the yielded Var,
        or None once it has returned."""
        if self.return_value is not None:
            return None
        if self.started:
            self.push(ConstVar(None))  # the value of the yield expression: nothing was sent
        self.started = True
        self.run()
        item, self.yielded = self.yielded, None
        return item

    def location(self) -> SourceLocation:
        """The user's file, line, columns and source text of the current instruction."""
        current = self.current
        assert current is not None and current.positions is not None, "no instruction yet"
        positions = current.positions
        assert positions.lineno is not None, f"{current.opname} has no line"
        filename = self.code.co_filename
        text = linecache.getline(filename, positions.lineno).rstrip()
        return SourceLocation(filename, positions.lineno, positions.col_offset,
                              positions.end_col_offset, text,
                              user_function_name(self.code.co_name))

    def jump_to(self, offset: int) -> None:
        self.ip = self.index_of[offset]

    def push(self, var: Var) -> None:
        self.stack.append(var)

    def pop(self) -> Var:
        return self.stack.pop()

    def pop_as(self, kind: type[V]) -> V:
        """Pop a value the bytecode guarantees is a `kind` (a BUILD_* result, a code constant)."""
        var = self.stack.pop()
        assert isinstance(var, kind), f"expected {kind.__name__} on the stack, found {var!r}"
        return var

    def stack_at(self, depth: int, kind: type[V]) -> V:
        """The `kind` the bytecode guarantees `depth` deep on the stack (LIST_APPEND's list)."""
        var = self.stack[-depth]
        assert isinstance(var, kind), f"expected {kind.__name__} on the stack, found {var!r}"
        return var

    def popn(self, n: int) -> list[Var]:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def RAISE_VARARGS(self, inst: dis.Instruction) -> None:
        # the traced call raises: decided by the eager run (Note [User errors] in entry.py)
        raise Unsupported(BreakKind.RAISE, "a `raise` statement was reached while tracing")

    # ----- loads and stores -------------------------------------------------------------
    def NOP(self, inst: dis.Instruction) -> None:
        pass

    RESUME = NOP
    COPY_FREE_VARS = NOP  # free variables are set up as cells before tracing
    EXTENDED_ARG = NOP  # dis lists prefixes too (folded into the next arg); jumps may land here

    def MAKE_CELL(self, inst: dis.Instruction) -> None:
        name = inst.argval
        cell = self.cells.get(name)
        if cell is None:
            self.cells[name] = CellVar(contents=self.locals.pop(name, None))
        elif name in self.locals:  # an argument that is also a cell: move it in
            cell.contents = self.locals.pop(name)

    def LOAD_CONST(self, inst: dis.Instruction) -> None:
        self.push(ConstVar(inst.argval))

    def LOAD_FAST(self, inst: dis.Instruction) -> None:
        if inst.argval not in self.locals:
            raise Unsupported(BreakKind.UNBOUND_LOCAL, f"local variable {inst.argval!r} referenced "
                              "before assignment")
        self.push(self.locals[inst.argval])

    def STORE_FAST(self, inst: dis.Instruction) -> None:
        self.locals[inst.argval] = self.pop()

    def DELETE_FAST(self, inst: dis.Instruction) -> None:
        self.locals.pop(inst.argval, None)

    def LOAD_DEREF(self, inst: dis.Instruction) -> None:
        cell = self.cells[inst.argval]
        if cell.contents is None:
            raise Unsupported(BreakKind.UNBOUND_LOCAL, f"free variable {inst.argval!r} referenced "
                              "before assignment")
        self.push(cell.contents)

    def STORE_DEREF(self, inst: dis.Instruction) -> None:
        cell = self.cells[inst.argval]
        if cell.source is not None:
            raise Unsupported(BreakKind.SIDE_EFFECT, f"assignment to the closure variable "
                              f"{inst.argval!r} of an enclosing function",
                              "return the value instead of assigning it in the closure")
        cell.contents = self.pop()

    def LOAD_CLOSURE(self, inst: dis.Instruction) -> None:
        self.push(self.cells[inst.argval])

    # a class body's namespace (Note [Classes defined in traced code] in user_objects.py)
    def LOAD_NAME(self, inst: dis.Instruction) -> None:
        value = self.locals.get(inst.argval)
        self.push(value if value is not None else self.ctx.load_global(self, inst.argval))

    def STORE_NAME(self, inst: dis.Instruction) -> None:
        self.locals[inst.argval] = self.pop()

    def SETUP_ANNOTATIONS(self, inst: dis.Instruction) -> None:
        self.locals.setdefault("__annotations__", DictVar({}))

    def LOAD_BUILD_CLASS(self, inst: dis.Instruction) -> None:
        self.push(ObjectVar(builtins.__build_class__))

    def LOAD_GLOBAL(self, inst: dis.Instruction) -> None:
        if oparg(inst) & 1:
            self.push(NullVar())
        self.push(self.ctx.load_global(self, inst.argval))

    def STORE_GLOBAL(self, inst: dis.Instruction) -> None:
        self.ctx.store_global(self, inst.argval, self.pop())

    def LOAD_ATTR(self, inst: dis.Instruction) -> None:
        self.push(operations.load_attr(self, self.pop(), inst.argval))

    def LOAD_METHOD(self, inst: dis.Instruction) -> None:
        receiver = self.pop()
        self.push(NullVar())
        self.push(operations.load_attr(self, receiver, inst.argval))

    def STORE_ATTR(self, inst: dis.Instruction) -> None:
        target = self.pop()
        value = self.pop()
        operations.store_attr(self, target, inst.argval, value)

    # ----- stack shuffles -------------------------------------------------------------
    def POP_TOP(self, inst: dis.Instruction) -> None:
        self.pop()

    def PUSH_NULL(self, inst: dis.Instruction) -> None:
        self.push(NullVar())

    def COPY(self, inst: dis.Instruction) -> None:
        self.push(self.stack[-oparg(inst)])

    def SWAP(self, inst: dis.Instruction) -> None:
        self.stack[-1], self.stack[-oparg(inst)] = self.stack[-oparg(inst)], self.stack[-1]

    # ----- calls ----------------------------------------------------------------------
    def KW_NAMES(self, inst: dis.Instruction) -> None:
        self.kw_names = self.code.co_consts[oparg(inst)]

    def PRECALL(self, inst: dis.Instruction) -> None:
        pass

    def call(self, fn: Var, args: list[Var], kwargs: dict[str, Var]) -> Var:
        """Trace the call `fn(*args, **kwargs)` made in this frame (see calls.py)."""
        return calls.call(self, fn, args, kwargs)

    def CALL(self, inst: dis.Instruction) -> None:
        args = self.popn(oparg(inst))
        callable_, null_or_self = self.pop(), self.pop()
        if not isinstance(null_or_self, NullVar):  # [method, self] from LOAD_METHOD
            args = [callable_] + args
            callable_ = null_or_self
        kw_names, self.kw_names = self.kw_names, ()
        n_kw = len(kw_names)
        positional = args[:len(args) - n_kw]
        keywords = dict(zip(kw_names, args[len(args) - n_kw:], strict=True))
        self.push(self.call(callable_, positional, keywords))

    def CALL_FUNCTION_EX(self, inst: dis.Instruction) -> None:
        keywords: dict[str, Var] = {}
        if oparg(inst) & 1:
            kw = self.pop()
            if not isinstance(kw, DictVar):
                raise Unsupported(BreakKind.UNSUPPORTED_CALL, "**kwargs of an unknown mapping")
            keywords = dict(kw.items)
        args = self.pop()
        callable_ = self.pop()
        if isinstance(self.stack[-1], NullVar):
            self.pop()
        self.push(self.call(callable_, operations.unpack_iterable(self, args), keywords))

    def MAKE_FUNCTION(self, inst: dis.Instruction) -> None:
        code = self.pop_as(ConstVar).value
        closure: tuple = ()
        if oparg(inst) & 0x08:
            closure = tuple(self.pop_as(TupleVar).items)
        if oparg(inst) & 0x04:
            self.pop()  # annotations
        kwdefaults: dict[str, Var] = {}
        if oparg(inst) & 0x02:
            kwdefaults = dict(self.pop_as(DictVar).items)
        defaults: tuple = ()
        if oparg(inst) & 0x01:  # a tuple built at run time, or a constant one
            defaults = tuple(operations.unpack_iterable(self, self.pop()))
        self.push(NestedFunctionVar(code, self.f_globals, defaults, kwdefaults, closure))

    def RETURN_VALUE(self, inst: dis.Instruction) -> None:
        self.return_value = self.pop()

    def RETURN_GENERATOR(self, inst: dis.Instruction) -> None:
        self.push(ConstVar(None))  # the frame resumes with the sent value (POP_TOP drops it)

    def YIELD_VALUE(self, inst: dis.Instruction) -> None:
        self.yielded = self.pop()

    def GET_YIELD_FROM_ITER(self, inst: dis.Instruction) -> None:  # `yield from x`
        self.GET_ITER(inst)

    def SEND(self, inst: dis.Instruction) -> None:
        """`yield from`'s step: the delegate's next item, or (exhausted) its return value
        and a jump past the loop. Nothing is sent into a traced generator."""
        self.pop()
        item = operations.next_item(self, self.stack[-1])
        if item is not None:
            self.push(item)
            return
        self.push(operations.returned_value(self.pop()))
        self.jump_to(inst.argval)

    # ----- operators ------------------------------------------------------------------
    def BINARY_OP(self, inst: dis.Instruction) -> None:
        b, a = self.pop(), self.pop()
        symbol = binary_op_symbol(oparg(inst))
        inplace = symbol.endswith("=")
        fn = OPERATORS[symbol[:-1] if inplace else symbol]
        self.push(operations.apply_operator(self, fn, [a, b], inplace=inplace))

    def COMPARE_OP(self, inst: dis.Instruction) -> None:
        b, a = self.pop(), self.pop()
        self.push(operations.apply_operator(self, OPERATORS[inst.argval], [a, b]))

    def IS_OP(self, inst: dis.Instruction) -> None:
        b, a = self.pop(), self.pop()
        same = operations.is_same(self, a, b)
        self.push(ConstVar(same != bool(oparg(inst))))

    def CONTAINS_OP(self, inst: dis.Instruction) -> None:
        container, item = self.pop(), self.pop()
        found = operations.contains(self, container, item)
        self.push(ConstVar(found != bool(oparg(inst))))

    def _unary(self, inst: dis.Instruction) -> None:
        self.push(operations.apply_operator(self, OPERATORS[inst.opname], [self.pop()]))

    UNARY_NEGATIVE = UNARY_POSITIVE = UNARY_INVERT = _unary

    def UNARY_NOT(self, inst: dis.Instruction) -> None:
        self.push(ConstVar(not operations.truth(self, self.pop())))

    def BINARY_SUBSCR(self, inst: dis.Instruction) -> None:
        index, container = self.pop(), self.pop()
        self.push(operations.getitem(self, container, index))

    def STORE_SUBSCR(self, inst: dis.Instruction) -> None:
        index, container, value = self.pop(), self.pop(), self.pop()
        operations.setitem(self, container, index, value)

    # ----- builders -------------------------------------------------------------------
    def BUILD_TUPLE(self, inst: dis.Instruction) -> None:
        self.push(TupleVar(self.popn(oparg(inst))))

    def BUILD_LIST(self, inst: dis.Instruction) -> None:
        self.push(ListVar(self.popn(oparg(inst))))

    def BUILD_MAP(self, inst: dis.Instruction) -> None:
        items = self.popn(2 * oparg(inst))
        self.push(DictVar({operations.constant(self, k): v for k, v in zip(items[::2], items[1::2],
                                                                       strict=True)}))

    def BUILD_CONST_KEY_MAP(self, inst: dis.Instruction) -> None:
        keys = operations.constant(self, self.pop())
        values = self.popn(oparg(inst))
        self.push(DictVar(dict(zip(keys, values, strict=True))))

    def BUILD_SLICE(self, inst: dis.Instruction) -> None:
        # sizes stay SymInts in a slice (`mask[:T]`, Note [Symbolic sizes])
        parts = [operations.to_python(self, v) if isinstance(v, ConstVar) and v.source is None
                 else operations.constant(self, v) for v in self.popn(oparg(inst))]
        self.push(ConstVar(slice(*parts)))

    def BUILD_STRING(self, inst: dis.Instruction) -> None:
        self.push(ConstVar("".join(operations.constant(self, v) for v in self.popn(oparg(inst)))))

    def FORMAT_VALUE(self, inst: dis.Instruction) -> None:
        spec = operations.constant(self, self.pop()) if oparg(inst) & 0x04 else ""
        value = operations.constant(self, self.pop())
        conversions: dict[int, Callable[[Any], Any]] = {0: lambda v: v, 1: str, 2: repr, 3: ascii}
        conversion = conversions[oparg(inst) & 0x03]
        self.push(ConstVar(format(conversion(value), spec)))

    def LIST_APPEND(self, inst: dis.Instruction) -> None:
        value = self.pop()
        self.stack_at(oparg(inst), ListVar).items.append(value)

    def LIST_EXTEND(self, inst: dis.Instruction) -> None:
        values = operations.unpack_iterable(self, self.pop())
        self.stack_at(oparg(inst), ListVar).items.extend(values)

    def LIST_TO_TUPLE(self, inst: dis.Instruction) -> None:
        self.push(TupleVar(list(self.pop_as(ListVar).items)))

    def MAP_ADD(self, inst: dis.Instruction) -> None:
        value, key = self.pop(), self.pop()
        self.stack_at(oparg(inst), DictVar).items[operations.constant(self, key)] = value

    def DICT_UPDATE(self, inst: dis.Instruction) -> None:
        update = self.pop()
        if not isinstance(update, DictVar):
            raise Unsupported(BreakKind.UNSUPPORTED_CALL, "dict update from an unknown mapping")
        self.stack_at(oparg(inst), DictVar).items.update(update.items)

    DICT_MERGE = DICT_UPDATE

    def UNPACK_SEQUENCE(self, inst: dis.Instruction) -> None:
        items = operations.unpack_iterable(self, self.pop())
        if len(items) != oparg(inst):
            raise Unsupported(BreakKind.UNSUPPORTED_OPCODE, f"unpacking {len(items)} values into "
                              f"{oparg(inst)} names")
        self.stack.extend(reversed(items))

    def UNPACK_EX(self, inst: dis.Instruction) -> None:
        items = operations.unpack_iterable(self, self.pop())
        before, after = oparg(inst) & 0xFF, oparg(inst) >> 8
        middle = ListVar(items[before:len(items) - after])
        values = items[:before] + [middle] + items[len(items) - after:]
        self.stack.extend(reversed(values))

    # ----- control flow ---------------------------------------------------------------
    def JUMP_FORWARD(self, inst: dis.Instruction) -> None:
        self.jump_to(inst.argval)

    JUMP_BACKWARD = JUMP_BACKWARD_NO_INTERRUPT = JUMP_FORWARD

    def _pop_jump(self, inst: dis.Instruction, jump_if: bool) -> None:
        if operations.truth(self, self.pop()) == jump_if:
            self.jump_to(inst.argval)

    def POP_JUMP_FORWARD_IF_TRUE(self, inst: dis.Instruction) -> None:
        self._pop_jump(inst, True)

    def POP_JUMP_FORWARD_IF_FALSE(self, inst: dis.Instruction) -> None:
        self._pop_jump(inst, False)

    POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_FORWARD_IF_TRUE
    POP_JUMP_BACKWARD_IF_FALSE = POP_JUMP_FORWARD_IF_FALSE

    def _pop_jump_none(self, inst: dis.Instruction, jump_if_none: bool) -> None:
        value = self.pop()
        is_none = isinstance(value, ConstVar) and operations.constant(self, value) is None
        if is_none == jump_if_none:
            self.jump_to(inst.argval)

    def POP_JUMP_FORWARD_IF_NONE(self, inst: dis.Instruction) -> None:
        self._pop_jump_none(inst, True)

    def POP_JUMP_FORWARD_IF_NOT_NONE(self, inst: dis.Instruction) -> None:
        self._pop_jump_none(inst, False)

    POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_FORWARD_IF_NONE
    POP_JUMP_BACKWARD_IF_NOT_NONE = POP_JUMP_FORWARD_IF_NOT_NONE

    def JUMP_IF_TRUE_OR_POP(self, inst: dis.Instruction) -> None:
        if operations.truth(self, self.stack[-1]):
            self.jump_to(inst.argval)
        else:
            self.pop()

    def JUMP_IF_FALSE_OR_POP(self, inst: dis.Instruction) -> None:
        if not operations.truth(self, self.stack[-1]):
            self.jump_to(inst.argval)
        else:
            self.pop()

    def GET_ITER(self, inst: dis.Instruction) -> None:
        value = self.pop()
        if isinstance(value, (IteratorVar, GeneratorVar)):  # its own iterator
            self.push(value)
        else:
            self.push(IteratorVar(operations.unpack_iterable(self, value)))

    def FOR_ITER(self, inst: dis.Instruction) -> None:
        iterator = self.stack[-1]
        item = operations.next_item(self, iterator)
        if item is not None:
            self.push(item)
        else:
            self.pop()
            self.jump_to(inst.argval)

    # ----- with blocks (grad mode only) --------------------------------------------------
    def BEFORE_WITH(self, inst: dis.Instruction) -> None:
        manager = self.pop()
        if not isinstance(manager, GradModeVar):
            raise Unsupported(BreakKind.UNSUPPORTED_CONTEXT_MANAGER,
                              "a `with` block over a context "
                              "manager the tracer does not model",
                              "only no_grad/enable_grad/set_grad_enabled/inference_mode "
                              "are traced")
        self.push(self.ctx.enter_grad_mode(manager.enabled, manager.previous))
        self.push(ConstVar(None))
