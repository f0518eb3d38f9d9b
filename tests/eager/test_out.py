"""`out=` with PyTorch's rules (jitgrad/eager/ops/out.py): every declared pointwise op and
every function of OUT_FUNCTIONS writes its result into `out` and returns it; the result is
cast, resized (with torch's warning unless `out` is empty) or refused as torch 2.13 does.
"""

import inspect
import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.eager.ops.declare import DECLARED, REQUIRED
from jitgrad.eager.ops.out import OUT_FUNCTIONS

X = np.array([[0.25, 1.5, -0.75], [2.0, -1.25, 0.5]], np.float32)
Y = np.array([[1.0, -2.0, 0.5], [0.75, 1.25, -1.5]], np.float32)


def _declared_call(name):
    fn = jg.__dict__.get(name)
    required = [p for p in inspect.signature(DECLARED[name]).parameters.values()
                if p.default is REQUIRED]  # threshold(x, threshold, value): no generic call
    if fn is None or fn is not DECLARED[name] or required:
        return None
    args = [jg.tensor(X), jg.tensor(Y)][:len(DECLARED[name].op.input_names)]
    return lambda **out: fn(*args, **out)


OUT_CALLS = {
    **{name: (lambda fn: lambda **out: fn(jg.tensor(X), jg.tensor(Y), **out))(jg.__dict__[name])
       for name in ("add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide",
                    "floor_divide", "remainder", "fmod", "pow", "atan2", "arctan2", "maximum",
                    "minimum", "eq", "ne", "lt", "le", "gt", "ge", "greater",
                    "less", "greater_equal", "less_equal", "not_equal", "logical_and",
                    "logical_or", "logical_xor")},
    "logical_not": lambda **out: jg.logical_not(jg.tensor(X), **out),
    "lerp": lambda **out: jg.lerp(jg.tensor(X), jg.tensor(Y), 0.25, **out),
    "addcmul": lambda **out: jg.addcmul(jg.tensor(X), jg.tensor(Y), jg.tensor(X), value=2, **out),
    "addcdiv": lambda **out: jg.addcdiv(jg.tensor(X), jg.tensor(Y), jg.tensor(Y), **out),
    "clamp": lambda **out: jg.clamp(jg.tensor(X), -0.5, 1.0, **out),
    "clip": lambda **out: jg.clip(jg.tensor(X), max=1.0, **out),
    "where": lambda **out: jg.where(jg.tensor(X) > 0, jg.tensor(X), jg.tensor(Y), **out),
    "mean": lambda **out: jg.mean(jg.tensor(X), 1, **out),
    "std": lambda **out: jg.std(jg.tensor(X), 0, **out),
    "var": lambda **out: jg.var(jg.tensor(X), 1, keepdim=True, **out),
    "logsumexp": lambda **out: jg.logsumexp(jg.tensor(X), 1, **out),
    "matmul": lambda **out: jg.matmul(jg.tensor(X), jg.tensor(Y).t(), **out),
    "mm": lambda **out: jg.mm(jg.tensor(X).t(), jg.tensor(Y), **out),
    "bmm": lambda **out: jg.bmm(jg.tensor(X)[None], jg.tensor(Y).t()[None], **out),
    "cat": lambda **out: jg.cat([jg.tensor(X), jg.tensor(Y)], 1, **out),
    "stack": lambda **out: jg.stack([jg.tensor(X), jg.tensor(Y)], **out),
    "amax": lambda **out: jg.amax(jg.tensor(X), 0, **out),
    "amin": lambda **out: jg.amin(jg.tensor(X), 1, **out),
    "sum": lambda **out: jg.sum(jg.tensor(X), 1, **out),
    "prod": lambda **out: jg.prod(jg.tensor(X), 0, **out),
    "cumsum": lambda **out: jg.cumsum(jg.tensor(X), 1, **out),
    "cumprod": lambda **out: jg.cumprod(jg.tensor(X), 0, **out),
}
CALLS = {**{n: c for n in DECLARED if (c := _declared_call(n)) is not None}, **OUT_CALLS}


def test_every_out_function_has_a_call_here():
    assert set(OUT_FUNCTIONS) == set(OUT_CALLS)
    assert not set(OUT_FUNCTIONS) & set(DECLARED), "declared ops take out= themselves"


