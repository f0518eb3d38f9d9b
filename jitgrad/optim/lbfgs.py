"""`LBFGS` (torch.optim.LBFGS): limited-memory BFGS with an optional strong-Wolfe line search.

PyTorch's algorithm step for step (itself after minFunc, Schmidt 2005): the closure is
evaluated once per step and after each inner iteration; the search direction comes from the
two-loop recursion over the last `history_size` curvature pairs (Nocedal & Wright,
"Numerical Optimization", Algorithm 7.4), scaled by H_diag = y's / y'y. Scalars that torch
keeps as 0-d tensors (y's, H_diag, g'd, the first step size) are 0-d tensors here too, and
losses are Python floats, so every branch takes torch's turn.

State (on the first parameter, as in PyTorch, so `state_dict()` has the one entry 0):
"func_evals", "n_iter", "d", "t", "old_dirs", "old_stps", "ro", "H_diag",
"prev_flat_grad", "prev_loss", "al".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jitgrad.eager.grad_mode import enable_grad, no_grad
from jitgrad.eager.ops.joining import cat
from jitgrad.eager.tensor import Tensor
from jitgrad.optim.line_search import strong_wolfe
from jitgrad.optim.optimizer import Optimizer, ParamsT


class LBFGS(Optimizer):
    """L-BFGS over all parameters flattened into one vector; `step(closure)` requires the
    closure (it zeroes the grads, computes the loss, calls backward and returns the loss).

    Raises ValueError for a negative lr, a multi-element tensor lr or several parameter
    groups; RuntimeError from step() for a line_search_fn other than "strong_wolfe".
    """

    def __init__(self, params: ParamsT, lr: float | Tensor = 1, max_iter: int = 20,
                 max_eval: int | None = None, tolerance_grad: float = 1e-7,
                 tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params: list[Tensor] = self.param_groups[0]["params"]

    # ----- the parameters as one flat vector ---------------------------------------------
    def _gather_flat_grad(self) -> Tensor:
        views = [p.new(p.numel()).zero_() if p.grad is None else p.grad.reshape(-1)
                 for p in self._params]
        return cat(views, 0)

    def _add_grad(self, step_size: Any, update: Tensor) -> None:
        offset = 0
        for p in self._params:
            numel = p.numel()
            p.add_(update[offset:offset + numel].view_as(p), alpha=step_size)
            offset += numel

    def _directional_evaluate(self, closure: Callable[[], Any], x: list[Tensor], t: Any,
                              d: Tensor) -> tuple[float, Tensor]:
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        for p, saved in zip(self._params, x, strict=True):
            p.copy_(saved)
        return loss, flat_grad

    # ----- the step ------------------------------------------------------------------------
    def step(self, closure: Callable[[], Any]) -> Any:  # type: ignore[override]
        """Up to max_iter L-BFGS iterations; returns the closure's first loss of this step."""
        with no_grad():
            return self._step(enable_grad()(closure))

    def _step(self, closure: Callable[[], Any]) -> Any:
        group = self.param_groups[0]
        lr = group["lr"].reshape(()) if isinstance(group["lr"], Tensor) else group["lr"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if flat_grad.abs().max() <= group["tolerance_grad"]:
            return orig_loss
        memory: dict[str, Any] = {key: state.get(key) for key in (
            "d", "t", "old_dirs", "old_stps", "ro", "H_diag", "prev_flat_grad", "prev_loss")}
        n_iter = 0
        while n_iter < group["max_iter"]:
            n_iter += 1
            state["n_iter"] += 1
            self._direction(state, memory, flat_grad, group["history_size"])
            if memory["prev_flat_grad"] is None:
                memory["prev_flat_grad"] = flat_grad.clone()
            else:
                memory["prev_flat_grad"].copy_(flat_grad)
            memory["prev_loss"] = loss
            d = memory["d"]
            t = min(1.0, 1.0 / flat_grad.abs().sum()) * lr if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d)
            if gtd > -group["tolerance_change"]:
                memory["t"] = t
                break
            loss, flat_grad, t, evals, opt_cond = self._advance(
                closure, group, d, t, loss, flat_grad, gtd, current_evals, n_iter)
            memory["t"] = t
            current_evals += evals
            state["func_evals"] += evals
            if (n_iter == group["max_iter"] or current_evals >= group["max_eval"] or opt_cond
                    or d.mul(t).abs().max() <= group["tolerance_change"]
                    or abs(loss - memory["prev_loss"]) < group["tolerance_change"]):
                break
        state.update(memory)
        return orig_loss

    def _direction(self, state: dict[str, Any], memory: dict[str, Any], flat_grad: Tensor,
                   history_size: int) -> None:
        """Set memory["d"]: -g on the first iteration, else -H g by the two-loop recursion
        after storing the newest curvature pair (s, y) when y's > 1e-10."""
        if state["n_iter"] == 1:
            memory.update(d=flat_grad.neg(), old_dirs=[], old_stps=[], ro=[], H_diag=1)
            return
        old_dirs, old_stps, ro = memory["old_dirs"], memory["old_stps"], memory["ro"]
        y = flat_grad.sub(memory["prev_flat_grad"])
        s = memory["d"].mul(memory["t"])
        ys = y.dot(s)
        if ys > 1e-10:
            if len(old_dirs) == history_size:
                old_dirs.pop(0)
                old_stps.pop(0)
                ro.pop(0)
            old_dirs.append(y)
            old_stps.append(s)
            ro.append(1.0 / ys)
            memory["H_diag"] = ys / y.dot(y)
        if "al" not in state:
            state["al"] = [None] * history_size
        al = state["al"]
        q = flat_grad.neg()
        for i in range(len(old_dirs) - 1, -1, -1):
            al[i] = old_stps[i].dot(q) * ro[i]
            q.add_(old_dirs[i], alpha=-al[i])
        r = q * memory["H_diag"]
        for i in range(len(old_dirs)):
            be_i = old_dirs[i].dot(r) * ro[i]
            r.add_(old_stps[i], alpha=al[i] - be_i)
        memory["d"] = r

    def _advance(self, closure: Callable[[], Any], group: dict[str, Any], d: Tensor, t: Any,
                 loss: float, flat_grad: Tensor, gtd: Tensor, current_evals: int,
                 n_iter: int) -> tuple[float, Tensor, Any, int, Any]:
        """Move the parameters along d: (loss, flat grad, step, evaluations, optimal?)."""
        line_search_fn = group["line_search_fn"]
        if line_search_fn is not None:
            if line_search_fn != "strong_wolfe":
                raise RuntimeError("only 'strong_wolfe' is supported")
            x_init = [p.clone() for p in self._params]
            loss, flat_grad, t, evals = strong_wolfe(
                lambda x, step, direction: self._directional_evaluate(closure, x, step,
                                                                      direction),
                x_init, t, d, loss, flat_grad, gtd, max_ls=group["max_eval"] - current_evals)
            self._add_grad(t, d)
            return loss, flat_grad, t, evals, flat_grad.abs().max() <= group["tolerance_grad"]
        self._add_grad(t, d)
        if n_iter == group["max_iter"]:
            return loss, flat_grad, t, 0, False
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        return loss, flat_grad, t, 1, flat_grad.abs().max() <= group["tolerance_grad"]


__all__ = ["LBFGS"]
