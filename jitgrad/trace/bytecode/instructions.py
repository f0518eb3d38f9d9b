"""A mutable instruction list for editing CPython 3.11 code objects.

`decode(code)` turns a code object into a list of `Instr` in which jumps point at their
target `Instr` (not at offsets) and every instruction covered by an exception-table entry
carries that `ExnEntry` (handler `Instr`, stack depth, lasti flag). Instructions can then be
inserted, removed or edited freely; `assemble.assemble` turns the list back into a code
object, recomputing offsets, opargs, EXTENDED_ARG prefixes, jump directions, caches, the
stack size and both tables. The `create_*` helpers build new instructions by *value*
(`argval`): constants, names and variables are given as Python objects and strings, and
their indexes are assigned at assembly against the code options.

Model: torch/_dynamo/bytecode_transformation.py (`Instruction`, `cleaned_instructions`,
`InstructionExnTabEntry`), rewritten for jitgrad.
"""

from __future__ import annotations

import bisect
import dis
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jitgrad.trace.bytecode import opcodes as bc

_MISSING: Any = object()


@dataclass(eq=False, slots=True)
class ExnEntry:
    """Exception-table entry shared by the instructions it covers.

    `start`/`end`: first and last covered instruction (inclusive) as decoded; the assembler
    reads only each instruction's own `exn_entry`, so edits need not update them.
    `target`: first instruction of the handler. `depth`: value-stack depth the unwinder cuts
    back to before pushing (lasti and) the exception; copied from the original code and
    never recomputed (a recomputed depth crashed the interpreter, research/dynamo.md 0.4).
    """

    start: Instr
    end: Instr
    target: Instr
    depth: int
    lasti: bool


@dataclass(eq=False, slots=True)
class Instr:
    """One bytecode instruction; hashes by identity, so it can key analysis results.

    `arg` is the raw oparg as decoded. The assembler recomputes it from `argval` for
    constants, names, variables and comparisons (for `LOAD_GLOBAL` it keeps only the low
    "push NULL" bit of `arg`), from `target` for jumps, and uses `arg` as is otherwise.
    `offset` is the byte offset in the original code (None for created instructions);
    `positions` are the PEP 657 source positions (line, end line, columns) or None.
    """

    opname: str
    arg: int | None = None
    argval: Any = None
    offset: int | None = None
    starts_line: int | None = None
    positions: dis.Positions | None = None
    target: Instr | None = None
    exn_entry: ExnEntry | None = None

    @property
    def opcode(self) -> int:
        return bc.OPMAP[self.opname]

    @property
    def decoded_offset(self) -> int:
        """`offset` of an instruction read from a code object (decode sets it)."""
        assert self.offset is not None, "an instruction made by a rewrite has no offset"
        return self.offset

    @property
    def argrepr(self) -> str:
        """Readable argument, free of object addresses (deterministic logs and tests)."""
        op = self.opcode
        if op < bc.HAVE_ARGUMENT:
            return ""
        if op in bc.HASCONST:
            return _const_repr(self.argval)
        if self.opname == "LOAD_GLOBAL":
            null = bc.load_global_pushes_null(self.arg or 0)
            return f"NULL + {self.argval}" if null else str(self.argval)
        if op in bc.HASNAME or op in bc.HASLOCAL or op in bc.HASFREE or op in bc.HASCOMPARE:
            return str(self.argval)
        if self.opname == "BINARY_OP":
            return bc.binary_op_symbol(self.arg or 0)
        if op in bc.JUMPS:
            return "to ?" if self.target is None else f"to {self.target.opname}"
        return str(self.arg)

    def __repr__(self) -> str:
        return f"Instr({self.opname} {self.argrepr})".replace(" )", ")")


def _const_repr(value: Any) -> str:
    if isinstance(value, types.CodeType):
        return f"<code {value.co_name}>"
    if isinstance(value, types.FunctionType | types.BuiltinFunctionType | type):
        return f"<{type(value).__name__} {value.__qualname__}>"
    text = repr(value)
    return f"<{type(value).__name__}>" if " at 0x" in text else text


