"""What @jitgrad.compile costs: per cached call, and to trace a 200-op function.

1. Cached-call overhead: a compiled `x + 1` on an 8-element float32 tensor versus the
   same eager call, i.e. guard + runner + graph dispatch (eager backend). Beside it,
   torch eager and torch.compile (backend="eager" and the default inductor) when torch
   is installed, all on one thread, timed in the same run. Aim (issue 3): <= 5 us added
   per cached call (torch.compile adds about 18 us on these machines).
2. Trace time: the first call of a 200-op pointwise chain (trace + guards + eager
   backend), median of fresh compiles.

Run: python -m benchmarks.compile_overhead
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from benchmarks.harness import interleaved_medians, print_table, try_import_torch


def add_one(x):
    return x + 1


def chain_200(x):
    for _ in range(100):
        x = (x * 1.01).tanh()
    return x


def cached_call_variants() -> dict:
    import jitgrad as jg

    data = np.random.default_rng(0).uniform(-1, 1, 8).astype(np.float32)
    x = jg.tensor(data)
    compiled = jg.compile(add_one)
    compiled(x)
    variants = {"jitgrad eager": lambda: add_one(x), "jitgrad compiled (eager backend)":
                lambda: compiled(x)}
    torch = try_import_torch()
    if torch is not None:
        xt = torch.tensor(data)
        compiled_eager = torch.compile(add_one, backend="eager")
        compiled_inductor = torch.compile(add_one)
        compiled_eager(xt)
        compiled_inductor(xt)
        variants["torch eager"] = lambda: add_one(xt)
        variants["torch.compile (eager backend)"] = lambda: compiled_eager(xt)
        variants["torch.compile (inductor)"] = lambda: compiled_inductor(xt)
    return variants


def trace_time_ms(repeats: int = 7) -> float:
    import jitgrad as jg

    x = jg.tensor(np.ones(8, np.float32))
    times = []
    for _ in range(repeats):
        jg.reset()
        compiled = jg.compile(chain_200)
        start = time.perf_counter()
        compiled(x)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    medians = interleaved_medians(cached_call_variants(), number=2000)
    rows = [(name, seconds * 1e6) for name, seconds in medians.items()]
    print_table("Cached call of f(x) = x + 1 on 8 float32 elements (1 thread, median)", rows,
                "us/call", "jitgrad eager")
    added = medians["jitgrad compiled (eager backend)"] - medians["jitgrad eager"]
    print(f"  jitgrad compile overhead per cached call: {added * 1e6:.2f} us")
    if "torch eager" in medians:
        for name in ("torch.compile (eager backend)", "torch.compile (inductor)"):
            extra = medians[name] - medians["torch eager"]
            print(f"  {name} overhead per cached call: {extra * 1e6:.2f} us")
    print(f"\nTrace + compile (eager backend) of a 200-op function: {trace_time_ms():.1f} ms "
          "(median of 7 fresh compiles)")


if __name__ == "__main__":
    main()
