"""Random numbers: the default `Generator`, `manual_seed`, random factories and fills.

Backed by numpy's PCG64. jitgrad does not reproduce PyTorch's random stream: seeded
runs are reproducible within jitgrad, and tests never compare random values with torch
(research/real_programs.md §7). Dtypes follow PyTorch: float factories give the default
float dtype, `randint`/`randperm`/`multinomial` give int64, `bernoulli` keeps its input's
dtype. Every function takes `generator=` (a `jitgrad.Generator`, default: the global one).

`normal(mean, std)` and `bernoulli(p)` record autograd history like PyTorch's
(`NormalBackward`, `BernoulliBackward`) with zero gradients: the samples are not
reparameterized (derivatives.yaml: `mean: zeros_like(grad)`).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from jitgrad.eager import dtypes, layout
from jitgrad.eager.devices import CPU
from jitgrad.eager.node import tensor_type_name
from jitgrad.eager.ops._binary import binary, unary
from jitgrad.eager.ops.creation import ERR_INT_REQUIRES_GRAD, check_device, size_of
from jitgrad.eager.ops.registry import TensorMeta, apply_op, register
from jitgrad.eager.tensor import Tensor


class Generator:
    """A random number generator (`torch.Generator`), wrapping `numpy.random.Generator`.

    `np` is the numpy Generator every jitgrad random op draws from.
    """

    def __init__(self, device: Any = "cpu") -> None:
        check_device(device)
        self.device = CPU
        self._seed = 67280421310721  # PyTorch's default seed value, for familiarity
        self.np = np.random.Generator(np.random.PCG64(self._seed))

    def manual_seed(self, seed: int) -> Generator:
        """Reseed; returns self (so `Generator().manual_seed(0)` works)."""
        self._seed = int(seed)
        self.np = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def seed(self) -> int:
        """Reseed from the operating system's entropy; returns the new seed."""
        self.manual_seed(secrets.randbits(63))
        return self._seed

    def initial_seed(self) -> int:
        """The seed last set by `manual_seed` or `seed`."""
        return self._seed

    def get_state(self) -> Tensor:
        """The generator state as a uint8 tensor of `STATE_NBYTES` bytes (PCG64 state)."""
        state = self.np.bit_generator.state
        raw = (state["state"]["state"].to_bytes(16, "little")
               + state["state"]["inc"].to_bytes(16, "little")
               + state["has_uint32"].to_bytes(1, "little")
               + state["uinteger"].to_bytes(4, "little"))
        return Tensor._make(np.frombuffer(raw, dtype=np.uint8).copy())

    def set_state(self, new_state: Tensor) -> Generator:
        """Restore a state from `get_state`. Raises RuntimeError for anything else."""
        if not isinstance(new_state, Tensor) or new_state._data.dtype != np.uint8 \
                or new_state._data.shape != (STATE_NBYTES,):
            got = (f"{new_state.dtype} tensor of shape {list(new_state.shape)}"
                   if isinstance(new_state, Tensor) else type(new_state).__name__)
            raise RuntimeError(f"set_state expects the jitgrad.uint8 tensor of {STATE_NBYTES} "
                               f"bytes returned by get_state() (got {got})")
        raw = new_state._data.tobytes()
        self.np.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": int.from_bytes(raw[:16], "little"),
                      "inc": int.from_bytes(raw[16:32], "little")},
            "has_uint32": raw[32],
            "uinteger": int.from_bytes(raw[33:37], "little"),
        }
        return self


STATE_NBYTES = 37  # PCG64 state (16) + increment (16) + has_uint32 (1) + uinteger (4)

default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (and return it), as `torch.manual_seed`."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generator from the operating system's entropy; returns the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """The default generator's seed."""
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The default generator's state (a uint8 tensor), for `set_rng_state`."""
    return default_generator.get_state()


def set_rng_state(new_state: Tensor) -> None:
    """Restore the default generator's state from `get_rng_state`."""
    default_generator.set_state(new_state)


