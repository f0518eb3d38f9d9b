"""The strong-Wolfe line search LBFGS uses (torch.optim.lbfgs._strong_wolfe), ported as is.

Algorithm 3.5/3.6 of Nocedal & Wright, "Numerical Optimization" (2nd ed.), as written in
minFunc (Schmidt 2005) and PyTorch: bracket a step satisfying the strong Wolfe conditions
    f(x + t d) <= f(x) + c1 t g'd      (sufficient decrease)
    |g(x + t d)'d| <= -c2 g'd           (curvature)
by cubic interpolation, then zoom into the bracket. Losses are Python floats, directional
derivatives 0-d tensors, as in PyTorch, so the branches take the same turns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jitgrad.eager.tensor import Tensor

ObjectiveT = Callable[[list[Tensor], Any, Tensor], tuple[float, Tensor]]


def cubic_interpolate(x1: Any, f1: Any, g1: Any, x2: Any, f2: Any, g2: Any,
                      bounds: tuple[Any, Any] | None = None) -> Any:
    """The minimizer of the cubic through (x1, f1, g1), (x2, f2, g2), clamped to `bounds`
    (default: the interval between x1 and x2); the bounds' midpoint when it has none."""
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square >= 0:
        d2 = d2_square.sqrt()
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


class _Bracket:
    """Trial steps with their losses, gradients and directional derivatives."""

    def __init__(self, t: list[Any], f: list[Any], g: list[Tensor], gtd: list[Any]) -> None:
        self.t, self.f, self.g, self.gtd = t, f, g, gtd

    def set(self, pos: int, t: Any, f: Any, g: Tensor, gtd: Any) -> None:
        self.t[pos], self.f[pos], self.g[pos], self.gtd[pos] = t, f, g, gtd

    def order(self) -> tuple[int, int]:
        """(low, high): the position of the lower loss first."""
        return (0, 1) if self.f[0] <= self.f[-1] else (1, 0)


def strong_wolfe(obj_func: ObjectiveT, x: list[Tensor], t: Any, d: Tensor, f: float,
                 g: Tensor, gtd: Tensor, c1: float = 1e-4, c2: float = 0.9,
                 tolerance_change: float = 1e-9, max_ls: int = 25
                 ) -> tuple[float, Tensor, Any, int]:
    """(loss, flat gradient, step, evaluations) at the step found along d from x.

    obj_func(x, t, d) -> (loss at x + t d, its flat gradient), leaving the parameters at x.
    """
    d_norm = d.abs().max()
    bracket, done, ls_iter, evals, t = _bracket_phase(obj_func, x, t, d, f, g, gtd, c1, c2,
                                                      max_ls)
    low, evals = _zoom_phase(obj_func, x, d, f, gtd, c1, c2, tolerance_change, max_ls,
                             bracket, done, ls_iter, evals, d_norm)
    return bracket.f[low], bracket.g[low], bracket.t[low], evals


def _bracket_phase(obj_func: ObjectiveT, x: list[Tensor], t: Any, d: Tensor, f: float,
                   g: Tensor, gtd: Tensor, c1: float, c2: float, max_ls: int
                   ) -> tuple[_Bracket, bool, int, int, Any]:
    """Grow the step until an interval holds a point satisfying the conditions."""
    g = g.clone()
    f_new, g_new = obj_func(x, t, d)
    evals, ls_iter = 1, 0
    gtd_new = g_new.dot(d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            return (_Bracket([t_prev, t], [f_prev, f_new], [g_prev, g_new.clone()],
                             [gtd_prev, gtd_new]), False, ls_iter, evals, t)
        if abs(gtd_new) <= -c2 * gtd:
            return _Bracket([t], [f_new], [g_new], [gtd_new]), True, ls_iter, evals, t
        if gtd_new >= 0:
            return (_Bracket([t_prev, t], [f_prev, f_new], [g_prev, g_new.clone()],
                             [gtd_prev, gtd_new]), False, ls_iter, evals, t)
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                              bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.clone(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
    # out of evaluations: PyTorch keeps no directional derivatives here (the zoom loop,
    # which would read them, cannot run)
    return _Bracket([0, t], [f, f_new], [g, g_new], [None, None]), False, ls_iter, evals, t


def _zoom_phase(obj_func: ObjectiveT, x: list[Tensor], d: Tensor, f: float, gtd: Tensor,
                c1: float, c2: float, tolerance_change: float, max_ls: int,
                bracket: _Bracket, done: bool, ls_iter: int, evals: int, d_norm: Tensor
                ) -> tuple[int, int]:
    """(position of the best point, evaluations): shrink the bracket by safeguarded cubic
    interpolation until a point qualifies."""
    insuf_progress = False
    low, high = bracket.order()
    while not done and ls_iter < max_ls:
        if abs(bracket.t[1] - bracket.t[0]) * d_norm < tolerance_change:
            break
        t = cubic_interpolate(bracket.t[0], bracket.f[0], bracket.gtd[0],
                              bracket.t[1], bracket.f[1], bracket.gtd[1])
        t, insuf_progress = _safeguard(t, bracket.t, insuf_progress)
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket.f[low]:
            bracket.set(high, t, f_new, g_new.clone(), gtd_new)
            low, high = (0, 1) if bracket.f[0] <= bracket.f[1] else (1, 0)
            continue
        if abs(gtd_new) <= -c2 * gtd:
            done = True
        elif gtd_new * (bracket.t[high] - bracket.t[low]) >= 0:
            bracket.set(high, bracket.t[low], bracket.f[low], bracket.g[low], bracket.gtd[low])
        bracket.set(low, t, f_new, g_new.clone(), gtd_new)
    return low, evals


def _safeguard(t: Any, steps: list[Any], insuf_progress: bool) -> tuple[Any, bool]:
    """Move t 10% of the bracket away from its ends when progress stalls there."""
    top, bottom = max(steps), min(steps)
    eps = 0.1 * (top - bottom)
    if min(top - t, t - bottom) >= eps:
        return t, False
    if insuf_progress or t >= top or t <= bottom:
        return (top - eps if abs(t - top) < abs(t - bottom) else bottom + eps), False
    return t, True
