"""Analyses over decoded instructions: stack depths, liveness, loops, try/with blocks,
checkpoints. Expected values are worked out by hand from the `dis` listing of each function."""

import types

import pytest

from jitgrad.trace.bytecode.analysis import (
    checkpoints,
    exn_blocks,
    is_in_loop,
    livevars,
    stack_depths,
)
from jitgrad.trace.bytecode.assemble import assemble, code_options
from jitgrad.trace.bytecode.instructions import create_instr, create_jump, create_load_const, decode


def _helper(v):
    return v


def _at(fn, opname, argval=None, nth=0):
    """The nth instruction of fn with this opname (and argval), with the decoded list."""
    instrs = decode(fn.__code__)
    found = [i for i in instrs if i.opname == opname and (argval is None or i.argval == argval)]
    return instrs, found[nth]


def _line(fn, instr):
    """Line of `instr` relative to the `def` line of fn."""
    return instr.positions.lineno - fn.__code__.co_firstlineno


# --- stack depths ----------------------------------------------------------------------


def _call_in_sum(a, b):
    return a + _helper(b)


def test_stack_depths_of_a_call_inside_an_expression():
    instrs = decode(_call_in_sum.__code__)
    depths = stack_depths(instrs)
    assert [(i.opname, depths[i]) for i in instrs] == [
        ("RESUME", 0), ("LOAD_FAST", 0), ("LOAD_GLOBAL", 1),  # pushes NULL + _helper
        ("LOAD_FAST", 3), ("PRECALL", 4), ("CALL", 3), ("BINARY_OP", 2), ("RETURN_VALUE", 1)]


def _with_body(ctx, x):
    with ctx:
        y = x + 1
    return y


def test_stack_depths_inside_with_and_its_handler():
    instrs = decode(_with_body.__code__)
    depths = stack_depths(instrs)
    store = next(i for i in instrs if i.opname == "STORE_FAST")
    assert depths[store] == 2  # __exit__ under the body, then the sum
    handler = store.exn_entry.target
    assert (handler.opname, store.exn_entry.depth, store.exn_entry.lasti) == (
        "PUSH_EXC_INFO", 1, True)
    assert depths[handler] == 1 + 1 + 1  # cut to depth 1, push lasti, push the exception
    assert max(depths.values()) == _with_body.__code__.co_stacksize


def test_unreachable_handler_has_no_depth():
    def f():
        try:
            pass
        finally:
            return 1  # noqa: B012 (the empty try body is the subject)
    instrs = decode(f.__code__)
    depths = stack_depths(instrs)
    assert [i.opname for i in instrs if i not in depths] == [
        "PUSH_EXC_INFO", "POP_TOP", "POP_EXCEPT", "LOAD_CONST", "RETURN_VALUE", "COPY",
        "POP_EXCEPT", "RERAISE"]


def test_generator_code_starts_with_the_sent_value():
    def gen():
        yield 1
    instrs = decode(gen.__code__)
    depths = stack_depths(instrs)
    assert [(i.opname, depths[i]) for i in instrs[:3]] == [
        ("RETURN_GENERATOR", 0), ("POP_TOP", 1), ("RESUME", 0)]


# --- liveness ----------------------------------------------------------------------------


def _straight(a, b, c):
    x = a + 1
    y = x + b
    return y


def test_livevars_straight_line():
    instrs, second = _at(_straight, "LOAD_FAST", "x")
    assert livevars(instrs, second) == {"x", "b"}
    assert livevars(instrs, instrs[0]) == {"a", "b"}  # c is never read; x, y written first


def _branches(flag, a, b, c):
    if flag:
        y = a
    else:
        y = b
    del c
    return y


def test_livevars_union_over_branches_and_delete_reads():
    instrs = decode(_branches.__code__)
    assert livevars(instrs, instrs[0]) == {"flag", "a", "b", "c"}
    instrs, delete = _at(_branches, "DELETE_FAST")
    assert livevars(instrs, delete) == {"c", "y"}


def _exception_path(fallback):
    try:
        x = _helper(1)
    except ValueError:
        return fallback
    return x


def test_livevars_follow_exception_edges():
    instrs, call = _at(_exception_path, "PRECALL")
    assert livevars(instrs, call) == {"fallback"}  # x is written before it is read


def _loop_carried(xs):
    total = 0
    for x in xs:
        total = total + x
    return total


def test_livevars_around_a_loop():
    instrs, for_iter = _at(_loop_carried, "FOR_ITER")
    assert livevars(instrs, for_iter) == {"total"}
    assert livevars(instrs, instrs[0]) == {"xs"}


def _cells(a):
    k = a

    def inner():
        return k
    k = k + 1
    return inner


def test_livevars_include_cells_and_closure_loads():
    instrs, closure = _at(_cells, "LOAD_CLOSURE")
    assert livevars(instrs, instrs[0]) == {"a"}  # k is written (STORE_DEREF) first
    assert livevars(instrs, closure) == {"k"}
    inner_instrs = decode(_cells(1).__code__)
    assert livevars(inner_instrs, inner_instrs[0]) == {"k"}


# --- loops -------------------------------------------------------------------------------


