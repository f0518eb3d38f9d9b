"""CPython 3.11 bytecode facts, in one place.

Everything the trace layer knows about the interpreter's encoding lives here: opcode
tables, inline CACHE counts, jump kinds and directions, stack effects, the exception-table
and line-table encodings, the call protocol (`PUSH_NULL`/`LOAD_GLOBAL` low bit, `KW_NAMES`,
`PRECALL`, `CALL`), `BINARY_OP`/`COMPARE_OP` argument tables and the "localsplus" index
space of locals, cells and free variables. Supporting another Python version means changing
this module (and the tests that pin its facts), nothing else.

Sources: CPython 3.11 `Lib/opcode.py`, `Lib/dis.py`, `Python/compile.c` (`assemble_*`,
`write_location_*`), `Objects/exception_handling_notes.txt`, `Objects/locations.md`;
jitgrad's research notes `research/dynamo.md` section 2 (each fact checked on 3.11.7).
"""

from __future__ import annotations

import dis
import inspect
import opcode
import sys
import types
from typing import NamedTuple

SUPPORTED_VERSION = (3, 11)

OPMAP: dict[str, int] = dict(dis.opmap)
OPNAMES: list[str] = list(dis.opname)
HAVE_ARGUMENT: int = dis.HAVE_ARGUMENT
EXTENDED_ARG: int = dis.EXTENDED_ARG
CACHE: int = OPMAP["CACHE"]
RETURN_GENERATOR: int = OPMAP["RETURN_GENERATOR"]

# Inline CACHE code units that follow an instruction (zeros in `co_code`), by opcode.
CACHE_ENTRIES: dict[int, int] = {
    op: count
    for op, count in enumerate(opcode._inline_cache_entries)  # type: ignore[attr-defined]
    if count
}

# Which argument space an opcode's oparg indexes.
HASCONST = frozenset(dis.hasconst)  # co_consts (LOAD_CONST, KW_NAMES)
HASNAME = frozenset(dis.hasname)  # co_names
HASLOCAL = frozenset(dis.haslocal)  # co_varnames (LOAD_FAST, STORE_FAST, DELETE_FAST)
HASFREE = frozenset(dis.hasfree)  # localsplus (cells and frees: LOAD_DEREF, MAKE_CELL, ...)
HASCOMPARE = frozenset(dis.hascompare)  # dis.cmp_op

# All 3.11 jumps are relative; the direction is part of the opcode (`dis.hasjabs` is empty).
JUMPS = frozenset(dis.hasjrel)
BACKWARD_JUMPS = frozenset(op for op in JUMPS if "BACKWARD" in OPNAMES[op])
FORWARD_JUMPS = JUMPS - BACKWARD_JUMPS
UNCONDITIONAL_JUMPS = frozenset(
    OPMAP[name] for name in ("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT")
)

# Instructions after which control never falls through to the next instruction.
TERMINAL = UNCONDITIONAL_JUMPS | frozenset(
    OPMAP[name] for name in ("RETURN_VALUE", "RAISE_VARARGS", "RERAISE")
)

# Same jump, other direction. FOR_ITER, SEND and JUMP_IF_*_OR_POP exist only forward;
# JUMP_BACKWARD_NO_INTERRUPT turns into a plain JUMP_FORWARD (forward jumps never check
# for interrupts, so nothing is lost).
_DIRECTION_PAIRS = [
    ("JUMP_FORWARD", "JUMP_BACKWARD"),
    ("POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE"),
    ("POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE"),
    ("POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE"),
    ("POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE"),
]
FORWARD_OF: dict[str, str] = {back: fwd for fwd, back in _DIRECTION_PAIRS}
FORWARD_OF["JUMP_BACKWARD_NO_INTERRUPT"] = "JUMP_FORWARD"
BACKWARD_OF: dict[str, str] = dict(_DIRECTION_PAIRS)

# Code flags of functions whose frames cannot be split into resume functions.
GENERATOR_FLAGS = (
    inspect.CO_GENERATOR
    | inspect.CO_COROUTINE
    | inspect.CO_ASYNC_GENERATOR
    | inspect.CO_ITERABLE_COROUTINE
)
# A generator's code (its calls are traced lazily, Note [Generators] in translator.py), and
# the coroutine kinds the tracer does not inline.
GENERATOR_FLAG = inspect.CO_GENERATOR
COROUTINE_FLAGS = GENERATOR_FLAGS & ~inspect.CO_GENERATOR

# `BINARY_OP n`: n indexes this table of (NB_* name, operator symbol); 13.. are in-place.
BINARY_OPS: list[tuple[str, str]] = list(dis._nb_ops)  # type: ignore[attr-defined]
# `COMPARE_OP n`: n indexes this table.
COMPARE_OPS: tuple[str, ...] = tuple(dis.cmp_op)

