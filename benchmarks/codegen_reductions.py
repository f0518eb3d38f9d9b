"""Reductions: softmax and layer_norm over the last dim of 256x1024 float32, and var over
the last dim of 16384x1024 float32; softmax and the variance also written with
primitives (`exp(x - x.amax(-1, keepdim=True)) / sum`, `((x - x.mean(-1, keepdim=True))
** 2).mean(-1)`), as user code and the joint backward graphs write them (issue 12).

Variants, all on one thread and timed round-robin in the same run (benchmarks.harness):
numpy (the eager forward's formula, one ufunc/reduction per step), jitgrad eager, jitgrad
compiled (backend="numba": one reduction kernel, codegen/reductions.py), and torch eager
/ torch.compile (inductor) when torch is installed. Beside them, np.copyto of the input's
size gives the machine's copy bandwidth. Effective bandwidth counts the bytes a kernel
must move: one read of the input (and of weight/bias) plus one write of the result, so
softmax/layer_norm move 8 bytes per element like a copy, and var 4 (its output is one
value per row). Before timing, every variant's result is checked against numpy's (rtol
1e-4, atol 1e-5).

Run: python -m benchmarks.codegen_reductions
"""

from __future__ import annotations

import numpy as np

from benchmarks.harness import interleaved_medians, print_table, try_import_torch
from jitgrad.nn import functional as F  # noqa: N812 - the name PyTorch programs use

ROWS_SHAPE = (256, 1024)
VAR_SHAPE = (16384, 1024)


def softmax(x):
    return x.softmax(-1)


def layer_norm(x, weight, bias):
    return F.layer_norm(x, (x.shape[-1],), weight, bias)


def var(x):
    return x.var(-1)


def softmax_numpy(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layer_norm_numpy(x, weight, bias):
    centered = x - x.mean(axis=-1, keepdims=True)
    variance = (centered * centered).mean(axis=-1, keepdims=True)
    return centered / np.sqrt(variance + np.float32(1e-5)) * weight + bias


def var_numpy(x):
    return x.var(axis=-1, ddof=1)


def softmax_composed(x):
    """softmax as users and backward graphs write it: a max, a sum and three pointwise ops."""
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def var_composed(x):
    """The biased variance written with means: two reductions around a broadcast."""
    return ((x - x.mean(-1, keepdim=True)) ** 2).mean(-1)


def var_composed_numpy(x):
    return x.var(axis=-1)


FUNCTIONS = {"softmax": (softmax, softmax_numpy, ROWS_SHAPE, 1),
             "layer_norm": (layer_norm, layer_norm_numpy, ROWS_SHAPE, 3),
             "var": (var, var_numpy, VAR_SHAPE, 1),
             "softmax written as exp(x - amax) / sum": (softmax_composed, softmax_numpy,
                                                        ROWS_SHAPE, 1),
             "variance written with means": (var_composed, var_composed_numpy, ROWS_SHAPE, 1),
             "variance written with means (large)": (var_composed, var_composed_numpy,
                                                     VAR_SHAPE, 1)}


def torch_function(name: str, torch):
    if FUNCTIONS[name][0] in (softmax_composed, var_composed):
        return FUNCTIONS[name][0]  # the same tensor methods
    if name == "layer_norm":
        return lambda x, w, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)
    if name == "var":
        return lambda x: x.var(-1)
    return softmax


def variants(name: str, arrays: tuple[np.ndarray, ...]) -> dict:
    """variant name -> zero-argument callable, each checked against numpy's result first."""
    import jitgrad as jg

    fn, fn_numpy, _, arity = FUNCTIONS[name]
    arrays = arrays[:arity]
    tensors = [jg.tensor(a) for a in arrays]
    compiled = jg.compile(fn, backend="numba")
    runs = {"numpy": lambda: fn_numpy(*arrays), "jitgrad eager": lambda: fn(*tensors),
            "jitgrad compiled (numba)": lambda: compiled(*tensors)}
    torch = try_import_torch()
    if torch is not None:
        torch_tensors = [torch.from_numpy(a) for a in arrays]
        torch_fn = torch_function(name, torch)
        compiled_torch = torch.compile(torch_fn)
        runs["torch eager"] = lambda: torch_fn(*torch_tensors)
        runs["torch.compile (inductor)"] = lambda: compiled_torch(*torch_tensors)
    expected = fn_numpy(*arrays)
    for variant, run in runs.items():
        result = run()
        result = result if isinstance(result, np.ndarray) else result.numpy()
        np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-5,
                                   err_msg=f"{variant} disagrees with numpy")
    copy_target = np.empty_like(arrays[0])
    runs["np.copyto (bandwidth)"] = lambda: np.copyto(copy_target, arrays[0])
    return runs


def moved_bytes(name: str, shape: tuple[int, int]) -> int:
    """Bytes the operation must read and write (see the module docstring)."""
    rows, n = shape
    if FUNCTIONS[name][0] is var_composed:
        return 4 * (rows * n + rows)
    if name == "var":
        return 4 * (rows * n + rows)
    if name == "layer_norm":
        return 4 * (2 * rows * n + 2 * n)
    return 4 * 2 * rows * n


def main() -> None:
    rng = np.random.default_rng(0)
    for name, (_, _, shape, _) in FUNCTIONS.items():
        arrays = (rng.standard_normal(shape).astype(np.float32) * 4,
                  rng.standard_normal(shape[-1]).astype(np.float32),
                  rng.standard_normal(shape[-1]).astype(np.float32))
        large = shape == VAR_SHAPE
        medians = interleaved_medians(variants(name, arrays), number=2 if large else 20,
                                      rounds=7 if large else 15)
        rows = [(variant, seconds * 1e6) for variant, seconds in medians.items()]
        print_table(f"{name} over the last dim of {shape[0]}x{shape[1]} float32, 1 thread, "
                    "median", rows, "us/call", "numpy")
        copy_bytes = 2 * 4 * shape[0] * shape[1]
        for variant, seconds in medians.items():
            moved = copy_bytes if variant.startswith("np.copyto") else moved_bytes(name, shape)
            print(f"  {variant + ' effective':<46}{moved / seconds / 1e9:>8.1f} GB/s")


if __name__ == "__main__":
    main()
