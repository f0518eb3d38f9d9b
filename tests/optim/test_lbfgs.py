"""LBFGS against values printed by torch 2.13.0 (CPU) for the same problems and settings.

Rosenbrock plus a coupled term, float64, from x = [-1.5, 2], b = [0.5]:
    loss = (1 - x0)^2 + 100 (x1 - x0^2)^2 + 3 (b0 - x0)^2
and a float32 least-squares problem (A, y below). Torch's numbers were printed with
`LBFGS(...).step(closure).item()` per step and the state afterwards.
"""

import numpy as np
import pytest

import jitgrad as jg

# (kwargs, steps, losses per step, x, b, func_evals, n_iter, len(old_dirs), t, H_diag)
ROSENBROCK_TORCH = [
    ({}, 3, [24.5, 4.322417255746269, 1.4867006995104894],
     [0.5369298494022323, 0.29088638416231555], [0.5372465335810046], 60, 60, 59, 1.0,
     0.0013439112812604311),
    ({"line_search_fn": "strong_wolfe"}, 3, [24.5, 2.249773873185359, 0.0013630971572100685],
     [1.0000093406672286, 1.0000184405835548], [1.000005756377345], 55, 46, 45, 1.0,
     0.012524016685160077),
    ({"line_search_fn": "strong_wolfe", "history_size": 3, "max_iter": 7, "lr": 0.5}, 2,
     [24.5, 6.892344782306661], [-1.0922211347867437, 1.2079079141927784],
     [-1.1590962796673179], 16, 9, 3, 0.04688921980875993, 0.02789498742474075),
    ({"history_size": 2, "max_iter": 5, "lr": 0.1}, 2, [24.5, 16.732617646653033],
     [-1.3610202114140633, 1.8928923716268817], [0.19178879430627954], 10, 10, 2, 0.1,
     0.001580095578740062),
]


def _rosenbrock_run(kwargs, steps):
    x = jg.tensor([-1.5, 2.0], dtype=jg.float64, requires_grad=True)
    b = jg.tensor([0.5], dtype=jg.float64, requires_grad=True)
    opt = jg.optim.LBFGS([x, b], **kwargs)

    def closure():
        opt.zero_grad()
        loss = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2 + (b[0] - x[0]) ** 2 * 3
        loss.backward()
        return loss

    losses = [opt.step(closure).item() for _ in range(steps)]
    return opt, x, b, losses


@pytest.mark.parametrize("case", ROSENBROCK_TORCH, ids=lambda c: str(c[0]))
def test_rosenbrock_matches_torch(case):
    kwargs, steps, losses, x_ref, b_ref, evals, n_iter, history, t, h_diag = case
    opt, x, b, got = _rosenbrock_run(kwargs, steps)
    # 60 iterations of a curved valley: rounding differences grow to ~1e-8 relative
    np.testing.assert_allclose(got, losses, rtol=1e-8)
    np.testing.assert_allclose(x.tolist() + b.tolist(), x_ref + b_ref, rtol=1e-6)
    state = opt.state[x]
    assert (state["func_evals"], state["n_iter"], len(state["old_dirs"])) == (evals, n_iter,
                                                                              history)
    np.testing.assert_allclose([float(state["t"]), float(state["H_diag"])], [t, h_diag],
                               rtol=1e-6)
    assert sorted(opt.state_dict()["state"][0]) == [
        "H_diag", "al", "d", "func_evals", "n_iter", "old_dirs", "old_stps", "prev_flat_grad",
        "prev_loss", "ro", "t"]
    assert list(opt.state_dict()["state"]) == [0]


A = np.arange(12, dtype=np.float32).reshape(4, 3) / 7.0 + np.eye(4, 3, dtype=np.float32)
Y = np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)
# torch 2.13, float32, history_size=4, max_iter=6: losses of 3 steps and w afterwards
LEAST_SQUARES_TORCH = {
    None: ([3.5625, 1.3396880626678467, 1.339665412902832],
           [2.175668716430664, -1.4612720012664795, 0.401804119348526]),
    "strong_wolfe": ([3.5625, 1.341839075088501, 1.3396646976470947],
                     [2.175809621810913, -1.461248755455017, 0.40168872475624084]),
}


