"""Run one program on each backend and compare every result against eager jitgrad.

Backends: "eager" (plain jitgrad: the reference), "numba" and "compiled_eager"
(`jitgrad.compile(backend="numba" | "eager")`, one CompiledFunction over all calls, so
recompiles on changed shapes, dtypes and Python values are exercised), "numpy" (the
float64 numpy translation; values and shapes only) and "torch" (real torch in a subprocess,
tests.fuzz.torch_worker; compared to eager jitgrad).

Tolerance model (float rounding only). Each finite float element must satisfy
`|x - ref| <= tol * (|ref| + scale)` with `tol = 16 * eps * (depth + 1)`: eps is float32's
unless the call is float64 throughout (int and bool promote to float32), depth the number
of statements (loops count three times), scale the largest finite magnitude among the
reference's outputs and inputs (at least 1), which bounds the absolute error of sums with
cancellation; for `.grad`s the outputs count as well (the gradient of a nearly constant
output, such as sum(layer_norm(x) ** 2), is a small difference of output-sized terms),
and in a program dividing a tensor by itself that scale is divided by the smallest nonzero
input magnitude (x / x has the gradient g / x - g x / x^2: rounding of |g / x|-sized terms).
Against torch, whose kernels round in their own order, a program with large constants has
its scale multiplied by 3e39, the largest factor a program applies to rounding noise. A program with layer_norm has its tol multiplied by the op's condition,
1 / sqrt(1e-5) (tests.fuzz.compare.condition_of): on a near-constant row the mean's
rounding is divided by sqrt(var + 1e-5). A wrong op, promotion or dropped term misses by
orders of magnitude more.
An output value outside that bound still passes when a float64 numpy translation exists
and the value is no further from it than twice eager's own distance (plus the bound):
both are then float32 rounding of an ill-conditioned value, such as a dot product of large
terms that cancel (tests.fuzz.compare.as_accurate_as_reference; seed 606014, whose terms of
~5600 sum to 0.65: eager 0.6704, compiled 0.6380, float64 0.6547).
NaN positions must match exactly; infinities must match in position and sign (in a
program with a matmul, values that overflowed or came within 16x of the dtype's max only
have to have done so in both, tests.fuzz.compare.overflow_order_of: an overflowing dot
product's inf, NaN or huge value is the BLAS summation order's); ints and
bools exactly; dtypes, shapes, requires_grad, `.grad` None-ness and the builtin class of an
exception exactly; inputs mutated in place are compared like outputs; what the program
printed (SINK) exactly between jitgrad backends.

Known deliberate differences from torch (tests.fuzz.torch_worker.TORCH_QUIRKS shims torch's
values to jitgrad's, differentiated through torch's own op, so that programs reaching them
still compare):
- `F.gelu(+inf)` is NaN in torch's vectorized float32/float16 kernel (and for float64 in
  a one-element tensor), and gelu(x) for x > max / 2 is inf there ((1 + erf) * x * 0.5
  overflows); jitgrad and the formula give +inf and x. Gradients agree.
- float32 `prod` of a slice holding a zero whose other factors overflow float32 when
  multiplied: torch multiplies in float32 vector lanes and gives NaN (inf * 0; which lanes
  overflow depends on the CPU's vector width), jitgrad multiplies in float64 and gives 0.
- `layer_norm` of rows whose squares overflow their dtype (|x| > 1.8e19 in float32,
  1.3e154 in float64): torch's kernel gives NaN rows; jitgrad computes eager's two passes
  in the input's dtype, so the variance is inf and the row 0 (a constant row of 3e38 is 0
  as in exact arithmetic).
- `torch.maximum`/`minimum` of two zeros: torch's vectorized loop returns the second
  operand's, its scalar loop the first's (by length and vector width); jitgrad the first's.
- An integer tensor written with a value requiring grad (`i[..., 0] = x.sum()`) reports
  requires_grad=True in torch (it can never get a gradient); in jitgrad False. The
  requires_grad of integer and bool tensors is not compared, nor are their `.grad`s listed;
  the generator writes no value requiring grad into one (torch may then refuse autograd).
"""

import dataclasses
import linecache
import os
import re
import tempfile
import warnings

import numpy as np

import jitgrad
from tests.fuzz import harness
from tests.fuzz.ops import NUMPY_PRELUDE