# --- decoding ------------------------------------------------------------------------


def decode(code: types.CodeType) -> list[Instr]:
    """Instructions of `code` with caches hidden, EXTENDED_ARG folded into the instruction
    it extends, jump targets and exception entries resolved to `Instr` objects.

    Reads `co_code` (never the specialized adaptive copy). Raises RuntimeError on an
    interpreter other than CPython 3.11.
    """
    bc.check_version()
    instrs: list[Instr] = []
    at_offset: dict[int, Instr] = {}  # every byte offset an instruction starts at, prefixes too
    jump_offsets: list[tuple[int, int]] = []  # (index in instrs, target byte offset)
    prefix_offsets: list[int] = []
    prefix_line: int | None = None
    for raw in dis.get_instructions(code):
        if raw.opcode == bc.EXTENDED_ARG:
            prefix_offsets.append(raw.offset)
            prefix_line = prefix_line or raw.starts_line
            continue
        argval = raw.argval
        if raw.opcode in bc.HASCONST:  # dis leaves KW_NAMES' tuple as "<unknown>"
            argval = code.co_consts[raw.arg or 0]
        elif raw.opcode in bc.JUMPS:  # the target goes in `target`, resolved below
            jump_offsets.append((len(instrs), raw.argval))
            argval = None
        instr = Instr(raw.opname, raw.arg, argval, raw.offset, raw.starts_line or prefix_line,
                      raw.positions)
        for offset in [*prefix_offsets, raw.offset]:
            at_offset[offset] = instr
        prefix_offsets, prefix_line = [], None
        instrs.append(instr)
    for index, target_offset in jump_offsets:
        instrs[index].target = at_offset[target_offset]
    _attach_exception_entries(code, instrs, at_offset)
    return instrs


def _attach_exception_entries(
    code: types.CodeType, instrs: list[Instr], at_offset: Mapping[int, Instr]
) -> None:
    offsets = [instr.offset or 0 for instr in instrs]  # all set by decode
    for row in bc.decode_exception_table(code.co_exceptiontable):
        first = bisect.bisect_left(offsets, row.start * 2)
        stop = bisect.bisect_left(offsets, row.end * 2)
        covered = instrs[first:stop]
        assert covered, f"exception table row {row} covers no instruction"
        entry = ExnEntry(covered[0], covered[-1], at_offset[row.target * 2], row.depth, row.lasti)
        for instr in covered:
            instr.exn_entry = entry


# --- creating instructions -----------------------------------------------------------

_BY_VALUE = bc.HASCONST | bc.HASNAME | bc.HASLOCAL | bc.HASFREE | bc.HASCOMPARE


def create_instr(
    opname: str, arg: int | None = None, *, argval: Any = _MISSING, target: Instr | None = None
) -> Instr:
    """A new instruction, without offset or positions.

    Give `argval` for constants (the object), names and variables (the name) and
    `COMPARE_OP` (the operator string); `target` for jumps (either direction: the assembler
    picks the one the layout needs); `arg` for everything else (`BUILD_TUPLE 3`,
    `CALL 2`, `BINARY_OP 0`), and for `LOAD_GLOBAL` optionally `arg=1` to push a NULL.
    Raises ValueError for an unknown opname or a missing or misplaced argument.
    """
    if opname not in bc.OPMAP:
        raise ValueError(f"unknown opcode name {opname!r} (CPython 3.11 names: dis.opmap)")
    op = bc.OPMAP[opname]
    given = (arg is not None, argval is not _MISSING, target is not None)
    if op < bc.HAVE_ARGUMENT:
        expected = (False, False, False)
    elif op in bc.JUMPS:
        expected = (False, False, True)
    elif op in _BY_VALUE:
        expected = (opname == "LOAD_GLOBAL" and arg is not None, True, False)
    else:
        expected = (True, False, False)
    if given != expected:
        what = ("arg", "argval", "target")
        need = [w for w, e in zip(what, expected, strict=True) if e] or ["no argument"]
        got = [w for w, g in zip(what, given, strict=True) if g] or ["none"]
        raise ValueError(f"{opname} takes {' and '.join(need)}, got {', '.join(got)}")
    return Instr(opname, arg, None if argval is _MISSING else argval, target=target)


