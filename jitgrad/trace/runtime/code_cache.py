"""The compiled entries of each code object: `CodeCache` per (code, closure, defaults,
backend, options), each `CacheEntry` a guard function, a runner and what it holds."""

from __future__ import annotations

import types
import weakref
from collections.abc import Callable
from typing import Any

from jitgrad.trace.capture.sources import SizeSource, Source
from jitgrad.trace.capture.tracing import TraceResult
from jitgrad.trace.ir.graph_module import GraphModule
from jitgrad.trace.runtime.dynamic import SymbolicGraph
from jitgrad.trace.runtime.runner import Runner


class CacheEntry:
    """One compiled version of a frame: its guard function, runner and what it holds."""

    def __init__(self, guard: Callable[..., bool], run: Runner, result: TraceResult,
                 graph_module: GraphModule, compiled: Any) -> None:
        self.guard = guard
        self.run = run
        self.guards = result.guards
        self.graph_module = graph_module
        self.compiled = compiled  # what the backend returned (its `show()`, if any)
        # over symbolic sizes: a guard that holds may still need its sizes checked
        self.symbolic = isinstance(compiled, SymbolicGraph)
        self.hits = 0

    @property
    def guard_source(self) -> str:
        """The guards as text (made when shown, not on every compile)."""
        return str(self.guards)


class CodeCache:
    """Entries of one code object, most recently used first, plus the frame's state.

    owners: the closure cells and defaults its guards read (held, so their ids, part of
    the cache key, are not reused while the cache lives).
    """

    def __init__(self, owners: tuple, code: types.CodeType) -> None:
        self.owners = owners
        self._code = weakref.ref(code)  # weak: the cache is dropped when the code dies
        self.entries: list[CacheEntry] = []
        self.compiles = 0
        self.dynamic_numbers: frozenset[Source] = frozenset()  # Note [Unspecialized numbers]
        # Note [Symbolic sizes]: dims made dynamic after a change, and dims kept exact
        self.dynamic_sizes: frozenset[SizeSource] = frozenset()
        self.static_sizes: frozenset[SizeSource] = frozenset()
        self.eager_reason: str | None = None  # set when the frame runs eagerly from now on
        self.live = True  # False once dropped (`clear`, `drop`): a holder must look it up again

    def serves(self, fn: types.FunctionType) -> bool:
        """Whether this is still the cache `cache_for(fn, ...)` returns (for a caller that
        holds it between calls): not dropped, and `fn`'s code and defaults are still the
        ones it was made for (each can be reassigned; the closure cannot)."""
        return self.live and self._code() is fn.__code__ and \
            self.owners[1] is fn.__defaults__ and self.owners[2] is fn.__kwdefaults__


# (code, closure, defaults, kwdefaults, backend) identities, then the options
CacheKey = tuple[int | bool | None, ...]
_CACHES: dict[CacheKey, CodeCache] = {}


def cache_for(fn: types.FunctionType, backend: Any,
              options: tuple[bool, bool | None] = (False, None)) -> CodeCache:
    """The cache of `fn`'s code object compiled for `backend` with `options` (fullgraph,
    dynamic), keyed by identity and dropped when the code dies.

    Functions sharing code but closing over different cells or with different defaults
    (two closures made by one factory, `def f(x, k=k)` in a loop) get separate caches: a
    guard reads the cells and defaults of the function it was built for. So do two
    backends (`compile(f, backend="eager")` after `compile(f)` runs the eager oracle) and
    two sets of options (`fullgraph=True` must raise where another compile of f went eager).
    """
    code = fn.__code__
    owners = (fn.__closure__, fn.__defaults__, fn.__kwdefaults__, backend)
    key = (*_cache_key(fn, backend), *options)
    cache = _CACHES.get(key)
    if cache is None:
        cache = _CACHES[key] = CodeCache(owners, code)
        weakref.finalize(code, _drop_cache, key)
    return cache


def _drop_cache(key: CacheKey) -> None:
    cache = _CACHES.pop(key, None)
    if cache is not None:
        cache.live = False


def _cache_key(fn: types.FunctionType, backend: Any) -> tuple[int, ...]:
    return (id(fn.__code__), *(0 if owner is None else id(owner) for owner in
                               (fn.__closure__, fn.__defaults__, fn.__kwdefaults__)), id(backend))


def clear() -> None:
    """Forget every code object's entries."""
    for cache in _CACHES.values():
        cache.live = False
    _CACHES.clear()


def drop(fn: types.FunctionType, backend: Any, options: tuple[bool, bool | None]) -> None:
    """Forget the entries of `fn`'s code object compiled for `backend` with `options`."""
    cache = _CACHES.pop((*_cache_key(fn, backend), *options), None)
    if cache is not None:
        cache.live = False
