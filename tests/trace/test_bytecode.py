"""CPython 3.11 facts in jitgrad.trace.bytecode.opcodes, checked against the running interpreter
(`dis`, real code objects) and against the hand-decoded examples of research/dynamo.md 2."""

import dis
import sys
import types

import pytest

from jitgrad.trace.bytecode import opcodes as bc


def _sample(x, ctx):
    a = x.sin()
    with ctx:
        b = len(a)
    try:
        c = b / a
    except ZeroDivisionError as e:
        c = e
    return c


def test_cache_counts_match_research_table():
    counts = {bc.OPNAMES[op]: n for op, n in bc.CACHE_ENTRIES.items()}
    assert counts == {"LOAD_GLOBAL": 5, "LOAD_METHOD": 10, "LOAD_ATTR": 4, "STORE_ATTR": 4,
                      "BINARY_SUBSCR": 4, "STORE_SUBSCR": 1, "BINARY_OP": 1, "COMPARE_OP": 2,
                      "UNPACK_SEQUENCE": 1, "PRECALL": 1, "CALL": 4}
    assert bc.cache_entries(bc.OPMAP["LOAD_FAST"]) == 0


def test_offsets_of_x_sin_call_follow_cache_counts():
    # research/dynamo.md 2.2: LOAD_METHOD at 4, PRECALL at 26, CALL at 30, next at 40
    def f(x):
        return x.sin()
    offsets = {i.opname: i.offset for i in dis.get_instructions(f)}
    assert (offsets["LOAD_METHOD"], offsets["PRECALL"], offsets["CALL"],
            offsets["RETURN_VALUE"]) == (4, 26, 30, 40)
    assert offsets["PRECALL"] == 4 + 2 * bc.instruction_units(bc.OPMAP["LOAD_METHOD"], 0)


def test_jump_tables():
    names = lambda ops: {bc.OPNAMES[op] for op in ops}  # noqa: E731
    assert names(bc.BACKWARD_JUMPS) == {
        "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "POP_JUMP_BACKWARD_IF_TRUE",
        "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_NONE",
        "POP_JUMP_BACKWARD_IF_NOT_NONE"}
    assert names(bc.FORWARD_JUMPS) == {
        "JUMP_FORWARD", "FOR_ITER", "SEND", "JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP",
        "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_FORWARD_IF_NONE",
        "POP_JUMP_FORWARD_IF_NOT_NONE"}
    assert names(bc.UNCONDITIONAL_JUMPS) == {"JUMP_FORWARD", "JUMP_BACKWARD",
                                             "JUMP_BACKWARD_NO_INTERRUPT"}
    assert names(bc.TERMINAL) == names(bc.UNCONDITIONAL_JUMPS) | {"RETURN_VALUE",
                                                                   "RAISE_VARARGS", "RERAISE"}
    assert dis.hasjabs == []


def test_direction_flip_tables_are_inverse_and_cover_every_two_way_jump():
    for forward, backward in bc.BACKWARD_OF.items():
        assert bc.FORWARD_OF[backward] == forward
        assert bc.OPMAP[forward] in bc.FORWARD_JUMPS and bc.OPMAP[backward] in bc.BACKWARD_JUMPS
    assert set(bc.FORWARD_OF) == {bc.OPNAMES[op] for op in bc.BACKWARD_JUMPS}
    assert bc.FORWARD_OF["JUMP_BACKWARD_NO_INTERRUPT"] == "JUMP_FORWARD"
    forward_only = {bc.OPNAMES[op] for op in bc.FORWARD_JUMPS} - set(bc.BACKWARD_OF)
    assert forward_only == {"FOR_ITER", "SEND", "JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP"}


