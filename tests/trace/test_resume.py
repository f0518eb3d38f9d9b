"""Resume functions built at offsets of hand-written functions, run and compared with the
original function: at every checkpoint, with live stack values (NULLs included), inside
re-entered `with` blocks (exceptions after the jump still run `__exit__`), inside a `try`,
and with closures whose cells keep seeing updates."""

import dis
import types

import pytest

import jitgrad
from jitgrad.trace.breaks.resume import build_resume_code, clear_resume_cache, resume_freevars
from jitgrad.trace.bytecode import opcodes as bc
from jitgrad.trace.bytecode.analysis import checkpoints, livevars, stack_depths
from jitgrad.trace.bytecode.assemble import transform_code
from jitgrad.trace.bytecode.instructions import (
    create_call,
    create_instr,
    create_load_const,
    create_load_global,
    decode,
)
from tests.trace.contexts import LoggingContext

_STOPPED = object()


def _stop_at(fn, offset):
    """fn, changed to return (_STOPPED, locals()) when it reaches `offset` (an empty-stack
    instruction): the frame state a transformed function would hand to a resume function."""
    def insert_stop(instrs, options):
        target = next(i for i in instrs if i.offset == offset)
        stop = [create_load_const(_STOPPED), create_load_global("locals", push_null=True),
                *create_call(0), create_instr("BUILD_TUPLE", 2), create_instr("RETURN_VALUE")]
        for instr in instrs:
            if instr.target is target:
                instr.target = stop[0]
        at = instrs.index(target)
        instrs[at:at] = stop
    stopping = types.FunctionType(transform_code(fn.__code__, insert_stop), fn.__globals__,
                                  fn.__name__, fn.__defaults__)
    stopping.__kwdefaults__ = fn.__kwdefaults__
    return stopping


def _resume_fn(fn, code, closure=None):
    return types.FunctionType(code, fn.__globals__, code.co_name, None, closure)


def _double(v):
    return 2 * v


def _scaled(v, scale=1):
    return v * scale


# --- every checkpoint of pure functions ---------------------------------------------------


def _branchy(x, y):
    a = x * 2
    if a > y:
        b = a - y
    else:
        b = y - a
    c = [b, a]
    for v in c:
        b += v
    try:
        d = b // (x - 1)
    except ZeroDivisionError:
        d = None
    return b, c, d


def _varargs(a, *rest, scale=2, **kw):
    total = a + sum(rest)
    if kw:
        total += len(kw)
    return total * scale


def _with_known_ctx(x):
    y = x + 1
    with jitgrad.no_grad():
        z = y * 2
    return z, jitgrad.is_grad_enabled()


def _many_locals_fn():
    source = ["def big(x):"] + [f"    v{i} = x + {i}" for i in range(280)]
    source += ["    if x > 0:", "        v0 = -v0", "    return v279 + v0 + v140"]
    namespace = {}
    exec(compile("\n".join(source), "<big>", "exec"), namespace)
    return namespace["big"]


