"""What @jitgrad.compile costs: per cached call, and to trace a 200-op function.

1. Cached-call overhead: a compiled `x + 1` on an 8-element float32 tensor versus the
   same eager call, i.e. guard + runner + graph (numba backend, where the add is too small
   for a kernel and runs as numpy's add; and the eager backend, which runs eager ops).
   Beside it, torch eager and torch.compile (backend="eager" and the default inductor)
   when torch is installed, all on one thread, timed in the same run. Aim (issue 3): <= 5
   us added per cached call (torch.compile adds about 18 us on these machines).
2. Small groups: a chain of 1-3 pointwise ops over 1 to 32768 elements as one kernel
   launch and as the ops' numpy forwards, with the form Note [Groups too small for a
   kernel] (jitgrad/codegen/launch_cost.py) chooses: the rule should pick the faster one,
   except near the crossover and where its per-element bound is deliberately cautious.
3. Trace time: the first call of a 200-op pointwise chain (trace + guards + eager
   backend), median of fresh compiles.

Run: python -m benchmarks.compile_overhead
"""

from __future__ import annotations

import math
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
    compiled_eager = jg.compile(add_one, backend="eager")
    compiled(x)
    compiled_eager(x)
    variants = {"jitgrad eager": lambda: add_one(x), "jitgrad compiled (numba)":
                lambda: compiled(x), "jitgrad compiled (eager backend)":
                lambda: compiled_eager(x)}
    torch = try_import_torch()
    if torch is not None:
        xt = torch.tensor(data)
        torch_eager_backend = torch.compile(add_one, backend="eager")
        compiled_inductor = torch.compile(add_one)
        torch_eager_backend(xt)
        compiled_inductor(xt)
        variants["torch eager"] = lambda: add_one(xt)
        variants["torch.compile (eager backend)"] = lambda: torch_eager_backend(xt)
        variants["torch.compile (inductor)"] = lambda: compiled_inductor(xt)
    return variants


def chain_of(ops: int, step):
    """A chain of `ops` calls of `step` (its own closure, so its own compiled cache)."""
    def chain(x):
        for _ in range(ops):
            x = step(x)
        return x
    return chain


SMALL_GROUP_CHAINS = (("x * 1.5", lambda x: x * 1.5, [(1, 2, 3), (1, 64, 512, 4096, 32768)]),
                      ("x.tanh()", lambda x: x.tanh(), [(1,), (1, 64, 512, 4096)]))


def small_group_rows() -> list[str]:
    """Kernel against numpy forwards for short chains, and the rule's choice."""
    import jitgrad as jg
    from jitgrad import config
    from jitgrad.codegen import launch_cost

    launch_us = launch_cost.LAUNCH_US
    lines = []
    for name, step, (op_counts, sizes) in SMALL_GROUP_CHAINS:
        for ops in op_counts:
            for elements in sizes:
                x = jg.tensor(np.linspace(-1, 1, elements, dtype=np.float32))
                forms = {}
                # each form forced: every group a kernel, or no group worth one
                for form, as_numpy, launch in (("kernel", False, launch_us),
                                               ("numpy", True, math.inf)):
                    config.SMALL_GROUPS_AS_NUMPY, launch_cost.LAUNCH_US = as_numpy, launch
                    forms[form] = jg.compile(chain_of(ops, step))
                    forms[form](x)
                config.SMALL_GROUPS_AS_NUMPY, launch_cost.LAUNCH_US = True, launch_us
                calls = {k: (lambda f=f, x=x: f(x)) for k, f in forms.items()}
                medians = interleaved_medians(calls, number=500, rounds=9)
                kernel, numpy_ = (medians[k] * 1e6 for k in ("kernel", "numpy"))
                chosen = "numpy" if launch_cost.numpy_cost_us(
                    [name != "x * 1.5"] * ops, elements) < launch_cost.kernel_cost_us(
                    elements) else "kernel"
                faster = "numpy" if numpy_ < kernel else "kernel"
                lines.append(f"  {ops} x {name:<8} on {elements:>5} elements: kernel "
                             f"{kernel:6.2f} us, numpy {numpy_:6.2f} us; rule: {chosen:<6}"
                             f"{'' if chosen == faster else ' (the other was faster)'}")
    return lines


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
    for name in ("jitgrad compiled (numba)", "jitgrad compiled (eager backend)"):
        added = medians[name] - medians["jitgrad eager"]
        print(f"  {name} overhead per cached call: {added * 1e6:.2f} us")
    if "torch eager" in medians:
        for name in ("torch.compile (eager backend)", "torch.compile (inductor)"):
            extra = medians[name] - medians["torch eager"]
            print(f"  {name} overhead per cached call: {extra * 1e6:.2f} us")
    print("\nSmall fusion groups: a short chain as one kernel vs as numpy ops, float32, "
          "1 thread, median")
    print("\n".join(small_group_rows()))
    print(f"\nTrace + compile (eager backend) of a 200-op function: {trace_time_ms():.1f} ms "
          "(median of 7 fresh compiles)")


if __name__ == "__main__":
    main()