# Instructions that may precede `RESUME 0`: one MAKE_CELL per cell variable,
# COPY_FREE_VARS n for closures, RETURN_GENERATOR + POP_TOP for generators.
PREFIX_OPNAMES = frozenset({"MAKE_CELL", "COPY_FREE_VARS", "RETURN_GENERATOR", "POP_TOP"})


def check_version() -> None:
    """Raise RuntimeError unless the running interpreter is the CPython this module describes."""
    if sys.version_info[:2] != SUPPORTED_VERSION or sys.implementation.name != "cpython":
        raise RuntimeError(
            f"jitgrad.trace reads CPython {SUPPORTED_VERSION[0]}.{SUPPORTED_VERSION[1]} bytecode, "
            f"but this is {sys.implementation.name} {sys.version.split()[0]}; "
            "run the function without jitgrad.compile on this interpreter")


def line_at(code: types.CodeType, offset: int) -> int:
    """The source line of the instruction at `offset`, or of the closest one before it
    that has a line (the function's first line if none does)."""
    line = code.co_firstlineno
    for start, _, lineno in code.co_lines():
        if start > offset:
            break
        if lineno is not None:
            line = lineno
    return line


def cache_entries(op: int) -> int:
    """Number of inline CACHE code units after opcode `op` (0 for most opcodes)."""
    return CACHE_ENTRIES.get(op, 0)


def extended_arg_count(arg: int) -> int:
    """Number of EXTENDED_ARG prefixes needed to encode oparg `arg` (0..3)."""
    assert 0 <= arg < 1 << 32, f"oparg {arg} does not fit in 32 bits"
    return (arg > 0xFF) + (arg > 0xFFFF) + (arg > 0xFFFFFF)


def instruction_units(op: int, arg: int) -> int:
    """Code units (2 bytes each) taken by one instruction: EXTENDED_ARGs, itself, its caches."""
    return extended_arg_count(arg) + 1 + cache_entries(op)


def stack_effect(op: int, arg: int | None, jump: bool) -> int:
    """Net change of the value-stack depth when `op` runs (taking the jump if `jump`).

    `arg` is the oparg; only its meaning matters (LOAD_GLOBAL's low bit, CALL's count),
    never jump distances, so None is accepted for instructions not yet assembled.
    Quirks kept from CPython: `PRECALL n` counts -n and `CALL n` -1 (together they pop
    n + 2 and push 1); `LOAD_GLOBAL` pushes one more when `arg & 1` (a NULL).
    One correction to `dis.stack_effect`: `RETURN_GENERATOR` counts +1, because the frame
    continues when the generator is first resumed, with the sent value pushed (the
    `POP_TOP` after it drops that value; CPython's compiler starts generator code at
    depth 1 for the same reason).
    """
    if op == RETURN_GENERATOR:
        return 1
    if op < HAVE_ARGUMENT:
        return dis.stack_effect(op, None, jump=jump)
    return dis.stack_effect(op, arg or 0, jump=jump)


def exception_handler_depth(depth: int, lasti: bool) -> int:
    """Stack depth at a handler's first instruction: cut to `depth`, push lasti?, push exc."""
    return depth + int(lasti) + 1


# --- call protocol -------------------------------------------------------------------


def load_global_arg(name_index: int, push_null: bool) -> int:
    """Oparg of `LOAD_GLOBAL`: name index shifted left, low bit = also push a NULL first."""
    return name_index << 1 | int(push_null)


def load_global_pushes_null(arg: int) -> bool:
    """Whether `LOAD_GLOBAL arg` pushes NULL before the global (the `NULL + name` form)."""
    return bool(arg & 1)


def call_sequence(nargs: int, kw_names: tuple[str, ...]) -> list[tuple[str, object]]:
    """(opname, argval) of the instructions that call with `nargs` values on the stack.

    The stack holds `[NULL or callable, callable or self, *args, *kwargs values]`; `nargs`
    counts positional plus keyword values, and the last `len(kw_names)` values are the
    keywords in `kw_names` order. `KW_NAMES` must come right before `PRECALL`: without it
    keywords silently become positionals.
    """
    if len(kw_names) > nargs:
        raise ValueError(f"call with {nargs} values cannot have {len(kw_names)} keywords "
                         f"{kw_names}: every keyword needs a value on the stack")
    prefix: list[tuple[str, object]] = [("KW_NAMES", tuple(kw_names))] if kw_names else []
    return prefix + [("PRECALL", nargs), ("CALL", nargs)]


def oparg(inst: dis.Instruction) -> int:
    """The oparg of an instruction that takes one (`dis` types it `int | None`)."""
    assert inst.arg is not None, f"{inst.opname} takes no oparg"
    return inst.arg


def binary_op_symbol(arg: int) -> str:
    """Operator of `BINARY_OP arg`: '+', '@', '+=' ..."""
    return BINARY_OPS[arg][1]


