"""Runs fuzz programs on real torch: a subprocess of an interpreter that has torch.

Started by `TorchWorker` (below) as `<torch python> torch_worker.py`; reads pickled
`(source, filename, calls)` requests from stdin, runs them with tests.fuzz.harness
(imported by path: this interpreter has neither jitgrad nor the project on its path), and
writes pickled call results to stdout. `graph_break()` is a no-op under torch.
The class `TorchWorker` is the client, used by the campaign under `--torch`.
"""

import os
import pickle
import struct
import subprocess
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))


def send(stream, obj) -> None:
    data = pickle.dumps(obj)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def receive(stream):
    header = stream.read(8)
    if len(header) < 8:
        raise EOFError("torch worker closed its stream")
    return pickle.loads(stream.read(struct.unpack("<Q", header)[0]))


def gelu_with_infinity(torch):
    """F.gelu that gives x for x > max / 2 and +inf at +inf (torch's vectorized kernel
    computes (1 + erf) * x * 0.5, which overflows there, and gives NaN at +inf; see the
    deliberate differences in tests.fuzz.runner). The gradient stays torch's: where()
    routes a zero into gelu's backward (NaN at +inf, as 0 * gelu'(inf))."""
    gelu = torch.nn.functional.gelu

    def patched(input, approximate="none"):
        huge = input > torch.finfo(input.dtype).max / 2 if input.is_floating_point() else \
            input != input
        return torch.where(huge, input, gelu(input, approximate=approximate))

    return patched


def float64_statistics(torch, fn, needs):
    """`fn` computed in float64 and cast back for a float32/float16 input where `needs(x)`
    (the deliberate differences in tests.fuzz.runner: jitgrad accumulates these in float64,
    torch's float32 kernels overflow)."""
    def wide(a):
        return a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a

    def in_float64(input, *args, **kwargs):
        return fn(input.double(), *map(wide, args),
                  **{k: wide(v) for k, v in kwargs.items()}).to(input.dtype)

    return value_from(torch, fn, needs, in_float64)


def value_from(torch, fn, needs, value_of, narrow_only=True):
    """`fn`, whose values for a float32/float16 input (any float input unless
    `narrow_only`) where `needs(x)` are `value_of`'s."""
    value_of_out = _value_of_class(torch)

    def patched(input, *args, **kwargs):
        kinds = (torch.float32, torch.float16) if narrow_only else (
            torch.float64, torch.float32, torch.float16)
        narrow = input.dtype in kinds and "dtype" not in kwargs
        if not narrow or not bool(needs(input)):
            return fn(input, *args, **kwargs)
        value = value_of(input, *args, **kwargs)
        if not torch.is_grad_enabled() or not input.requires_grad:
            return value
        # the shimmed value, differentiated as torch's own op on the input itself: that op
        # saves the input, so an in-place write to it after the op still makes backward
        # raise (fuzz seed 701601: a.prod(1), then a.mul_() under no_grad), and its
        # gradient is torch's, NaN and inf included (seed 950445)
        return value_of_out.apply(fn(input, *args, **kwargs), value.detach())

    return patched


def _value_of_class(torch):
    class ValueOf(torch.autograd.Function):
        """`value` forward; backward: the gradient goes to `out` as it is."""

        @staticmethod
        def forward(ctx, out, value):
            return value.clone()

        @staticmethod
        def backward(ctx, grad):
            return grad, None

    return ValueOf


def _finite_abs_max(x):
    finite = x[x.isfinite()]
    return finite.abs().max() if finite.numel() else x.new_zeros(())


def prod_in_float64(torch, fn):
    """prod of a float32 slice holding a zero whose other partial products overflow: torch
    multiplies in float32 lanes, meets inf * 0 and gives NaN (which lanes depends on the
    CPU's vector width); jitgrad multiplies in float64 and gives 0."""
    return float64_statistics(torch, fn, lambda x: (x == 0).any() & (
        _finite_abs_max(x) > 1.0))


def layer_norm_in_input_dtype(torch, fn):
    """layer_norm of rows whose squares overflow their dtype: torch's kernel gives NaN rows;
    jitgrad computes eager's two passes in the input's dtype, `(x - mean) / sqrt(var +
    eps)` with the mean of the squared deviations, so an overflowing variance is inf and
    the row 0 (fuzz seed 701709)."""
    def two_pass(input, normalized_shape, weight=None, bias=None, eps=1e-5):
        dims = tuple(range(input.dim() - len(normalized_shape), input.dim()))
        centered = input - input.mean(dims, keepdim=True)
        out = centered / torch.sqrt((centered * centered).mean(dims, keepdim=True) + eps)
        out = out if weight is None else out * weight
        return out if bias is None else out + bias

    # squares overflow past sqrt(max): 1.8e19 in float32, 1.3e154 in float64 (seed 990166)
    return value_from(torch, fn, lambda x: _finite_abs_max(x) > torch.finfo(x.dtype).max ** 0.5
                      / 16, two_pass, narrow_only=False)


def _gelu(torch, fn):
    return gelu_with_infinity(torch)


def first_zero_of_ties(torch, fn):
    """torch.maximum/minimum where both operands are zeros: torch's vectorized loop gives
    the second operand's zero and its scalar loop the first's (which elements take which
    path depends on the length and the CPU's vector width); jitgrad always gives the
    first's. -0.0 and 0.0 part through 1/x (campaign seed 1046568). The first's, where
    both are zeros; the gradient stays torch's."""
    value_of_out = _value_of_class(torch)

    def patched(input, other, *args, **kwargs):
        out = fn(input, other, *args, **kwargs)
        if not (isinstance(input, torch.Tensor) and isinstance(other, torch.Tensor)
                and out.is_floating_point()):
            return out
        ties = (input == 0) & (other == 0)
        if not bool(ties.any()):
            return out
        value = torch.where(ties, input.detach().to(out.dtype), out.detach())
        return value_of_out.apply(out, value) if out.requires_grad else value

    return patched


# (namespace under torch, name) -> shim factory(torch, original)
TORCH_QUIRKS = {("nn.functional", "gelu"): _gelu,
                ("nn.functional", "layer_norm"): layer_norm_in_input_dtype,
                ("", "prod"): prod_in_float64, ("Tensor", "prod"): prod_in_float64,
                ("", "maximum"): first_zero_of_ties, ("", "minimum"): first_zero_of_ties}


def install_quirks(torch) -> None:
    """Replace each function of TORCH_QUIRKS on `torch` with its shim."""
    for (namespace, name), shim in TORCH_QUIRKS.items():
        owner = torch
        for part in filter(None, namespace.split(".")):
            owner = getattr(owner, part)
        setattr(owner, name, shim(torch, getattr(owner, name)))


def serve() -> None:
    sys.path.insert(0, HERE)
    import harness
    import numpy as np
    import torch

    torch.set_num_threads(1)
    install_quirks(torch)
    while True:
        try:
            source, filename, calls = receive(sys.stdin.buffer)
        except EOFError:
            return
        fn, sink = harness.load_program(torch, source, filename, lambda: None)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            results = [harness.run_call(torch, fn, call, sink) for call in calls]
        send(sys.stdout.buffer, results)


class TorchWorker:
    """Client of one torch subprocess; `run(program)` returns its call results."""

    def __init__(self, python: str):
        self.process = subprocess.Popen([python, os.path.join(HERE, "torch_worker.py")],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def run(self, program) -> list[dict]:
        send(self.process.stdin, (program.source, program.filename, program.calls))
        return receive(self.process.stdout)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


if __name__ == "__main__":
    serve()
