"""Fuzz campaign: `python -m tests.fuzz --programs 10000 --seed S [--jobs N] [--backends ...]`.

Generates programs `seed .. seed + programs - 1`, checks each on the backends, shrinks and
saves each failure under `--out` (see tests.fuzz.campaign), and prints figures: programs,
time per program, mismatches per label (backend:kind), fuzzer errors, feature coverage.
`--torch [PYTHON]` adds real torch (run by that interpreter) as a backend compared with
eager jitgrad. `--known-off` turns off the features of tests.fuzz.test_fuzz.KNOWN_OPEN;
`--off a,b` turns off more. `--replay DIR` re-runs a saved failure and prints its diff.
Every fusion group gets a kernel, however small, since the kernels are what the campaign
tests; `--small-groups-as-numpy` runs the shipped rule instead (Note [Groups too small for
a kernel] in jitgrad/codegen/launch_cost.py).
"""

import argparse
import collections
import multiprocessing
import os
import pickle
import sys
import tempfile
import time

from tests.fuzz import campaign
from tests.fuzz.work import init_worker, one

TORCH_PYTHON = "/work/torchref/bin/python"


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n")[0])
    p.add_argument("--programs", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--backends", default="numba,compiled_eager,numpy")
    p.add_argument("--torch", nargs="?", const=TORCH_PYTHON, default=None, metavar="PYTHON")
    p.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "jitgrad_fuzz_failures"))
    p.add_argument("--known-off", action="store_true")
    p.add_argument("--off", default="")
    p.add_argument("--no-shrink", action="store_true")
    p.add_argument("--replay", default=None, metavar="DIR")
    p.add_argument("--small-groups-as-numpy", action="store_true")
    return p.parse_args(argv)


def summarize(rows, wall: float) -> None:
    ok = [r for r in rows if "error" not in r]
    per_label = collections.Counter(lab for r in ok for lab in r["labels"])
    coverage = collections.Counter(f for r in ok for f in r["used"])
    print(f"programs {len(rows)}  wall {wall:.0f} s  "
          f"check time per program {sum(r['time'] for r in ok) / max(len(ok), 1):.2f} s")
    print(f"with numpy reference {sum(r['numpy'] for r in ok)}  "
          f"error programs {sum(r['raises'] for r in ok)}  "
          f"failing programs {sum(bool(r['labels']) for r in ok)}")
    print("mismatches per label:")
    for label, n in per_label.most_common():
        seeds = [r["seed"] for r in ok if label in r["labels"]][:8]
        print(f"  {label:40s} {n:5d}  seeds {seeds}")
    errors = [r for r in rows if "error" in r]
    print(f"fuzzer errors {len(errors)}" + "".join(
        f"\n  seed {r['seed']}: {r['error'].strip().splitlines()[-1]}" for r in errors[:10]))
    print("feature coverage: " + ", ".join(f"{f} {n}" for f, n in sorted(coverage.items())))


def replay(path: str, backends) -> None:
    with open(f"{path}/programs.pkl", "rb") as f:
        programs = pickle.load(f)
    for name, program in programs.items():
        print(f"--- {name}\n{program.source}")
        for backend, diff in campaign.check(program, backends).items():
            print(f"{backend}: call {diff[0]}: {diff[1]}")


def main(argv=None) -> None:
    args = parse(argv if argv is not None else sys.argv[1:])
    if args.replay:
        replay(args.replay, [b for b in args.backends.split(",") if b])
        return
    seeds = range(args.seed, args.seed + args.programs)
    start = time.perf_counter()
    rows = []
    if args.jobs == 1:
        init_worker(args)
        for i, seed in enumerate(seeds):
            rows.append(one(seed))
            if rows[-1].get("labels") or (i + 1) % 50 == 0:
                print(f"[{i + 1}/{len(seeds)}] seed {seed} {rows[-1].get('labels', '')}",
                      flush=True)
    else:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(args.jobs, initializer=init_worker, initargs=(args,)) as pool:
            rows = list(pool.imap_unordered(one, seeds))
    summarize(sorted(rows, key=lambda r: r["seed"]), time.perf_counter() - start)


if __name__ == "__main__":
    main()