def _least_squares(line_search_fn, lr, loss_fn=None):
    a, y = jg.tensor(A), jg.tensor(Y)
    w = jg.zeros(3, requires_grad=True)
    opt = jg.optim.LBFGS([w], lr=lr, history_size=4, max_iter=6, line_search_fn=line_search_fn)
    loss_of = loss_fn or (lambda w: ((a @ w - y) ** 2).mean())

    def closure():
        opt.zero_grad()
        loss = loss_of(w)
        loss.backward()
        return loss

    return opt, w, closure


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_float32_least_squares_matches_torch(line_search_fn):
    losses, w_ref = LEAST_SQUARES_TORCH[line_search_fn]
    opt, w, closure = _least_squares(line_search_fn, jg.tensor(0.8) if line_search_fn is None
                                     else 1)
    got = [opt.step(closure).item() for _ in range(3)]
    assert w.dtype == jg.float32 and opt.state[w]["prev_flat_grad"].dtype == jg.float32
    # float32 near the optimum: the last iterations stop on rounding noise, as torch's do,
    # and the loss is flat there: numpy 2.4.6's float32 rounding ends strong_wolfe's steps
    # 5e-4 from torch's w at the same float32 loss
    np.testing.assert_allclose(got, losses, rtol=1e-5)
    np.testing.assert_allclose(w.tolist(), w_ref, atol=1e-3)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_state_dict_resumes_the_same_run(line_search_fn):
    straight, w, closure = _least_squares(line_search_fn, 0.8)
    straight.step(closure)
    straight.step(closure)
    first, w1, closure1 = _least_squares(line_search_fn, 0.8)
    first.step(closure1)
    resumed, w2, closure2 = _least_squares(line_search_fn, 0.8)
    with jg.no_grad():
        w2.copy_(w1)
    resumed.load_state_dict(first.state_dict())
    assert resumed.state[w2]["old_dirs"] is not first.state[w1]["old_dirs"]  # torch copies lists
    resumed.step(closure2)
    assert w2.tolist() == w.tolist()
    assert resumed.state[w2]["n_iter"] == straight.state[w]["n_iter"]


def test_a_compiled_loss_in_the_closure_gives_eager_values():
    a, y = jg.tensor(A), jg.tensor(Y)

    def loss_of(w):
        return ((a @ w - y) ** 2).mean()

    runs = []
    for fn in (loss_of, jg.compile(loss_of)):
        opt, w, closure = _least_squares("strong_wolfe", 1, fn)
        runs.append(([opt.step(closure).item() for _ in range(2)], w.tolist()))
    np.testing.assert_allclose(runs[1][0], runs[0][0], rtol=1e-6)
    np.testing.assert_allclose(runs[1][1], runs[0][1], rtol=1e-5)


def test_stops_at_once_when_the_gradient_is_zero():
    w = jg.ones(2, requires_grad=True)
    opt = jg.optim.LBFGS([w])

    def closure():
        opt.zero_grad()
        loss = ((w - 1) ** 2).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == 0.0
    assert opt.state[w] == {"func_evals": 1, "n_iter": 0}


@pytest.mark.parametrize(("make", "error", "pattern"), [
    (lambda w: jg.optim.LBFGS([w], lr=-1), ValueError, "Invalid learning rate: -1"),
    (lambda w: jg.optim.LBFGS([w], lr=jg.ones(2)), ValueError, "Tensor lr must be 1-element"),
    (lambda w: jg.optim.LBFGS([{"params": [w]}, {"params": [jg.ones(1, requires_grad=True)]}]),
     ValueError, "doesn't support per-parameter options"),
])
def test_constructor_errors(make, error, pattern):
    with pytest.raises(error, match=pattern):
        make(jg.ones(1, requires_grad=True))


def test_unknown_line_search_raises_at_step():
    w = jg.ones(2, requires_grad=True)
    opt = jg.optim.LBFGS([w], line_search_fn="armijo")

    def closure():
        opt.zero_grad()
        loss = (w ** 2).sum()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(closure)
