"""Row kernels: softmax and layer_norm over the last dim of a 256x1024 float32 tensor.

Variants, all on one thread and timed round-robin in the same run (benchmarks.harness):
numpy (the eager forward's formula, one ufunc/reduction per step), jitgrad eager, jitgrad
compiled (backend="numba": one row kernel, codegen/reductions.py), and torch eager /
torch.compile (inductor) when torch is installed. Beside them, np.copyto of the same size
gives the machine's copy bandwidth. Before timing, every variant's result is checked
against numpy's (rtol 1e-4, atol 1e-5).

Run: python -m benchmarks.codegen_reductions
"""

from __future__ import annotations

import numpy as np

from benchmarks.harness import interleaved_medians, print_table, try_import_torch
from jitgrad.nn import functional as F  # noqa: N812 - the name PyTorch programs use

SHAPE = (256, 1024)


def softmax(x):
    return x.softmax(-1)


def layer_norm(x, weight, bias):
    return F.layer_norm(x, (SHAPE[-1],), weight, bias)


def softmax_numpy(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layer_norm_numpy(x, weight, bias):
    centered = x - x.mean(axis=-1, keepdims=True)
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return centered / np.sqrt(var + np.float32(1e-5)) * weight + bias


def variants(name: str, arrays: tuple[np.ndarray, ...]) -> dict:
    """variant name -> zero-argument callable, each checked against numpy's result first."""
    import jitgrad as jg

    fn, fn_numpy = {"softmax": (softmax, softmax_numpy),
                    "layer_norm": (layer_norm, layer_norm_numpy)}[name]
    arrays = arrays[:1] if name == "softmax" else arrays
    tensors = [jg.tensor(a) for a in arrays]
    compiled = jg.compile(fn, backend="numba")
    runs = {"numpy": lambda: fn_numpy(*arrays), "jitgrad eager": lambda: fn(*tensors),
            "jitgrad compiled (numba)": lambda: compiled(*tensors)}
    torch = try_import_torch()
    if torch is not None:
        torch_tensors = [torch.from_numpy(a) for a in arrays]
        torch_fn = softmax if name == "softmax" else (
            lambda x, w, b: torch.nn.functional.layer_norm(x, (SHAPE[-1],), w, b))
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


def main() -> None:
    rng = np.random.default_rng(0)
    arrays = (rng.standard_normal(SHAPE).astype(np.float32) * 4,
              rng.standard_normal(SHAPE[-1]).astype(np.float32),
              rng.standard_normal(SHAPE[-1]).astype(np.float32))
    for name in ("softmax", "layer_norm"):
        medians = interleaved_medians(variants(name, arrays), number=20, rounds=15)
        rows = [(variant, seconds * 1e6) for variant, seconds in medians.items()]
        print_table(f"{name} over the last dim of {SHAPE[0]}x{SHAPE[1]} float32, 1 thread, "
                    "median", rows, "us/call", "numpy")


if __name__ == "__main__":
    main()
