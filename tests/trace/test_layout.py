"""Inside compiled code, tensors report eager's layout: `stride()`, `is_contiguous()` and
`storage_offset()` of inputs (contiguous, transposed, sliced, stepped, expanded), of views
and of op results, and the layout decisions eager makes (view or copy, `view()` refusing a
non-viewable layout) are the same. Fake tensors hold zero arrays with the real layout
(jitgrad.eager.layout); input strides are guarded, storage offsets once they are read.
"""

import warnings

import numpy as np
import pytest

import jitgrad as jg
from tests.eager.op_table import OP_CASES

F = jg.nn.functional


def _base():
    return jg.arange(48.0).reshape(6, 8)


# inputs of shape (3, 4) in different layouts, and how each was made
INPUTS = {
    "contiguous": lambda: jg.arange(12.0).reshape(3, 4),
    "transposed": lambda: jg.arange(12.0).reshape(4, 3).t(),
    "rows_sliced": lambda: _base()[2:5, :4],
    "stepped": lambda: _base()[::2, 1::2],
    "expanded": lambda: jg.arange(4.0).expand(3, 4),
    "permuted_3d": lambda: jg.arange(12.0).reshape(2, 2, 3).permute(2, 0, 1).reshape(3, 4),
}

VIEWS_AND_OPS = {
    "identity": lambda x: x, "t": lambda x: x.t(), "mul": lambda x: x * 2,
    "add_t": lambda x: x.t() + 1, "exp": lambda x: x.exp(), "relu": lambda x: x.relu(),
    "col_step": lambda x: x[:, ::2], "rows_from_1": lambda x: x[1:], "row": lambda x: x[1],
    "column": lambda x: x[:, 1], "unsqueeze": lambda x: x.unsqueeze(1),
    "expand": lambda x: x[0].expand(3, 4), "expand_mul": lambda x: x[0].expand(3, 4) * 1,
    "contiguous": lambda x: x.contiguous(), "t_contiguous": lambda x: x.t().contiguous(),
    "reshape": lambda x: x.reshape(12), "t_reshape": lambda x: x.t().reshape(2, 6),
    "flatten": lambda x: x.flatten(), "view": lambda x: x.view(4, 3),
    "t_view": lambda x: x.t().view(12), "sum0": lambda x: x.sum(0),
    "sum_keepdim": lambda x: x.t().sum(1, keepdim=True), "matmul": lambda x: x.t() @ x,
    "clone": lambda x: x.clone(), "double": lambda x: x.double(),
    "where": lambda x: jg.where(x > 2, x, 0.0), "softmax": lambda x: x.softmax(-1),
    "cat": lambda x: jg.cat([x, x]), "stack": lambda x: jg.stack([x, x], 1),
    "narrow": lambda x: x.narrow(1, 1, 2), "chunk": lambda x: x.chunk(2, 1)[1],
    "select_t": lambda x: x.t()[2], "squeeze": lambda x: x[:1].squeeze(0),
    "diagonal": lambda x: x.diagonal(), "movedim": lambda x: x.unsqueeze(0).movedim(0, 2),
    "layer_norm": lambda x: F.layer_norm(x, (4,)), "mean_t": lambda x: x.t().mean(0),
    "square_matmul": lambda x: x[:3, :3] @ x[:3, :3].t(), "sort": lambda x: x.sort(-1)[0],
    "argsort_t": lambda x: x.t().argsort(0),
}


def layout(t):
    return tuple(t.stride()), t.is_contiguous(), t.storage_offset(), tuple(t.shape)


def outcome(fn, *args):
    try:
        return fn(*args)
    except RuntimeError as err:  # `view` of a layout that cannot be viewed
        return type(err), str(err)


def layout_program(view):
    def program(x):
        y = view(x)
        return layout(y), y.stride(0) if y.ndim else None
    return program