def generator_of(generator: Generator | None) -> np.random.Generator:
    """The numpy Generator to draw from: the given one's, else the default's. Every draw
    asks here, so an open `undone_draws` sees it."""
    gen = generator or default_generator
    if _JOURNALS:
        _JOURNALS[-1].setdefault(gen, gen.np.bit_generator.state)
    return gen.np


_JOURNALS: list[dict[Generator, Any]] = []  # open `undone_draws`, innermost last


@contextlib.contextmanager
def undone_draws() -> Iterator[dict[Generator, Any]]:
    """Run a block whose draws are undone on exit; yields the generators it drew from.

    The tracer runs real code under it: numbers drawn while tracing would be baked into the
    graph as constants, so such a call is refused and every generator put back as it was
    (Note [Random draws are ops])."""
    journal: dict[Generator, Any] = {}
    _JOURNALS.append(journal)
    try:
        yield journal
    finally:
        _JOURNALS.pop()
        for gen, state in journal.items():
            gen.np.bit_generator.state = state


# ----- sampling helpers (numpy arrays of a given dtype) ---------------------------------

def _legacy_name(np_dtype: np.dtype) -> str:
    """PyTorch's scalar type name used in "not implemented for 'Long'" messages."""
    return tensor_type_name(Tensor._make(np.empty(0, np_dtype)))[len("jitgrad."):-len("Tensor")]


def _require_float(np_dtype: np.dtype, what: str) -> None:
    if np_dtype.kind != "f":
        raise NotImplementedError(
            f"{what}: not implemented for '{_legacy_name(np_dtype)}' "
            f"({dtypes.from_numpy_dtype(np_dtype)}); random floats need a floating dtype, "
            "e.g. dtype=jitgrad.float32 (use randint for integers)")


def _sample_dtype(np_dtype: np.dtype) -> np.dtype:
    # numpy draws float32 and float64 natively; float16 is drawn as float32 and rounded
    return np_dtype if np_dtype in (np.float32, np.float64) else np.dtype(np.float32)


def _uniform(gen: np.random.Generator, shape: tuple[int, ...], np_dtype: np.dtype,
             low: float = 0.0, high: float = 1.0) -> np.ndarray:
    u = gen.random(shape, dtype=_sample_dtype(np_dtype))
    if low != 0.0 or high != 1.0:
        u = low + (high - low) * u
    return u.astype(np_dtype, copy=False)


def _normal(gen: np.random.Generator, shape: tuple[int, ...], np_dtype: np.dtype,
            mean: float = 0.0, std: float = 1.0) -> np.ndarray:
    z = gen.standard_normal(shape, dtype=_sample_dtype(np_dtype))
    if mean != 0.0 or std != 1.0:
        z = mean + std * z
    return z.astype(np_dtype, copy=False)


def _integers(gen: np.random.Generator, shape: tuple[int, ...], np_dtype: np.dtype,
              low: int, high: int) -> np.ndarray:
    return gen.integers(low, high, shape, dtype=np.int64).astype(np_dtype, copy=False)


def _check_bounds(low: int, high: int) -> None:
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got "
                           f"from={low} >= to={high}")


def _all_integers(gen: np.random.Generator, shape: tuple[int, ...],
                  np_dtype: np.dtype) -> np.ndarray:
    """`random_()`: integers in [0, 2^mantissa] (the dtype's max for integer dtypes)."""
    top = _RANDOM_MAX[np_dtype] if np_dtype in _RANDOM_MAX else int(np.iinfo(np_dtype).max)
    return gen.integers(0, top, shape, dtype=np.int64, endpoint=True).astype(np_dtype,
                                                                           copy=False)


def _permutation(gen: np.random.Generator, shape: tuple[int, ...],
                 np_dtype: np.dtype) -> np.ndarray:
    return gen.permutation(shape[0]).astype(np_dtype, copy=False)