def create_load_const(value: Any) -> Instr:
    """`LOAD_CONST value`; any Python object (the code is never marshalled)."""
    return create_instr("LOAD_CONST", argval=value)


def create_load_global(name: str, push_null: bool) -> Instr:
    """`LOAD_GLOBAL name`, pushing a NULL first if `push_null` (to call the global)."""
    return create_instr("LOAD_GLOBAL", int(push_null), argval=name)


def create_jump(opname: str, target: Instr) -> Instr:
    """A jump to `target`; the assembler flips FORWARD/BACKWARD to match the layout."""
    if bc.OPMAP.get(opname) not in bc.JUMPS:
        jumps = sorted(bc.OPNAMES[op] for op in bc.JUMPS)
        raise ValueError(f"{opname} is not a jump; jumps are {jumps}")
    return create_instr(opname, target=target)


def create_call(nargs: int, kw_names: Iterable[str] = ()) -> list[Instr]:
    """Instructions calling with `nargs` values (positional then keyword) on the stack.

    The stack must hold `[NULL, callable, *values]` or `[callable, self, *values]`;
    `[KW_NAMES names] PRECALL n; CALL n` leaves the result in their place.
    """
    out = []
    for name, value in bc.call_sequence(nargs, tuple(kw_names)):
        if name == "KW_NAMES":
            out.append(create_instr(name, argval=value))
        else:
            assert isinstance(value, int), "PRECALL and CALL take the value count"
            out.append(create_instr(name, value))
    return out


def _variable_kind(name: str, code_options: Mapping[str, Any]) -> str:
    if name in code_options["co_cellvars"] or name in code_options["co_freevars"]:
        return "DEREF"
    if name in code_options["co_varnames"]:
        return "FAST"
    return "GLOBAL"


def create_load(name: str, code_options: Mapping[str, Any]) -> Instr:
    """Instruction pushing variable `name`: LOAD_DEREF for cells and free variables,
    LOAD_FAST for locals, LOAD_GLOBAL (without NULL) otherwise."""
    kind = _variable_kind(name, code_options)
    if kind == "GLOBAL":
        return create_load_global(name, push_null=False)
    return create_instr(f"LOAD_{kind}", argval=name)


def create_store(name: str, code_options: Mapping[str, Any]) -> Instr:
    """Instruction popping TOS into variable `name` (STORE_DEREF / STORE_FAST / STORE_GLOBAL)."""
    return create_instr(f"STORE_{_variable_kind(name, code_options)}", argval=name)


# --- printing ------------------------------------------------------------------------


def format_instructions(instrs: list[Instr]) -> str:
    """Listing of `instrs`, one per line: index, line start, opname, argument, jump target
    index and exception entry (handler index, depth, lasti). Deterministic: no addresses."""
    index = {instr: i for i, instr in enumerate(instrs)}
    lines = []
    for i, instr in enumerate(instrs):
        text = f"{i:4d} {instr.starts_line or '':>5} {instr.opname:<28} "
        if instr.target is not None:
            text += f"-> {index.get(instr.target, '?')}"
        else:
            text += instr.argrepr
        entry = instr.exn_entry
        if entry is not None:
            lasti = " lasti" if entry.lasti else ""
            text = f"{text:<60} [exc -> {index.get(entry.target, '?')} depth {entry.depth}{lasti}]"
        lines.append(text.rstrip())
    return "\n".join(lines)
