"""The op table of the fuzzer: each entry writes one expression for torch and for numpy.

`{a}`/`{b}` are operand names. A numpy template of None means the op has no reference;
a program using it is compared between jitgrad backends (and torch) only. The numpy
reference runs in float64 (float32 inputs are widened), so its numpy namespace is
`NUMPY_PRELUDE` below.

Kinds (how the generator may apply an op without rounding flipping a result):
- "exact": result is exact when the operands are (neg, abs, relu, max, views...);
- "smooth": continuous, rounding errors stay proportional (tanh, add, matmul...);
- "domain": NaN/inf/poles for some inputs, or ill-conditioned for large ones (sin, cos:
  an argument's rounding error passes unshrunk, |x| eps, far above the value's scale):
  applied as written only to exact operands, otherwise through its `safe` form
  (log(|x| + 1), sqrt(|x| + 1), x / (|y| + 1), sin of x clipped to [-8, 8]);
- "disc": discontinuous (comparisons, sign, floor): only on exact operands, since one
  ulp of difference in an operand could flip the result.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Op:
    """One expression: torch template, numpy template (or None), kind, safe variant."""

    name: str
    torch: str
    numpy: str | None
    kind: str
    safe_torch: str | None = None
    safe_numpy: str | None = None
    floats_only: bool = False


UNARY = [
    Op("neg", "-{a}", "-{a}", "exact"),
    Op("abs", "torch.abs({a})", "np.abs({a})", "exact"),
    Op("relu", "torch.relu({a})", "relu({a})", "exact"),
    Op("relu_method", "{a}.relu()", "relu({a})", "exact"),
    Op("clamp", "{a}.clamp(-1.0, 1.5)", "np.clip({a}, -1.0, 1.5)", "exact"),
    Op("clamp_min", "torch.clamp({a}, min=0.5)", "np.maximum({a}, 0.5)", "exact"),
    Op("exp", "torch.exp({a})", "np.exp({a})", "domain",
       "torch.exp({a}.clamp(-8.0, 8.0))", "np.exp(np.clip({a}, -8.0, 8.0))"),
    Op("tanh", "torch.tanh({a})", "np.tanh({a})", "smooth"),
    Op("sigmoid", "torch.sigmoid({a})", "sigmoid({a})", "smooth"),
    Op("sin", "torch.sin({a})", "np.sin({a})", "domain",
       "torch.sin({a}.clamp(-8.0, 8.0))", "np.sin(np.clip({a}, -8.0, 8.0))"),
    Op("cos", "{a}.cos()", "np.cos({a})", "domain",
       "{a}.clamp(-8.0, 8.0).cos()", "np.cos(np.clip({a}, -8.0, 8.0))"),
    Op("square", "{a} * {a}", "{a} * {a}", "smooth"),
    Op("pow2", "{a} ** 2", "{a} ** 2", "smooth"),
    Op("gelu", "F.gelu({a})", "gelu({a})", "smooth", floats_only=True),
    Op("silu", "F.silu({a})", "{a} * sigmoid({a})", "smooth", floats_only=True),
    Op("leaky_relu", "F.leaky_relu({a}, 0.1)", "np.where({a} > 0, {a}, {a} * 0.1)", "smooth",
       floats_only=True),
    Op("log", "torch.log({a})", "np.log({a})", "domain",
       "torch.log({a}.abs() + 1)", "np.log(np.abs({a}) + 1)"),
    Op("sqrt", "torch.sqrt({a})", "np.sqrt({a})", "domain",  # safe: away from 0, where
       "torch.sqrt({a}.abs() + 1)", "np.sqrt(np.abs({a}) + 1)"),  # sqrt's condition is inf
    Op("rsqrt", "torch.rsqrt({a})", "1 / np.sqrt({a})", "domain",
       "torch.rsqrt({a}.abs() + 1)", "1 / np.sqrt(np.abs({a}) + 1)"),
    Op("reciprocal", "{a}.reciprocal()", "1 / {a}", "domain",
       "1 / ({a}.abs() + 1)", "1 / (np.abs({a}) + 1)"),
    Op("pow_half", "{a} ** 0.5", "{a} ** 0.5", "domain",
       "({a}.abs() + 1) ** 0.5", "(np.abs({a}) + 1) ** 0.5"),
    Op("sign", "torch.sign({a})", "np.where(np.isnan({a}), 0.0, np.sign({a}))", "disc"),
    Op("floor", "torch.floor({a})", "np.floor({a})", "disc"),
    Op("round", "torch.round({a})", "np.round({a})", "disc"),
    Op("gt0", "({a} > 0)", "({a} > 0)", "disc"),
    Op("le_half", "({a} <= 0.5)", "({a} <= 0.5)", "disc"),
    Op("to_float", "{a}.float()", "f64({a})", "exact"),
    Op("to_double", "{a}.double()", "f64({a})", "exact"),
    Op("to_f64", "{a}.to(torch.float64)", "f64({a})", "exact"),
    Op("nan_to_num", "torch.nan_to_num({a})", None, "exact"),
]

BINARY = [
    Op("add", "{a} + {b}", "{a} + {b}", "smooth"),
    Op("sub", "{a} - {b}", "{a} - {b}", "smooth"),
    Op("mul", "{a} * {b}", "{a} * {b}", "smooth"),
    Op("rsub", "{b} - {a}", "{b} - {a}", "smooth"),
    Op("add_alpha", "torch.add({a}, {b}, alpha=2)", "{a} + 2 * {b}", "smooth"),
    Op("div", "{a} / {b}", "{a} / {b}", "domain",
       "{a} / ({b}.abs() + 1)", "{a} / (np.abs({b}) + 1)"),
    Op("maximum", "torch.maximum({a}, {b})", "maximum({a}, {b})", "exact"),
    Op("minimum", "torch.minimum({a}, {b})", "minimum({a}, {b})", "exact"),
    Op("gt", "({a} > {b})", "({a} > {b})", "disc"),
    Op("eq", "({a} == {b})", "({a} == {b})", "disc"),
    Op("where", "torch.where({a} > 0, {a}, {b})", "np.where({a} > 0, {a}, {b})", "disc"),
]

SCALARS = ["2", "-1", "0.5", "-1.5", "3.0", "1e-3", "True"]
ZERO_DIM = ["torch.tensor(2.5)", "torch.tensor(3)", "torch.tensor(-0.5, dtype=torch.float64)",
            "torch.tensor(True)"]
ZERO_DIM_NUMPY = {"torch.tensor(2.5)": "np.float64(2.5)", "torch.tensor(3)": "np.int64(3)",
                  "torch.tensor(-0.5, dtype=torch.float64)": "np.float64(-0.5)",
                  "torch.tensor(True)": "np.bool_(True)"}

# reductions: (name, torch with {a},{d},{k}, numpy, exact, needs a dim)
REDUCTIONS = [
    ("sum", "{a}.sum({d}{k})", "np.sum({a}, axis={nd}{nk})", False, False),
    ("mean", "{a}.mean({d}{k})", "np.mean({a}, axis={nd}{nk})", False, False),
    ("amax", "{a}.amax({d}{k})", "np.max({a}, axis={nd}{nk})", True, False),
    ("amin", "torch.amin({a}, {d}{k})", "np.min({a}, axis={nd}{nk})", True, False),
    ("var", "{a}.var({d}{k})", "np.var({a}, axis={nd}, ddof=1{nk})", False, False),
    ("var0", "{a}.var({d}, correction=0{k})", "np.var({a}, axis={nd}{nk})", False, True),
    ("std", "{a}.std({d}{k})", "np.std({a}, axis={nd}, ddof=1{nk})", False, True),
    ("logsumexp", "torch.logsumexp({a}, {d}{k})", "logsumexp({a}, {nd}{nk})", False, True),
    ("softmax", "torch.softmax({a}, {d})", "softmax({a}, {nd})", False, True),
    ("log_softmax", "F.log_softmax({a}, {d})", "log_softmax({a}, {nd})", False, True),
    ("prod", "{a}.prod({d}{k})", "np.prod({a}, axis={nd}{nk})", False, True),
    ("argmax", "{a}.argmax({d}{k})", "np.argmax({a}, axis={nd}{nk})", True, True),
    ("cumsum", "{a}.cumsum({d})", "np.cumsum({a}, axis={nd})", False, True),
]
# torch's reductions, scans and softmaxes return C-contiguous results whatever the input's
# layout, where numpy's keep it: the reference follows torch, so a later view aliases as
# in torch (fuzz seed 670650: a clone of a cumsum, written through view(-1))
REDUCTIONS = [(name, t, f"c_order({n})", *flags) for name, t, n, *flags in REDUCTIONS]

NUMPY_PRELUDE = '''
import math
import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])


def c_order(a):
    return np.asarray(a, order="C")


def f64(a):
    return np.asarray(a, dtype=np.float64)


def relu(a):
    # torch's: NaN stays NaN, relu(-0.0) is -0.0 (np.maximum's tie would give 0.0)
    return np.where(a < 0, 0, a) if np.asarray(a).dtype != bool else a


def maximum(a, b):
    # torch's: NaN from either, of equal operands (-0.0 and 0.0) the first
    return np.where((np.asarray(b) > a) | np.isnan(b), b, a)


def minimum(a, b):
    return np.where((np.asarray(b) < a) | np.isnan(b), b, a)


def sigmoid(a):
    return 1 / (1 + np.exp(-np.asarray(a, dtype=np.float64)))


def gelu(a):
    return 0.5 * a * (1 + _erf(a / math.sqrt(2)))


# max with initial=-inf: a reduction over a zero-size dim gives torch's empty or -inf
# result (on floats: an integer operand is widened first, as torch computes in float)


def floats(a):
    a = np.asarray(a)
    return a if a.dtype.kind == "f" else a.astype(np.float64)


def logsumexp(a, axis, keepdims=False):
    a = floats(a)
    m = np.max(a, axis=axis, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def softmax(a, axis):
    a = floats(a)
    e = np.exp(a - np.max(a, axis=axis, keepdims=True, initial=-np.inf))
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(a, axis):
    a = floats(a)
    shifted = a - np.max(a, axis=axis, keepdims=True, initial=-np.inf)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def contiguous(a):
    """torch's contiguous(): the array itself when C-contiguous (a later in-place write
    shows through), else a copy; 0-d stays 0-d (np.ascontiguousarray would give 1-d)."""
    return a if isinstance(a, np.ndarray) and a.flags.c_contiguous else np.array(a, copy=True)


def index(a, idx, dim):
    """a[idx] along dim as torch: indices are checked only when the result has elements."""
    shape = list(np.shape(a))
    shape[dim] = len(idx)
    if 0 in shape:
        return np.zeros(shape, np.asarray(a).dtype)
    return np.take(a, np.array(idx, dtype=np.int64), axis=dim)


def layer_norm(a, n):
    mean = np.mean(a, axis=-1, keepdims=True)
    var = np.mean((a - mean) ** 2, axis=-1, keepdims=True)
    return (a - mean) / np.sqrt(var + 1e-5)


def cross_entropy(logits, target, reduction):
    logp = log_softmax(logits, -1)
    picked = -np.take_along_axis(logp, np.asarray(target)[..., None], axis=-1)[..., 0]
    if reduction == "mean":
        return np.mean(picked)
    return np.sum(picked) if reduction == "sum" else picked
'''
