"""Compare a backend's call results with the reference's; mismatches as (kind, detail).

Kinds: exception_class, raises_only_reference, raises_only_backend, output_count, none,
python_value, dtype, shape, requires_grad, nan, inf, value (outputs); the same with prefix
"input_" for inputs mutated in place and "grad_" for `.grad` (grad_none when one is None);
sink, backward_exception. The tolerance model is in tests.fuzz.runner.
"""

import re

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)
EPS64 = float(np.finfo(np.float64).eps)
# a generated program multiplies by at most 3e38 * 10.0: rounding noise it multiplies (a mean
# of layer_norm's output is 0 up to eps) is that large, and only an independent rounding
# order (torch) shows it
LARGEST_CONSTANT = 3e39
# layer_norm divides x - mean by sqrt(var + 1e-5): on a near-constant row, rounding in the
# mean (eps * |x|) reaches the output multiplied by up to 1 / sqrt(1e-5), its condition
LAYER_NORM_CONDITION = 1 / np.sqrt(1e-5)


def depth_of(program) -> int:
    return sum(s.count("\n") + 1 + 2 * s.startswith("for") for s in program.statements)


def overflow_order_of(program) -> bool:
    """Whether a matrix product may overflow mid-sum: whether its result is inf, -inf, NaN
    or a huge finite value then depends on the BLAS kernel's summation order (torch's lanes
    give inf + -inf = NaN where numpy's order stays inf), so near overflow only that it
    overflowed is compared."""
    return "matmul" in program.used


def self_division_condition(program, call: list[dict]) -> float:
    """1 / the smallest nonzero input magnitude (at least 1) when the program divides a
    tensor by itself: the gradient of x / x is g / x - g x / x^2, zero up to rounding of
    terms of size |g / x|, which a small x makes larger than any output."""
    if "self_operand" not in program.used or not re.search(r"\b(\w+) / \1\b", program.source):
        return 1.0
    magnitudes = [np.abs(s["array"][np.isfinite(s["array"]) & (s["array"] != 0)])
                  for s in call if s["kind"] == "tensor" and s["array"].dtype.kind == "f"]
    smallest = min([1.0] + [float(m.min()) for m in magnitudes if m.size])
    return 1.0 / smallest


def condition_of(program) -> float:
    """How much the program's ops may amplify rounding beyond the depth model (1 if not)."""
    return LAYER_NORM_CONDITION if "layer_norm" in program.used else 1.0


def eps_of(program, call: list[dict], desc: dict) -> float:
    """float64's eps only for a float64 result of float64 inputs never cast to float32 (nor
    computed in float32 on the way: `(x <= 0.5).cos()` of a float64 x is float32)."""
    arrays = [s["array"] for s in call if s["kind"] == "tensor"]
    wide = arrays and all(a.dtype == np.float64 for a in arrays) and ".float()" not in \
        program.source and desc.get("dtype") in ("float64", None) and \
        not program.narrow_floats
    return EPS64 if wide else EPS32


# features whose ops sum many terms: torch accumulates float32 sums in float32 (eager jitgrad
# in float64), so its rounding grows with the number of terms, ~sqrt(n) for n terms
ACCUMULATING = frozenset({"reductions", "matmul", "layer_norm", "cross_entropy"})


def accumulation_of(program, call: list[dict]) -> float:
    """How much more a float32 accumulation's rounding may be than the depth model's: the
    square root of the largest input's element count, where the program sums."""
    if not ACCUMULATING & set(program.used):
        return 1.0
    sizes = [s["array"].size for s in call if s["kind"] == "tensor"]
    return float(np.sqrt(max([1] + sizes)))


def scale_of(descs: list[dict], call: list[dict]) -> float:
    arrays = [d["values"] for d in descs if "values" in d]
    arrays += [s["array"] for s in call if s["kind"] == "tensor"]
    finite = [np.abs(a[np.isfinite(a)]).max() for a in arrays
              if a.dtype.kind == "f" and np.isfinite(a).any()]
    return float(max([1.0] + finite))


