"""Differential fuzzer: random programs run by eager jitgrad, both compile backends and references.

`generator` writes seeded random programs as real Python source (`def program(...)`, valid
under `import jitgrad as torch` and under real torch); `harness` turns input specs into
tensors and results into plain numpy data for any torch-like module; `runner` executes a
program on each backend (eager jitgrad, `compile(backend="numba")`, `compile(backend="eager")`,
an independent numpy reference, optionally real torch in a subprocess) and compares;
`shrink` deletes lines while a mismatch persists; `__main__` runs campaigns
(`python -m tests.fuzz --programs 10000 --seed 0`). `test_fuzz` is the small CI budget.
"""