def localsplus_names(
    varnames: tuple[str, ...], cellvars: tuple[str, ...], freevars: tuple[str, ...]
) -> tuple[str, ...]:
    """Names of the unified locals array that DEREF-family opargs index, in slot order.

    Plain locals first, then cell variables that are not also arguments (an argument that
    is a cell keeps its argument slot: `MAKE_CELL 0 (x)`), then free variables. Mirrors
    `code._varname_from_oparg`.
    """
    cells = tuple(name for name in cellvars if name not in varnames)
    return tuple(varnames) + cells + tuple(freevars)


# --- exception table -----------------------------------------------------------------


class ExceptionTableRow(NamedTuple):
    """One `co_exceptiontable` entry, offsets in code units (2 bytes), `end` exclusive."""

    start: int
    end: int
    target: int
    depth: int
    lasti: bool


def _exception_varint(value: int, first: bool) -> bytes:
    # 6-bit chunks, most significant first; 0x40 = more chunks follow; 0x80 marks an entry's
    # first byte.
    assert 0 <= value < 1 << 30, f"exception table value {value} out of range"
    chunks = [value & 0x3F]
    value >>= 6
    while value:
        chunks.append(value & 0x3F)
        value >>= 6
    chunks.reverse()
    out = bytearray(chunk | 0x40 for chunk in chunks[:-1])
    out.append(chunks[-1])
    if first:
        out[0] |= 0x80
    return bytes(out)


def encode_exception_table(rows: list[ExceptionTableRow]) -> bytes:
    """Bytes of `co_exceptiontable` for rows sorted by start and not overlapping."""
    out = bytearray()
    for row in rows:
        assert row.end > row.start, f"empty exception table row {row}"
        out += _exception_varint(row.start, first=True)
        out += _exception_varint(row.end - row.start, first=False)
        out += _exception_varint(row.target, first=False)
        out += _exception_varint(row.depth << 1 | int(row.lasti), first=False)
    return bytes(out)


def decode_exception_table(table: bytes) -> list[ExceptionTableRow]:
    """Rows of a `co_exceptiontable` (offsets in code units)."""
    it = iter(table)

    def varint(byte: int) -> int:
        value = byte & 0x3F
        while byte & 0x40:
            byte = next(it)
            value = value << 6 | (byte & 0x3F)
        return value

    rows = []
    for byte in it:
        assert byte & 0x80, "exception table entry must start with the 0x80 marker"
        start = varint(byte)
        length = varint(next(it))
        target = varint(next(it))
        depth_lasti = varint(next(it))
        rows.append(ExceptionTableRow(start, start + length, target, depth_lasti >> 1,
                                      bool(depth_lasti & 1)))
    return rows


# --- line table (PEP 657 locations) ---------------------------------------------------

LOCATION_NO_COLUMNS = 13
LOCATION_LONG = 14
LOCATION_NONE = 15
LOCATION_MAX_UNITS = 8  # one entry covers 1..8 code units


def _location_varint(value: int) -> bytes:
    # 6-bit chunks, least significant first; 0x40 = more chunks follow.
    out = bytearray()
    while value >= 0x40:
        out.append(0x40 | (value & 0x3F))
        value >>= 6
    out.append(value)
    return bytes(out)


def _location_signed_varint(value: int) -> bytes:
    return _location_varint(-value << 1 | 1 if value < 0 else value << 1)


def encode_line_table(
    entries: list[tuple[int, dis.Positions | None]], firstlineno: int
) -> bytes:
    """Bytes of `co_linetable` for consecutive runs of `(code_units, positions)`.

    Uses only the "no location" (15), "no column" (13) and "long" (14) kinds; line numbers
    are stored as deltas from the previous entry's line, starting at `firstlineno`. A run
    longer than 8 units is split. Positions with a line but no columns use kind 13;
    missing columns inside a long entry are stored as 0 (decoded as None).
    """
    out = bytearray()
    previous_line = firstlineno
    for units, positions in entries:
        while units > 0:
            chunk = min(units, LOCATION_MAX_UNITS)
            units -= chunk
            if positions is None or positions.lineno is None:
                out.append(0x80 | LOCATION_NONE << 3 | (chunk - 1))
                continue
            line = positions.lineno
            end_line = line if positions.end_lineno is None else positions.end_lineno
            no_columns = positions.col_offset is None and positions.end_col_offset is None
            if no_columns and end_line == line:
                out.append(0x80 | LOCATION_NO_COLUMNS << 3 | (chunk - 1))
                out += _location_signed_varint(line - previous_line)
            else:
                assert end_line >= line, f"positions end before they start: {positions}"
                out.append(0x80 | LOCATION_LONG << 3 | (chunk - 1))
                out += _location_signed_varint(line - previous_line)
                out += _location_varint(end_line - line)
                out += _location_varint(_column_plus_one(positions.col_offset))
                out += _location_varint(_column_plus_one(positions.end_col_offset))
            previous_line = line
    return bytes(out)


def _column_plus_one(column: int | None) -> int:
    return 0 if column is None else column + 1

