"""decode + assemble: exact round trips over whole stdlib modules, rebuilt code that runs
identically, and edits (inserted code, flipped jumps, new constants) that assemble right."""

import asyncio
import builtins
import contextlib
import dis
import importlib
import inspect
import textwrap
import types

import pytest

from jitgrad.trace.bytecode.assemble import OPTION_KEYS, assemble, code_options, transform_code
from jitgrad.trace.bytecode.instructions import (
    ExnEntry,
    Instr,
    create_call,
    create_instr,
    create_jump,
    create_load,
    create_load_const,
    create_load_global,
    create_store,
    decode,
    format_instructions,
)
from tests.trace.contexts import LoggingContext

CORPUS_MODULES = [
    "textwrap", "difflib", "json.decoder", "json.encoder", "ast", "dis", "inspect", "argparse",
    "collections", "dataclasses", "enum", "functools", "typing", "_pydecimal", "asyncio.tasks",
    "contextlib", "pickle", "tarfile", "email.message", "re._parser", "unittest.case",
]


def _nested_codes(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _nested_codes(const)


def _module_code(name):
    module = importlib.import_module(name)
    path = inspect.getsourcefile(module)
    with open(path, encoding="utf-8") as f:
        return compile(f.read(), path, "exec")


def _round_trip(code):
    return assemble(decode(code), code_options(code))


def _rebuild(code):
    """Round trip `code` and every code object nested in its constants."""
    rebuilt = {id(c): _rebuild(c) for c in code.co_consts if isinstance(c, types.CodeType)}

    def swap_nested(instrs, options):
        options["co_consts"] = tuple(rebuilt.get(id(c), c) for c in options["co_consts"])
        for instr in instrs:
            if id(instr.argval) in rebuilt:
                instr.argval = rebuilt[id(instr.argval)]
    return transform_code(code, swap_nested)


# --- decoding ------------------------------------------------------------------------


def _many_locals_source(n):
    lines = ["def big(x):"]
    lines += [f"    v{i} = x + {i}.5" for i in range(n)]
    lines += ["    total = 0.0", "    for k in range(3):",
              "        if k % 2:", *[f"            total += v{i}" for i in range(0, n, 7)],
              "        else:", "            total -= v0", f"    return total + v{n - 1}"]
    return "\n".join(lines)


def _make_big(n=300):
    namespace = {}
    exec(compile(_many_locals_source(n), "<big>", "exec"), namespace)
    return namespace["big"]


def test_decode_folds_extended_arg_and_hides_caches():
    big = _make_big()
    raw = list(dis.get_instructions(big))
    instrs = decode(big.__code__)
    assert any(r.opname == "EXTENDED_ARG" for r in raw)
    assert not any(i.opname in ("EXTENDED_ARG", "CACHE") for i in instrs)
    assert [i.opname for i in instrs] == [r.opname for r in raw if r.opname != "EXTENDED_ARG"]
    store = next(i for i in instrs if i.opname == "STORE_FAST" and i.argval == "v299")
    assert store.arg == big.__code__.co_varnames.index("v299") > 255
    real = next(r for r in raw if r.opname == "STORE_FAST" and r.argval == "v299")
    assert store.offset == real.offset


def test_decode_resolves_jumps_to_instructions():
    def f(xs):
        total = 0
        for x in xs:
            if x:
                total += x
        return total
    instrs = decode(f.__code__)
    for_iter = next(i for i in instrs if i.opname == "FOR_ITER")
    back = next(i for i in instrs if i.opname == "JUMP_BACKWARD")
    assert back.target is for_iter
    assert for_iter.target.opname == "LOAD_FAST" and for_iter.target.argval == "total"
    assert for_iter.argval is None  # the target lives in `target`, not in argval
    raw = {r.offset: r for r in dis.get_instructions(f)}
    for instr in instrs:
        if instr.target is not None:
            assert raw[instr.offset].argval == instr.target.offset


def test_decode_jump_into_extended_arg_prefix_lands_on_the_instruction():
    big = _make_big()
    raw = list(dis.get_instructions(big))
    prefixed = {raw[k + 1].offset: raw[k].offset for k in range(len(raw) - 1)
                if raw[k].opname == "EXTENDED_ARG" and raw[k + 1].opname != "EXTENDED_ARG"}
    jumps_into_prefix = [r for r in raw if r.opcode in dis.hasjrel
                         and r.argval in prefixed.values()]
    assert jumps_into_prefix, "the corpus function must jump to an EXTENDED_ARG prefix"
    instrs = {i.offset: i for i in decode(big.__code__)}
    for r in jumps_into_prefix:
        target = instrs[r.offset].target
        assert prefixed[target.offset] == r.argval


def test_decode_exception_entries():
    def f(ctx):
        with ctx:
            x = 1
        return x
    instrs = decode(f.__code__)
    rows = dis._parse_exception_table(f.__code__)
    by_offset = {i.offset: i for i in instrs}
    for row in rows:
        covered = [i for i in instrs if row.start <= i.offset < row.end]
        entry = covered[0].exn_entry
        assert all(i.exn_entry is entry for i in covered)
        assert (entry.start, entry.end, entry.target) == (covered[0], covered[-1],
                                                          by_offset[row.target])
        assert (entry.depth, entry.lasti) == (row.depth, row.lasti)
    covered_offsets = {i.offset for row in rows for i in instrs if row.start <= i.offset < row.end}
    assert all(i.exn_entry is None for i in instrs if i.offset not in covered_offsets)


def test_decode_reads_kw_names_constant():
    def f(g):
        return g(a=1)
    kw = next(i for i in decode(f.__code__) if i.opname == "KW_NAMES")
    assert kw.argval == ("a",)


def test_decode_keeps_lines_and_positions():
    def f(x):
        y = x + 1
        return y
    instrs = decode(f.__code__)
    line = f.__code__.co_firstlineno
    assert [(i.opname, i.starts_line) for i in instrs if i.starts_line] == [
        ("RESUME", line), ("LOAD_FAST", line + 1), ("LOAD_FAST", line + 2)]
    add = next(i for i in instrs if i.opname == "BINARY_OP")
    assert add.positions == dis.Positions(line + 1, line + 1, 12, 17)
    assert add.argrepr == "+" and add.opcode == dis.opmap["BINARY_OP"]


# --- round trips -----------------------------------------------------------------------


@pytest.mark.parametrize("module", CORPUS_MODULES)
def test_round_trip_is_byte_identical(module):
    mismatches = []
    for code in _nested_codes(_module_code(module)):
        new = _round_trip(code)
        for field in ("co_code", "co_exceptiontable", "co_stacksize", "co_consts", "co_names",
                      "co_varnames", "co_nlocals", "co_flags", "co_qualname", "co_freevars",
                      "co_cellvars", "co_argcount", "co_kwonlyargcount", "co_firstlineno"):
            if getattr(new, field) != getattr(code, field):
                mismatches.append(f"{code.co_qualname}: {field}")
        if list(new.co_positions()) != list(code.co_positions()):
            mismatches.append(f"{code.co_qualname}: positions")
        if list(new.co_lines()) != list(code.co_lines()):
            mismatches.append(f"{code.co_qualname}: lines")
    assert mismatches == []


def test_stack_size_ignores_handlers_no_instruction_can_reach():
    # CPython counts the handler of an empty try body; nothing can raise into it, so the
    # dataflow over real edges finds a smaller, still sufficient, stack.
    def f():
        try:
            pass
        finally:
            return 1  # noqa: B012 (the empty try body is the subject)
    new = _round_trip(f.__code__)
    assert new.co_code == f.__code__.co_code
    assert (new.co_stacksize, f.__code__.co_stacksize) == (1, 4)
    assert types.FunctionType(new, {})() == 1


def _exec_rebuilt(module_name):
    code = _rebuild(_module_code(module_name))
    namespace = {"__name__": f"rebuilt_{module_name}", "__builtins__": builtins}
    exec(code, namespace)
    return namespace


def test_rebuilt_textwrap_runs_identically():
    rebuilt = _exec_rebuilt("textwrap")
    text = ("The quick brown fox jumps over the lazy dog. " * 6 + "\n\n  indented\tline  ") * 3
    for fn in ("wrap", "fill", "shorten"):
        assert rebuilt[fn](text, width=23) == getattr(textwrap, fn)(text, width=23)
    assert rebuilt["dedent"]("    a\n      b\n") == textwrap.dedent("    a\n      b\n")
    assert rebuilt["indent"](text, "> ", lambda ln: "fox" in ln) == textwrap.indent(
        text, "> ", lambda ln: "fox" in ln)
    with pytest.raises(ValueError, match="invalid width"):
        rebuilt["wrap"](text, width=0)


def test_rebuilt_difflib_runs_identically():
    import difflib
    rebuilt = _exec_rebuilt("difflib")
    a = [f"line {i} {'x' * (i % 5)}\n" for i in range(40)]
    b = [line.replace("x", "y") if k % 3 == 0 else line for k, line in enumerate(a)]
    assert list(rebuilt["unified_diff"](a, b, n=2)) == list(difflib.unified_diff(a, b, n=2))
    assert list(rebuilt["ndiff"](a[:10], b[:10])) == list(difflib.ndiff(a[:10], b[:10]))
    assert rebuilt["SequenceMatcher"](None, "abcdxyz", "abxcdyz").get_opcodes() == (
        difflib.SequenceMatcher(None, "abcdxyz", "abxcdyz").get_opcodes())
    assert rebuilt["get_close_matches"]("appel", ["ape", "apple", "peach", "puppy"]) == (
        difflib.get_close_matches("appel", ["ape", "apple", "peach", "puppy"]))
    assert rebuilt["HtmlDiff"]().make_table(a[:5], b[:5]).count("<tr>") == (
        difflib.HtmlDiff().make_table(a[:5], b[:5]).count("<tr>"))


def test_rebuilt_pydecimal_runs_identically():
    import _pydecimal
    rebuilt = _exec_rebuilt("_pydecimal")
    for mod in (rebuilt, vars(_pydecimal)):
        mod["getcontext"]().prec = 40
    cases = ["1.1", "-2.5e-7", "123456789.987654321", "0.000", "7"]
    for s in cases:
        new, old = rebuilt["Decimal"](s), _pydecimal.Decimal(s)
        assert str(new.sqrt() if new >= 0 else new.exp()) == str(
            old.sqrt() if old >= 0 else old.exp())
        assert str((new * 3 + 1).ln()) == str((old * 3 + 1).ln())
        assert format(new, ".5e") == format(old, ".5e")
        assert str(new.quantize(rebuilt["Decimal"]("0.01"))) == str(
            old.quantize(_pydecimal.Decimal("0.01")))
    with pytest.raises(rebuilt["DivisionByZero"]):
        rebuilt["Decimal"](1) / rebuilt["Decimal"](0)


# --- hand-written functions, rebuilt and run ---------------------------------------------


def _closure_counter(start):
    count = start

    def bump(k=1):
        nonlocal count
        count += k
        return count
    return bump, lambda: count


def _generator(n):
    total = yield "start"
    for i in range(n):
        total = (total or 0) + (yield i)
    yield from ("a", "b")
    return total


def _comprehensions(xs):
    squares = [x * x for x in xs if x % 2]
    table = {x: [y for y in range(x)] for x in xs}
    pairs = {(x, y) for x in xs for y in xs if x < y}
    return squares, table, pairs, sum(x for x in xs)


def _try_everything(x):
    log = []
    try:
        try:
            log.append(10 // x)
        except ZeroDivisionError as e:
            log.append(type(e).__name__)
            raise ValueError("wrapped") from e
        else:
            log.append("else")
        finally:
            log.append("inner finally")
    except ValueError as e:
        log.append(str(e))
    finally:
        log.append("outer finally")
    return log


def _with_blocks(x, swallow):
    log = []
    with LoggingContext(log) as outer, LoggingContext(log, swallow):
        log.append(outer is not None)
        with contextlib.suppress(KeyError):
            log.append({}[x] if x == "k" else x)
        if x == "raise":
            raise RuntimeError(x)
    return log


async def _coroutine(x):
    await asyncio.sleep(0)
    return x * 2


@pytest.mark.parametrize(("fn", "calls"), [
    (_try_everything, [(0,), (5,)]),
    (_with_blocks, [("k", False), ("v", False), ("raise", True)]),
    (_comprehensions, [([1, 2, 3, 4, 5],)]),
    (_make_big(), [(1.0,), (-3.0,)]),
], ids=["try", "with", "comprehensions", "300_locals"])
def test_rebuilt_functions_return_the_same(fn, calls):
    rebuilt = types.FunctionType(_rebuild(fn.__code__), fn.__globals__, fn.__name__,
                                 fn.__defaults__, fn.__closure__)
    for args in calls:
        assert rebuilt(*args) == fn(*args)


def test_rebuilt_with_block_propagates_unswallowed_exception():
    rebuilt = types.FunctionType(_rebuild(_with_blocks.__code__), globals())
    with pytest.raises(RuntimeError, match="raise"):
        rebuilt("raise", False)


def test_rebuilt_closure_shares_cells():
    bump, peek = _closure_counter(5)
    rebuilt_bump = types.FunctionType(_rebuild(bump.__code__), globals(), "bump",
                                      bump.__defaults__, bump.__closure__)
    assert rebuilt_bump(2) == 7 and bump() == 8 and peek() == 8
    make = types.FunctionType(_rebuild(_closure_counter.__code__), globals())
    new_bump, new_peek = make(1)
    assert (new_bump(), new_bump(10), new_peek()) == (2, 12, 12)


def test_rebuilt_generator_and_coroutine():
    rebuilt = types.FunctionType(_rebuild(_generator.__code__), globals())

    def drive(gen_fn):
        gen = gen_fn(3)
        out = [next(gen), gen.send(10)]
        out += [gen.send(v) for v in (1, 2, 3)]
        out.append(next(gen))
        with pytest.raises(StopIteration) as stop:
            next(gen)
        return out, stop.value.value
    assert drive(rebuilt) == drive(_generator) == (["start", 0, 1, 2, "a", "b"], 16)
    coro = types.FunctionType(_rebuild(_coroutine.__code__), globals())
    assert asyncio.run(coro(21)) == 42


# --- edits ---------------------------------------------------------------------------


def _loop_sum(n):
    total = 0
    i = 0
    while i < n:
        total += i
        i += 1
    return total


def test_inserting_code_grows_jumps_to_extended_arg():
    def pad_loop_body(instrs, options):
        body = [i for i in instrs if i.opname == "STORE_FAST" and i.argval == "total"][-1]
        at = instrs.index(body) + 1
        instrs[at:at] = [create_instr("NOP") for _ in range(600)]
    new = transform_code(_loop_sum.__code__, pad_loop_body)
    raw = list(dis.get_instructions(new))
    backward = next(r for r in raw if r.opname.startswith("POP_JUMP_BACKWARD"))
    assert backward.arg > 600 and raw[raw.index(backward) - 1].opname == "EXTENDED_ARG"
    assert types.FunctionType(new, {})(10) == _loop_sum(10) == 45


def _options(**changes):
    return {**code_options((lambda: None).__code__), "co_consts": (None,), "co_names": (),
            "co_varnames": (), "co_name": "made", "co_qualname": "made", **changes}


def test_jump_direction_follows_the_layout():
    # JUMP_FORWARD placed after its target becomes JUMP_BACKWARD; a backward jump placed
    # before its target becomes forward.
    ret = [create_load_const("reached"), create_instr("RETURN_VALUE")]
    tail = create_jump("JUMP_FORWARD", ret[0])
    head = create_jump("JUMP_BACKWARD", tail)
    instrs = [create_instr("RESUME", 0), head, *ret, tail]
    code = assemble(instrs, _options())
    names = [r.opname for r in dis.get_instructions(code)]
    assert names == ["RESUME", "JUMP_FORWARD", "LOAD_CONST", "RETURN_VALUE", "JUMP_BACKWARD"]
    assert types.FunctionType(code, {})() == "reached"
    assert (head.opname, tail.opname) == ("JUMP_BACKWARD", "JUMP_FORWARD")  # inputs untouched


def test_forward_only_jump_placed_backward_is_an_error():
    # a loop laid out with its exit block first: FOR_ITER would have to jump backward
    exit_block = [create_load_const(None), create_instr("RETURN_VALUE")]
    for_iter = create_jump("FOR_ITER", exit_block[0])
    instrs = [create_instr("RESUME", 0), create_load_const(()), create_instr("GET_ITER"),
              create_jump("JUMP_FORWARD", for_iter), *exit_block, for_iter,
              create_instr("POP_TOP"), create_jump("JUMP_BACKWARD", for_iter)]
    with pytest.raises(ValueError, match="FOR_ITER can only jump forward"):
        assemble(instrs, _options())


def test_constants_by_identity():
    def helper():
        return "helper"
    unhashable = [1, 2]
    instrs = [create_instr("RESUME", 0), create_load_const(helper), create_load_const(1),
              create_load_const(1.0), create_load_const(True), create_load_const(unhashable),
              create_instr("BUILD_TUPLE", 5), create_instr("RETURN_VALUE")]
    code = assemble(instrs, _options())
    out = types.FunctionType(code, {})()
    assert out[0] is helper and out[4] is unhashable
    assert [type(v) for v in out[1:4]] == [int, float, bool]
    assert code.co_consts == (None, helper, 1, 1.0, True, unhashable)


def test_new_names_and_locals_are_added_and_options_left_alone():
    options = _options(co_argcount=1, co_varnames=("x",))
    instrs = [create_instr("RESUME", 0), create_load("x", options),
              create_instr("LOAD_ATTR", argval="real"), create_instr("STORE_FAST", argval="y"),
              create_load_global("abs", push_null=True),
              create_instr("LOAD_FAST", argval="y"), *create_call(1),
              create_instr("RETURN_VALUE")]
    code = assemble(instrs, options)
    assert (code.co_varnames, code.co_names, code.co_nlocals) == (("x", "y"), ("real", "abs"), 2)
    assert options["co_varnames"] == ("x",) and options["co_names"] == ()
    assert types.FunctionType(code, {"__builtins__": builtins})(-4) == 4


def test_stack_size_of_edited_code():
    instrs = [create_instr("RESUME", 0), *[create_load_const(i) for i in range(20)],
              create_instr("BUILD_TUPLE", 20), create_instr("RETURN_VALUE")]
    code = assemble(instrs, _options())
    assert code.co_stacksize == 20
    assert types.FunctionType(code, {})() == tuple(range(20))


def test_inserted_code_inside_try_is_covered_by_the_same_handler():
    def guarded(x):
        try:
            y = x + 1
        except TypeError:
            y = "handled"
        return y

    def insert_raising_call(instrs, options):
        store = next(i for i in instrs if i.opname == "STORE_FAST" and i.argval == "y")
        new = [create_load_global("int", push_null=True), create_load_const("nope"),
               *create_call(1), create_instr("POP_TOP")]
        for instr in new:
            instr.exn_entry = store.exn_entry
        at = instrs.index(store) + 1
        instrs[at:at] = new
    new = transform_code(guarded.__code__, insert_raising_call)
    with pytest.raises(ValueError, match="invalid literal"):
        types.FunctionType(new, {"__builtins__": builtins})(1)  # ValueError is not caught
    assert types.FunctionType(new, {"__builtins__": builtins})("s") == "handled"


def test_transform_code_replaces_an_operator():
    def f(a, b):
        return a + b

    def to_multiply(instrs, options):
        add = next(i for i in instrs if i.opname == "BINARY_OP")
        add.arg = 5  # '*' in dis._nb_ops
    assert types.FunctionType(transform_code(f.__code__, to_multiply), {})(6, 7) == 42


def test_value_left_on_the_stack_at_return_is_legal():
    instrs = [create_instr("RESUME", 0), create_load_const(1), create_load_const(2),
              create_instr("RETURN_VALUE")]
    code = assemble(instrs, _options())
    assert (code.co_stacksize, types.FunctionType(code, {})()) == (2, 2)


@pytest.mark.parametrize(("build", "message"), [
    (lambda: [create_instr("RESUME", 0), create_instr("POP_TOP"), create_load_const(1),
              create_instr("RETURN_VALUE")], "stack underflow"),
    (lambda: [create_instr("RESUME", 0), create_load_const(1)], "falls off the end"),
    (lambda: [create_instr("RESUME", 0), create_instr("LOAD_DEREF", argval="k"),
              create_instr("RETURN_VALUE")], "'k': not a cell or free variable"),
    (lambda: [create_instr("RESUME", 0), create_jump("JUMP_FORWARD", create_instr("NOP"))],
     "jumps to an instruction that is not in the list"),
    (lambda: [], "empty instruction list"),
])
def test_invalid_code_is_refused(build, message):
    with pytest.raises(ValueError, match=message):
        assemble(build(), _options())


def test_paths_disagreeing_on_depth_are_refused():
    ret = create_instr("RETURN_VALUE")
    instrs = [create_instr("RESUME", 0), create_load_const(True), create_load_const(1),
              create_jump("POP_JUMP_FORWARD_IF_TRUE", ret), create_load_const(2),
              create_load_const(3), ret]
    with pytest.raises(ValueError, match="reached with stack depth 1 and 3"):
        assemble(instrs, _options())


def test_handler_deeper_than_the_stack_is_refused():
    handler = create_instr("RERAISE", 0)
    body = create_instr("NOP")
    body.exn_entry = ExnEntry(body, body, handler, depth=2, lasti=False)
    instrs = [create_instr("RESUME", 0), body, create_load_const(None),
              create_instr("RETURN_VALUE"), handler]
    with pytest.raises(ValueError, match="stack depth 0 is covered by a handler that expects "
                                         "depth 2"):
        assemble(instrs, _options())


def test_missing_options_are_named():
    options = _options()
    del options["co_qualname"]
    with pytest.raises(ValueError, match=r"lack \['co_qualname'\]"):
        assemble([create_instr("RESUME", 0)], options)
    assert set(code_options(_loop_sum.__code__)) == set(OPTION_KEYS)


# --- creating and printing instructions -----------------------------------------------


@pytest.mark.parametrize(("call", "message"), [
    (lambda: create_instr("LOAD_SPAM"), "unknown opcode name 'LOAD_SPAM'"),
    (lambda: create_instr("POP_TOP", 1), "POP_TOP takes no argument, got arg"),
    (lambda: create_instr("BUILD_TUPLE"), "BUILD_TUPLE takes arg, got none"),
    (lambda: create_instr("LOAD_CONST", 0), "LOAD_CONST takes argval, got arg"),
    (lambda: create_instr("JUMP_FORWARD", 3), "JUMP_FORWARD takes target, got arg"),
    (lambda: create_jump("POP_TOP", Instr("NOP")), "POP_TOP is not a jump"),
])
def test_create_instr_validates_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_create_load_and_store_pick_the_variable_kind():
    def outer(a):
        c = 1

        def inner():
            return a + c
        return inner
    options = code_options(outer(1).__code__)
    outer_options = code_options(outer.__code__)
    assert create_load("a", options).opname == "LOAD_DEREF"
    assert create_load("a", outer_options).opname == "LOAD_DEREF"  # argument that is a cell
    assert create_load("inner", outer_options).opname == "LOAD_FAST"
    glob = create_load("len", outer_options)
    assert (glob.opname, glob.arg, glob.argrepr) == ("LOAD_GLOBAL", 0, "len")
    assert [create_store(n, outer_options).opname for n in ("c", "inner", "G")] == [
        "STORE_DEREF", "STORE_FAST", "STORE_GLOBAL"]


def test_create_call_with_keywords_calls_correctly():
    options = _options(co_argcount=1, co_varnames=("f",))
    instrs = [create_instr("RESUME", 0), create_instr("PUSH_NULL"), create_load("f", options),
              create_load_const(1), create_load_const(2), *create_call(2, kw_names=("b",)),
              create_instr("RETURN_VALUE")]
    assert [i.opname for i in instrs[-4:-1]] == ["KW_NAMES", "PRECALL", "CALL"]
    code = assemble(instrs, options)
    assert types.FunctionType(code, {})(lambda a, b=0: (a, b)) == (1, 2)


def _compiled(source, name):
    namespace = {}
    exec(compile(source, "<listing>", "exec"), namespace)
    return namespace[name]


def test_format_instructions_listing():
    fn = _compiled("def f(ctx):\n    with ctx:\n        x = 1\n    return x\n", "f")
    assert format_instructions(decode(fn.__code__)).split("\n") == [
        '   0     1 RESUME                       0',
        '   1     2 LOAD_FAST                    ctx',
        '   2       BEFORE_WITH',
        '   3       POP_TOP                                           [exc -> 13 depth 1 lasti]',
        '   4     3 LOAD_CONST                   1                    [exc -> 13 depth 1 lasti]',
        '   5       STORE_FAST                   x                    [exc -> 13 depth 1 lasti]',
        '   6     2 LOAD_CONST                   None',
        '   7       LOAD_CONST                   None',
        '   8       LOAD_CONST                   None',
        '   9       PRECALL                      2',
        '  10       CALL                         2',
        '  11       POP_TOP',
        '  12       JUMP_FORWARD                 -> 24',
        '  13       PUSH_EXC_INFO                                     [exc -> 17 depth 3 lasti]',
        '  14       WITH_EXCEPT_START                                 [exc -> 17 depth 3 lasti]',
        '  15       POP_JUMP_FORWARD_IF_TRUE     -> 20                [exc -> 17 depth 3 lasti]',
        '  16       RERAISE                      2                    [exc -> 17 depth 3 lasti]',
        '  17       COPY                         3',
        '  18       POP_EXCEPT',
        '  19       RERAISE                      1',
        '  20       POP_TOP                                           [exc -> 17 depth 3 lasti]',
        '  21       POP_EXCEPT',
        '  22       POP_TOP',
        '  23       POP_TOP',
        '  24     4 LOAD_FAST                    x',
        '  25       RETURN_VALUE',
    ]


def test_instr_repr_has_no_addresses():
    def f():
        return _loop_sum
    instrs = decode(f.__code__)
    assert repr(instrs[1]) == "Instr(LOAD_GLOBAL _loop_sum)"
    assert repr(create_load_const(f)) == (
        "Instr(LOAD_CONST <function test_instr_repr_has_no_addresses.<locals>.f>)")
    assert repr(create_load_const(f.__code__)) == "Instr(LOAD_CONST <code f>)"
    assert repr(create_load_const(object())) == "Instr(LOAD_CONST <object>)"
    assert repr(create_instr("NOP")) == "Instr(NOP)"