def _loops(xs, n):
    before = len(xs)
    for x in xs:
        if x < 0:
            raise ValueError(x)
        before += x
    while n > 0:
        n -= 1
    after = before + n
    return after


def test_is_in_loop_spans_loop_bodies():
    instrs = decode(_loops.__code__)
    in_loop = {(_line(_loops, i), i.opname) for i in instrs if is_in_loop(instrs, i)}
    assert (1, "STORE_FAST") not in in_loop  # before = len(xs)
    assert {(2, "FOR_ITER"), (5, "STORE_FAST"), (7, "STORE_FAST")} <= in_loop
    assert (4, "RAISE_VARARGS") in in_loop  # leaves the loop, but sits inside its body
    assert not any(line == 8 for line, _ in in_loop)  # after = before + n


def test_is_in_loop_is_found_from_positions_not_opnames():
    # an edited list may hold a JUMP_FORWARD placed after its target: still a loop
    head = create_instr("NOP")
    jump = create_jump("JUMP_FORWARD", head)
    instrs = [create_instr("RESUME", 0), head, jump]
    assert [is_in_loop(instrs, i) for i in instrs] == [False, True, True]


# --- try / with blocks ------------------------------------------------------------------


def _nested_blocks(ctx, g):
    try:
        with ctx:
            a = g(1)
            with ctx:
                b = g(2)
            c = g(3)
    except KeyError as e:
        d = g(e)
    finally:
        f = g(5)
    return a, b, c, d, f


def _blocks_at(argval):
    instrs, call_arg = _at(_nested_blocks, "LOAD_CONST", argval)
    return [(b.kind, b.depth, b.lasti) for b in exn_blocks(instrs, call_arg)]


def test_exn_blocks_nested_with_inside_try_finally():
    # try/finally and try/except are two handlers, then the two with blocks (exit slots 0, 1)
    assert _blocks_at(1) == [("try", 0, False), ("try", 0, False), ("with", 1, True)]
    assert _blocks_at(2) == [("try", 0, False), ("try", 0, False), ("with", 1, True),
                             ("with", 2, True)]
    assert _blocks_at(3) == [("try", 0, False), ("try", 0, False), ("with", 1, True)]
    assert _blocks_at(5) == []  # the finally body on the normal path


def test_exn_blocks_in_an_except_body_report_the_handling_code():
    instrs, load_e = _at(_nested_blocks, "LOAD_FAST", "e")
    kinds = [b.kind for b in exn_blocks(instrs, load_e)]
    assert kinds[0] == "try" and kinds[-1] == "except" and "with" not in kinds


def test_exn_blocks_of_the_with_block_point_at_its_exit_handler():
    instrs, store = _at(_with_body, "STORE_FAST", "y")
    (block,) = exn_blocks(instrs, store)
    following = instrs[instrs.index(block.target) + 1]
    assert (block.kind, block.target.opname, following.opname) == (
        "with", "PUSH_EXC_INFO", "WITH_EXCEPT_START")


# --- checkpoints -------------------------------------------------------------------------


def _shape(xs, ctx):
    a = 1
    for x in xs:
        a += x
    with ctx:
        b = a
    try:
        c = b
    except KeyError:
        c = 0
    return c


def test_checkpoints_skip_loops_blocks_and_non_empty_stacks():
    instrs = decode(_shape.__code__)
    found = [(_line(_shape, i), i.opname) for i in checkpoints(instrs)]
    assert found == [
        (1, "LOAD_CONST"),  # a = 1
        (2, "LOAD_FAST"),  # xs, before GET_ITER: the loop has not started
        (4, "LOAD_FAST"),  # ctx, before BEFORE_WITH
        (4, "JUMP_FORWARD"),  # after the with block's normal exit
        (6, "NOP"),  # try: (the NOP is not covered by the try's entry)
        (7, "JUMP_FORWARD"),  # end of the try body, jumping over the handler
        (9, "JUMP_FORWARD"),  # end of the except body, after POP_EXCEPT
        (10, "LOAD_FAST"),  # return c
    ]


def test_checkpoints_can_be_resumed_by_assembled_code():
    # every checkpoint has depth 0 in the reassembled code too (same instructions)
    instrs = decode(_shape.__code__)
    code = assemble(instrs, code_options(_shape.__code__))
    assert code.co_code == _shape.__code__.co_code
    depths = stack_depths(instrs)
    assert all(depths[c] == 0 for c in checkpoints(instrs))


@pytest.mark.parametrize("fn", [_straight, _branches, _loop_carried, _shape, _nested_blocks])
def test_max_depth_is_the_compiler_stack_size(fn):
    assert max(stack_depths(decode(fn.__code__)).values()) == fn.__code__.co_stacksize


def test_unassembled_instructions_can_be_analysed():
    instrs = [create_instr("RESUME", 0), create_load_const(1), create_instr("RETURN_VALUE")]
    assert list(stack_depths(instrs).values()) == [0, 0, 1]
    assert checkpoints(instrs) == [instrs[1]]
    assert isinstance(assemble(instrs, code_options(_straight.__code__)), types.CodeType)