def values(ref: np.ndarray, got: np.ndarray, tol: float, scale: float,
           overflow_order: bool = False) -> str | None:
    """None if equal under the model, else the kind: shape, nan, inf or value.

    overflow_order: where a value overflowed or came within 16x of the dtype's max, the
    other must have too, whatever inf, -inf, NaN or huge value it is (`overflow_order_of`)."""
    if ref.shape != got.shape:
        return "shape"
    if ref.dtype.kind != "f" and got.dtype.kind != "f":
        return None if np.array_equal(ref.astype(np.float64), got.astype(np.float64)) \
            else "value"
    limit = np.finfo(ref.dtype).max / 16 if ref.dtype.kind == "f" else np.inf
    ref, got = ref.astype(np.float64), got.astype(np.float64)
    if overflow_order:
        with np.errstate(invalid="ignore"):
            huge = ~np.isfinite(ref) | (np.abs(ref) >= limit)
            if not np.array_equal(huge, ~np.isfinite(got) | (np.abs(got) >= limit)):
                return "nan"
        ref, got = np.where(huge, 0.0, ref), np.where(huge, 0.0, got)
    if not np.array_equal(np.isnan(ref), np.isnan(got)):
        return "nan"
    infs = np.isinf(ref) | np.isinf(got)
    if not np.array_equal(ref[infs], got[infs]):
        return "inf"
    finite = ~(infs | np.isnan(ref))
    with np.errstate(over="ignore"):  # near float64's max, |ref| + scale may overflow
        err = np.abs(ref[finite] - got[finite])
        return None if np.all(err <= tol * (np.abs(ref[finite]) + scale)) else "value"


def describe_diff(ref: dict, got: dict, tol: float, scale: float, typed: bool,
                  overflow_order: bool = False) -> str | None:
    if "none" in ref or "none" in got:
        return None if ("none" in ref) == ("none" in got) else "none"
    if "py" in ref or "py" in got:
        same = ref.get("py") == got.get("py") and ref.get("value") == got.get("value")
        return None if same or (ref.get("value") != ref.get("value")) else "python_value"
    if typed and ref["dtype"] != got["dtype"]:
        return "dtype"
    if tuple(ref["shape"]) != tuple(got["shape"]):
        return "shape"
    # an integer tensor never gets a gradient; torch may still flag one written with a
    # value requiring grad (`int_t[..., 0] = x.sum()`), jitgrad does not (tests.fuzz.runner)
    floating = str(ref["dtype"]).startswith(("float", "bfloat"))
    if typed and floating and ref["requires_grad"] != got["requires_grad"]:
        return "requires_grad"
    found = got["values"]
    if not typed and ref["values"].dtype.kind == found.dtype.kind == "f" and \
            ref["values"].dtype.itemsize < found.dtype.itemsize:
        # the float64 translation's value as the program's dtype holds it: beyond its
        # range, inf (fuzz seed 950436: a float32 prod of 400 factors is inf, not 2e229)
        with np.errstate(over="ignore"):
            found = found.astype(ref["values"].dtype)
    return values(ref["values"], found, tol, scale, overflow_order)


def as_accurate_as_reference(ref: dict, got: dict, exact: dict | None, tol: float,
                             scale: float) -> bool:
    """Whether values that differ from eager's beyond the model are, at their worst, no
    further from the float64 numpy translation (`exact`) than eager's are at theirs (twice
    that, plus the model's tolerance): then both are float32 rounding of an ill-conditioned
    value, such as a dot product whose large terms cancel (`c * x.sum().item() @ ...t()`:
    terms of 5600 summing to 0.65), whose rounding the model's scale (inputs and outputs)
    does not see. A wrong value misses by more than eager's own worst rounding."""
    if exact is None or "values" not in exact or "values" not in ref or "values" not in got:
        return False
    e, g, n = (np.asarray(d["values"], np.float64) for d in (ref, got, exact))
    if not e.shape == g.shape == n.shape:
        return False
    finite = np.isfinite(e) & np.isfinite(g) & np.isfinite(n)
    if not np.array_equal(np.isfinite(e), np.isfinite(g)):
        return False
    if not finite.any():
        return True
    eager_worst = np.abs(e - n)[finite].max()
    bound = 2 * eager_worst + tol * (np.abs(n[finite]).max() + scale)
    return bool(np.abs(g - n)[finite].max() <= bound)


