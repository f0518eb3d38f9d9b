"""jitgrad's benchmarks: run `python -m benchmarks.<name>` (never part of the test suite).

Every benchmark runs on one thread: the variables are set here, before any benchmark module
imports numpy (whose BLAS reads them once, when it loads), numba or torch.
"""

import os

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "NUMBA_NUM_THREADS")
for _var in THREAD_VARIABLES:
    os.environ.setdefault(_var, "1")
