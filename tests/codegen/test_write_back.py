"""A functionalized `target.copy_(source)` in a graph program (program.copy_reusing_source):
when nothing else reads the source's array, the program's copy is that array, and the
write-back into the real tensor makes the one copy; values and aliasing stay eager's."""

import numpy as np

import jitgrad as jg
from jitgrad.codegen.program import copy_reusing_source
from tests.codegen.test_backend import compile_numba


def test_an_update_written_back_reuses_the_kernel_output():
    def update(p, g):
        with jg.no_grad():
            p.copy_(p * 0.9 - g * 0.1)
        return p

    rng = np.random.default_rng(0)
    start, grad = (rng.standard_normal((5, 7)).astype(np.float32) for _ in range(2))
    compiled, produced = compile_numba(update)
    p, q = jg.tensor(start.copy()), jg.tensor(start.copy())
    memory = p._data
    for _ in range(3):
        compiled(p, jg.tensor(grad))
        update(q, jg.tensor(grad))
    np.testing.assert_array_equal(p.numpy(), q.numpy())
    assert p._data is memory and p._version == q._version
    (program,) = produced
    assert "copy_reusing_source(" in program.wrapper.code


def test_a_source_read_elsewhere_is_copied():
    def update(p, g):
        with jg.no_grad():
            new = p - g
            p.copy_(new)
        return new

    p = jg.tensor(np.ones(4, np.float32))
    compiled, _ = compile_numba(update)
    new = compiled(p, jg.tensor(np.full(4, 0.5, np.float32)))
    p.add_(1.0)  # the returned value is not p's memory, as in eager
    np.testing.assert_array_equal(new.numpy(), np.full(4, 0.5, np.float32))
    np.testing.assert_array_equal(p.numpy(), np.full(4, 1.5, np.float32))


def test_the_source_is_reused_only_when_it_is_the_copy():
    target = np.zeros((3, 4), np.float32)
    fresh = np.ones((3, 4), np.float32)
    assert copy_reusing_source(target, fresh) is fresh
    for source in (np.ones((4, 3), np.float32).T, np.ones((3, 4)), np.ones(4, np.float32),
                   fresh[:, :]):
        copied = copy_reusing_source(target, source)
        assert copied is not source and copied.dtype == target.dtype
        assert copied.shape == target.shape and copied.strides == target.strides
        np.testing.assert_array_equal(copied, np.broadcast_to(source, (3, 4)))
