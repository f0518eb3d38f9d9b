"""What a first call costs: the cold compile of a training step, and the warm-cache start.

The step: an MLP of L blocks (Linear 128, LayerNorm, GELU) on a batch of 64 x 128, a
Linear head to 10 classes, cross-entropy, `zero_grad`, `backward`, AdamW step, under
`jitgrad.compile(backend="numba")` or `torch.compile` (inductor). Each figure is one
fresh Python process (imports excluded), so nothing is shared between them:
1. cold: empty kernel caches (JITGRAD_CACHE_DIR and NUMBA_CACHE_DIR for jitgrad,
   TORCHINDUCTOR_CACHE_DIR and a fresh Triton/FX cache for torch), the first call's time,
   for L = 1 and L = 8; with the number of kernel files jitgrad wrote.
2. warm: a new process on the cache the cold run of L = 1 left, the first two calls.
Issue 12 aims: the cold compile <= 0.1x torch.compile's; depth 8 <= 1.5x depth 1; warm
first two calls <= 0.5 s.

Run: python -m benchmarks.cold_compile
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.harness import is_quick, print_table, try_import_torch

DEPTHS = (1, 8)

# One process: build the step, time its first `calls` calls, print them as JSON.
_CHILD = r'''
import json, sys, time
import numpy as np
library, depth, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if library == "torch":
    import torch as lib
    lib.set_num_threads(1)
    compile_step = lib.compile
else:
    import jitgrad as lib
    compile_step = lambda fn: lib.compile(fn, backend="numba")
nn = lib.nn
lib.manual_seed(0)
layers = []
for _ in range(depth):
    layers += [nn.Linear(128, 128), nn.LayerNorm(128), nn.GELU()]
model = nn.Sequential(*layers, nn.Linear(128, 10))
optimizer = lib.optim.AdamW(model.parameters(), lr=1e-3)

def step(x, y):
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss

rng = np.random.default_rng(0)
x = lib.tensor(rng.standard_normal((64, 128)).astype(np.float32))
y = lib.tensor(rng.integers(0, 10, 64))
compiled = compile_step(step)
times = []
for _ in range(calls):
    start = time.perf_counter()
    compiled(x, y)
    times.append(time.perf_counter() - start)
print(json.dumps(times))
'''


def first_calls(library: str, depth: int, calls: int, env: dict[str, str]) -> list[float]:
    """Seconds of each of the first `calls` calls in a fresh process with `env` added."""
    done = subprocess.run([sys.executable, "-c", _CHILD, library, str(depth), str(calls)],
                          env={**os.environ, **env, "OMP_NUM_THREADS": "1",
                               "NUMBA_NUM_THREADS": "1"},
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def jitgrad_env(cache: Path) -> dict[str, str]:
    return {"JITGRAD_CACHE_DIR": str(cache / "jitgrad"), "NUMBA_CACHE_DIR": str(cache / "numba")}


def torch_env(cache: Path) -> dict[str, str]:
    return {"TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
            "TRITON_CACHE_DIR": str(cache / "triton"), "TORCHINDUCTOR_FX_GRAPH_CACHE": "1"}


def kernel_files(cache: Path) -> int:
    return sum(1 for _ in (cache / "jitgrad").rglob("*.py"))


def main() -> None:
    torch = try_import_torch()
    depths = DEPTHS[:1] if is_quick() else DEPTHS
    warm_rows: list[tuple[str, float]] = []
    for depth in depths:
        rows = []
        with tempfile.TemporaryDirectory() as directory:
            cache = Path(directory)
            (cold,) = first_calls("jitgrad", depth, 1, jitgrad_env(cache))
            files = kernel_files(cache)
            rows.append((f"jitgrad compiled (cold, {files} kernel files)", cold))
            if depth == depths[0]:
                warm = first_calls("jitgrad", depth, 2, jitgrad_env(cache))
                warm_rows.append(("jitgrad compiled (warm cache)", sum(warm)))
        if torch is not None:
            with tempfile.TemporaryDirectory() as directory:
                (cold,) = first_calls("torch", depth, 1, torch_env(Path(directory)))
                rows.append(("torch.compile (inductor, cold)", cold))
                if depth == depths[0]:
                    warm = first_calls("torch", depth, 2, torch_env(Path(directory)))
                    warm_rows.append(("torch.compile (inductor, warm cache)", sum(warm)))
        reference = rows[-1][0]
        print_table(f"Cold compile, first call of the MLP+AdamW step, depth L = {depth}, "
                    "fresh process, empty caches", rows, "s", reference)
    print_table("New process on a warm cache, first two calls of the depth-1 step", warm_rows,
                "s", warm_rows[-1][0])


if __name__ == "__main__":
    main()
