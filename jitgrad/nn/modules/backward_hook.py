"""Full backward hooks of a Module call (`Module.register_full_backward_hook`).

As torch/utils/hooks.py's BackwardHook: the tensor arguments that require grad and the
tensor outputs of one module call each pass through an identity autograd Function.
When backward reaches the outputs' identity node, it records `grad_output`; when it
reaches the inputs' identity node, it calls every hook with
`hook(module, grad_input, grad_output)`, and a hook's non-None return replaces
`grad_input`. `grad_input` has one entry per positional argument of the call: None for
non-tensors, zeros for tensors that do not require grad (they pass through the identity
as non-differentiable outputs, as in PyTorch). When no argument requires grad, the hooks
run when `grad_output` is known, with `grad_input` all None.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jitgrad.eager.function import Function
from jitgrad.eager.tensor import Tensor


class _HookIdentity(Function):
    """Identity on tensors whose backward hands the gradients to `callback` first."""

    @staticmethod
    def forward(ctx: Any, callback: Callable, *tensors: Tensor) -> tuple[Tensor, ...]:
        ctx.callback = callback
        outputs = tuple(t.clone() for t in tensors)
        ctx.mark_non_differentiable(*[o for o, t in zip(outputs, tensors, strict=True)
                                      if not t.requires_grad])
        return outputs

    @staticmethod
    def backward(ctx: Any, *grads: Tensor) -> tuple:
        return (None, *ctx.callback(grads))


class BackwardHook:
    """The backward hooks of one module call: wraps its inputs and outputs."""

    def __init__(self, module: Any, hooks: list[Callable]) -> None:
        self.module = module
        self.hooks = hooks
        self.n_args = 0
        self.hooked_positions: list[int] = []
        self.grad_output: tuple | None = None

    def setup_input(self, args: tuple) -> tuple:
        """`args` with its tensors replaced by hooked identities (when one requires grad)."""
        self.n_args = len(args)
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        if not any(args[i].requires_grad for i in positions):
            return args
        self.hooked_positions = positions
        hooked = _HookIdentity.apply(self._on_grad_input,
                                     *[args[i] for i in self.hooked_positions])
        replaced = list(args)
        for i, t in zip(self.hooked_positions, hooked, strict=True):
            replaced[i] = t
        return tuple(replaced)

    def setup_output(self, output: Any) -> Any:
        """`output` (a Tensor or a tuple) with its tensors replaced by hooked identities."""
        is_tensor = isinstance(output, Tensor)
        items = (output,) if is_tensor else tuple(output) if isinstance(output, tuple) else ()
        positions = [i for i, o in enumerate(items) if isinstance(o, Tensor)]
        if not any(items[i].requires_grad for i in positions):
            return output
        hooked = _HookIdentity.apply(self._on_grad_output, *[items[i] for i in positions])
        replaced = list(items)
        for i, t in zip(positions, hooked, strict=True):
            replaced[i] = t
        return replaced[0] if is_tensor else type(output)(replaced)

    def _on_grad_output(self, grads: tuple) -> tuple:
        self.grad_output = grads
        if not self.hooked_positions:
            self._run_hooks((None,) * self.n_args)
        return grads

    def _on_grad_input(self, grads: tuple) -> tuple:
        grad_input: list[Any] = [None] * self.n_args
        for i, g in zip(self.hooked_positions, grads, strict=True):
            grad_input[i] = g
        result = self._run_hooks(tuple(grad_input))
        return tuple(result[i] for i in self.hooked_positions)

    def _run_hooks(self, grad_input: tuple) -> tuple:
        for hook in self.hooks:
            replaced = hook(self.module, grad_input, self.grad_output)
            if replaced is None:
                continue
            replaced = tuple(replaced) if isinstance(replaced, (tuple, list)) else (replaced,)
            if len(replaced) != len(grad_input):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got "
                                   f"{len(replaced)}, but expected {len(grad_input)}")
            grad_input = replaced
        return grad_input