JITGRAD_BACKENDS = ("numba", "compiled_eager")
PROGRAM_DIR = os.path.join(tempfile.gettempdir(), f"jitgrad_fuzz_{os.getpid()}")


def source_file(program) -> str:
    """Write the program's source to a real file (line numbers, tracebacks) and register it."""
    os.makedirs(PROGRAM_DIR, exist_ok=True)
    path = os.path.join(PROGRAM_DIR, program.filename)
    with open(path, "w") as f:
        f.write(program.source)
    linecache.cache[path] = (len(program.source), None, program.source.splitlines(True), path)
    return path


def run_jitgrad(program, backend: str) -> list[dict]:
    """Results of every call of `program` on eager jitgrad or one compile backend."""
    fn, sink = harness.load_program(jitgrad, program.source, source_file(program),
                                    jitgrad.graph_break)
    if backend == "eager":
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return [harness.run_call(jitgrad, fn, call, sink) for call in program.calls]
    fn = jitgrad.compile(fn, backend="eager" if backend == "compiled_eager" else backend)
    results = []
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="ignore"):
        warnings.simplefilter("always")
        for call in program.calls:
            seen = len(caught)
            result = harness.run_call(jitgrad, fn, call, sink)
            fallback = next((str(w.message) for w in caught[seen:]
                             if any(marker in str(w.message) for marker in FALLBACKS)), None)
            if fallback is not None:
                result["fallback"] = fallback[:300]
            results.append(result)
    return results


# warnings of a compile that fell back to eager after a failure of jitgrad's own (the
# values still match eager's, so only this says coverage was lost)
FALLBACKS = ("runs eagerly after an internal error", "a kernel failed to compile")


# text that makes a program's path depend on its float width: then a float64 run of it is
# not the same computation, so it is no reference for the float32 one
_WIDTH_DEPENDENT = re.compile(r"\.(float|half|double|bfloat16|to|type)\(|dtype|\bfloat(16|32|64)\b")


def widened(program):
    """`program` with its float32 inputs passed as float64, or None where its path depends on
    the width (casts, dtypes): eager jitgrad's run of it is the gradient reference of
    `tests.fuzz.compare.as_accurate_as_reference`, which the numpy translation (values only)
    cannot give."""
    if _WIDTH_DEPENDENT.search(program.source):
        return None
    calls = [[dict(spec, array=spec["array"].astype(np.float64))
              if spec["kind"] == "tensor" and spec["array"].dtype == np.float32 else spec
              for spec in call] for call in program.calls]
    return dataclasses.replace(program, calls=calls)


def numpy_args(call: list[dict]) -> list:
    args = []
    for spec in call:
        if spec["kind"] == "py":
            args.append(spec["value"])
            continue
        arr = spec["array"].astype(np.float64) if spec["array"].dtype == np.float32 \
            else spec["array"].copy()
        args.append(arr.swapaxes(-1, -2) if spec["layout"] == "T" else
                    arr[..., ::2] if spec["layout"] == "step" else arr)
    return args


def run_numpy(program) -> list[dict] | None:
    """Results of the numpy translation (float64), or None when the program has none."""
    if program.numpy_source is None:
        return None
    namespace: dict = {}
    exec(NUMPY_PRELUDE, namespace)
    exec(compile(program.numpy_source, "<numpy " + program.filename + ">", "exec"), namespace)
    results = []
    for call in program.calls:
        args = numpy_args(call)
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                outputs = namespace["program"](*args)
        except Exception as err:  # the class is the result being compared
            results.append({"raise": harness.builtin_class(err)})
            continue
        results.append({"outputs": [describe_numpy(o) for o in outputs],
                        "inputs_after": [describe_numpy(a) for a in args
                                         if isinstance(a, np.ndarray)]})
    return results


def describe_numpy(value) -> dict:
    arr = np.array(value, copy=True)
    return {"dtype": None, "shape": arr.shape, "values": arr}


def run_all(program, backends, torch_worker=None) -> dict:
    """{backend: results} for eager jitgrad and each requested backend."""
    jitgrad.reset()
    results = {"eager": run_jitgrad(program, "eager")}
    for backend in backends:
        if backend in JITGRAD_BACKENDS:
            results[backend] = run_jitgrad(program, backend)
        elif backend == "numpy":
            results[backend] = run_numpy(program)
        elif backend == "torch" and torch_worker is not None:
            results[backend] = torch_worker.run(program)
    jitgrad.reset()
    return results
