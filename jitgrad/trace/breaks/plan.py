"""Graph breaks: compile the graph so far, run the unsupported instruction natively, and
continue in a resume function (Note [Graph break protocol]).

Note [Graph break protocol]: when tracing stops at a root-frame instruction I it cannot
capture (a call to `print`, a data-dependent `if`, `.item()`, a disabled function), the
entry's runner becomes generated Python that
  1. runs the graph of everything before I,
  2. evaluates the live stack values and locals (graph outputs, constants, values read
     through their sources) into temporaries,
  3. executes I itself: the call, or the branch on the now-real condition tensor,
  4. returns `resume(stack values..., live locals...)`, where `resume` is a clone of the
     function's code that starts after I (or at the taken branch's target; one resume
     function per side of a branch), built by `jitgrad.trace.breaks.resume`.
Resume functions are ordinary functions wrapped in `CompiledFunction`, so they are
traced, guarded and compiled lazily on their first call and may break again; a break
inside an inlined callee stops at the caller's CALL, and the callee then runs through
its own `CompiledFunction` (a trampoline), as TorchDynamo's nested frames do.

Breaks that cannot be resumed — inside a loop (the resume function would recompile per
iteration), inside a try or with block, in frames that create closures over their own
variables — leave the frame to run eagerly, reported as its outcome.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any

from jitgrad.eager.grad_mode import set_grad_enabled
from jitgrad.trace.breaks.resume import build_resume_code, user_function_name
from jitgrad.trace.breaks.unsupported import BreakKind, Unsupported
from jitgrad.trace.bytecode import analysis
from jitgrad.trace.bytecode.instructions import decode
from jitgrad.trace.bytecode.opcodes import binary_op_symbol, line_at, oparg
from jitgrad.trace.capture.translator import Translator
from jitgrad.trace.capture.variables import (
    GradModeExitVar,
    NullVar,
    TensorVar,
    Var,
    tensors_in,
)

_BRANCHES = {"POP_JUMP_FORWARD_IF_TRUE": True, "POP_JUMP_BACKWARD_IF_TRUE": True,
             "POP_JUMP_FORWARD_IF_FALSE": False, "POP_JUMP_BACKWARD_IF_FALSE": False}

# Instructions other than CALL and branches that a break can run natively (side effects
# the graph cannot hold): operands they pop, and whether they push a result.
_STATEMENTS = {"STORE_ATTR": (2, False), "STORE_GLOBAL": (1, False),
               "STORE_SUBSCR": (3, False), "BINARY_OP": (2, True), "COMPARE_OP": (2, True)}
_OPERATOR_BREAKS = frozenset({BreakKind.INPLACE_ON_TENSOR, BreakKind.DYNAMIC_NUMBER})


@dataclasses.dataclass
class BreakPlan:
    """Where a frame breaks and what runs natively there.

    resume_offsets: offset of each resume function's first instruction (one for a call,
    fall-through and jump target for a branch, in that order).
    """

    offset: int
    opname: str
    resume_offsets: tuple[int, ...]


def plan_break(fn: types.FunctionType, err: Unsupported) -> BreakPlan:
    """Check that the failing root instruction can be resumed; raise `Unsupported` if not.

    The message of a refusal says why (every reason that applies), for the frame outcome.
    """
    instruction = err.root_instruction
    if instruction is None or err.kind == BreakKind.USER_ERROR:  # the eager run shows user errors
        raise err
    code = fn.__code__
    instrs = decode(code)
    at = next(i for i in instrs if i.offset == instruction.offset)
    blocks = analysis.exn_blocks(instrs, at)
    if err.kind == BreakKind.RAISE and instruction.opname == "RAISE_VARARGS" and \
            all(b.kind == "with" for b in blocks):
        # no handler in this frame: the call raises, so the eager run raises it at the
        # user's line (Note [User errors] in entry.py), and the next call traces again
        raised = Unsupported(BreakKind.USER_ERROR, "the function raises an exception on these "
                             "arguments")
        raised.location = getattr(err, "location", None)
        raise raised
    refusals = [why for refused, why in (
        (bool(code.co_cellvars), "the function creates closures over its own variables"),
        (analysis.is_in_loop(instrs, at), "the break is inside a loop")) if refused]
    if refusals:  # every reason, so fixing one does not reveal the next
        raise _frame_only(err, "; ".join(refusals))
    if any(block.kind != "with" for block in blocks):
        return _checkpoint_before(instrs, at, err)
    following = instrs[instrs.index(at) + 1].decoded_offset
    if instruction.opname == "CALL":
        return BreakPlan(instruction.offset, "CALL", (following,))
    if instruction.opname in _BRANCHES:
        return BreakPlan(instruction.offset, instruction.opname,
                         (following, instruction.argval))
    if instruction.opname in _STATEMENTS and (
            instruction.opname not in ("BINARY_OP", "COMPARE_OP") or err.kind in _OPERATOR_BREAKS):
        return BreakPlan(instruction.offset, instruction.opname, (following,))
    raise _frame_only(err, f"{instruction.opname} cannot be resumed after")


def _checkpoint_before(instrs: list[Any], at: Any, err: Unsupported) -> BreakPlan:
    """A break inside a try body: the graph ends at the last checkpoint before the try
    (an empty stack outside any block) and the rest of the frame runs in a resume function,
    whose own trace finds nothing to capture before the try and runs eagerly (§2.11)."""
    candidates = [c for c in analysis.checkpoints(instrs) if c.offset < at.offset]
    if not candidates:
        raise _frame_only(err, "the break is inside a try block with no earlier checkpoint")
    checkpoint = candidates[-1]
    return BreakPlan(checkpoint.decoded_offset, "CHECKPOINT", (checkpoint.decoded_offset,))


def _frame_only(err: Unsupported, why: str) -> Unsupported:
    refused = Unsupported(err.kind, f"{err.message} ({why}; the frame runs eagerly)", err.hint)
    refused.location = getattr(err, "location", None)
    return refused


def live_names(fn: types.FunctionType, offset: int) -> list[str]:
    """Locals read after `offset` before being written (sorted, for a stable signature)."""
    instrs = decode(fn.__code__)
    start = next(i for i in instrs if i.offset == offset)
    return sorted(analysis.livevars(instrs, start))


def tensors_at_break(tx: Translator, plan: BreakPlan) -> list[TensorVar]:
    """Every traced tensor the native instruction or the resume functions need."""
    fn = tx.ctx.fn
    names = {name for offset in plan.resume_offsets for name in live_names(fn, offset)}
    values = list(tx.stack) + [tx.locals[n] for n in sorted(names) if n in tx.locals]
    found: list[TensorVar] = []
    for var in values:
        found.extend(tensors_in(var))
    return found


def emit_break(tx: Translator, plan: BreakPlan, expr: Any, make_resume: Any,
               trampoline: Any, const: Any) -> list[str]:
    """The runner statements after the graph call (see Note [Graph break protocol]).

    expr(var) renders a Var as a Python expression; make_resume(offset, n_stack, names,
    with_blocks, null_slots) names the resume function for one target; trampoline(var) names a
    compiled wrapper for a user function called at the break (or None to call the value
    itself); const(value, hint) names any other object the statements need.
    """
    fn = tx.ctx.fn
    n_operands = {"CALL": _call_arity(tx) + 2 if plan.opname == "CALL" else 0,
                  "CHECKPOINT": 0}.get(plan.opname, _STATEMENTS.get(plan.opname, (1,))[0])
    operands = tx.stack[len(tx.stack) - n_operands:]
    below = tx.stack[:len(tx.stack) - n_operands]
    # the `__exit__` of each grad-mode `with` block around the break: the resume function
    # re-enters the blocks itself, the native instruction runs in the innermost mode
    exits = [v for v in below if isinstance(v, GradModeExitVar)]
    below = [v for v in below if not isinstance(v, GradModeExitVar)]
    with_blocks = tuple((set_grad_enabled, (e.enabled,)) for e in exits)
    # a break inside the arguments of another call: the NULLs of the pending calls are
    # pushed again by the resume function's prologue, not passed
    null_slots = tuple(i for i, var in enumerate(below) if isinstance(var, NullVar))
    lines = [f"__s{i} = {expr(var)}" for i, var in enumerate(below) if i not in null_slots]
    # a name live on some path (e.g. through a with/except handler) but not bound yet at
    # the break stays a plain, unbound local of the resume function, as in the original
    names_by_target = [[n for n in live_names(fn, offset) if n in tx.locals]
                       for offset in plan.resume_offsets]
    for name in sorted({n for names in names_by_target for n in names}):
        if name in tx.locals:
            lines.append(f"__l_{name} = {expr(tx.locals[name])}")
    stack_args = [f"__s{i}" for i in range(len(below)) if i not in null_slots]

    def resume_call(index: int, stack: list[str]) -> str:
        resume = make_resume(plan.resume_offsets[index], len(stack) + len(null_slots),
                             names_by_target[index], with_blocks, null_slots)
        args = stack + [_local_arg(tx, n) for n in names_by_target[index]]
        return f"return {resume}({', '.join(args)})"

    if plan.opname in _BRANCHES:
        test = expr(operands[0]) if _BRANCHES[plan.opname] else f"not {expr(operands[0])}"
        return lines + [f"if {test}:", f"    {resume_call(1, stack_args)}",
                        resume_call(0, stack_args)]
    if plan.opname == "CALL":
        native = [f"__r = {_render_call(tx, operands, expr, trampoline)}"]
        stack_args = stack_args + ["__r"]
    elif plan.opname in _STATEMENTS:
        native = _render_statement(tx, operands, expr)
        if _STATEMENTS[plan.opname][1]:
            stack_args = stack_args + ["__r"]
    else:
        native = []
    if exits and native:
        lines.append(f"with {const(set_grad_enabled, 'set_grad_enabled')}({exits[-1].enabled}):")
        native = [f"    {line}" for line in native]
    return lines + native + [resume_call(0, stack_args)]


def _render_statement(tx: Translator, operands: list[Var], expr: Any) -> list[str]:
    """A side-effecting instruction as Python statements (result, if any, in `__r`)."""
    inst = tx.current
    assert inst is not None, "stopped at an instruction"
    if inst.opname == "STORE_ATTR":
        value, obj = operands
        return [f"{expr(obj)}.{inst.argval} = {expr(value)}"]
    if inst.opname == "STORE_GLOBAL":
        return [f"__G[{inst.argval!r}] = {expr(operands[0])}"]
    if inst.opname == "STORE_SUBSCR":
        value, container, index = operands
        return [f"{expr(container)}[{expr(index)}] = {expr(value)}"]
    a, b = operands
    if inst.opname == "COMPARE_OP":
        return [f"__r = {expr(a)} {inst.argval} {expr(b)}"]
    # BINARY_OP: an in-place `x += 1` on a tensor, or arithmetic on a dynamic number
    return [f"__r = {expr(a)}", f"__r {binary_op_symbol(oparg(inst))} {expr(b)}"
            if binary_op_symbol(oparg(inst)).endswith("=") else
            f"__r = __r {binary_op_symbol(oparg(inst))} {expr(b)}"]


def _local_arg(tx: Translator, name: str) -> str:
    return f"__l_{name}"


def _call_arity(tx: Translator) -> int:
    current = tx.current
    assert current is not None and current.opname == "CALL" and current.arg is not None, \
        "stopped at a CALL"
    return current.arg


def _render_call(tx: Translator, operands: list[Var], expr: Any, trampoline: Any) -> str:
    """`callable(args..., k=v)` for the CALL's operands [NULL|method, callable|self, args]."""
    first, second, *args = operands
    if isinstance(first, NullVar):
        callable_ = second
    else:
        callable_, args = first, [second] + args
    kw_names = tx.kw_names
    positional = args[:len(args) - len(kw_names)]
    keywords = args[len(args) - len(kw_names):]
    parts = [expr(a) for a in positional]
    parts += [f"{k}={expr(v)}" for k, v in zip(kw_names, keywords, strict=True)]
    return f"{trampoline(callable_) or expr(callable_)}({', '.join(parts)})"


def resume_function(fn: types.FunctionType, offset: int, n_stack: int, names: list[str],
                    with_blocks: tuple = (), null_slots: tuple[int, ...] = ()
                    ) -> types.FunctionType:
    """A function running `fn`'s code from `offset` with `n_stack` stack values and `names`,
    re-entering `with_blocks` ((factory, args) per active grad-mode block) first; the
    stack values at `null_slots` are NULLs of pending calls (not arguments)."""
    line = line_at(fn.__code__, offset)
    name = f"resume_in_{user_function_name(fn.__code__.co_name)}_at_{line}"
    code = build_resume_code(fn.__code__, offset, n_stack, names, with_blocks,
                             null_slots=null_slots, name=name)
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True))
    closure = tuple(cells[n] for n in code.co_freevars) or None
    return types.FunctionType(code, fn.__globals__, name, None, closure)
