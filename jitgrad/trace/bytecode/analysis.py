"""Static analyses over an instruction list (see `instructions.decode`).

Stack depth at every instruction (also the source of `co_stacksize`), liveness of local
variables, loop membership, the try/with blocks active at an instruction (3.11 has no
block stack, so they are rebuilt from exception-table entries), and the checkpoints where a
frame can be split into a resume function.

Stack depths and liveness follow both normal control flow and exceptional edges (from
every covered instruction to its handler); loops are found lexically, from backward jumps.

Model: torch/_dynamo/bytecode_analysis.py
(`stacksize_analysis`, `livevars_analysis`) and symbolic_convert.py (`update_block_stack`),
rewritten for jitgrad.
"""

from __future__ import annotations

from dataclasses import dataclass

from jitgrad.trace.bytecode import opcodes as bc
from jitgrad.trace.bytecode.instructions import Instr

_READS = frozenset({"LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_CLASSDEREF",
                    "DELETE_FAST", "DELETE_DEREF"})
_WRITES = frozenset({"STORE_FAST", "STORE_DEREF", "DELETE_FAST", "DELETE_DEREF"})


def _indexes(instrs: list[Instr]) -> dict[Instr, int]:
    index = {instr: i for i, instr in enumerate(instrs)}
    assert len(index) == len(instrs), "an Instr object appears twice in the list"
    return index


def _normal_successors(
    instrs: list[Instr], index: dict[Instr, int]
) -> list[tuple[int | None, int | None]]:
    """(fall-through index, jump-target index) of each instruction, None where absent."""
    successors = []
    for i, instr in enumerate(instrs):
        op = instr.opcode
        fall = jump = None
        if op not in bc.TERMINAL:
            if i + 1 == len(instrs):
                raise ValueError(f"control falls off the end of the code after {instr!r}")
            fall = i + 1
        if op in bc.JUMPS:
            if instr.target not in index:
                raise ValueError(f"{instr!r} jumps to an instruction that is not in the list")
            jump = index[instr.target]
        successors.append((fall, jump))
    return successors


def _handler_index(instr: Instr, index: dict[Instr, int]) -> int | None:
    entry = instr.exn_entry
    if entry is None:
        return None
    if entry.target not in index:
        raise ValueError(f"exception handler of {instr!r} is not in the instruction list")
    return index[entry.target]


def stack_depths(instrs: list[Instr]) -> dict[Instr, int]:
    """Value-stack depth on entry to every instruction reachable from the first one.

    Exception handlers start at `entry.depth + lasti + 1`. Unreachable instructions are
    absent. Raises ValueError when two paths reach an instruction with different depths,
    a depth goes negative, a covered instruction's stack is shallower than its handler's
    depth, or control falls off the end: each of these would corrupt the interpreter.
    """
    index = _indexes(instrs)
    successors = _normal_successors(instrs, index)
    depths: dict[int, int] = {0: 0}
    work = [0]
    while work:
        i = work.pop()
        instr, depth = instrs[i], depths[i]
        fall, jump = successors[i]
        arrivals = []
        if fall is not None:
            arrivals.append((fall, depth + bc.stack_effect(instr.opcode, instr.arg, False)))
        if jump is not None:
            arrivals.append((jump, depth + bc.stack_effect(instr.opcode, instr.arg, True)))
        entry = instr.exn_entry
        handler = _handler_index(instr, index)
        if entry is not None and handler is not None:
            if depth < entry.depth:
                raise ValueError(f"{instr!r} at stack depth {depth} is covered by a handler "
                                 f"that expects depth {entry.depth}")
            arrivals.append((handler, bc.exception_handler_depth(entry.depth, entry.lasti)))
        for j, new_depth in arrivals:
            if new_depth < 0:
                raise ValueError(f"stack underflow: {instr!r} leaves depth {new_depth}")
            old = depths.get(j)
            if old is None:
                depths[j] = new_depth
                work.append(j)
            elif old != new_depth:
                raise ValueError(f"{instrs[j]!r} (instruction {j}) is reached with stack depth "
                                 f"{old} and {new_depth}; every path must agree")
    return {instrs[i]: depth for i, depth in depths.items()}


