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

import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np

from jitgrad.eager import dtypes
from jitgrad.eager.grad_mode import STATE
from jitgrad.eager.node import tensor_type_name
from jitgrad.eager.ops._binary import binary, unary
from jitgrad.eager.ops.creation import check_device, finish, like_layout, size_of
from jitgrad.eager.ops.registry import TensorMeta, apply_op, register
from jitgrad.eager.tensor import CPU, Tensor


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
    """The numpy Generator to draw from: the given one's, else the default's."""
    return (generator or default_generator).np


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


def _integers(gen: np.random.Generator, low: int, high: int, shape: tuple[int, ...],
              np_dtype: np.dtype) -> np.ndarray:
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got "
                           f"from={low} >= to={high}")
    return gen.integers(low, high, shape, dtype=np.int64).astype(np_dtype, copy=False)


# ----- factories --------------------------------------------------------------------------

def _float_factory_dtype(dtype: Any, what: str) -> np.dtype:
    d = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    dtypes.check_supported(d, what)
    _require_float(d.np, what)
    return d.np


def rand(*size: Any, generator: Generator | None = None, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1) of the given size (varargs or one tuple); default float32.

    Raises NotImplementedError for a non-float dtype.
    """
    check_device(device)
    np_dtype = _float_factory_dtype(dtype, "rand")
    return finish(_uniform(generator_of(generator), size_of(size), np_dtype), requires_grad)


def randn(*size: Any, generator: Generator | None = None, dtype: Any = None, device: Any = None,
          requires_grad: bool = False) -> Tensor:
    """Standard normal samples of the given size; default float32.

    Raises NotImplementedError for a non-float dtype.
    """
    check_device(device)
    np_dtype = _float_factory_dtype(dtype, "randn")
    return finish(_normal(generator_of(generator), size_of(size), np_dtype), requires_grad)


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
    np_dtype = dtypes.to_dtype(dtype).np if dtype is not None else np.dtype(np.int64)
    values = _integers(generator_of(generator), low, high, size_of((size,)), np_dtype)
    return finish(values, requires_grad)


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
    np_dtype = dtypes.to_dtype(dtype).np if dtype is not None else np.dtype(np.int64)
    values = generator_of(generator).permutation(int(n)).astype(np_dtype, copy=False)
    return finish(values, requires_grad)


def _like_dtype(input: Tensor, dtype: Any) -> np.dtype:
    return dtypes.to_dtype(dtype).np if dtype is not None else input._data.dtype


def rand_like(input: Tensor, *, generator: Generator | None = None, dtype: Any = None,
              device: Any = None, requires_grad: bool = False) -> Tensor:
    """`rand` with the shape and (default) dtype of `input`."""
    check_device(device)
    np_dtype = _like_dtype(input, dtype)
    _require_float(np_dtype, "rand_like")
    return finish(like_layout(_uniform(generator_of(generator), input._data.shape, np_dtype),
                              input), requires_grad)


def randn_like(input: Tensor, *, generator: Generator | None = None, dtype: Any = None,
               device: Any = None, requires_grad: bool = False) -> Tensor:
    """`randn` with the shape and (default) dtype of `input`."""
    check_device(device)
    np_dtype = _like_dtype(input, dtype)
    _require_float(np_dtype, "randn_like")
    return finish(like_layout(_normal(generator_of(generator), input._data.shape, np_dtype),
                              input), requires_grad)


def randint_like(input: Tensor, *args: int, generator: Generator | None = None,
                 dtype: Any = None, device: Any = None, requires_grad: bool = False,
                 **bounds: int) -> Tensor:
    """`randint` with the shape and (default) dtype of `input`.

    Called as `randint_like(input, high)` or `randint_like(input, low, high)`.
    """
    check_device(device)
    low, high = _bounds(list(args), bounds, "randint_like")
    values = _integers(generator_of(generator), low, high, input._data.shape,
                       _like_dtype(input, dtype))
    return finish(values, requires_grad)


# ----- sampling ops with autograd (zero gradients, as PyTorch) ---------------------------

def _zero_grads(xp: Any, ctx: Any, g: Any) -> tuple:
    return tuple(xp.zeros_like(g) if m is not None else None for m in ctx.input_metadata)


def _normal_forward(mean: Any, std: Any, generator: np.random.Generator) -> np.ndarray:
    np_dtype = np.result_type(mean, std)
    shape = np.broadcast_shapes(np.shape(mean), np.shape(std))
    return (mean + std * generator.standard_normal(shape, dtype=_sample_dtype(np_dtype))
            ).astype(np_dtype, copy=False)


def _normal_meta(mean: Any, std: Any, generator: np.random.Generator) -> TensorMeta:
    shapes = [x.shape for x in (mean, std) if isinstance(x, TensorMeta)]
    np_dtype = np.result_type(*[x.dtype if isinstance(x, TensorMeta) else x for x in (mean, std)])
    return TensorMeta(np.broadcast_shapes(*shapes), np_dtype)


NORMAL = register("normal", _normal_forward, _zero_grads, meta=_normal_meta,
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
    gen = generator_of(generator)
    if not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        if size is None:
            raise TypeError("normal(mean: float, std: float) needs size=, e.g. "
                            "normal(0.0, 1.0, (3,)); or pass mean or std as a Tensor")
        _check_std(std)
        np_dtype = _float_factory_dtype(dtype, "normal")
        return finish(_normal(gen, size_of((size,)), np_dtype, mean, std), requires_grad)
    if isinstance(std, Tensor):
        if (std._data < 0).any():
            raise RuntimeError("normal expects all elements of std >= 0.0")
    else:
        _check_std(std)
    for x in (mean, std):
        if isinstance(x, Tensor):
            _require_float(x._data.dtype, "normal")
    return binary(NORMAL, mean, std, generator=gen)


def _check_std(std: float) -> None:
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")


def _bernoulli_forward(input: np.ndarray, p: float | None, generator: np.random.Generator
                       ) -> np.ndarray:
    probabilities = input if p is None else p
    return (generator.random(input.shape) < probabilities).astype(input.dtype)


BERNOULLI = register("bernoulli", _bernoulli_forward, _zero_grads, inputs=("input",),
                     meta=lambda probabilities, p, generator: TensorMeta(probabilities.shape,
                                                                         probabilities.dtype),
                     source="derivatives.yaml bernoulli: self gets zeros_like(grad)")


def _dropout_mask_forward(input: np.ndarray, p: float) -> np.ndarray:
    keep = default_generator.np.random(input.shape) >= p
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
    return unary(BERNOULLI, input, p=p, generator=generator_of(generator))


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

def _fill_(t: Tensor, values: np.ndarray) -> Tensor:
    """Write `values` into `t` as an in-place op: PyTorch's checks, then a version bump.

    Raises RuntimeError as every in-place op does (leaf requiring grad, view of one, ...)
    and for an expanded `t`.
    """
    from jitgrad.eager.ops.inplace import check_inplace, check_no_overlap

    check_inplace(t)
    check_no_overlap(t._data)
    if STATE.enabled and t._requires_grad:
        # the new values do not depend on t's old value: copy_ rebases t's history (and its
        # view's base, if any) so that the old history gets a zero gradient
        return t.copy_(Tensor._make(values))
    t._data[...] = values
    t._bump_version()
    return t


def uniform_(self: Tensor, a: float = 0.0, b: float = 1.0, *,
             generator: Generator | None = None) -> Tensor:
    """Fill with U(a, b) samples. Raises RuntimeError if a > b."""
    _require_float(self._data.dtype, "uniform_")
    if a > b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                           f"from={a:g} > to={b:g}")
    return _fill_(self, _uniform(generator_of(generator), self._data.shape, self._data.dtype,
                                 a, b))


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *,
            generator: Generator | None = None) -> Tensor:
    """Fill with N(mean, std^2) samples. Raises RuntimeError if std < 0."""
    _require_float(self._data.dtype, "normal_")
    _check_std(std)
    return _fill_(self, _normal(generator_of(generator), self._data.shape, self._data.dtype,
                                mean, std))


def bernoulli_(self: Tensor, p: float | Tensor = 0.5, *,
               generator: Generator | None = None) -> Tensor:
    """Fill with 0/1 samples, 1 with probability p (a float or a broadcastable Tensor).

    Works for any dtype. Raises RuntimeError for p outside [0, 1].
    """
    probabilities = p._data if isinstance(p, Tensor) else p
    if not np.all((np.asarray(probabilities) >= 0) & (np.asarray(probabilities) <= 1)):
        shown = f"p={p:g}" if not isinstance(p, Tensor) else "values outside [0, 1] in p"
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got {shown}")
    draws = generator_of(generator).random(self._data.shape) < probabilities
    return _fill_(self, draws.astype(self._data.dtype))


# the largest integer `random_()` draws: every value up to it is exact in the dtype
_RANDOM_MAX = {np.dtype(np.float16): 2**11, np.dtype(np.float32): 2**24,
               np.dtype(np.float64): 2**53, np.dtype(np.bool_): 1}


def random_(self: Tensor, *bounds: int, generator: Generator | None = None) -> Tensor:
    """Fill with integers: `random_()` in [0, 2^mantissa] (dtype max for ints),
    `random_(to)` in [0, to), `random_(from, to)` in [from, to).

    Raises RuntimeError when from >= to.
    """
    np_dtype = self._data.dtype
    gen = generator_of(generator)
    if len(bounds) == 2:
        values = _integers(gen, int(bounds[0]), int(bounds[1]), self._data.shape, np_dtype)
    elif len(bounds) == 1:
        values = _integers(gen, 0, int(bounds[0]), self._data.shape, np_dtype)
    elif not bounds:
        top = _RANDOM_MAX[np_dtype] if np_dtype in _RANDOM_MAX else int(np.iinfo(np_dtype).max)
        values = gen.integers(0, top, self._data.shape, dtype=np.int64, endpoint=True)
        values = values.astype(np_dtype, copy=False)
    else:
        raise TypeError(f"random_() takes at most 2 bounds (from, to), got {len(bounds)}")
    return _fill_(self, values)


def exponential_(self: Tensor, lambd: float = 1.0, *,
                 generator: Generator | None = None) -> Tensor:
    """Fill with Exp(lambd) samples (mean 1/lambd). Raises RuntimeError if lambd <= 0."""
    _require_float(self._data.dtype, "exponential_")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    values = generator_of(generator).exponential(1.0 / lambd, self._data.shape)
    return _fill_(self, values.astype(self._data.dtype))


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