@pytest.mark.parametrize("name", sorted(CALLS))
def test_out_receives_the_result_and_is_returned(name):
    with np.errstate(all="ignore"):  # acos(2.0) is NaN here, as for the plain call
        expected = CALLS[name]()
    for out in (jg.empty(*expected.shape, dtype=expected.dtype),  # the right shape
                jg.empty(0, dtype=expected.dtype)):  # empty: resized without a warning
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("error", UserWarning)
            assert CALLS[name](out=out) is out
        assert out.dtype == expected.dtype and tuple(out.shape) == tuple(expected.shape)
        np.testing.assert_array_equal(out.numpy(), expected.numpy())


def test_a_float_result_is_cast_into_a_wider_or_narrower_float_out():
    out = jg.empty(2, 3, dtype=jg.float64)
    jg.exp(jg.tensor(X), out=out)
    # computed in the inputs' float32, then cast (as torch): not exp in float64
    np.testing.assert_array_equal(out.numpy(), jg.exp(jg.tensor(X)).numpy().astype(np.float64))
    assert jg.add(jg.tensor([1, 2]), 1, out=jg.empty(2, dtype=jg.int32)).dtype == jg.int32


@pytest.mark.parametrize(("call", "out_dtype", "message"), [
    (lambda out: jg.exp(jg.tensor(X), out=out), jg.int64,
     "result type Float can't be cast to the desired output type Long"),
    (lambda out: jg.add(jg.tensor(X), 1, out=out), jg.bool,
     "result type Float can't be cast to the desired output type Bool"),
    (lambda out: jg.mean(jg.tensor(X), 1, out=out), jg.int64,
     "result type Float can't be cast to the desired output type Long"),
    (lambda out: jg.amax(jg.tensor(X), 1, out=out), jg.float64,
     "Expected the dtype for input and out to match, but got Float for input's dtype and "
     "Double for out's dtype."),
])
def test_outs_of_another_kind_are_refused_with_torchs_error(call, out_dtype, message):
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(jg.empty(2, dtype=out_dtype))


def test_sum_and_prod_compute_in_outs_dtype_as_with_dtype():
    ones = jg.tensor([[0.6, 0.6, 0.6]])
    assert jg.sum(ones, 1, out=jg.empty(1, dtype=jg.int64)).tolist() == [0]
    assert jg.sum(ones, 1, dtype=jg.int64).tolist() == [0]


def test_an_out_of_another_shape_is_resized_with_torchs_warning():
    out = jg.empty(2)
    with pytest.warns(UserWarning, match=r"resized since it had shape \[2\], which does not "
                      r"match the required output shape \[2, 3\]"):
        jg.sin(jg.tensor(X), out=out)
    np.testing.assert_allclose(out.numpy(), np.sin(X), rtol=1e-6)


@pytest.mark.parametrize("which", ["input", "out", "listed_input"])
def test_out_with_autograd_is_refused_under_grad_mode_only(which):
    x = jg.tensor(X, requires_grad=which != "out")
    out = jg.empty(2, 3, requires_grad=which == "out")
    call = {"input": lambda: jg.tanh(x, out=out), "out": lambda: jg.tanh(x, out=out),
            "listed_input": lambda: jg.stack([x, x], out=jg.empty(2, 2, 3))}[which]
    name = "stack" if which == "listed_input" else "tanh"
    with pytest.raises(RuntimeError, match=rf"{name}\(\): functions with out=\.\.\. arguments "
                       "don't support automatic differentiation"):
        call()
    if which != "out":
        with jg.no_grad():
            call()


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_out_inside_compiled_code_writes_the_callers_tensor(backend):
    def program(x, y, out):
        jg.mul(x, y, out=out)
        return jg.exp(out, out=out) * 2

    x, y = jg.tensor(X), jg.tensor(Y)
    expected_out = jg.empty(2, 3)
    expected = program(x, y, expected_out)
    out = jg.empty(2, 3)
    got = jg.compile(program, backend=backend)(x, y, out)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-6)
    np.testing.assert_allclose(out.numpy(), expected_out.numpy(), rtol=1e-6)
