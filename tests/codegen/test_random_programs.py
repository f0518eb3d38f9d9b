"""Random pointwise programs (chains of 3-8 ops), compiled with the numba backend, match eager.

Shapes come from a fixed few, and each program is one fused kernel, so the number of
distinct kernels stays at the number of examples. Float32, rtol 1e-5 / atol 1e-5: errors
of an ulp or two per op compound over up to 8 ops (exp and division amplify them).
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import jitgrad as jg
import jitgrad.nn.functional as functional

# (x, y) shapes: y broadcasts against x
SHAPES = [((5,), (5,)), ((3, 4), (4,)), ((2, 3), (2, 1)), ((4, 1), (3,))]
UNARY = {
    "exp": lambda x: jg.exp(x.clamp(-5, 5)), "tanh": jg.tanh, "sigmoid": jg.sigmoid,
    "relu": jg.relu, "gelu": functional.gelu, "abs": jg.abs, "neg": lambda x: -x,
    "sqrt_abs": lambda x: jg.sqrt(jg.abs(x)), "log_abs1": lambda x: jg.log(jg.abs(x) + 1),
    "where_pos": lambda x: jg.where(x > 0, x, x * 0.5),
}
BINARY = {
    "add": lambda x, o: x + o, "sub": lambda x, o: x - o, "mul": lambda x, o: x * o,
    "div": lambda x, o: x / (jg.abs(o) + 1) if isinstance(o, jg.Tensor) else x / o,
}
STEP = st.one_of(
    st.tuples(st.just("unary"), st.sampled_from(sorted(UNARY))),
    st.tuples(st.just("binary"), st.sampled_from(sorted(BINARY)),
              st.one_of(st.just("y"), st.sampled_from([0.5, -2.0, 3.0]))),
)


def make_program(steps):
    def program(x, y):
        for step in steps:
            if step[0] == "unary":
                x = UNARY[step[1]](x)
            else:
                x = BINARY[step[1]](x, y if step[2] == "y" else step[2])
        return x
    return program


@settings(max_examples=12, deadline=None)  # each example compiles its own kernels
@given(steps=st.lists(STEP, min_size=3, max_size=8), shapes=st.sampled_from(SHAPES),
       seed=st.integers(0, 3))
def test_random_program_matches_eager(steps, shapes, seed):
    rng = np.random.default_rng(seed)
    x, y = (jg.tensor(rng.uniform(-2, 2, size=s).astype(np.float32)) for s in shapes)
    program = make_program(steps)
    jg.reset()  # every program is the same code object with another closure
    compiled = jg.compile(program, backend="numba")(x, y)
    eager = program(x, y)
    assert compiled.dtype == eager.dtype and compiled.shape == eager.shape
    np.testing.assert_allclose(compiled.numpy(), eager.numpy(), rtol=1e-5, atol=1e-5)
