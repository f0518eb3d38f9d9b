"""The CI budget of the differential fuzzer: fixed seeds, every backend, known bugs off.

Each seed's program (tests.fuzz.generator) runs on eager jitgrad, compile(backend="numba"),
compile(backend="eager") and the numpy reference; any mismatch fails with the program's
source and the diff. A bug class still open is turned off by its named generator feature
in KNOWN_OPEN (its repro is in the issue's note); delete the name once the fix lands.

The seeds are chosen, not a range: the suite runs from a cold kernel cache in CI, where a
program costs its numba compilations (0 to 60 s; seeds 0-79 took 12 minutes on a busy 2-core
box), and 11 of seeds 0-79 capture nothing (a tensor index made from a traced value runs the
whole frame eagerly) while still paying for eager runs. SEEDS is a greedy cover weighted by
cold cost over those of seeds 0-108 whose graphs capture at least 3 ops: every feature used
at least FEATURE_USES times where that pool has it; plus 245 and 408 (the two cheapest of
the 45 in 0-1999 that use enable_grad_in_no_grad), 345 (a "big" program that compiles, for
the kernels' parallel paths), 10 and 88 (error programs: compiled must raise eager's class),
28 and 79 (NaN through relu/clamp: seeded with a kernel maximum that drops NaN, seeds 28,
43, 63 and 79 of 0-79 fail and none of the cover does; with exp 1e-4 too high, 18 and 19 of
the cover fail). About a quarter of the cost of seeds 0-79. Turning a feature off in
KNOWN_OPEN changes the seeds' programs; the coverage test then names the features to find
seeds for (`python -m tests.fuzz` prints each feature's coverage).
"""

import collections

import pytest

from tests.fuzz import campaign
from tests.fuzz.generator import FEATURES, generate

KNOWN_OPEN: dict[str, str] = {}  # feature name -> the open bug it would find
SEEDS = (0, 2, 3, 8, 9, 10, 12, 13, 14, 18, 19, 23, 24, 26, 28, 37, 42, 45, 48, 49, 60, 67, 69,
         79, 86, 88, 91, 96, 101, 103, 105, 106, 245, 345, 408)
FEATURE_USES = 3
# features no seed of 0-1999 uses: "indexing" is not recorded by any builder (basic indexing
# is "views"), "index_empty_grad" needs an index into an empty tensor that requires grad
NOT_GENERATED = frozenset({"indexing", "index_empty_grad"})
# features fewer than FEATURE_USES seeds of the pool use
RARE = frozenset({"big", "bool_mask", "empty", "enable_grad_in_no_grad", "error_programs",
                  "inplace_empty"})


@pytest.mark.parametrize("seed", SEEDS)
def test_program_matches_eager_on_every_backend(seed):
    program = generate(seed, FEATURES - set(KNOWN_OPEN))
    found = campaign.check(program, ["numba", "compiled_eager", "numpy"])
    assert not found, f"{program.source}\n{found}"


def test_the_seeds_use_every_feature():
    uses = collections.Counter(feature for seed in SEEDS
                               for feature in generate(seed, FEATURES - set(KNOWN_OPEN)).used)
    enabled = FEATURES - set(KNOWN_OPEN) - NOT_GENERATED
    missing = sorted(f for f in enabled if uses[f] < (1 if f in RARE else FEATURE_USES))
    assert not missing, f"features the CI seeds use too rarely: {missing} ({dict(uses)})"
