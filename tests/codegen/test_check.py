"""Check mode (`backend="check"`, JITGRAD_CHECK): compiled graphs run beside eager ops.

Fault injection: a test replaces one entry of our own LOWERINGS table (or the joint
graph's gradient step) for its duration, so the numba program computes a wrong value, and
asserts that check mode names the node, op, user file:line, error and kernel. Correct
programs pass silently and return eager's values up to rounding (Note [Check tolerance]).
"""

import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use
from jitgrad import config
from jitgrad.codegen import joint_graphs, lowering
from jitgrad.codegen import reductions as reductions_module
from jitgrad.codegen.backend import numba_backend
from jitgrad.codegen.check import CheckedGraph, checked
from jitgrad.codegen.compare import compare
from jitgrad.eager.ops.registry import OPS

HERE = os.path.basename(__file__)


def inputs(*shapes, seed=0, requires_grad=False):
    rng = np.random.default_rng(seed)
    return [jg.tensor(rng.normal(size=s).astype(np.float32), requires_grad=requires_grad)
            for s in shapes]


def check_compile(fn):
    jg.reset()
    return jg.compile(fn, backend="check")


def line_of(fn, text):
    """The file line of the statement `text` in `fn` (the user line check mode prints)."""
    lines, first = __import__("inspect").getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def chain(x, w):
    y = x * w
    z = jg.tanh(y) + 1.0
    return z * 0.5


def prologue(x):
    e = jg.exp(x - 1.0)
    return e.sum(1)


def epilogue(x):
    s = x.amax(1)
    return jg.sigmoid(s) * 3.0


# (name, op whose lowering is wrong, wrong lowering, function, its inputs, user line, kernel)
FAULTS = [
    ("mul_scaled", "mul", lambda e, a, b: f"({a} * {b} * {e.const(1.0001)})", chain,
     ((4, 8), (8,)), "y = x * w", "fused_0 of the graph (mul, tanh, add, mul)"),
    ("tanh_identity", "tanh", lambda e, x: x, chain, ((4, 8), (8,)), "z = jg.tanh(y) + 1.0",
     "fused_0 of the graph (mul, tanh, add, mul)"),
    ("exp_in_reduction_prologue", "exp", lambda e, x: f"({e.call('exp', x)} * {e.const(1.001)})",
     prologue, ((6, 5),), "e = jg.exp(x - 1.0)", "fused_0 of the graph (sub, exp, sum)"),
    ("sigmoid_in_reduction_epilogue", "sigmoid", lambda e, x: f"({x} * {e.const(0.25)})",
     epilogue, ((6, 5),), "return jg.sigmoid(s) * 3.0", "fused_0 of the graph (amax, sigmoid, mul)"),
]


@pytest.mark.parametrize("case", FAULTS, ids=lambda c: c[0])
def test_a_wrong_lowering_is_named_with_node_op_line_error_and_kernel(case, monkeypatch):
    _, op, wrong, fn, shapes, statement, kernel = case
    args = inputs(*shapes)
    monkeypatch.setitem(lowering.LOWERINGS, OPS[op], wrong)
    with pytest.raises(jg.CheckError) as raised:
        check_compile(fn)(*args)
    text = str(raised.value)
    line = line_of(fn, statement)
    node = re.search(r"^  node:    %(\w+) = (\w+)\(", text, re.M)
    assert node is not None and node.group(2) == op, text
    assert text.startswith(f"jitgrad check: the compiled graph computes %{node.group(1)} "
                           "differently from eager\n")
    assert f"\n  op:      {op}\n" in text
    assert f"\n  at:      {HERE}:{line}\n               {statement}\n" in text
    path = re.search(rf"\n  kernel:  {re.escape(kernel)}, source (\S+\.py)\n", text)
    assert path is not None and os.path.exists(path.group(1)), text
    assert re.search(r"\n  error:   max abs error \S+, max rel error \S+ at \[", text), text


