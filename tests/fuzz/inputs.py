"""Argument plans: tensor templates over shared size symbols, and the calls made with them.

A template fixes an argument's rank pattern (size symbols or broadcast 1s), dtype, layout and
requires_grad; a call fixes the symbol sizes, a float dtype override, the Python argument
values, whether NaN/inf/-0.0 are sprinkled in, and a value seed. `specs(call)` makes the
input specs of tests.fuzz.harness. Sizes only grow across calls (indices written for the
first call stay in range); "big" programs have more than 2^17 elements per input, so
kernels take their parallel paths.
"""

import numpy as np

BIG_SIZES = [384, 400]


INPUT_DTYPE_FEATURES = {"float64_inputs": "float64", "int_inputs": "int64",
                        "bool_inputs": "bool"}


def tensor_template(g, big: bool) -> dict:
    """A random tensor argument template (see module notes)."""
    rank = g.rng.choices([0, 1, 2, 3], [1, 3, 4, 2])[0]
    if big:
        rank = 2
    syms = tuple(None if (g.rng.random() < 0.15 and not big) else i
                 for i in range(3 - rank, 3))
    dtypes = [("float32", 6)]
    for feature, weight in (("float64_inputs", 1.5), ("int_inputs", 1.5), ("bool_inputs", 1)):
        if feature in g.features:
            dtypes.append((INPUT_DTYPE_FEATURES[feature], weight))
    dtype = g.rng.choices([d for d, _ in dtypes], [w for _, w in dtypes])[0]
    g.used.update(feature for feature, d in INPUT_DTYPE_FEATURES.items() if d == dtype)
    layout = "contig"
    if g.on("noncontig", 0.2) and rank >= 1:
        layout = g.rng.choice(["T", "step"] if rank >= 2 else ["step"])
        g.used.add("noncontig")
    requires_grad = dtype.startswith("float") and g.grad_program and g.rng.random() < 0.7
    return {"kind": "tensor", "syms": syms, "dtype": dtype, "layout": layout,
            "requires_grad": requires_grad}


def first_sizes(g, big: bool) -> list[int]:
    if big:
        return [2] + BIG_SIZES
    sizes = [g.rng.choice([2, 3, 4, 5]) for _ in range(3)]
    if g.on("empty", 0.05):
        sizes[g.rng.randrange(3)] = 0
        g.used.add("empty")
    return sizes


def array_for(template: dict, call: dict, nrng) -> np.ndarray:
    """The stored array of one tensor argument in one call (layout applied)."""
    shape = tuple(1 if s is None else call["sizes"][s] for s in template["syms"])
    dtype = template["dtype"]
    if dtype == "float32" and call["float64"]:
        dtype = "float64"
    if template["layout"] == "T":
        shape = shape[:-2] + (shape[-1], shape[-2])
    elif template["layout"] == "step":
        shape = shape[:-1] + (2 * shape[-1],)
    if dtype == "bool":
        return np.asarray(nrng.random(shape) < 0.5)
    if dtype == "int64":
        return np.asarray(nrng.integers(-3, 4, size=shape), dtype=np.int64)
    values = np.asarray(nrng.uniform(-2, 2, size=shape))
    if call["special"] and values.size:
        mask = nrng.random(shape) < 0.25
        values[mask] = nrng.choice([np.nan, np.inf, -np.inf, 0.0, -0.0], size=int(mask.sum()))
    return values.astype(dtype)


def specs(templates: list, call: dict) -> list[dict]:
    """Input specs (tests.fuzz.harness) of one call."""
    nrng = np.random.default_rng(call["value_seed"])
    out = []
    for template in templates:
        if template["kind"] == "py":
            out.append({"kind": "py", "value": call["py"][template["name"]]})
        else:
            out.append({"kind": "tensor", "array": array_for(template, call, nrng),
                        "layout": template["layout"],
                        "requires_grad": template["requires_grad"]})
    return out


def later_calls(g, first: dict) -> list[dict]:
    """Calls after the first: new values; sizes grown twice; float64; changed Python values;
    NaN."""
    calls = [dict(first, value_seed=first["value_seed"] + 1, py=changed_py(g, first["py"]))]
    if g.on("shape_change", 0.5):
        sizes = list(first["sizes"])
        grown = g.rng.randrange(3)
        sizes[grown] += 2
        calls.append(dict(first, sizes=sizes, value_seed=first["value_seed"] + 2))
        # grown again: the size is a symbol by now (automatic dynamic), so this call runs
        # the symbolic trace at new sizes (Note [Checking a symbolic trace])
        sizes = list(sizes)
        sizes[grown] += 3
        calls.append(dict(first, sizes=sizes, value_seed=first["value_seed"] + 5))
        g.used.add("shape_change")
    if g.on("dtype_change", 0.3):
        calls.append(dict(first, float64=True, value_seed=first["value_seed"] + 3))
        g.used.add("dtype_change")
    if g.on("special_values", 0.4):
        calls.append(dict(first, special=True, value_seed=first["value_seed"] + 4))
        g.used.add("special_values")
    return calls


def changed_py(g, py: dict) -> dict:
    out = dict(py)
    if g.rng.random() < 0.5:
        for name, value in py.items():
            out[name] = (not value if isinstance(value, bool) else
                         value + 1 if isinstance(value, int) else value * -2.0)
    return out


def py_params(g) -> dict:
    """Python arguments: k (loop count), s (a float used with tensors), flag (a branch)."""
    out = {}
    if "python_control" in g.features:
        if g.rng.random() < 0.4:
            out["k"] = g.rng.randint(1, 3)
        if g.rng.random() < 0.3:
            out["flag"] = g.rng.random() < 0.5
    if "python_float_args" in g.features and g.rng.random() < 0.3:
        out["s"] = g.rng.choice([0.5, -1.25, 3.0, 1e-3, 0.1, 1 / 3])
    return out
