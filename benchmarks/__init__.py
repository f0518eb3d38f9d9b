"""jitgrad's benchmarks: run `python -m benchmarks.<name>` (never part of the test suite)."""