def test_the_reported_error_is_the_injected_one(monkeypatch):
    x, w = inputs((4, 8), (8,))
    monkeypatch.setitem(lowering.LOWERINGS, OPS["mul"],
                        lambda e, a, b: f"({a} * {b} * {e.const(1.0001)})")
    with pytest.raises(jg.CheckError) as raised:
        check_compile(chain)(x, w)
    product = x.numpy() * w.numpy()
    wrong = product * np.float32(1.0001)
    error = np.abs(wrong.astype(np.float64) - product)
    index = np.unravel_index(np.argmax(error), error.shape)
    relative = (error / np.abs(product)).max()
    assert (f"  error:   max abs error {error.max():.3g}, max rel error {relative:.3g} at "
            f"{list(map(int, index))}: compiled {wrong[index]:.8g}, eager {product[index]:.8g} "
            "(against float64: compiled ") in str(raised.value)
    assert "\n  outputs: %mul_1 of the graph differ\n" in str(raised.value)


def relu_step(x, w):
    h = x @ w
    a = jg.relu(h)
    return (a * 3.0).sum()


def test_a_wrong_backward_lowering_is_caught_in_the_gradients(monkeypatch):
    # relu's backward is where(out <= 0, 0, g): `le` appears only in the backward graph
    x, = inputs((6, 4))
    w, = inputs((4, 5), seed=1, requires_grad=True)
    monkeypatch.setitem(lowering.LOWERINGS, OPS["le"], lambda e, a, b: f"({a} < {b})")
    compiled = check_compile(relu_step)
    loss = compiled(x, w)
    with pytest.raises(jg.CheckError) as raised:
        loss.backward()
    text = str(raised.value)
    assert text.startswith("jitgrad check: the compiled backward graph computes %le "
                           "differently from eager\n  node:    %le = le(%saved_relu, 0)  "
                           f"b8[6, 5]  {HERE}:{line_of(relu_step, 'a = jg.relu(h)')}\n"), text
    assert "\n  op:      le\n" in text
    assert "\n  kernel:  fused_0 of the backward graph (mul, le, where), source " in text
    assert re.search(r"\n  error:   \d+ of 30 element\(s\) differ; first at \[\d, \d\]: "
                     r"compiled False, eager True\n", text), text


def test_a_wrong_backward_graph_names_the_input_whose_gradient_differs(monkeypatch):
    # a fault in building the joint graph: each backward kernel matches its (wrong) node
    x, = inputs((6, 4))
    w, = inputs((4, 5), seed=1, requires_grad=True)
    right = joint_graphs.validate_tensor_grad
    monkeypatch.setattr(joint_graphs, "validate_tensor_grad",
                        lambda *a: right(*a) * 1.001)
    loss = check_compile(relu_step)(x, w)
    with pytest.raises(jg.CheckError) as raised:
        loss.backward()
    text = str(raised.value)
    assert text.startswith("jitgrad check: the compiled gradient of input %w differs from "
                           "eager autograd's\n  node:    %w (graph input)  f32[4, 5] grad\n"
                           "  op:      input\n  kernel:  see the backward graph's kernels\n"
                           "  error:   max abs error "), text
    assert "the backward graph itself (codegen/joint_graphs.py) differs" in text


def pointwise(x, y):
    return jg.where(x > 0, jg.exp(-x) * y, F.gelu(x) - y / 3.0), (x * 2).to(jg.int64)


def reductions(x, t):
    return (F.softmax(x, 1), F.log_softmax(x, 1).mean(), x.var(1), x.max(1), x.argmin(0),
            F.layer_norm(x, (x.shape[1],)), F.cross_entropy(x, t), x.sum(), jg.logsumexp(x, 1))


def matmul(a, b, bias):
    return jg.tanh(a @ b + bias) @ b.t()


