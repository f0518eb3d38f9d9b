"""Guards: the conditions under which a compiled entry may be reused.

A `Guard(kind, source, expected, location)` states one assumption the trace made about a
value read from the frame (research/dynamo.md §1D, §5.5): its type, identity, value,
tensor metadata, container length or keys, the code of a called function, the absence of
a name that would shadow a builtin, or the grad mode. `location` is the user's line that
made the assumption, so a recompile can say which line to look at.

A `GuardSet` de-duplicates guards by `(kind, source)` and orders them so each check only
runs after the checks that make it safe: global state first, then per source (bases
before the sources read from them) TYPE -> LENGTH/KEYS -> EQUALS/CODE/ID/NOT_PRESENT ->
TENSOR -> DUPLICATE_INPUT. `GuardSet.build_guard_fn(fn)` compiles all checks into ONE
generated Python function with `fn`'s own signature (so CPython binds arguments and
defaults exactly as for `fn`), whose body is a single short-circuit `return`; see
Note [Generated guard function].
Every kind is defined once, as the checks it makes (Note [One definition per guard kind]):
the guard function, the printed guard set and `explain_failure`'s recompile reason are
renderings of those checks.
"""


from jitgrad.trace.guards.guard_set import (
    FailedGuard,
    GuardSet,
    changed_numbers,
    changed_sizes,
    explain_failure,
    guard_source,
)
from jitgrad.trace.guards.kinds import (
    DenseOrder,
    Guard,
    GuardKind,
    GuardLocation,
    KeysMatch,
    LengthMatch,
    SizeRelation,
    TensorMatch,
    dense_order,
    dense_strides,
)

__all__ = ["DenseOrder", "FailedGuard", "Guard", "GuardKind", "GuardLocation", "GuardSet",
           "KeysMatch", "LengthMatch", "SizeRelation", "TensorMatch", "dense_order",
           "dense_strides", "changed_numbers", "changed_sizes", "explain_failure", "guard_source"]
