"""One campaign worker: its settings, and the check of one seed (tests.fuzz.__main__).

A module of its own so that `spawn` workers (`--jobs N`) can import what they run.
"""

import time
import traceback

from jitgrad import config
from tests.fuzz import campaign
from tests.fuzz.generator import FEATURES, generate

STATE: dict = {}


def features_of(args) -> frozenset:
    off = {f for f in args.off.split(",") if f}
    if args.known_off:
        from tests.fuzz.test_fuzz import KNOWN_OPEN
        off |= set(KNOWN_OPEN)
    unknown = off - FEATURES
    if unknown:
        raise SystemExit(f"unknown features: {sorted(unknown)}; known: {sorted(FEATURES)}")
    return FEATURES - off


def init_worker(args) -> None:
    config.SMALL_GROUPS_AS_NUMPY = args.small_groups_as_numpy
    STATE["args"] = args
    STATE["features"] = features_of(args)
    STATE["backends"] = [b for b in args.backends.split(",") if b]
    if args.torch:
        from tests.fuzz.torch_worker import TorchWorker
        STATE["torch"] = TorchWorker(args.torch)
        STATE["backends"].append("torch")


def one(seed: int) -> dict:
    """Check one seed; shrink and save its failures. Returns figures for the summary."""
    start = time.perf_counter()
    try:
        program = generate(seed, STATE["features"])
        found = campaign.check(program, STATE["backends"], STATE.get("torch"))
    except Exception:  # a fuzzer crash is a figure, not the end of the run
        return {"seed": seed, "error": traceback.format_exc(limit=3), "time": 0.0}
    elapsed = time.perf_counter() - start
    labels = {}
    for backend, diff in found.items():
        label = campaign.label_of(backend, diff)
        shrunk = program
        if not STATE["args"].no_shrink:
            shrunk = campaign.shrink(program, backend, label, diff[0], STATE.get("torch"))
        labels[label] = campaign.save(STATE["args"].out, label, program, shrunk, diff)
    return {"seed": seed, "time": elapsed, "labels": labels, "used": sorted(program.used),
            "numpy": program.numpy_source is not None, "raises": program.expect_raise}