def run_silently(compiled, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return compiled(*args)


def assert_same(compiled, eager):
    if isinstance(eager, tuple):
        for c, e in zip(compiled, eager, strict=True):
            assert_same(c, e)
        return
    assert compiled.dtype == eager.dtype and compiled.shape == eager.shape
    np.testing.assert_allclose(compiled.numpy(), eager.numpy(), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("fn, args", [
    (pointwise, lambda: inputs((5, 7), (7,))),
    (reductions, lambda: [*inputs((8, 10)), jg.tensor(np.arange(8) % 10)]),
    (matmul, lambda: inputs((6, 5), (5, 9), (9,))),
], ids=["pointwise", "reductions", "matmul"])
def test_correct_programs_pass_silently_with_eager_values(fn, args):
    values = args()
    assert_same(run_silently(check_compile(fn), *values), fn(*values))


def mlp_step(x, target, w1, b1, w2, b2):
    h = F.relu(x @ w1 + b1)
    loss = F.cross_entropy(F.dropout(h, 0.25) @ w2 + b2, target)
    loss.backward()
    return loss


def test_a_training_step_passes_silently_with_eager_gradients_and_random_draws():
    x, = inputs((16, 6))
    target = jg.tensor(np.arange(16) % 3)
    params = inputs((6, 12), (12,), (12, 3), (3,), seed=2, requires_grad=True)
    eager_params = [p.detach().clone().requires_grad_() for p in params]
    compiled = check_compile(mlp_step)
    for _ in range(2):
        for p, e in zip(params, eager_params, strict=True):
            p.grad = e.grad = None
        jg.manual_seed(3)
        loss = run_silently(compiled, x, target, *params)
        after_compiled = jg.rand(3).numpy()
        jg.manual_seed(3)
        expected = mlp_step(x, target, *eager_params)
        np.testing.assert_array_equal(after_compiled, jg.rand(3).numpy())
        np.testing.assert_allclose(loss.item(), expected.item(), rtol=1e-6)
        for p, e in zip(params, eager_params, strict=True):
            np.testing.assert_allclose(p.grad.numpy(), e.grad.numpy(), rtol=1e-5, atol=1e-7)


def zero_behind_a_root(x, y):
    zero = x * y - x * y
    return zero * 2.0, zero.abs().sqrt()


def test_a_backward_where_one_output_got_no_gradient_is_checked_against_eager():
    # the second output gets no gradient: compiled and oracle both skip its sqrt'(0) = inf
    results = {}
    for name, fn in (("check", check_compile(zero_behind_a_root)), ("eager", zero_behind_a_root)):
        x, y = inputs((3, 4), (3, 4), requires_grad=True)
        first, _ = run_silently(fn, x, y)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            (first * 1.5).sum().backward()
        results[name] = x.grad.numpy(), y.grad.numpy()
    for got, want in zip(results["check"], results["eager"], strict=True):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(want, np.zeros((3, 4), np.float32))


def test_warn_mode_warns_and_returns_eager_values(monkeypatch):
    x, w = inputs((4, 8), (8,))
    monkeypatch.setattr(config, "CHECK", "warn")
    monkeypatch.setitem(lowering.LOWERINGS, OPS["tanh"], lambda e, x: x)
    with pytest.warns(jg.CheckWarning, match=r"computes %tanh differently from eager"):
        out = check_compile(chain)(x, w)
    np.testing.assert_array_equal(out.numpy(), chain(x, w).numpy())


def test_jitgrad_check_checks_the_default_backend_and_is_off_otherwise(monkeypatch):
    x, w = inputs((4, 8), (8,))
    monkeypatch.setitem(lowering.LOWERINGS, OPS["tanh"], lambda e, x: x)
    jg.reset()
    unchecked = jg.compile(chain)
    assert unchecked._backend is numba_backend  # no check, no cost
    assert not np.allclose(unchecked(x, w).numpy(), chain(x, w).numpy())  # the fault shows
    monkeypatch.setattr(config, "CHECK", "raise")
    jg.reset()
    with pytest.raises(jg.CheckError, match=r"computes %tanh differently"):
        jg.compile(chain)(x, w)


@pytest.mark.parametrize("value, action", [("", None), ("0", None), ("1", "raise"),
                                           ("raise", "raise"), ("warn", "warn"),
                                           ("WARN", "warn")])
def test_jitgrad_check_values(value, action):
    assert config.check_action(value) == action


def test_an_unknown_jitgrad_check_value_warns_and_raises():
    with pytest.warns(UserWarning, match="JITGRAD_CHECK='yes': expected 1, raise or warn"):
        assert config.check_action("yes") == "raise"


def test_another_backend_is_checked_on_its_outputs(monkeypatch):
    def off_by_one(gm, example_inputs):
        return lambda *args: tuple(out + 1 for out in gm.forward(*args))

    def fn(x):
        return x * 2

    monkeypatch.setattr(config, "CHECK", "raise")
    jg.reset()
    x, = inputs((3,))
    with pytest.raises(jg.CheckError) as raised:
        jg.compile(fn, backend=off_by_one)(x)
    text = str(raised.value)
    assert f"computes %mul differently from eager\n  node:    %mul = mul(%x, 2)  f32[3]  " \
           f"{HERE}:{line_of(fn, 'return x * 2')}\n" in text
    assert "\n  kernel:  none found (no kernel of this graph differs on eager's inputs)\n" in text
    assert isinstance(checked(off_by_one)(*_graph_of(fn, x)), CheckedGraph)


def _graph_of(fn, x):
    captured = []
    jg.reset()
    jg.compile(fn, backend=lambda gm, example: captured.append((gm, example)) or gm.forward)(x)
    return captured[0]


F32 = np.float32


@pytest.mark.parametrize("compiled, eager, what", [
    (np.zeros(3, F32), np.zeros(3, np.float64), "dtype"),
    (np.zeros(3, F32), np.zeros((1, 3), F32), "shape"),
    (np.array([1, np.nan], F32), np.array([1, 2], F32), "nan"),
    (np.array([np.inf, 1], F32), np.array([-np.inf, 1], F32), "inf"),
    (np.array([1, 2]), np.array([1, 3]), "value"),
    (np.array([1, 1.001], F32), np.array([1, 1], F32), "value"),
], ids=["dtype", "shape", "nan", "inf_sign", "integers", "floats"])
def test_compare_reports_each_kind_of_difference(compiled, eager, what):
    difference = compare(jg.tensor(compiled), jg.tensor(eager))
    assert difference is not None and difference.what == what


def test_compare_accepts_rounding_and_uses_float64_for_cancellation():
    one_ulp = np.nextafter(F32(2), F32(3))
    assert compare(jg.tensor([one_ulp, np.nan, -np.inf]), jg.tensor([F32(2), np.nan, -np.inf])) \
        is None
    # a float32 sum that cancels: eager's is off by 1 (1e8 + 1 rounds), compiled is exact
    compiled, eager, reference = jg.tensor(F32(1)), jg.tensor(F32(0)), jg.tensor(1.0)
    assert compare(compiled, eager) is not None  # tier 1 alone cannot tell
    assert compare(compiled, eager, reference) is None
    assert compare(eager, compiled, reference) is not None  # the reverse is compiled's error
    assert compare(eager, compiled, scale=1e8) is None  # within 16 ulps of the inputs' 1e8


def test_warn_mode_in_training_warns_once_at_the_user_line_and_keeps_eager_gradients(
        monkeypatch):
    x, = inputs((6, 4))
    w, = inputs((4, 5), seed=1, requires_grad=True)
    eager_w = w.detach().clone().requires_grad_()
    relu_step(x, eager_w).backward()
    monkeypatch.setattr(config, "CHECK", "warn")
    monkeypatch.setitem(lowering.LOWERINGS, OPS["le"], lambda e, a, b: f"({a} < {b})")
    compiled = check_compile(relu_step)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            w.grad = None
            compiled(x, w).backward()
            np.testing.assert_array_equal(w.grad.numpy(), eager_w.grad.numpy())
    assert [(type(c.message), os.path.basename(c.filename), c.lineno) for c in caught] == [
        (jg.CheckWarning, HERE, line_of(relu_step, "a = jg.relu(h)"))]


def normalized(x):
    centered = x - 0.5
    m = centered.mean(1)
    return jg.exp(m) + 1.0


def test_a_wrong_reduction_kernel_names_the_reduction_node(monkeypatch):
    # the mean's divisor (a runtime scalar of the reduction kernel) is off by one
    right = reductions_module.ReductionKernel._scalar_params

    def wrong(self, node):
        params = right(self, node)
        if self.spec.kind == "mean":
            params[1] += 1.0
        return params

    monkeypatch.setattr(reductions_module.ReductionKernel, "_scalar_params", wrong)
    x, = inputs((5, 6))
    with pytest.raises(jg.CheckError) as raised:
        check_compile(normalized)(x)
    text = str(raised.value)
    assert f"\n  op:      mean\n  at:      {HERE}:{line_of(normalized, 'm = centered.mean(1)')}\n" \
        in text, text
    assert "\n  kernel:  fused_0 of the graph (sub, mean, exp, add), source " in text, text


def scaled_relu(x, w):
    h = x @ w
    return (jg.relu(h) * 3.0).sum()


def _wrong_joint_forward(monkeypatch):
    """The joint graph's forward multiplies by 3.003 where the user wrote 3.0."""
    right = joint_graphs._JointForward.run

    def wrong(self, *example_inputs):
        outputs = right(self, *example_inputs)
        node = next(n for n in self.new.nodes if n.op == "call_function" and 3.0 in n.args)
        node.args = tuple(3.003 if a == 3.0 else a for a in node.args)
        return outputs

    monkeypatch.setattr(joint_graphs._JointForward, "run", wrong)


def test_a_wrong_joint_forward_graph_is_named_at_the_region_output(monkeypatch):
    x, = inputs((6, 4))
    w, = inputs((4, 5), seed=1, requires_grad=True)
    _wrong_joint_forward(monkeypatch)
    with pytest.raises(jg.CheckError) as raised:
        check_compile(scaled_relu)(x, w)
    text = str(raised.value)
    assert text.startswith("jitgrad check: the compiled region computes %sum differently from "
                           f"eager\n  node:    %sum = sum(%mul, dims=None, keepdim=False, "
                           f"out_dtype=None)  f32[] grad  {HERE}:"), text
    assert "\n  note:    the joint forward graph (codegen/joint_graphs.py) computes this output " \
           "differently from the captured graph\n" in text


def test_warn_mode_runs_a_region_with_a_wrong_joint_forward_eagerly(monkeypatch):
    x, = inputs((6, 4))
    w, = inputs((4, 5), seed=1, requires_grad=True)
    eager_w = w.detach().clone().requires_grad_()
    expected = scaled_relu(x, eager_w)
    expected.backward()
    _wrong_joint_forward(monkeypatch)
    monkeypatch.setattr(config, "CHECK", "warn")
    with pytest.warns(jg.CheckWarning, match="the compiled region computes %sum"):
        loss = check_compile(scaled_relu)(x, w)
    loss.backward()
    assert loss.item() == expected.item()
    np.testing.assert_array_equal(w.grad.numpy(), eager_w.grad.numpy())


def test_a_wrong_dtype_or_shape_from_a_backend_is_named(monkeypatch):
    def fn(x):
        return x * 2, x + 1

    def float64_first(gm, example_inputs):
        return lambda *args: (gm.forward(*args)[0].double(), gm.forward(*args)[1][None])

    monkeypatch.setattr(config, "CHECK", "raise")
    x, = inputs((3,))
    jg.reset()
    with pytest.raises(jg.CheckError) as raised:
        jg.compile(fn, backend=float64_first)(x)
    assert "\n  error:   dtype: compiled float64, eager float32\n" in str(raised.value)
    assert "\n  outputs: %mul, %add of the graph differ\n" in str(raised.value)


def test_the_environment_switch_is_read_by_config():
    script = "from jitgrad import config; print(config.CHECK)"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env={**os.environ, "JITGRAD_CHECK": "warn"}, check=True)
    assert result.stdout.strip() == "warn"
