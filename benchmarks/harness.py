"""Timing helpers shared by the benchmarks: one thread, interleaved rounds, medians.

The machines are shared and noisy, so every variant of a benchmark is timed in the
same run, round-robin (round k times each variant once), and the median over rounds is
reported together with ratios between variants, never absolute figures alone.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

# `python -m benchmarks` sets these: --quick times fewer rounds and calls (same variants),
# and every table printed while `_tables` is a list is also appended to it for the summary.
_quick = False
_tables: list[tuple[str, list[tuple[str, float]], str]] | None = None


def set_quick(quick: bool) -> None:
    """Time at most 3 rounds of a fifth of the calls per timing (for a short run)."""
    global _quick
    _quick = quick


def is_quick() -> bool:
    """Whether `python -m benchmarks --quick` asked for short timings."""
    return _quick


def record_tables() -> list[tuple[str, list[tuple[str, float]], str]]:
    """Start collecting every table printed from now on: (title, rows, unit) each."""
    global _tables
    _tables = []
    return _tables


def try_import_torch():
    """torch pinned to one thread, or None when it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    return torch


def time_per_call(fn: Callable[[], object], number: int) -> float:
    """Seconds per call of `fn`, averaged over `number` back-to-back calls."""
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def interleaved_medians(variants: dict[str, Callable[[], object]], number: int,
                        rounds: int = 15) -> dict[str, float]:
    """Median seconds per call of each variant, timed round-robin in one process."""
    if _quick:
        number, rounds = max(1, number // 5), min(rounds, 3)
    for fn in variants.values():  # warm up caches and lazy imports
        time_per_call(fn, max(1, number // 10))
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            samples[name].append(time_per_call(fn, number))
    return {name: statistics.median(values) for name, values in samples.items()}


def print_table(title: str, rows: list[tuple[str, float]], unit: str, reference: str) -> None:
    """Print `name  value  ratio-to-reference` rows."""
    ref = dict(rows)[reference]
    if _tables is not None:
        _tables.append((title, list(rows), unit))
    print(f"\n{title}")
    print(f"  {'variant':<34}{unit:>12}{'ratio to ' + reference:>28}")
    for name, value in rows:
        print(f"  {name:<34}{value:>12.2f}{value / ref:>28.2f}")
