"""Inputs in, plain results out, for any torch-like module (jitgrad or real torch).

Imports neither jitgrad nor torch: the runner passes `jitgrad`, the torch worker (a
subprocess of another interpreter) passes `torch`, so both build the same inputs from the
same specs and report in the same form.

An input spec is a dict: `{"kind": "tensor", "array": ndarray, "layout": "contig" | "T" |
"step", "requires_grad": bool}` or `{"kind": "py", "value": int | float | bool}`. Layout "T"
stores the transpose of the last two dims and passes a transposed view; "step" stores twice
the last dim and passes `[..., ::2]`. The leaf (what requires grad) is the stored tensor.

A call result is a dict: `{"raise": class}` (the first builtin class in the exception's MRO,
so jitgrad's RuntimeError subclasses and torch's compare equal) or `{"outputs": [...],
"inputs_after": [...], "sink": text, "backward": None | class, "grads": [...]}` where each
tensor is described by `describe`.
"""

import io

import numpy as np

PRELUDE_NAMES = ("torch", "F", "SINK", "graph_break")


def builtin_class(err: BaseException) -> str:
    """Name of the first builtin class in the exception's MRO (RuntimeError, IndexError...)."""
    for cls in type(err).__mro__:
        if cls.__module__ == "builtins":
            return cls.__name__
    return type(err).__name__


def materialize(torch, spec):
    """(argument, leaf or None) for one input spec; the leaf is what requires grad."""
    if spec["kind"] == "py":
        return spec["value"], None
    leaf = torch.tensor(spec["array"])
    if spec["requires_grad"]:
        leaf.requires_grad_(True)
    arg = leaf
    if spec["layout"] == "T":
        arg = leaf.transpose(-1, -2)
    elif spec["layout"] == "step":
        arg = leaf[..., ::2]
    return arg, leaf


def describe(torch, value):
    """A tensor, None or Python value as plain data: dtype name, shape, numpy values."""
    if value is None:
        return {"none": True}
    if isinstance(value, torch.Tensor):
        return {"dtype": str(value.dtype).rsplit(".", 1)[-1], "shape": tuple(value.shape),
                "requires_grad": bool(value.requires_grad),
                "values": np.array(value.detach().numpy(), copy=True)}
    return {"py": type(value).__name__, "value": value}


def load_program(torch, source: str, filename: str, graph_break):
    """Compile `source` (defining `program`) under `filename`; returns (program, sink)."""
    sink = io.StringIO()
    namespace = {"torch": torch, "F": torch.nn.functional, "SINK": sink,
                 "graph_break": graph_break, "__name__": "fuzz_program"}
    exec(compile(source, filename, "exec"), namespace)
    return namespace["program"], sink


def backward_of(torch, outputs):
    """Sum every floating output that requires grad and run backward; None or class."""
    terms = [o.sum() for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad
             and o.dtype.is_floating_point]
    if not terms:
        return None
    loss = terms[0]
    for term in terms[1:]:
        loss = loss + term
    try:
        loss.backward()
    except Exception as err:  # the class is the result being compared
        return builtin_class(err)
    return None


def run_call(torch, fn, call, sink):
    """Run `fn` on one call's input specs; the result dict described in the module notes."""
    pairs = [materialize(torch, spec) for spec in call]
    args = [arg for arg, _ in pairs]
    sink.seek(0)
    sink.truncate()
    try:
        outputs = fn(*args)
    except Exception as err:  # the class is the result being compared
        return {"raise": builtin_class(err), "message": str(err)[:300]}
    if not isinstance(outputs, tuple):
        outputs = (outputs,)
    result = {"outputs": [describe(torch, o) for o in outputs],
              "inputs_after": [describe(torch, a) for a, leaf in pairs if leaf is not None],
              "sink": sink.getvalue()}
    result["backward"] = backward_of(torch, outputs)
    # floating leaves only: torch flags an int/bool tensor written with a value requiring
    # grad as requiring grad (a documented difference, tests.fuzz.runner)
    result["grads"] = [describe(torch, leaf.grad) for _, leaf in pairs
                       if leaf is not None and leaf.requires_grad
                       and leaf.dtype.is_floating_point]
    return result