@pytest.mark.parametrize(("opname", "arg", "jump", "effect"), [
    ("LOAD_GLOBAL", 2, False, 1),  # name 1, no NULL
    ("LOAD_GLOBAL", 3, False, 2),  # name 1, NULL + global
    ("LOAD_METHOD", 0, False, 1),
    ("PRECALL", 3, False, -3),
    ("CALL", 3, False, -1),  # PRECALL n + CALL n pop n + 2 and push 1
    ("CALL_FUNCTION_EX", 1, False, -3),
    ("FOR_ITER", 0, False, 1),
    ("FOR_ITER", 0, True, -1),
    ("JUMP_IF_TRUE_OR_POP", 0, True, 0),
    ("JUMP_IF_TRUE_OR_POP", 0, False, -1),
    ("POP_JUMP_FORWARD_IF_TRUE", 0, True, -1),
    ("BEFORE_WITH", None, False, 1),
    ("RETURN_GENERATOR", None, False, 1),  # corrected: the sent value is pushed on resume
    ("MAKE_FUNCTION", 0x08 | 0x01, False, -2),
    ("UNPACK_EX", 2 | 1 << 8, False, 3),
])
def test_stack_effects(opname, arg, jump, effect):
    assert bc.stack_effect(bc.OPMAP[opname], arg, jump) == effect


def test_stack_effect_accepts_missing_arg_of_unassembled_instruction():
    assert bc.stack_effect(bc.OPMAP["LOAD_CONST"], None, False) == 1
    assert bc.stack_effect(bc.OPMAP["JUMP_FORWARD"], None, True) == 0


def test_exception_handler_depth():
    assert bc.exception_handler_depth(1, True) == 3  # cut to 1, push lasti, push exception
    assert bc.exception_handler_depth(0, False) == 1


def test_extended_arg_counts():
    assert [bc.extended_arg_count(a) for a in (0, 255, 256, 65535, 65536, 1 << 24)] == [
        0, 0, 1, 1, 2, 3]
    assert bc.instruction_units(bc.OPMAP["LOAD_GLOBAL"], 300) == 1 + 1 + 5


def test_exception_table_hand_decoded_example():
    # research/dynamo.md 2.7: 83 06 15 03 = offsets 6..16 -> 42, depth 1, lasti
    row = bc.ExceptionTableRow(start=3, end=9, target=21, depth=1, lasti=True)
    assert bc.decode_exception_table(bytes([0x83, 0x06, 0x15, 0x03])) == [row]
    assert bc.encode_exception_table([row]) == bytes([0x83, 0x06, 0x15, 0x03])


def test_exception_table_multi_chunk_varints_round_trip():
    rows = [bc.ExceptionTableRow(5000, 5001, 70000, 3, False),
            bc.ExceptionTableRow(70000, 300000, 1 << 24, 40, True)]
    table = bc.encode_exception_table(rows)
    assert bc.decode_exception_table(table) == rows
    # 5000 = 1 * 64**2 + 14 * 64 + 8: most significant chunk first, 0x40 = more follow,
    # 0x80 on the entry's first byte
    assert table[:3] == bytes([0x80 | 0x40 | 1, 0x40 | 14, 8])


def test_exception_table_decoding_matches_dis():
    rows = bc.decode_exception_table(_sample.__code__.co_exceptiontable)
    expected = [(e.start, e.end, e.target, e.depth, e.lasti)
                for e in dis._parse_exception_table(_sample.__code__)]
    assert [(2 * r.start, 2 * r.end, 2 * r.target, r.depth, r.lasti) for r in rows] == expected
    assert bc.encode_exception_table(rows) == _sample.__code__.co_exceptiontable


def _code_with_lines(entries, firstlineno):
    """A code object of NOPs + RETURN whose line table is encoded from `entries`."""
    units = sum(n for n, _ in entries)
    code_bytes = bytes([bc.OPMAP["NOP"], 0] * (units - 2) + [bc.OPMAP["LOAD_CONST"], 0,
                                                           bc.OPMAP["RETURN_VALUE"], 0])
    return (lambda: None).__code__.replace(
        co_code=code_bytes, co_firstlineno=firstlineno,
        co_linetable=bc.encode_line_table(entries, firstlineno))


