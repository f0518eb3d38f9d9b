"""A job that must end non-zero, quickly, with the failing rank's error (test_two_ranks.py).

`raise`: rank 1 raises while rank 0 waits in all_reduce (MPI_Abort ends rank 0).
`timeout`: rank 1 never joins the all_reduce; rank 0's collective times out after 1 s.
"""

from __future__ import annotations

import datetime
import sys
import time

import jitgrad
import jitgrad.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=1))
if dist.get_rank() == 1:
    if sys.argv[1] == "raise":
        raise ValueError("rank 1 cannot load its shard")
    time.sleep(30)
dist.all_reduce(jitgrad.ones(4))