def _exponential(gen: np.random.Generator, shape: tuple[int, ...], np_dtype: np.dtype,
                 lambd: float) -> np.ndarray:
    return gen.exponential(1.0 / lambd, shape).astype(np_dtype, copy=False)


def _bernoulli(gen: np.random.Generator, shape: tuple[int, ...], np_dtype: np.dtype,
               p: float) -> np.ndarray:
    return (gen.random(shape) < p).astype(np_dtype)


# the largest integer `random_()` draws: every value up to it is exact in the dtype
_RANDOM_MAX = {np.dtype(np.float16): 2**11, np.dtype(np.float32): 2**24,
               np.dtype(np.float64): 2**53, np.dtype(np.bool_): 1}


# Note [Random draws are ops]
# Every factory and fill draws through RANDOM (sizes from its params) or RANDOM_LIKE
# (sizes and layout from its tensor input): impure ops, so never fused, erased or merged,
# whose forward asks for the generator when it runs. A compiled graph therefore draws from
# the default generator (or the one passed, itself a param of the node) at the point of
# the program where eager draws, and after a `manual_seed` as eager does; nothing drawn
# while tracing is baked into a graph (the tracer runs real code under `undone_draws` and
# refuses a call that drew).
_SAMPLERS: dict[str, Any] = {"uniform": _uniform, "normal": _normal, "integers": _integers,
                             "all_integers": _all_integers, "permutation": _permutation,
                             "exponential": _exponential, "bernoulli": _bernoulli}


def _random_forward(*, sampler: str, shape: tuple[int, ...], np_dtype: np.dtype,
                    generator: Generator | None, **params: Any) -> np.ndarray:
    return _SAMPLERS[sampler](generator_of(generator), shape, np_dtype, **params)


def _random_like_forward(like: np.ndarray, *, sampler: str, np_dtype: np.dtype,
                         generator: Generator | None, **params: Any) -> np.ndarray:
    values = _SAMPLERS[sampler](generator_of(generator), like.shape, np_dtype, **params)
    if like.flags.c_contiguous:
        return values
    return layout.with_strides(values, layout.preserved_strides(like))


def _random_like_meta(like: TensorMeta, *, np_dtype: np.dtype, **params: Any) -> TensorMeta:
    if like.is_contiguous():
        return TensorMeta(like.shape, np.dtype(np_dtype))
    strides = layout.preserved_strides(like.zeros())
    return TensorMeta(like.shape, np.dtype(np_dtype), strides)


RANDOM = register("random", _random_forward, None, inputs=(), impure=True,
                  elementwise=False, source="numpy PCG64 samplers (Note [Random draws are ops])",
                  meta=lambda *, shape, np_dtype, **params: TensorMeta(tuple(shape),
                                                                       np.dtype(np_dtype)))
RANDOM_LIKE = register("random_like", _random_like_forward, None, inputs=("like",),
                       impure=True, elementwise=False, meta=_random_like_meta,
                       source="numpy PCG64 samplers (Note [Random draws are ops])")


