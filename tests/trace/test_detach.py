"""`.detach()` and `.data` inside compiled code stop the gradient, as in eager: the graph
reads them through a `detach` node (and the numba backend's joint graphs stop there)."""

import numpy as np
import pytest

import jitgrad as jg

PROGRAMS = {
    "detached_factor": lambda x: (x * x.detach()).sum(),
    "straight_through": lambda x: (x + (jg.round(x * 0.4) - x).detach()).pow(2).sum(),
    "data_factor": lambda x: (x * x.data).sum(),
    "detached_target": lambda x: ((x.exp() - x.detach().exp()) ** 2 + x).sum(),
}


@pytest.mark.parametrize("backend", ["eager", "numba"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_detach_stops_the_gradient_in_compiled_code(name, backend):
    program = PROGRAMS[name]
    x = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    expected = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    jg.reset()
    jg.compile(program, backend=backend)(x).backward()
    program(expected).backward()
    np.testing.assert_allclose(x.grad.numpy(), expected.grad.numpy(), rtol=1e-6)
