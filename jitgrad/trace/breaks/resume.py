"""Resume functions: a function's code, entered in the middle.

# Note [Resume functions]
At a graph break the transformed function runs the graph, then the unsupported
instruction natively, then returns `resume(stack values..., live locals...)`, where
`resume` runs the rest of the original function. Its code is a copy of the original
(research/dynamo.md 2.10):

* signature `(___stack0, ..., <live locals>)`; NULL stack slots are not arguments (a NULL
  cannot be passed) and get a `PUSH_NULL`; other locals of the original stay plain,
  unbound locals; no `*args`/`**kwargs`, no keyword-only or positional-only arguments;
* the original cell and free variables all become free variables, in the order
  `co_cellvars + co_freevars` of the original: the caller builds the function with the
  frame's own cell objects as its closure, so closures created before the break keep
  seeing updates made after it;
* prologue after `COPY_FREE_VARS n; RESUME 0`: re-enter each active `with` block
  (outermost first) by calling the given factory and running `BEFORE_WITH; POP_TOP`, so
  the bound `__exit__` lands in the stack slot the block's exception entry expects; push
  the stack values in order; jump to the target;
* the body keeps every instruction (dead code before the target is harmless) and every
  exception entry with its ORIGINAL depth: the entry covering the target is range-based,
  so an exception raised after the jump still reaches the original handler, which runs
  `__exit__` (a recomputed depth crashed the interpreter, research/dynamo.md 0.4);
  prologue instructions after a re-entered block are covered by that block's entry, so a
  failing inner re-entry still exits the outer context;
* `co_stacksize` recomputed by dataflow; name `resume_in_{fn}_at_{line}`.

Model: torch/_dynamo/resume_execution.py (`ContinueExecutionCache.generate`,
`ReenterWith`), rewritten for jitgrad.
"""

from __future__ import annotations

import dis
import inspect
import types
from collections.abc import Callable, Collection, Sequence
from typing import Any

from jitgrad.trace.bytecode import opcodes as bc
from jitgrad.trace.bytecode.analysis import ExnBlock, exn_blocks, stack_depths
from jitgrad.trace.bytecode.assemble import assemble, code_options
from jitgrad.trace.bytecode.instructions import (
    ExnEntry,
    Instr,
    create_call,
    create_instr,
    create_jump,
    create_load_const,
    decode,
)

WithReentry = tuple[Callable[..., Any], tuple[Any, ...]]

# (id(code), offset, signature with ids of the re-entry objects) -> (the objects whose ids
# are in the key, resume code): keeping them alive means their ids cannot be reused while
# the entry exists. Re-entry args may be unhashable constants, hence ids.
_cache: dict[tuple[Any, ...], tuple[Any, types.CodeType]] = {}


def clear_resume_cache() -> None:
    """Forget every resume code object built so far (jitgrad.reset calls this)."""
    _cache.clear()


def resume_freevars(code: types.CodeType) -> tuple[str, ...]:
    """Free variables of every resume function of `code`: its cells, then its frees.

    The closure passed when making the resume function holds the frame's cells in this order.
    """
    return code.co_cellvars + code.co_freevars


def build_resume_code(
    code: types.CodeType,
    target: Instr | int,
    stack_depth_n: int,
    live_names: Sequence[str],
    with_blocks: Sequence[WithReentry] = (),
    *,
    null_slots: Collection[int] = (),
    name: str | None = None,
) -> types.CodeType:
    """Code of a function that continues `code` at `target` (See Note [Resume functions]).

    target: the instruction (from `decode(code)`) or its byte offset where execution resumes.
    stack_depth_n: stack values at `target` other than the `__exit__` slots of `with`
        blocks; the arguments `___stack{i}` for i in range(stack_depth_n) not in
        `null_slots` come first, in stack order (bottom first).
    live_names: locals the rest of the function reads; those that are cells or free
        variables come through the closure (`resume_freevars(code)`) and are dropped from
        the arguments, the rest follow the stack arguments in the given order.
    with_blocks: one `(factory, args)` per `with` block active at `target`, outermost
        first; the prologue re-enters `factory(*args)` (args are constants).
    null_slots: indexes among the stack values that hold a NULL (call protocol).
    name: co_name and co_qualname; default `resume_in_{fn}_at_{line}`.

    Cached per (code, target, signature). Raises ValueError for generator or coroutine
    code, a target that is not an instruction of `code` or is unreachable, a stack or
    with-block count that disagrees with the code at `target`, or an unknown live name.
    """
    offset = target if isinstance(target, int) else target.offset
    reentries = tuple((factory, tuple(args)) for factory, args in with_blocks)
    key = (id(code), offset, stack_depth_n, tuple(sorted(null_slots)), tuple(live_names),
           tuple((id(factory), tuple(map(id, args))) for factory, args in reentries), name)
    cached = _cache.get(key)
    if cached is None:
        resume = _build(code, offset, stack_depth_n, live_names, reentries, set(null_slots), name)
        cached = _cache[key] = ((code, reentries), resume)
    return cached[1]