def _leaf(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad and t._data.dtype.kind != "f":
        raise RuntimeError(ERR_INT_REQUIRES_GRAD.format(dtype=t.dtype))
    return t.requires_grad_() if requires_grad else t


def _draw(sampler: str, shape: tuple[int, ...], np_dtype: np.dtype,
          generator: Generator | None, requires_grad: bool = False, **params: Any) -> Tensor:
    """A new tensor of `shape` drawn by `sampler`: a leaf (requires_grad as asked)."""
    return _leaf(apply_op(RANDOM, (), (), {"sampler": sampler, "shape": tuple(shape),
                                           "np_dtype": np.dtype(np_dtype),
                                           "generator": generator, **params}), requires_grad)


def _draw_like(sampler: str, like: Tensor, np_dtype: np.dtype, generator: Generator | None,
               **params: Any) -> Tensor:
    """Samples with the shape and layout of `like` (`*_like`, the values of a fill)."""
    return apply_op(RANDOM_LIKE, (like,), (like._data,), {
        "sampler": sampler, "np_dtype": np.dtype(np_dtype), "generator": generator, **params})


# ----- factories --------------------------------------------------------------------------

def _float_factory_dtype(dtype: Any, what: str) -> np.dtype:
    d = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    np_dtype = dtypes.numpy_dtype(d, what)
    _require_float(np_dtype, what)
    return np_dtype


def rand(*sizes: Any, size: Any = None, generator: Generator | None = None,
         dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1) of the given size (varargs or one tuple); default float32.

    Raises NotImplementedError for a non-float dtype.
    """
    check_device(device)
    np_dtype = _float_factory_dtype(dtype, "rand")
    return _draw("uniform", size_of(sizes, size, "rand"), np_dtype, generator, requires_grad)


def randn(*sizes: Any, size: Any = None, generator: Generator | None = None,
          dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Standard normal samples of the given size; default float32.

    Raises NotImplementedError for a non-float dtype.
    """
    check_device(device)
    np_dtype = _float_factory_dtype(dtype, "randn")
    return _draw("normal", size_of(sizes, size, "randn"), np_dtype, generator, requires_grad)


def randint(*args: Any, size: Sequence[int] | None = None, generator: Generator | None = None,
            dtype: Any = None, device: Any = None, requires_grad: bool = False,
            **bounds: int) -> Tensor:
    """Integers uniform in [low, high): `randint(high, size)` or `randint(low, high, size)`.

    `low`/`high` may also be keywords. Default dtype int64 (float dtypes allowed).
    Raises RuntimeError when low >= high, TypeError when size is missing.
    """
    check_device(device)
    args_list = list(args)
    if size is None:
        if not args_list or not isinstance(args_list[-1], (tuple, list)):
            raise TypeError("randint() needs a size tuple: randint(high, size) or "
                            "randint(low, high, size), e.g. randint(0, 10, (3,))")
        size = args_list.pop()
    low, high = _bounds(args_list, bounds, "randint")
    np_dtype = dtypes.numpy_dtype(dtypes.to_dtype(dtype), "randint") if dtype is not None \
        else np.dtype(np.int64)
    _check_bounds(low, high)
    return _draw("integers", size_of((size,)), np_dtype, generator, requires_grad, low=low,
                 high=high)


def _bounds(args: list[Any], bounds: dict[str, int], what: str) -> tuple[int, int]:
    unknown = set(bounds) - {"low", "high"}
    if unknown:
        raise TypeError(f"{what}() got an unexpected keyword argument '{sorted(unknown)[0]}'")
    if len(args) == 2:
        return int(args[0]), int(args[1])
    if len(args) == 1:
        return int(bounds.get("low", 0)), int(args[0])
    if "high" in bounds:
        return int(bounds.get("low", 0)), int(bounds["high"])
    raise TypeError(f"{what}() needs `high`: {what}(high, ...) or {what}(low, high, ...)")


def randperm(n: int, *, generator: Generator | None = None, dtype: Any = None,
             device: Any = None, requires_grad: bool = False) -> Tensor:
    """A random permutation of 0..n-1 (int64 by default)."""
    check_device(device)
    if n < 0:
        raise RuntimeError(f"randperm: n must be non-negative, got {n}")
    np_dtype = dtypes.numpy_dtype(dtypes.to_dtype(dtype), "randperm") if dtype is not None \
        else np.dtype(np.int64)
    return _draw("permutation", (int(n),), np_dtype, generator, requires_grad)


def _like_dtype(input: Tensor, dtype: Any) -> np.dtype:
    if dtype is None:
        return input._data.dtype
    return dtypes.numpy_dtype(dtypes.to_dtype(dtype), "factory")


def rand_like(input: Tensor, *, generator: Generator | None = None, dtype: Any = None,
              device: Any = None, requires_grad: bool = False) -> Tensor:
    """`rand` with the shape and (default) dtype of `input`."""
    check_device(device)
    np_dtype = _like_dtype(input, dtype)
    _require_float(np_dtype, "rand_like")
    return _leaf(_draw_like("uniform", input, np_dtype, generator), requires_grad)


def randn_like(input: Tensor, *, generator: Generator | None = None, dtype: Any = None,
               device: Any = None, requires_grad: bool = False) -> Tensor:
    """`randn` with the shape and (default) dtype of `input`."""
    check_device(device)
    np_dtype = _like_dtype(input, dtype)
    _require_float(np_dtype, "randn_like")
    return _leaf(_draw_like("normal", input, np_dtype, generator), requires_grad)


def randint_like(input: Tensor, *args: int, generator: Generator | None = None,
                 dtype: Any = None, device: Any = None, requires_grad: bool = False,
                 **bounds: int) -> Tensor:
    """`randint` with the shape and (default) dtype of `input`.

    Called as `randint_like(input, high)` or `randint_like(input, low, high)`.
    """
    check_device(device)
    low, high = _bounds(list(args), bounds, "randint_like")
    _check_bounds(low, high)
    np_dtype = _like_dtype(input, dtype)
    values = _draw_like("integers", input, np_dtype, generator, low=low, high=high)
    return _leaf(values, requires_grad)


# ----- sampling ops with autograd (zero gradients, as PyTorch) ---------------------------

def _zero_grads(xp: Any, ctx: Any, g: Any) -> tuple:
    return tuple(xp.zeros_like(g) if m is not None else None for m in ctx.input_metadata)


def _normal_forward(mean: Any, std: Any, generator: Generator | None) -> np.ndarray:
    np_dtype = np.result_type(mean, std)
    shape = np.broadcast_shapes(np.shape(mean), np.shape(std))
    z = generator_of(generator).standard_normal(shape, dtype=_sample_dtype(np_dtype))
    return (mean + std * z).astype(np_dtype, copy=False)


def _normal_meta(mean: Any, std: Any, generator: Generator | None) -> TensorMeta:
    shapes = [x.shape for x in (mean, std) if isinstance(x, TensorMeta)]
    np_dtype = np.result_type(*[x.dtype if isinstance(x, TensorMeta) else x for x in (mean, std)])
    return TensorMeta(np.broadcast_shapes(*shapes), np_dtype)


NORMAL = register("normal", _normal_forward, _zero_grads, meta=_normal_meta, impure=True,
                  source="derivatives.yaml normal: mean/std get zeros_like(grad)")


def normal(mean: Any = 0.0, std: Any = 1.0, size: Sequence[int] | None = None, *,
           generator: Generator | None = None, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """Normal samples with elementwise `mean` and `std` (Tensors or floats).

    Shapes: with a Tensor argument, the broadcast shape of mean and std; with two floats,
    `size` (required). Dtype: the tensors' promoted float dtype, else the default.
    Gradients with respect to mean and std are zero (PyTorch's convention).
    Raises RuntimeError for a negative std or shapes that do not broadcast.
    """
    check_device(device)
    if not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        if size is None:
            raise TypeError("normal(mean: float, std: float) needs size=, e.g. "
                            "normal(0.0, 1.0, (3,)); or pass mean or std as a Tensor")
        _check_std(std)
        np_dtype = _float_factory_dtype(dtype, "normal")
        return _draw("normal", size_of((size,)), np_dtype, generator, requires_grad,
                     mean=mean, std=std)
    if isinstance(std, Tensor):
        if (std._data < 0).any():
            raise RuntimeError("normal expects all elements of std >= 0.0")
    else:
        _check_std(std)
    for x in (mean, std):
        if isinstance(x, Tensor):
            _require_float(x._data.dtype, "normal")
    return binary(NORMAL, mean, std, generator=generator)


def _check_std(std: float) -> None:
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")


def _bernoulli_forward(input: np.ndarray, p: float | None, generator: Generator | None
                       ) -> np.ndarray:
    probabilities = input if p is None else p
    return (generator_of(generator).random(input.shape) < probabilities).astype(input.dtype)


BERNOULLI = register("bernoulli", _bernoulli_forward, _zero_grads, inputs=("input",),
                     impure=True,
                     meta=lambda probabilities, p, generator: TensorMeta(probabilities.shape,
                                                                         probabilities.dtype),
                     source="derivatives.yaml bernoulli: self gets zeros_like(grad)")


def _dropout_mask_forward(input: np.ndarray, p: float) -> np.ndarray:
    keep = generator_of(None).random(input.shape) >= p
    return keep.astype(input.dtype) * input.dtype.type(1.0 / (1.0 - p))


# the draw happens in the forward, so a compiled graph runs it (an extern, never fused)
# when the graph runs: eager and compiled code consume the generator in the same order
DROPOUT_MASK = register("dropout_mask", _dropout_mask_forward, None, impure=True,
                        meta=lambda x, p: TensorMeta(x.shape, x.dtype),
                        source="inverted dropout (Srivastava et al. 2014): keep/(1-p)")


def dropout_mask(input: Tensor, p: float) -> Tensor:
    """Shape and float dtype of `input`: 1/(1-p) where an element is kept (probability
    1-p, drawn from the default generator), else 0. Not differentiable; 0 <= p < 1."""
    return apply_op(DROPOUT_MASK, (input,), (input._data,), {"p": p})


def bernoulli(input: Tensor, p: float | None = None, *, generator: Generator | None = None
              ) -> Tensor:
    """0/1 samples with probability `input` (or `p` for every element); dtype of input.

    Raises RuntimeError for probabilities outside [0, 1], NotImplementedError for a
    non-float input.
    """
    _require_float(input._data.dtype, "bernoulli")
    probabilities = input._data if p is None else np.asarray(p)
    if not ((probabilities >= 0) & (probabilities <= 1)).all():
        raise RuntimeError("bernoulli: probabilities must be in [0, 1] (Expected p_in >= 0 "
                           "&& p_in <= 1 to be true, but got false.)")
    return unary(BERNOULLI, input, p=p, generator=generator)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator: Generator | None = None) -> Tensor:
    """Indices sampled from the categorical distribution(s) in the rows of `input`.

    Shapes: input (n,) -> (num_samples,); (m, n) -> (m, num_samples); int64.
    Weights need not sum to 1. Without replacement each row's indices are distinct
    (sequential sampling, done as the exponential-race trick: argmax of w / E, E ~ Exp(1)).
    Raises RuntimeError for a non-float input, rank other than 1 or 2, num_samples <= 0
    or > n without replacement, negative/inf/nan weights, or a row summing to 0.
    """
    data = input._data
    if data.dtype.kind != "f":
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, "
                           f"got: {_legacy_name(data.dtype)}")
    if data.ndim not in (1, 2):
        raise RuntimeError(f"prob_dist must be 1 or 2 dim (got shape {list(data.shape)})")
    n = data.shape[-1]
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > n:
        raise RuntimeError(f"cannot sample n_sample > prob_dist.size(-1) samples without "
                           f"replacement (n_sample={num_samples}, {n} categories); pass "
                           "replacement=True")
    rows = data.reshape(-1, n).astype(np.float64)
    if not np.isfinite(rows).all() or (rows < 0).any():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    totals = rows.sum(axis=1)
    if (totals <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    gen = generator_of(generator)
    if replacement:
        cdf = np.cumsum(rows, axis=1) / totals[:, None]
        draws = gen.random((rows.shape[0], num_samples))
        samples = np.stack([np.searchsorted(row_cdf, row_draws, side="right")
                            for row_cdf, row_draws in zip(cdf, draws, strict=True)])
        samples = np.minimum(samples, n - 1)  # u just below 1 against a cdf rounded below 1
    else:
        keys = rows / gen.exponential(size=rows.shape)
        samples = np.argsort(-keys, axis=1, kind="stable")[:, :num_samples]
    out = samples.astype(np.int64).reshape(data.shape[:-1] + (num_samples,))
    return Tensor._make(out)


# ----- in-place fills ------------------------------------------------------------------

def _fill_(t: Tensor, values: Tensor) -> Tensor:
    """Write `values` into `t` with `copy_`: an in-place op's checks (a leaf that requires
    grad, an expanded `t`, ...: RuntimeError) and version bump; with grad enabled, a `t`
    that requires grad has its history rebased (the old history gets a zero gradient: the
    new values do not depend on it)."""
    return t.copy_(values)


def uniform_(self: Tensor, a: float = 0.0, b: float = 1.0, *,
             generator: Generator | None = None) -> Tensor:
    """Fill with U(a, b) samples. Raises RuntimeError if a > b."""
    _require_float(self._data.dtype, "uniform_")
    if a > b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                           f"from={a:g} > to={b:g}")
    return _fill_(self, _draw_like("uniform", self, self._data.dtype, generator, low=a,
                                   high=b))


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *,
            generator: Generator | None = None) -> Tensor:
    """Fill with N(mean, std^2) samples. Raises RuntimeError if std < 0."""
    _require_float(self._data.dtype, "normal_")
    _check_std(std)
    return _fill_(self, _draw_like("normal", self, self._data.dtype, generator, mean=mean,
                                   std=std))