@pytest.mark.parametrize(("fn", "calls"), [
    (_branchy, [((1, 5), {}), ((4, 1), {}), ((0, 0), {})]),
    (_varargs, [((1,), {}), ((1, 2, 3), {"scale": 5, "extra": 1})]),
    (_with_known_ctx, [((3,), {})]),
    (_many_locals_fn(), [((2,), {}), ((-2,), {})]),
], ids=["branches", "varargs", "with_outside", "280_locals"])
def test_resume_at_every_checkpoint_returns_what_the_function_returns(fn, calls):
    instrs = decode(fn.__code__)
    points = checkpoints(instrs)
    assert len(points) >= 3
    for target in points[::max(1, len(points) // 12)]:  # at most ~12 per function
        live = sorted(livevars(instrs, target))
        reached = 0
        for args, kwargs in calls:
            out = _stop_at(fn, target.offset)(*args, **kwargs)
            if not (type(out) is tuple and out[0] is _STOPPED):
                continue  # this call's path does not pass the checkpoint
            reached += 1
            frame = out[1]
            names = [n for n in live if n in frame]
            resume = _resume_fn(fn, build_resume_code(fn.__code__, target, 0, names))
            assert resume(*[frame[n] for n in names]) == fn(*args, **kwargs), (target, args)
        assert reached, f"no call reaches {target!r}"


def test_resume_signature_drops_varargs_flags_and_names_the_line():
    instrs = decode(_varargs.__code__)
    target = next(i for i in instrs if i.opname == "LOAD_FAST" and i.argval == "kw")
    code = build_resume_code(_varargs.__code__, target, 0, ["kw", "total", "scale"])
    line = target.positions.lineno
    assert code.co_name == code.co_qualname == f"resume_in__varargs_at_{line}"
    assert code.co_varnames[:code.co_argcount] == ("kw", "total", "scale")
    assert (code.co_posonlyargcount, code.co_kwonlyargcount) == (0, 0)
    assert not code.co_flags & (0x04 | 0x08)  # CO_VARARGS, CO_VARKEYWORDS
    assert _resume_fn(_varargs, code)({"a": 1}, 5, 3) == (5 + 1) * 3


# --- live stack values --------------------------------------------------------------------


def _call_mid(a, b):
    r = a + _double(b)
    return r * 3


def _kw_call_mid(a, b):
    r = a - _scaled(b, scale=4)
    return r


def test_resume_after_a_call_with_its_result_on_the_stack():
    instrs = decode(_call_mid.__code__)
    after = next(i for i in instrs if i.offset == _after_call(_call_mid).offset)
    assert stack_depths(instrs)[after] == 2 and livevars(instrs, after) == set()
    resume = _resume_fn(_call_mid, build_resume_code(_call_mid.__code__, after, 2, []))
    assert resume.__code__.co_varnames[:2] == ("___stack0", "___stack1")
    assert resume(5, _double(7)) == _call_mid(5, 7) == 57


def test_resume_before_a_call_pushes_null_for_the_null_slot():
    instrs = decode(_call_mid.__code__)
    precall = next(i for i in instrs if i.opname == "PRECALL")
    assert stack_depths(instrs)[precall] == 4  # a, NULL, _double, b
    code = build_resume_code(_call_mid.__code__, precall, 4, [], null_slots={1})
    assert code.co_varnames[:code.co_argcount] == ("___stack0", "___stack2", "___stack3")
    assert _resume_fn(_call_mid, code)(5, _double, 7) == 57


def test_resume_at_kw_names_keeps_keywords_keywords():
    instrs = decode(_kw_call_mid.__code__)
    kw_names = next(i for i in instrs if i.opname == "KW_NAMES")
    code = build_resume_code(_kw_call_mid.__code__, kw_names.offset, 5, [], null_slots=[1])
    assert _resume_fn(_kw_call_mid, code)(100, _scaled, 2, 4) == _kw_call_mid(100, 2) == 92


# --- with blocks --------------------------------------------------------------------------


def _in_no_grad(x, probe):
    with jitgrad.no_grad():
        y = x * 2
        z = probe(y)
        w = probe(z + 1)
    return w, jitgrad.is_grad_enabled()


def _after_call_on(fn, argname):
    """Decoded fn and the instruction after the first call whose last argument is `argname`."""
    instrs = decode(fn.__code__)
    arg = next(k for k, i in enumerate(instrs) if i.opname == "LOAD_FAST" and i.argval == argname
               and instrs[k + 1].opname == "PRECALL")
    assert instrs[arg + 2].opname == "CALL"
    return instrs, instrs[arg + 3]


def test_resume_inside_no_grad_reenters_it():
    instrs, after = _after_call_on(_in_no_grad, "y")
    assert stack_depths(instrs)[after] == 2  # __exit__ of no_grad, then probe(y)
    code = build_resume_code(_in_no_grad.__code__, after, 1, ["probe"],
                             with_blocks=[(jitgrad.no_grad, ())])
    resume = _resume_fn(_in_no_grad, code)
    seen = []

    def probe(v):
        seen.append((v.requires_grad, jitgrad.is_grad_enabled()))
        return v
    z = jitgrad.tensor([1.0, 2.0], requires_grad=True)  # the value the first probe returned
    w, grad_after = resume(z, probe)
    assert seen == [(False, False)]  # z + 1 ran with grad disabled
    assert grad_after is True and jitgrad.is_grad_enabled()
    assert w.tolist() == [2.0, 3.0] and w.requires_grad is False
    x = jitgrad.tensor([1.0, 2.0], requires_grad=True)
    assert _in_no_grad(x, lambda v: v)[0].tolist() == [3.0, 5.0]


def test_exception_after_the_jump_runs_the_original_exit():
    _, after = _after_call_on(_in_no_grad, "y")
    code = build_resume_code(_in_no_grad.__code__, after, 1, ["probe"],
                             with_blocks=[(jitgrad.no_grad, ())])

    def failing_probe(v):
        assert not jitgrad.is_grad_enabled()
        raise KeyError("inside the with body")
    with pytest.raises(KeyError, match="inside the with body"):
        _resume_fn(_in_no_grad, code)(jitgrad.tensor([1.0]), failing_probe)
    assert jitgrad.is_grad_enabled()  # __exit__ of the re-entered no_grad ran


def _two_withs(log, v, check):
    with LoggingContext(log):
        with jitgrad.no_grad():
            r = _double(v)
            r = check(r)
        log.append("between")
    return r


def test_nested_with_blocks_are_reentered_outermost_first():
    instrs, after = _after_call_on(_two_withs, "v")
    assert stack_depths(instrs)[after] == 3
    log = []
    code = build_resume_code(_two_withs.__code__, after, 1, ["check", "log"],
                             with_blocks=[(LoggingContext, (log,)), (jitgrad.no_grad, ())])
    resume = _resume_fn(_two_withs, code)
    assert resume(14, lambda r: (r, jitgrad.is_grad_enabled()), log) == (14, False)
    assert log == ["enter", "between", "exit None"]
    del log[:]
    with pytest.raises(ZeroDivisionError):
        resume(14, lambda r: r / 0, log)
    assert log == ["enter", "exit ZeroDivisionError"] and jitgrad.is_grad_enabled()


def test_failing_inner_reentry_still_exits_the_outer_block():
    instrs, after = _after_call_on(_two_withs, "v")
    log = []

    def broken_ctx():
        raise RuntimeError("cannot enter")
    code = build_resume_code(_two_withs.__code__, after, 1, ["check", "log"],
                             with_blocks=[(LoggingContext, (log,)), (broken_ctx, ())])
    with pytest.raises(RuntimeError, match="cannot enter"):
        _resume_fn(_two_withs, code)(14, abs, log)
    assert log == ["enter", "exit RuntimeError"]


def test_swallowing_exit_continues_after_the_block_as_the_original_does():
    instrs, after = _after_call_on(_two_withs, "v")
    resumed_log, original_log = [], []
    code = build_resume_code(_two_withs.__code__, after, 1, ["check", "log"],
                             with_blocks=[(LoggingContext, (resumed_log, True)),
                                          (jitgrad.no_grad, ())])

    def check(r):
        raise ValueError(r)
    swallowing = LoggingContext(original_log, True)
    original = types.FunctionType(_two_withs.__code__, {**globals(),
                                                        "LoggingContext": lambda log: swallowing})
    assert _resume_fn(_two_withs, code)(14, check, resumed_log) == original(
        original_log, 7, check) == 14
    assert resumed_log == original_log == ["enter", "exit ValueError"]


def test_original_exception_entries_keep_their_depths():
    _, after = _after_call_on(_in_no_grad, "y")
    code = build_resume_code(_in_no_grad.__code__, after, 1, ["probe"],
                             with_blocks=[(jitgrad.no_grad, ())])
    original = bc.decode_exception_table(_in_no_grad.__code__.co_exceptiontable)
    resumed = bc.decode_exception_table(code.co_exceptiontable)
    assert sorted((r.depth, r.lasti) for r in original) == sorted(
        (r.depth, r.lasti) for r in resumed[1:])  # row 0 covers the prologue
    assert (resumed[0].depth, resumed[0].lasti, resumed[0].target) == (
        original[0].depth, original[0].lasti, resumed[1].target)


# --- try blocks ---------------------------------------------------------------------------


def _in_try(x):
    try:
        y = x + 1
        z = 10 / y
    except ZeroDivisionError:
        z = -1.0
    return z


def test_resume_inside_a_try_body_reaches_the_original_handler():
    instrs = decode(_in_try.__code__)
    target = next(i for i in instrs if i.opname == "LOAD_CONST" and i.argval == 10)
    assert target not in checkpoints(instrs) and stack_depths(instrs)[target] == 0
    resume = _resume_fn(_in_try, build_resume_code(_in_try.__code__, target, 0, ["y"]))
    assert (resume(4), resume(0)) == (_in_try(3), _in_try(-1)) == (2.5, -1.0)


# --- closures -----------------------------------------------------------------------------


def _make_counter(start):
    count = start

    def bump(k):
        nonlocal count
        count += k
        seen = count
        count += 1
        return seen, count
    return bump, lambda: count


def test_free_variables_are_the_callers_cells():
    bump, peek = _make_counter(10)
    instrs = decode(bump.__code__)
    target = next(i for i in instrs if i.opname == "STORE_FAST" and i.argval == "seen")
    target = instrs[instrs.index(target) - 1]  # LOAD_DEREF count, empty stack
    code = build_resume_code(bump.__code__, target, 0, sorted(livevars(instrs, target)))
    assert resume_freevars(bump.__code__) == code.co_freevars == ("count",)
    assert code.co_argcount == 0
    resume = _resume_fn(bump, code, bump.__closure__)
    assert resume() == (10, 11) and peek() == 11
    assert bump(5) == (16, 17) and resume() == (17, 18) and peek() == 18


def _cell_owner(x):
    k = x

    def get():
        return k
    k = k + 1
    return get() * 10 + k


def test_cells_of_the_original_become_free_variables():
    instrs = decode(_cell_owner.__code__)
    store = [i for i in instrs if i.opname == "STORE_DEREF"][-1]
    target = next(i for i in reversed(instrs[:instrs.index(store)])
                  if i.opname == "LOAD_DEREF")
    live = sorted(livevars(instrs, target))
    assert live == ["get", "k"]
    code = build_resume_code(_cell_owner.__code__, target, 0, live)
    assert (code.co_freevars, code.co_cellvars) == (("k",), ())
    assert code.co_varnames[:code.co_argcount] == ("get",)
    assert [i.opname for i in decode(code)[:2]] == ["COPY_FREE_VARS", "RESUME"]
    cell = types.CellType(4)  # the frame's cell, as made by `k = x` with x = 4
    get_code = next(c for c in _cell_owner.__code__.co_consts if isinstance(c, types.CodeType))
    get = types.FunctionType(get_code, globals(), "get", None, (cell,))
    assert _resume_fn(_cell_owner, code, (cell,))(get) == _cell_owner(4) == 55
    assert cell.cell_contents == 5 and get() == 5


# --- cache and refusals -------------------------------------------------------------------


def test_resume_code_is_cached_per_signature():
    clear_resume_cache()
    after = _after_call(_call_mid)
    first = build_resume_code(_call_mid.__code__, after, 2, [])
    assert build_resume_code(_call_mid.__code__, after.offset, 2, []) is first
    assert build_resume_code(_call_mid.__code__, after, 2, [], name="other") is not first
    clear_resume_cache()
    assert build_resume_code(_call_mid.__code__, after, 2, []) is not first


def test_reentry_arguments_may_be_unhashable_constants():
    _, after = _after_call_on(_in_no_grad, "y")
    log = []
    code = build_resume_code(_in_no_grad.__code__, after, 1, ["probe"],
                             with_blocks=[(LoggingContext, (log,))])
    assert build_resume_code(_in_no_grad.__code__, after, 1, ["probe"],
                             with_blocks=[(LoggingContext, (log,))]) is code
    assert build_resume_code(_in_no_grad.__code__, after, 1, ["probe"],
                             with_blocks=[(LoggingContext, ([],))]) is not code
    w, _ = _resume_fn(_in_no_grad, code)(1, lambda v: v * 10)
    assert w == 20 and log == ["enter", "exit None"]


def _generator(x):
    yield x


def _after_call(fn):
    instrs = decode(fn.__code__)
    return instrs[instrs.index(next(i for i in instrs if i.opname == "CALL")) + 1]


@pytest.mark.parametrize(("build", "message"), [
    (lambda: build_resume_code(_generator.__code__, 2, 0, []), "is a generator or coroutine"),
    (lambda: build_resume_code(_call_mid.__code__, 3, 0, []),
     "no instruction of _call_mid starts at offset 3"),
    (lambda: build_resume_code(_in_no_grad.__code__, _after_call_on(_in_no_grad, "y")[1], 1, []),
     r"stack holds 2 values, 1 of them `with` exits; got 1 stack values and 0 with re-entries"),
    (lambda: build_resume_code(_call_mid.__code__, _after_call(_call_mid), 1, []),
     r"stack holds 2 values, 0 of them `with` exits; got 1 stack values"),
    (lambda: build_resume_code(_call_mid.__code__, _after_call(_call_mid), 2, ["nope"]),
     r"live names \['nope'\] are not variables of _call_mid"),
    (lambda: build_resume_code(_call_mid.__code__, _after_call(_call_mid), 2, [],
                               null_slots={5}),
     r"null slots \[5\] outside the 2 stack values"),
    (lambda: build_resume_code(_call_mid.__code__, 0, 0, []),
     "offset 0 of _call_mid is in the prologue"),
    (lambda: build_resume_code(_call_mid.__code__, 1000, 0, []),
     "no instruction of _call_mid starts at offset 1000"),
], ids=["generator", "offset", "missing_with", "stack_count", "unknown_name", "null_slot",
        "prologue", "past_the_end"])
def test_impossible_resume_points_are_refused(build, message):
    clear_resume_cache()
    with pytest.raises(ValueError, match=message):
        build()


def test_jump_target_offset_of_an_extended_arg_prefix_names_its_instruction():
    big = _many_locals_fn()
    raw = list(dis.get_instructions(big))
    jump = next(r for r in raw if r.opname == "POP_JUMP_FORWARD_IF_FALSE")
    assert next(r for r in raw if r.offset == jump.argval).opname == "EXTENDED_ARG"
    code = build_resume_code(big.__code__, jump.argval, 0, ["v0", "v140", "v279"])
    assert _resume_fn(big, code)(1, 2, 3) == 3 + 1 + 2  # return v279 + v0 + v140


def test_unreachable_target_is_refused():
    def f():
        try:
            pass
        finally:
            return 1  # noqa: B012 (the empty try body is the subject)
    dead = next(i for i in decode(f.__code__) if i.opname == "PUSH_EXC_INFO")
    with pytest.raises(ValueError, match="is unreachable"):
        build_resume_code(f.__code__, dead, 0, [])


def _two_calls(a, b):
    c = _double(a) + 1
    d = c * _double(b)
    return c, d


def test_resume_function_of_a_resume_function():
    # a resume function can hit a further break: its own code is decoded and split again
    instrs, after_first = _after_call_on(_two_calls, "a")
    first = build_resume_code(_two_calls.__code__, after_first, 1, ["b"])
    assert transform_code(first, lambda instrs, options: None).co_code == first.co_code
    first_instrs = decode(first)
    calls = [k for k, i in enumerate(first_instrs) if i.opname == "CALL"]
    after_second = first_instrs[calls[-1] + 1]  # stack: c, result of _double(b)
    assert livevars(first_instrs, after_second) == {"c"}
    second = build_resume_code(first, after_second, 2, ["c"])
    assert second.co_name == f"resume_in_{first.co_name}_at_{after_second.positions.lineno}"
    c = _double(3) + 1
    assert _resume_fn(_two_calls, second)(c, _double(5), c) == _two_calls(3, 5) == (7, 70)
    assert _resume_fn(_two_calls, first)(_double(3), 5) == (7, 70)