def compare_call(program, call_index, ref: dict, got: dict, typed: bool,
                 other_rounding: bool = False, exact: dict | None = None) -> list:
    """Mismatches of one call (typed: compare dtypes and grads, false for numpy;
    other_rounding: `got` rounds in its own order, as torch's vectorized kernels do;
    exact: float64 results of the call, if any, which decide value mismatches as
    `as_accurate_as_reference` says: outputs from the numpy translation, grads from eager
    jitgrad's run of the widened program, `tests.fuzz.runner.widened`)."""
    if "raise" in ref or "raise" in got:
        if "raise" in ref and "raise" in got:
            return [] if ref["raise"] == got["raise"] else [
                ("exception_class", f"{ref['raise']} vs {got['raise']}")]
        which = "reference" if "raise" in ref else "backend"
        return [(f"raises_only_{which}", (ref if "raise" in ref else got).get("message", ""))]
    call = program.calls[call_index]
    depth = (depth_of(program) + 1) * condition_of(program)
    out = []
    # a backward that raised in both leaves partial gradients: eager's nodes that ran
    # before the error; a compiled region is one node and runs as a whole (as in
    # tests/trace/eager_parity.py), so they are not compared
    failed = ref.get("backward") is not None and got.get("backward") is not None
    for prefix, key in (("", "outputs"), ("input_", "inputs_after"), ("grad_", "grads")):
        if key not in got or key not in ref or (key == "grads" and (not typed or failed)):
            continue
        if len(ref[key]) != len(got[key]):
            out.append((prefix + "output_count", f"{len(ref[key])} vs {len(got[key])}"))
            continue
        # a gradient sums terms the size of the outputs, which may cancel: count them too
        scale = scale_of(ref[key] + (ref["outputs"] if key == "grads" else []), call)
        if key == "grads":
            scale *= self_division_condition(program, call)
        if other_rounding and "large_constants" in program.used:
            scale *= LARGEST_CONSTANT
        if other_rounding:
            scale *= accumulation_of(program, call)
        for j, (r, g) in enumerate(zip(ref[key], got[key], strict=False)):
            tol = 16 * eps_of(program, call, r) * depth
            kind = describe_diff(r, g, tol, scale, typed, overflow_order_of(program))
            if kind == "value" and key in ("outputs", "grads") and exact is not None and \
                    j < len(exact.get(key, ()) or ()) and \
                    as_accurate_as_reference(r, g, exact[key][j], tol, scale):
                kind = None
            if kind is not None:
                out.append((prefix + kind, f"{key}[{j}]: {summary(r)} vs {summary(g)}"))
    if typed and ref.get("backward") != got.get("backward"):
        out.append(("backward_exception", f"{ref.get('backward')} vs {got.get('backward')}"))
    return out


def summary(desc: dict) -> str:
    if "none" in desc:
        return "None"
    if "py" in desc:
        return f"{desc['py']} {desc['value']!r}"
    text = np.array2string(np.asarray(desc["values"]).ravel()[:6], precision=6)
    return f"{desc['dtype']}{list(desc['shape'])} {text}"


def compare(program, ref_results, got_results, typed=True, sink=False,
            other_rounding=False, exact_results=None) -> tuple | None:
    """(call index, mismatches) of the first call that differs, or None; `exact_results`:
    the numpy translation's, one per call (see `compare_call`)."""
    for i, (ref, got) in enumerate(zip(ref_results, got_results, strict=False)):
        exact = exact_results[i] if exact_results is not None and i < len(exact_results) \
            and "raise" not in exact_results[i] else None
        found = compare_call(program, i, ref, got, typed, other_rounding, exact)
        if sink and "sink" in ref and "sink" in got and ref["sink"] != got["sink"]:
            found.append(("sink", f"{ref['sink']!r} vs {got['sink']!r}"))
        if found:
            return i, found
    return None