def bernoulli_(self: Tensor, p: float | Tensor = 0.5, *,
               generator: Generator | None = None) -> Tensor:
    """Fill with 0/1 samples, 1 with probability p (a float or a broadcastable Tensor).

    Works for any dtype. Raises RuntimeError for p outside [0, 1].
    """
    probabilities = p._data if isinstance(p, Tensor) else p
    if not np.all((np.asarray(probabilities) >= 0) & (np.asarray(probabilities) <= 1)):
        shown = f"p={p:g}" if not isinstance(p, Tensor) else "values outside [0, 1] in p"
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got {shown}")
    if not isinstance(p, Tensor):
        return _fill_(self, _draw_like("bernoulli", self, self._data.dtype, generator,
                                       p=float(p)))
    draws = generator_of(generator).random(self._data.shape) < probabilities
    return _fill_(self, Tensor._make(draws.astype(self._data.dtype)))


def random_(self: Tensor, *bounds: int, generator: Generator | None = None) -> Tensor:
    """Fill with integers: `random_()` in [0, 2^mantissa] (dtype max for ints),
    `random_(to)` in [0, to), `random_(from, to)` in [from, to).

    Raises RuntimeError when from >= to.
    """
    np_dtype = self._data.dtype
    if len(bounds) > 2:
        raise TypeError(f"random_() takes at most 2 bounds (from, to), got {len(bounds)}")
    if not bounds:
        return _fill_(self, _draw_like("all_integers", self, np_dtype, generator))
    low, high = (0, int(bounds[0])) if len(bounds) == 1 else (int(bounds[0]), int(bounds[1]))
    _check_bounds(low, high)
    return _fill_(self, _draw_like("integers", self, np_dtype, generator, low=low, high=high))


def exponential_(self: Tensor, lambd: float = 1.0, *,
                 generator: Generator | None = None) -> Tensor:
    """Fill with Exp(lambd) samples (mean 1/lambd). Raises RuntimeError if lambd <= 0."""
    _require_float(self._data.dtype, "exponential_")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    return _fill_(self, _draw_like("exponential", self, self._data.dtype, generator,
                                   lambd=lambd))


__all__ = ["Generator", "manual_seed", "default_generator", "seed", "initial_seed",
           "get_rng_state", "set_rng_state", "rand", "randn", "randint", "randperm",
           "rand_like", "randn_like", "randint_like", "normal", "bernoulli", "multinomial"]

METHODS: dict[str, Any] = {
    "uniform_": uniform_,
    "normal_": normal_,
    "bernoulli_": bernoulli_,
    "random_": random_,
    "exponential_": exponential_,
    "bernoulli": bernoulli,
    "multinomial": multinomial,
}