def test_line_table_kinds_decode_to_the_same_positions():
    P = dis.Positions
    entries = [
        (1, None),  # kind 15: no location
        (2, P(12, 12, None, None)),  # kind 13: line only, delta +2
        (3, P(11, 14, 4, 200)),  # kind 14: negative delta, multi-line, wide columns
        (11, P(5000, 5000, 0, 1)),  # longer than 8 units: split; large delta (multi-chunk)
        (2, P(3, 3, None, 7)),  # missing start column inside a long entry
    ]
    code = _code_with_lines(entries, firstlineno=10)
    expected = [positions or P(None, None, None, None)
                for n, positions in entries for _ in range(n)]
    assert [P(*p) for p in code.co_positions()] == expected
    assert [line for _, _, line in code.co_lines()] == [None, 12, 11, 5000, 5000, 3]


def test_line_table_bytes_of_each_kind():
    P = dis.Positions
    assert bc.encode_line_table([(1, None)], 1) == bytes([0x80 | 15 << 3])
    assert bc.encode_line_table([(2, P(4, 4, None, None))], 1) == bytes([0x80 | 13 << 3 | 1, 6])
    # long: line delta -1 -> (1 << 1) | 1 = 3, end delta 0, col 4 + 1, end col 17 + 1
    assert bc.encode_line_table([(1, P(9, 9, 4, 17))], 10) == bytes([0x80 | 14 << 3, 3, 0, 5, 18])


def test_load_global_low_bit():
    def f():
        return len(())
    load = next(i for i in dis.get_instructions(f) if i.opname == "LOAD_GLOBAL")
    assert load.arg == bc.load_global_arg(f.__code__.co_names.index("len"), push_null=True)
    assert bc.load_global_pushes_null(load.arg) and not bc.load_global_pushes_null(4)


def test_call_sequence_matches_compiler_output():
    def f(foo, z):
        return foo(1, a=1, b=z)
    ops = [(i.opname, i.arg) for i in dis.get_instructions(f)]
    kw = ops.index(("KW_NAMES", f.__code__.co_consts.index(("a", "b"))))
    assert ops[kw + 1:kw + 3] == [("PRECALL", 3), ("CALL", 3)]
    assert bc.call_sequence(3, ("a", "b")) == [("KW_NAMES", ("a", "b")), ("PRECALL", 3),
                                               ("CALL", 3)]
    assert bc.call_sequence(0, ()) == [("PRECALL", 0), ("CALL", 0)]
    with pytest.raises(ValueError, match="1 values cannot have 2 keywords"):
        bc.call_sequence(1, ("a", "b"))


def test_binary_and_compare_tables():
    assert [bc.binary_op_symbol(n) for n in (0, 1, 2, 4, 5, 6, 8, 10, 11, 13)] == [
        "+", "&", "//", "@", "*", "%", "**", "-", "/", "+="]
    assert bc.COMPARE_OPS == ("<", "<=", "==", "!=", ">", ">=")


def test_localsplus_names_match_varname_from_oparg():
    def outer(x, y):
        k = 1

        def inner(z):
            return x + k + z
        return inner
    inner = outer(1, 2)
    for code in (outer.__code__, inner.__code__):
        names = bc.localsplus_names(code.co_varnames, code.co_cellvars, code.co_freevars)
        assert names == tuple(code._varname_from_oparg(i) for i in range(len(names)))
    assert bc.localsplus_names(("x", "y", "inner"), ("k", "x"), ()) == ("x", "y", "inner", "k")


def test_generator_flags():
    def gen():
        yield 1

    async def coro():
        return 1
    assert gen.__code__.co_flags & bc.GENERATOR_FLAGS
    assert coro.__code__.co_flags & bc.GENERATOR_FLAGS
    assert not _sample.__code__.co_flags & bc.GENERATOR_FLAGS


def test_check_version_names_the_interpreter(monkeypatch):
    bc.check_version()
    monkeypatch.setattr(sys, "version_info", (3, 12, 0, "final", 0))
    with pytest.raises(RuntimeError, match="reads CPython 3.11 bytecode"):
        bc.check_version()


def test_code_with_lines_helper_builds_runnable_code():
    fn = types.FunctionType(_code_with_lines([(3, None)], 1), {})
    assert fn() is None
