"""The test suite and the fuzz campaign (`python -m tests.fuzz`) give every fusion group a
kernel: they test the kernels on small inputs, which the numba backend would otherwise run
as their ops' numpy forwards (Note [Groups too small for a kernel] in
jitgrad/codegen/launch_cost.py; tests/codegen/test_launch_cost.py turns the rule back on to
test it). Set in the environment before jitgrad is imported, so subprocesses the tests
start (cache, cold-compile and example tests) see it too; run with
JITGRAD_SMALL_GROUPS_AS_NUMPY=1 to test everything with the rule on."""

import os

os.environ.setdefault("JITGRAD_SMALL_GROUPS_AS_NUMPY", "0")
