"""Fit y = sin(x) on [-pi, pi] with y ~ a + b * P3(c + d * x), where P3 is the Legendre
polynomial of degree 3 written as a custom autograd Function, by plain gradient descent.

A PyTorch program (it imports torch): jitgrad runs it through `python -m jitgrad.run`.
No randomness: the result is fixed by the starting values. Usage:
    legendre_fit.py [--steps N] [--dtype float32|float64]
"""

import argparse
import math

import torch


class Legendre3(torch.autograd.Function):
    """P3(t) = (5 t^3 - 3 t) / 2, with dP3/dt = 3 (5 t^2 - 1) / 2."""

    @staticmethod
    def forward(ctx, t):
        ctx.save_for_backward(t)
        return 0.5 * (5 * t**3 - 3 * t)

    @staticmethod
    def backward(ctx, grad_out):
        (t,) = ctx.saved_tensors
        return grad_out * 1.5 * (5 * t**2 - 1)


parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=2000)
parser.add_argument("--dtype", default="float32")
options = parser.parse_args()

dtype = getattr(torch, options.dtype)
device = torch.device("cpu")
x = torch.linspace(-math.pi, math.pi, 2000, dtype=dtype, device=device)
y = torch.sin(x)
a = torch.full((), 0.0, dtype=dtype, device=device, requires_grad=True)
b = torch.full((), -1.0, dtype=dtype, device=device, requires_grad=True)
c = torch.full((), 0.0, dtype=dtype, device=device, requires_grad=True)
d = torch.full((), 0.3, dtype=dtype, device=device, requires_grad=True)
step_size = 5e-6
losses = []
for _ in range(options.steps):
    prediction = a + b * Legendre3.apply(c + d * x)
    loss = (prediction - y).pow(2).sum()
    losses.append(loss.item())
    loss.backward()
    with torch.no_grad():
        for coefficient in (a, b, c, d):
            coefficient -= step_size * coefficient.grad
            coefficient.grad = None
print(f"loss {losses[-1]!r}: y = {a.item():.6g} + {b.item():.6g} P3({c.item():.6g} + {d.item():.6g} x)")
