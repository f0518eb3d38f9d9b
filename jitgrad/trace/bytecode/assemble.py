"""Assemble an instruction list back into a CPython 3.11 code object.

`assemble(instrs, code_options)` resolves every `argval` to an oparg against the code
options (adding constants and names as needed; constants by identity, so `co_consts` may
hold functions and other unhashable objects: the code is never marshalled), lays the code
out with inline CACHE units and the fewest EXTENDED_ARG prefixes (a fixed point, since
prefixes move offsets), encodes relative jumps and picks each jump's direction, computes
`co_stacksize` by dataflow (analysis.stack_depths: a too-small stack size is memory
corruption, not an exception), and writes the exception table from per-instruction entries
with their explicit depths and the line table from per-instruction positions.

For unedited code the result is byte-identical to the original `co_code` and
`co_exceptiontable` (tests/trace/test_assemble.py checks whole stdlib modules); only
`co_linetable` differs in encoding, not in the positions it describes.

Model: torch/_dynamo/bytecode_transformation.py (`clean_and_assemble_instructions`,
`devirtualize_jumps`, `fix_extended_args`, `compute_exception_table`,
`linetable_311_writer`), rewritten for jitgrad.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from jitgrad.trace.bytecode import opcodes as bc
from jitgrad.trace.bytecode.analysis import stack_depths
from jitgrad.trace.bytecode.instructions import Instr, decode

# Keys of a code-options dict: CodeType fields that assembly does not compute.
OPTION_KEYS = (
    "co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_flags", "co_consts",
    "co_names", "co_varnames", "co_filename", "co_name", "co_qualname", "co_firstlineno",
    "co_freevars", "co_cellvars",
)


def code_options(code: types.CodeType) -> dict[str, Any]:
    """The fields of `code` that `assemble` takes as given (OPTION_KEYS), as a new dict."""
    return {key: getattr(code, key) for key in OPTION_KEYS}


def transform_code(
    code: types.CodeType, transform: Callable[[list[Instr], dict[str, Any]], None]
) -> types.CodeType:
    """Decode `code`, let `transform(instrs, options)` edit both in place, assemble."""
    instrs = decode(code)
    options = code_options(code)
    transform(instrs, options)
    return assemble(instrs, options)


class _Tables:
    """co_consts, co_names, co_varnames and the localsplus names as assembly extends them."""

    def __init__(self, options: dict[str, Any]):
        self.consts = list(options["co_consts"])
        self.names = list(options["co_names"])
        self.varnames = list(options["co_varnames"])
        self._varname_set = set(self.varnames)
        self.cellvars = tuple(options["co_cellvars"])
        self.freevars = tuple(options["co_freevars"])
        self._const_index: dict[int, int] = {}
        for i, value in enumerate(self.consts):
            self._const_index.setdefault(id(value), i)
        self._name_index = {name: i for i, name in reversed(list(enumerate(self.names)))}

    def const(self, value: Any, hint: int | None) -> int:
        if hint is not None and 0 <= hint < len(self.consts) and self.consts[hint] is value:
            return hint
        if id(value) not in self._const_index:
            self._const_index[id(value)] = len(self.consts)
            self.consts.append(value)
        return self._const_index[id(value)]

    def name(self, name: str, hint: int | None) -> int:
        if hint is not None and 0 <= hint < len(self.names) and self.names[hint] == name:
            return hint
        if name not in self._name_index:
            self._name_index[name] = len(self.names)
            self.names.append(name)
        return self._name_index[name]

    def add_local(self, name: str) -> None:
        if name not in self._varname_set:
            self._varname_set.add(name)
            self.varnames.append(name)

    def localsplus(self) -> tuple[str, ...]:
        return bc.localsplus_names(tuple(self.varnames), self.cellvars, self.freevars)


def _resolve_arg(instr: Instr, tables: _Tables, localsplus: tuple[str, ...]) -> int:
    """Oparg of a non-jump instruction, from its argval where the oparg is an index."""
    op = instr.opcode
    if op < bc.HAVE_ARGUMENT:
        return 0
    if op in bc.HASCONST:
        return tables.const(instr.argval, instr.arg)
    if instr.opname == "LOAD_GLOBAL":
        hint = None if instr.arg is None else instr.arg >> 1
        return bc.load_global_arg(tables.name(instr.argval, hint),
                                  bc.load_global_pushes_null(instr.arg or 0))
    if op in bc.HASNAME:
        return tables.name(instr.argval, instr.arg)
    if op in bc.HASLOCAL:
        return tables.varnames.index(instr.argval)
    if op in bc.HASFREE:
        if instr.argval not in tables.cellvars and instr.argval not in tables.freevars:
            raise ValueError(f"{instr.opname} {instr.argval!r}: not a cell or free variable of "
                             f"the code (cells {tables.cellvars}, frees {tables.freevars})")
        if instr.arg is not None and instr.arg < len(localsplus) and (
                localsplus[instr.arg] == instr.argval):
            return instr.arg
        return localsplus.index(instr.argval)
    if op in bc.HASCOMPARE:
        return bc.COMPARE_OPS.index(instr.argval)
    if instr.arg is None:
        raise ValueError(f"{instr.opname} needs an oparg, got none")
    return instr.arg


def _layout(
    instrs: list[Instr], args: list[int], index: dict[Instr, int]
) -> tuple[list[str], list[int]]:
    """Fix jump opargs and directions; return (opnames, start unit of every instruction).

    Starts with zero-length jumps and grows EXTENDED_ARG prefixes until nothing changes:
    sizes only grow, so the loop ends at the smallest consistent layout.
    """
    opnames = [instr.opname for instr in instrs]
    jumps = [i for i, instr in enumerate(instrs) if instr.opcode in bc.JUMPS]
    for i in jumps:
        args[i] = 0
    while True:
        starts, unit = [], 0
        for instr, arg in zip(instrs, args, strict=True):
            starts.append(unit)
            unit += bc.instruction_units(instr.opcode, arg)
        grew = False
        for i in jumps:
            after = starts[i] + bc.instruction_units(instrs[i].opcode, args[i])
            jump_target = instrs[i].target
            assert jump_target is not None, "checked by stack_depths"
            target = starts[index[jump_target]]
            opnames[i] = _directed(instrs[i], forward=target >= after)
            new_arg = abs(target - after)
            grew |= bc.extended_arg_count(new_arg) > bc.extended_arg_count(args[i])
            args[i] = new_arg
        if not grew:
            return opnames, starts


def _directed(instr: Instr, forward: bool) -> str:
    name = instr.opname
    if forward:
        return bc.FORWARD_OF.get(name, name)
    if instr.opcode in bc.BACKWARD_JUMPS:
        return name
    if name not in bc.BACKWARD_OF:
        raise ValueError(f"{name} can only jump forward, but its target "
                         f"{instr.target!r} is placed before it")
    return bc.BACKWARD_OF[name]


def _code_bytes(opnames: list[str], args: list[int]) -> bytes:
    out = bytearray()
    for name, arg in zip(opnames, args, strict=True):
        op = bc.OPMAP[name]
        for shift in range(8 * bc.extended_arg_count(arg), 0, -8):
            out += bytes((bc.EXTENDED_ARG, arg >> shift & 0xFF))
        out += bytes((op, arg & 0xFF))
        out += bytes(2 * bc.cache_entries(op))
    return bytes(out)


def _exception_rows(
    instrs: list[Instr], starts: list[int], end_unit: int, index: dict[Instr, int]
) -> list[bc.ExceptionTableRow]:
    """One row per maximal run of consecutive instructions with the same handler."""
    rows: list[bc.ExceptionTableRow] = []
    current = None
    run_start = 0
    for i, instr in enumerate([*instrs, None]):
        entry = instr.exn_entry if instr is not None else None
        key = None if entry is None else (entry.target, entry.depth, entry.lasti)
        if key == current:
            continue
        unit = starts[i] if instr is not None else end_unit
        if current is not None:
            target, depth, lasti = current
            if target not in index:
                raise ValueError(f"exception handler {target!r} is not in the instruction list")
            rows.append(bc.ExceptionTableRow(run_start, unit, starts[index[target]], depth, lasti))
        current, run_start = key, unit
    return rows


def _line_entries(
    instrs: list[Instr], starts: list[int], end_unit: int
) -> list[tuple[int, Any]]:
    """(code units, positions) of every instruction; one entry each, as CPython writes them,
    so `co_lines()` yields the same ranges as for compiler-made code."""
    ends = [*starts[1:], end_unit]
    return [(end - start, instr.positions)
            for instr, start, end in zip(instrs, starts, ends, strict=True)]


def assemble(instrs: list[Instr], code_options: dict[str, Any]) -> types.CodeType:
    """A code object running `instrs`, with the fields in `code_options` (see OPTION_KEYS).

    `co_consts`, `co_names` and `co_varnames` are extended with constants, names and
    locals the instructions use but the options lack (`code_options` itself is not
    modified). Raises ValueError for missing option keys, variables that are not cells or
    frees of the code, jumps or handlers outside the list, forward-only jumps placed
    backward, and inconsistent stack depths (see analysis.stack_depths).
    """
    missing = [key for key in OPTION_KEYS if key not in code_options]
    if missing:
        raise ValueError(f"code options lack {missing}; start from code_options(code)")
    if not instrs:
        raise ValueError("cannot assemble an empty instruction list")
    bc.check_version()
    tables = _Tables(code_options)
    for instr in instrs:
        if instr.opcode in bc.HASLOCAL:
            tables.add_local(instr.argval)
    localsplus = tables.localsplus()
    stacksize = max(stack_depths(instrs).values())
    index = {instr: i for i, instr in enumerate(instrs)}
    args = [0 if instr.opcode in bc.JUMPS else _resolve_arg(instr, tables, localsplus)
            for instr in instrs]
    opnames, starts = _layout(instrs, args, index)
    code_bytes = _code_bytes(opnames, args)
    end_unit = len(code_bytes) // 2
    options = code_options
    return types.CodeType(
        options["co_argcount"], options["co_posonlyargcount"], options["co_kwonlyargcount"],
        len(tables.varnames), stacksize, options["co_flags"], code_bytes, tuple(tables.consts),
        tuple(tables.names), tuple(tables.varnames), options["co_filename"],
        options["co_name"], options["co_qualname"], options["co_firstlineno"],
        bc.encode_line_table(_line_entries(instrs, starts, end_unit), options["co_firstlineno"]),
        bc.encode_exception_table(_exception_rows(instrs, starts, end_unit, index)),
        tuple(options["co_freevars"]), tuple(options["co_cellvars"]),
    )