@pytest.mark.parametrize("name", sorted(VIEWS_AND_OPS))
def test_layout_inside_compiled_code_is_eager(name):
    program = layout_program(VIEWS_AND_OPS[name])
    compiled = jg.compile(program)
    for make in INPUTS.values():  # each layout: a recompile (strides are guarded)
        x = make()
        assert outcome(compiled, x) == outcome(program, x)


EMPTY_SHAPES = [(1,), (0,), (1, 0), (0, 3), (2, 0), (3, 1)]
EMPTY_VIEWS_AND_OPS = {
    "none_then_slice": lambda x: x[None, ..., 1:], "slice": lambda x: x[1:],
    "unsqueeze": lambda x: x.unsqueeze(-1), "expand": lambda x: x.unsqueeze(0).expand(3, *x.shape),
    "narrow_to_0": lambda x: x.narrow(0, 0, 0), "reshape": lambda x: x.reshape(-1),
    "add": lambda x: x + 1, "sum_keepdim": lambda x: x.sum(0, keepdim=True),
    "cat": lambda x: jg.cat([x, x]),
}


@pytest.mark.parametrize("name", sorted(EMPTY_VIEWS_AND_OPS))
def test_layout_of_empty_and_size_one_results_inside_compiled_code_is_eager(name):
    # an empty view shares no memory with its base, so the shape/dtype rule cannot tell it
    # is a view by looking; it must still get the strides eager's view has (fuzz 603356)
    program = layout_program(EMPTY_VIEWS_AND_OPS[name])
    compiled = jg.compile(program)
    for shape in EMPTY_SHAPES:
        x = jg.zeros(*shape)
        assert outcome(compiled, x) == outcome(program, x), shape


def test_fresh_contiguous_input_reports_its_strides():
    def program(x):
        return x.stride(), x.is_contiguous(), x.storage_offset(), (x * 2).stride()

    assert jg.compile(program)(jg.ones(3, 4)) == ((4, 1), True, 0, (4, 1))


def test_a_new_input_layout_recompiles():
    def program(x):
        return x.view(12) * 1 if x.is_contiguous() else x.reshape(12)

    compiled = jg.compile(program)
    for make in INPUTS.values():
        x = make()
        np.testing.assert_array_equal(compiled(x).numpy(), program(x).numpy())
    report = jg.explain(program)(INPUTS["transposed"]())
    assert "stride()" in str(report.guards)


def test_storage_offsets_of_input_views_follow_the_input():
    def program(x):
        return x[1:].storage_offset(), x.storage_offset(), x.t()[1].storage_offset()

    compiled = jg.compile(program)
    base = _base()
    for x in (base[0:3], base[1:4], base[2:5], base[1:4, 2:]):
        assert compiled(x) == program(x)


def _case_program(case):
    def program(*tensors):
        out = case.fn(*tensors)
        outs = out if isinstance(out, tuple) else (out,)
        return tuple(layout(o) for o in outs if isinstance(o, jg.Tensor))
    return program


@pytest.mark.parametrize("case", OP_CASES, ids=lambda c: c.name)
def test_op_table_layouts_inside_compiled_code_are_eager(case):
    program = _case_program(case)
    tensors = case.tensors(case.arrays(np.float32), requires_grad=False)
    expected = program(*tensors)
    jg.reset()
    assert jg.compile(program)(*tensors) == expected


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_a_zero_dim_integer_index_gives_a_view_in_compiled_code_too(backend):
    # eager (and torch) treat x[tensor(k)] as x[k]: a view, so a write through it reaches
    # x; a graph cannot make a view at an offset only known at run time, so it is not
    # captured as a copy (the frame runs eagerly)
    def program(x, i):
        row = x[i]
        row.zero_()
        return x.sum(), row.storage_offset()

    expected = program(jg.arange(12.0).reshape(3, 4), jg.tensor(2))
    x = jg.arange(12.0).reshape(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = jg.compile(program, backend=backend)(x, jg.tensor(2))
    assert (float(got[0]), got[1]) == (float(expected[0]), expected[1]) == (28.0, 8)
