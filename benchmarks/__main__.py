"""Run every benchmark of the project on one thread and print one table of ratios.

    python -m benchmarks [--quick] [NAME ...]

Each registered module's own `main()` runs in turn (its detailed tables are printed as it
goes); every table it prints through `harness.print_table` is collected, and the summary
at the end lists each jitgrad variant's time with its ratio to numpy and, when torch is
installed, to torch eager and torch.compile on the same benchmark. A ratio is jitgrad's
time divided by the other's: below 1.00 jitgrad is faster. `--quick` times at most 3
rounds of a fifth of the calls (noisier, for a look in about a minute); NAME restricts the
run to some of the registered modules.

BLAS, OpenMP and Numba are pinned to one thread by `benchmarks.harness` before numpy
loads, torch by `harness.try_import_torch`.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import platform
import sys
import time
import traceback

from benchmarks import harness  # before numpy is imported: pins the thread counts

# The benchmark modules, in running order: (module under benchmarks/, required). A new
# benchmark module is added here; optional ones are run when they exist.
BENCHMARKS: tuple[tuple[str, bool], ...] = (
    ("eager_overhead", True),
    ("compile_overhead", True),
    ("codegen_pointwise", True),
    ("codegen_reductions", True),
    ("train_step", True),
    ("cold_compile", True),
    ("lstm_lm", True),
    ("distributed", True),
    ("dynamic_shapes", True),
)

Table = tuple[str, list[tuple[str, float]], str]


def reference_for(variant: str, times: dict[str, float], family: str) -> str | None:
    """The row of `family` ("torch eager" or "torch.compile") to compare `variant` with:
    the one with the same qualifier in parentheses when there is one ("jitgrad eager
    (recording)" -> "torch eager (recording)"), else the plain or inductor row."""
    qualifier = variant[variant.index("("):] if "(" in variant else ""
    for name in (f"{family} {qualifier}".strip(), family, f"{family} (inductor)"):
        if name in times:
            return name
    return next((name for name in times if name.startswith(family)), None)


def ratio(value: float, times: dict[str, float], reference: str | None) -> str:
    return f"{value / times[reference]:.2f}x" if reference is not None else "-"


def print_summary(tables: list[Table]) -> None:
    """One table: per benchmark, each jitgrad variant's time and its ratios."""
    header = (f"{'variant':<36}{'time':>16}{'vs numpy':>11}{'vs torch eager':>16}"
              f"{'vs torch.compile':>18}")
    print("\n" + "=" * len(header))
    print("Summary: jitgrad time / other's time (below 1.00x jitgrad is faster), 1 thread")
    print(header)
    for title, rows, unit in tables:
        times = dict(rows)
        print(title)
        for variant, value in rows:
            if not variant.startswith("jitgrad"):
                continue
            numpy_ref = "numpy" if "numpy" in times else None
            print(f"  {variant:<34}{value:>10.2f} {unit:<5}"
                  f"{ratio(value, times, numpy_ref):>11}"
                  f"{ratio(value, times, reference_for(variant, times, 'torch eager')):>16}"
                  f"{ratio(value, times, reference_for(variant, times, 'torch.compile')):>18}")


def print_environment(torch_version: str | None) -> None:
    import numba
    import numpy

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"python {platform.python_version()}, numpy {numpy.__version__}, numba "
          f"{numba.__version__}, torch {torch_version or 'not installed'}; "
          f"{os.cpu_count()} cores, load average {load:.2f}; threads pinned to 1")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; returns the exit status (1 if a module failed)."""
    names = [name for name, _ in BENCHMARKS]
    parser = argparse.ArgumentParser(prog="python -m benchmarks",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer rounds and calls per timing (noisier, much shorter)")
    parser.add_argument("only", nargs="*", metavar="NAME",
                        help=f"run only these modules (of {', '.join(names)})")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.only) - set(names))
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(names)}")
    harness.set_quick(args.quick)
    torch = harness.try_import_torch()
    print_environment(None if torch is None else torch.__version__)
    tables = harness.record_tables()
    failed: list[str] = []
    for name, required in BENCHMARKS:
        if args.only and name not in args.only:
            continue
        if not required and importlib.util.find_spec(f"benchmarks.{name}") is None:
            print(f"\n(benchmarks.{name} is not present; skipped)")
            continue
        print(f"\n##### benchmarks.{name}")
        start = time.perf_counter()
        # One module's failure (an import, a mismatch check, a crash in jitgrad) is
        # reported and the others still run; the exit status says something failed.
        try:
            importlib.import_module(f"benchmarks.{name}").main()
        except Exception:  # any failure of a benchmark module is reported, see above
            traceback.print_exc()
            failed.append(name)
        print(f"(benchmarks.{name} took {time.perf_counter() - start:.0f} s)")
    print_summary(tables)
    if failed:
        print(f"\nFAILED: {', '.join(f'benchmarks.{name}' for name in failed)} "
              "(tracebacks above; their tables up to the failure are in the summary)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