def _build(
    code: types.CodeType, offset: int | None, n_stack: int, live_names: Sequence[str],
    with_blocks: Sequence[WithReentry], null_slots: set[int], name: str | None,
) -> types.CodeType:
    if code.co_flags & bc.GENERATOR_FLAGS:
        raise ValueError(f"{code.co_qualname} is a generator or coroutine; its frames cannot "
                         "be resumed from a new function")
    if not null_slots <= set(range(n_stack)):
        raise ValueError(f"null slots {sorted(null_slots)} outside the {n_stack} stack values")
    instrs = decode(code)
    start = _instruction_at(code, instrs, offset)
    depth, withs = _stack_at(code, instrs, start, n_stack, len(with_blocks))
    cells = resume_freevars(code)
    locals_in = [n for n in live_names if n not in cells]
    unknown = [n for n in locals_in if n not in code.co_varnames]
    if unknown:
        raise ValueError(f"live names {unknown} are not variables of {code.co_qualname}")
    line = bc.line_at(code, start.decoded_offset)
    prologue = _prologue(start, depth, n_stack, null_slots,
                         list(zip(withs, with_blocks, strict=True)))
    for instr in prologue:
        instr.positions = dis.Positions(line, line, None, None)
    args = [f"___stack{i}" for i in range(n_stack) if i not in null_slots] + locals_in
    options = code_options(code)
    options.update(
        co_argcount=len(args), co_posonlyargcount=0, co_kwonlyargcount=0,
        co_flags=code.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS),
        co_varnames=tuple(args + [v for v in code.co_varnames if v not in args and v not in cells]),
        co_cellvars=(), co_freevars=cells)
    options["co_name"] = options["co_qualname"] = name or f"resume_in_{code.co_name}_at_{line}"
    return assemble(_prefix(instrs, len(cells)) + prologue + _body(instrs), options)


def _stack_at(
    code: types.CodeType, instrs: list[Instr], start: Instr, n_stack: int, n_withs: int
) -> tuple[int, list[ExnBlock]]:
    """Stack depth at `start` and its active with blocks, checked against the request."""
    depth = stack_depths(instrs).get(start)
    if depth is None:
        raise ValueError(f"{start!r} at offset {start.offset} of {code.co_qualname} is "
                         "unreachable")
    withs = [block for block in exn_blocks(instrs, start) if block.kind == "with"]
    if len(withs) != n_withs or depth != n_stack + len(withs):
        raise ValueError(
            f"at offset {start.offset} of {code.co_qualname} the stack holds {depth} values, "
            f"{len(withs)} of them `with` exits; got {n_stack} stack values and "
            f"{n_withs} with re-entries")
    return depth, withs


def _instruction_at(code: types.CodeType, instrs: list[Instr], offset: int | None) -> Instr:
    """The instruction starting at byte `offset`, which may be the offset of its EXTENDED_ARG
    prefix (as `dis` reports jump targets); it must come after the function's RESUME."""
    start = next((instr for instr in instrs if offset is not None and instr.offset is not None
                  and instr.offset >= offset), None)
    if start is None or any(op != bc.EXTENDED_ARG for op in code.co_code[offset:start.offset:2]):
        raise ValueError(f"no instruction of {code.co_qualname} starts at offset {offset}")
    resume = next(i for i, instr in enumerate(instrs) if instr.opname == "RESUME")
    if instrs.index(start) <= resume:
        raise ValueError(f"offset {offset} of {code.co_qualname} is in the prologue "
                         f"({start.opname}); resume at an instruction after RESUME")
    return start


def _prefix(instrs: list[Instr], n_free: int) -> list[Instr]:
    """`COPY_FREE_VARS n; RESUME 0` for the resume code's own layout (no cells of its own)."""
    resume = next(instr for instr in instrs if instr.opname == "RESUME")
    prefix = [create_instr("COPY_FREE_VARS", n_free)] if n_free else []
    new_resume = create_instr("RESUME", 0)
    new_resume.positions = resume.positions
    return [*prefix, new_resume]


def _body(instrs: list[Instr]) -> list[Instr]:
    """The original instructions after the cell/free/generator prefix and `RESUME 0`."""
    end = next(i for i, instr in enumerate(instrs) if instr.opname == "RESUME") + 1
    assert all(instr.opname in bc.PREFIX_OPNAMES for instr in instrs[: end - 1]), (
        "only MAKE_CELL / COPY_FREE_VARS precede RESUME in a non-generator function")
    return instrs[end:]


def _prologue(
    start: Instr, depth: int, n_stack: int, null_slots: set[int],
    withs: list[tuple[ExnBlock, WithReentry]],
) -> list[Instr]:
    """Rebuild the `depth` stack slots and jump to `start`: `__exit__` of re-entered with
    blocks at slot `block.depth - 1`, stack arguments (or NULLs) everywhere else.

    Everything after a block's `BEFORE_WITH` is covered by that block's exception entry.
    """
    exit_slot = {block.depth - 1: (block, reentry) for block, reentry in withs}
    out: list[Instr] = []
    covering: ExnEntry | None = None
    stack_index = 0
    for slot in range(depth):
        if slot in exit_slot:
            block, (factory, args) = exit_slot[slot]
            enter = [create_instr("PUSH_NULL"), create_load_const(factory),
                     *map(create_load_const, args), *create_call(len(args)),
                     create_instr("BEFORE_WITH")]
            for instr in enter:
                instr.exn_entry = covering
            pop = create_instr("POP_TOP")
            covering = pop.exn_entry = ExnEntry(pop, pop, block.target, block.depth, block.lasti)
            out += [*enter, pop]
            continue
        if stack_index in null_slots:
            push = create_instr("PUSH_NULL")
        else:
            push = create_instr("LOAD_FAST", argval=f"___stack{stack_index}")
        push.exn_entry = covering
        out.append(push)
        stack_index += 1
    assert stack_index == n_stack, "every stack value is placed exactly once"
    jump = create_jump("JUMP_FORWARD", start)
    jump.exn_entry = covering
    return [*out, jump]


def user_function_name(co_name: str) -> str:
    """The user's function name of a code object: `f` for `resume_in_f_at_12` (a resume
    function split again keeps the user's name), else `co_name` itself."""
    if co_name.startswith("resume_in_") and "_at_" in co_name:
        return co_name[len("resume_in_"):].rsplit("_at_", 1)[0]
    return co_name
