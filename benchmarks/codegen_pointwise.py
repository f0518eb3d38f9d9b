"""Fused pointwise kernels: what the numba backend buys over eager, per size.

Two float32 functions of one tensor, at 2^12 (L1/L2), 2^18 (L2/L3) and 2^24 (DRAM)
elements:
- tanh-GELU, `0.5*x*(1+tanh(0.79788456*(x+0.044715*x**3)))`: 8 eager ops;
- a 10-op chain mixing arithmetic, tanh, sigmoid, exp and relu (`chain10`).
Variants, all on one thread and timed round-robin in the same run (benchmarks.harness):
numpy (one ufunc per op), jitgrad eager, jitgrad compiled (backend="numba": one fused
kernel), and torch eager / torch.compile (inductor) when torch is installed. Beside them,
np.copyto of the same size gives the machine's copy bandwidth, and each compiled variant's
effective bandwidth counts one read of x and one write of the result (8 bytes/element),
so a kernel at the copy bandwidth is memory-bound, and one far below it compute-bound.
Before timing, every variant's result is checked against numpy's (rtol 1e-4).

Run: python -m benchmarks.codegen_pointwise
"""

from __future__ import annotations

import numpy as np
from scipy import special

from benchmarks.harness import interleaved_medians, print_table, try_import_torch

SIZES = (1 << 12, 1 << 18, 1 << 24)
BYTES_PER_ELEMENT = 8  # float32: read x, write the result


def gelu_tanh(x):
    return 0.5 * x * (1 + (0.79788456 * (x + 0.044715 * x**3)).tanh())


def chain10(x):
    y = x * 0.5
    y = y + 1.0
    y = y.tanh()
    y = y * x
    y = y - 0.25
    y = y.sigmoid()
    y = y * 2.0
    y = y.exp()
    y = y + x
    return y.relu()


def gelu_tanh_numpy(x):
    return 0.5 * x * (1 + np.tanh(0.79788456 * (x + 0.044715 * x**3)))


def chain10_numpy(x):
    y = x * np.float32(0.5)
    y = y + np.float32(1.0)
    y = np.tanh(y)
    y = y * x
    y = y - np.float32(0.25)
    y = special.expit(y)
    y = y * np.float32(2.0)
    y = np.exp(y)
    y = y + x
    return np.maximum(y, np.float32(0))


FUNCTIONS = {"tanh-GELU (8 ops)": (gelu_tanh, gelu_tanh_numpy),
             "10-op chain": (chain10, chain10_numpy)}


def variants(fn, fn_numpy, data: np.ndarray) -> dict:
    """name -> zero-argument callable, each checked against numpy's result first."""
    import jitgrad as jg

    x = jg.tensor(data)
    compiled = jg.compile(fn, backend="numba")
    expected = fn_numpy(data)
    runs = {"numpy": lambda: fn_numpy(data), "jitgrad eager": lambda: fn(x),
            "jitgrad compiled (numba)": lambda: compiled(x)}
    to_numpy = {"numpy": np.asarray, "jitgrad eager": lambda t: t.numpy(),
                "jitgrad compiled (numba)": lambda t: t.numpy()}
    torch = try_import_torch()
    if torch is not None:
        xt = torch.from_numpy(data)
        compiled_torch = torch.compile(fn)
        runs["torch eager"] = lambda: fn(xt)
        runs["torch.compile (inductor)"] = lambda: compiled_torch(xt)
        to_numpy["torch eager"] = to_numpy["torch.compile (inductor)"] = lambda t: t.numpy()
    for name, run in runs.items():
        np.testing.assert_allclose(to_numpy[name](run()), expected, rtol=1e-4, atol=1e-6,
                                   err_msg=f"{name} disagrees with numpy")
    copy_target = np.empty_like(data)
    runs["np.copyto (bandwidth)"] = lambda: np.copyto(copy_target, data)
    return runs


def main() -> None:
    rng = np.random.default_rng(0)
    for size in SIZES:
        data = rng.uniform(-3, 3, size).astype(np.float32)
        number = max(1, (1 << 19) // size)
        rounds = 15 if size < (1 << 24) else 7
        for title, (fn, fn_numpy) in FUNCTIONS.items():
            medians = interleaved_medians(variants(fn, fn_numpy, data), number, rounds)
            rows = [(name, seconds * 1e6) for name, seconds in medians.items()]
            print_table(f"{title}, {size} float32 elements (2^{size.bit_length() - 1}), "
                        "1 thread, median", rows, "us/call", "numpy")
            gigabytes = size * BYTES_PER_ELEMENT / 1e9
            for name in ("np.copyto (bandwidth)", "jitgrad compiled (numba)",
                         "torch.compile (inductor)"):
                if name in medians:
                    print(f"  {name + ' effective':<46}{gigabytes / medians[name]:>8.1f} GB/s")


if __name__ == "__main__":
    main()