def livevars(instrs: list[Instr], start: Instr) -> set[str]:
    """Variables read on some path from `start` before being written there.

    Covers locals, cells and free variables (LOAD_FAST/DEREF/CLOSURE reads, STORE writes;
    DELETE both reads and unbinds). These are the values a resume function starting at
    `start` needs. Backward dataflow to a fixed point over normal and exceptional edges.
    """
    bit_of: dict[str, int] = {}
    uses, kills = [], []
    for instr in instrs:
        use = kill = 0
        if instr.opname in _READS or instr.opname in _WRITES:
            bit = 1 << bit_of.setdefault(instr.argval, len(bit_of))
            use = bit if instr.opname in _READS else 0
            kill = bit if instr.opname in _WRITES else 0
        else:
            assert instr.opname in ("MAKE_CELL",) or not (
                instr.opcode in bc.HASLOCAL or instr.opcode in bc.HASFREE
            ), f"liveness does not know how {instr.opname} uses its variable"
        uses.append(use)
        kills.append(kill)
    index = _indexes(instrs)
    normal = _normal_successors(instrs, index)
    handlers = [_handler_index(instr, index) for instr in instrs]
    live_in = [0] * len(instrs)
    changed = True
    while changed:
        changed = False
        for i in range(len(instrs) - 1, -1, -1):
            live_out = 0
            for j in normal[i]:
                if j is not None:
                    live_out |= live_in[j]
            new = uses[i] | (live_out & ~kills[i])
            handler = handlers[i]
            if handler is not None:  # the write may not have happened when it raises
                new |= live_in[handler]
            if new != live_in[i]:
                live_in[i] = new
                changed = True
    live = live_in[index[start]]
    return {name for name, bit in bit_of.items() if live >> bit & 1}


def _in_loops(instrs: list[Instr]) -> set[Instr]:
    """Instructions spanned by a backward jump: from its target up to the jump itself."""
    index = _indexes(instrs)
    starts_minus_ends = [0] * (len(instrs) + 1)
    for i, instr in enumerate(instrs):
        target = instr.target
        if target is not None and index[target] <= i:
            starts_minus_ends[index[target]] += 1
            starts_minus_ends[i + 1] -= 1
    inside: set[Instr] = set()
    open_spans = 0
    for i, instr in enumerate(instrs):
        open_spans += starts_minus_ends[i]
        if open_spans:
            inside.add(instr)
    return inside


def is_in_loop(instrs: list[Instr], instr: Instr) -> bool:
    """Whether a backward jump spans `instr` (by position in the list, whatever its opname).

    Lexical and conservative: code of a loop body that leaves the loop (a `raise`, a
    `return`, a `break` path) counts as inside, as in TorchDynamo, since a frame split there
    would still hold the loop's state (its iterator) on the stack.
    """
    return instr in _in_loops(instrs)


@dataclass(frozen=True)
class ExnBlock:
    """A try/with block active at an instruction, rebuilt from exception-table entries.

    `kind`: "with" (handler runs `__exit__`: PUSH_EXC_INFO; WITH_EXCEPT_START), "try"
    (an except or finally handler), or "except" (the instruction is itself inside
    exception-handling code, e.g. an `except` body, where the caught exception sits on the
    stack). `target`: handler's first instruction; `depth`/`lasti`: the entry's values. For
    a "with" block, the bound `__exit__` sits at stack slot `depth - 1`.
    """

    kind: str
    target: Instr
    depth: int
    lasti: bool


def exn_blocks(instrs: list[Instr], instr: Instr) -> list[ExnBlock]:
    """The try/with blocks active at `instr`, outermost first, innermost last.

    Walks the chain of handlers an exception raised at `instr` would visit: the entry
    covering `instr`, then the entry covering that handler's first instruction, and so on.
    A block handler (starting with PUSH_EXC_INFO) is protected by its own cleanup entry
    (COPY 3; POP_EXCEPT; RERAISE 1), which is skipped; any other handler not directly
    after a block marks exception-handling code ("except").
    """
    return _exn_blocks(instrs, _indexes(instrs), instr)


def _exn_blocks(instrs: list[Instr], index: dict[Instr, int], instr: Instr) -> list[ExnBlock]:
    blocks = []
    after_block = False
    seen: set[Instr] = set()
    entry = instr.exn_entry
    while entry is not None:
        handler = entry.target
        assert handler not in seen, f"exception handlers form a cycle at {handler!r}"
        seen.add(handler)
        if handler.opname == "PUSH_EXC_INFO":
            following = instrs[index[handler] + 1]
            kind = "with" if following.opname == "WITH_EXCEPT_START" else "try"
            blocks.append(ExnBlock(kind, handler, entry.depth, entry.lasti))
            after_block = True
        else:
            if not after_block:
                blocks.append(ExnBlock("except", handler, entry.depth, entry.lasti))
            after_block = False
        entry = handler.exn_entry
    blocks.reverse()
    return blocks


def checkpoints(instrs: list[Instr]) -> list[Instr]:
    """Instructions where a frame can be split: reachable, empty stack, no active try/with
    block, not in a loop, after the function's `RESUME`. In code order."""
    depths = stack_depths(instrs)
    in_loops = _in_loops(instrs)
    index = _indexes(instrs)
    resume = next(i for i, instr in enumerate(instrs) if instr.opname == "RESUME")
    return [instr for instr in instrs[resume + 1:] if depths.get(instr) == 0
            and instr not in in_loops and not _exn_blocks(instrs, index, instr)]
