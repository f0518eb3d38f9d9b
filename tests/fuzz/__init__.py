"""Differential fuzzer: random programs run by eager jitgrad, both compile backends and references.

- `generator` writes seeded random programs as real Python source (`def program(...)`,
  valid under `import jitgrad as torch` and under real torch), statement by statement
  from `statements` and `blocks` (op texts in `ops`), each checked by running it eagerly;
  `inputs` plans the arguments and the calls (new values, grown sizes, float64, NaN/inf);
- `harness` turns input specs into tensors and results into plain numpy data, for any
  torch-like module; `runner` executes a program on eager jitgrad,
  `compile(backend="numba")`, `compile(backend="eager")` and the numpy translation;
  `torch_worker` runs it on real torch in a subprocess of another interpreter;
- `compare` applies the tolerance model (see `runner`); `campaign` checks, shrinks (line
  deletion) and saves failures; `__main__` runs campaigns:
  `python -m tests.fuzz --programs 10000 --seed 0 [--jobs N] [--torch] [--known-off]`.
- `test_fuzz` is the CI budget, with the open bug classes switched off by name
  (`KNOWN_OPEN`); `test_fuzz_machinery` tests the fuzzer itself.
"""
