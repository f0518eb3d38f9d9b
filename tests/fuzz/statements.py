"""Statement builders: each proposes one statement (torch and numpy text) to a Generator.

A builder returns True when its statement was kept (`Generator.try_add` ran it eagerly).
Builders read operand facts (shape, dtype, requires_grad) from the eager values the
generator holds, and the exactness flags it tracks (see tests.fuzz.generator).
"""

import jitgrad
from tests.fuzz.ops import BINARY, REDUCTIONS, SCALARS, UNARY, ZERO_DIM, ZERO_DIM_NUMPY

BOOL_ARITH = {"add", "sub", "mul", "rsub", "add_alpha", "div"}
WIDEN = {"sign", "floor", "round"}  # numpy has no bool loop for these


def is_float(t) -> bool:
    return t.dtype.is_floating_point


def is_bool(t) -> bool:
    return t.dtype == jitgrad.bool


def unary(g) -> bool:
    op = g.rng.choice(UNARY)
    a = g.pick()
    if a is None or (op.floats_only and not is_float(g.env[a])):
        return False
    exact_a = g.exact.get(a, False)
    if op.kind == "disc" and not exact_a:
        return False
    t_src, n_src = op.torch, op.numpy
    if op.kind == "domain" and not exact_a:
        t_src, n_src = op.safe_torch, op.safe_numpy
    v = g.new_name()
    exact = exact_a and op.kind in ("exact", "disc")
    if op.name == "to_float" and (g.env[a].dtype == jitgrad.float64 or "dtype_change" in g.used):
        exact = False  # rounds a float64 operand: this call's, or a later call's (dtype_change)
    # numpy's float ufuncs give float16 for bool operands: widen first, as torch does
    n_a = f"f64({a})" if op.kind in ("smooth", "domain") or op.name in WIDEN else a
    n_line = None if n_src is None else f"{v} = " + n_src.format(a=n_a)
    if op.name.startswith("to_"):
        g.conversions = True
    return g.try_add(f"{v} = " + t_src.format(a=a), n_line, {v: exact}, "pointwise")


def operand(g, a):
    """Second operand: (torch text, numpy text, exact, is bool, feature)."""
    r = g.rng.random()
    if r < 0.55:
        b = g.pick()
        if b is not None:
            return b, b, g.exact.get(b, False), is_bool(g.env[b]), "pointwise"
    if r < 0.75 and "scalars" in g.features:
        if "large_constants" in g.features and g.rng.random() < 0.15:
            # float32 absorbs |x| < 4 into 1e8: (x + 1e8) - 1e8 is 0, not x, unless reassociated
            s = g.rng.choice(["1e8", "-1e8", "3e38"])
            return s, None, True, False, "large_constants"
        s = g.rng.choice(SCALARS)
        return s, s, True, s == "True", "scalars"
    if r < 0.85 and "zero_dim" in g.features:
        z = g.rng.choice(ZERO_DIM)
        return z, ZERO_DIM_NUMPY[z], True, "True" in z, "zero_dim"
    py = [p for p in ("s", "k") if p in g.env]
    if py and "python_float_args" in g.features:
        p = g.rng.choice(py)
        return p, p, True, False, "python_float_args"
    return "2", "2", True, False, "scalars"


def binary(g) -> bool:
    op = g.rng.choice(BINARY)
    a = g.pick()
    if a is None:
        return False
    b, nb, exact_b, bool_b, feature = operand(g, a)
    exact_a = g.exact.get(a, False)
    if op.kind == "disc" and not (exact_a and exact_b):
        return False
    t_src, n_src = op.torch, op.numpy
    if op.kind == "domain" and not exact_b:
        t_src, n_src = op.safe_torch, op.safe_numpy
        if not b.isidentifier():
            return False
    if op.name == "add_alpha" and feature in ("scalars", "python_float_args"):
        if "add_alpha_scalar" not in g.features:
            return False
        feature = "add_alpha_scalar"
    if b == a and op.kind != "disc":
        if "self_operand" not in g.features:
            return False
        feature = "self_operand"
    if is_bool(g.env[a]) and bool_b and op.name in BOOL_ARITH:
        if "bool_arith" not in g.features:
            return False
        feature = "bool_arith"
    if is_bool(g.env[a]) and (bool_b or op.name == "add_alpha"):
        nb = None  # bool results (b + b is b | b): the widened numpy translation cannot say
    v = g.new_name()
    exact = exact_a and exact_b and op.kind in ("exact", "disc")
    # the float64 reference keeps what float32 loses to a large constant: no numpy here
    n_line = None if nb is None else f"{v} = " + n_src.format(a=a, b=nb)
    return g.try_add(f"{v} = " + t_src.format(a=a, b=b), n_line, {v: exact}, feature)


def dims_for(g, ndim, needs_dim, allow_tuple):
    """(torch dim text, numpy axis text) or None when the reduction takes no dim here."""
    if ndim == 0:
        return None if not needs_dim else ("dim=0", None)
    if not needs_dim and g.rng.random() < 0.3:
        return "", "None"
    if allow_tuple and ndim >= 2 and g.rng.random() < 0.25:
        dims = tuple(sorted(g.rng.sample(range(ndim), 2)))
        return f"dim={dims}", str(dims)
    d = g.rng.randrange(-ndim, ndim)
    return f"dim={d}", str(d)


# Subtracting the mean amplifies an operand's rounding by |mean| / std: these take only
# exact operands (argmax: a tie broken by one ulp)
CANCELLING = {"argmax", "var", "var0", "std"}


def reduction(g) -> bool:
    if "reductions" not in g.features:
        return False
    name, t_tpl, n_tpl, exact_out, needs_dim = g.rng.choice(REDUCTIONS)
    a = g.pick()
    if a is None or (name in CANCELLING and not g.exact.get(a)):
        return False
    dims = dims_for(g, g.env[a].dim(), needs_dim, name in ("sum", "mean", "amax", "amin"))
    if dims is None or dims[1] is None:
        return False
    d, nd = dims
    keep = d != "" and name not in ("softmax", "log_softmax", "cumsum") and g.rng.random() < 0.4
    k, nk = (", keepdim=True", ", keepdims=True") if keep else ("", "")
    v = g.new_name()
    exact = exact_out and g.exact.get(a, False)
    return g.try_add(f"{v} = " + t_tpl.format(a=a, d=d, k=k),
                     f"{v} = " + n_tpl.format(a=a, nd=nd, nk=nk), {v: exact}, "reductions")


def layer_norm(g) -> bool:
    a = g.pick(lambda t: is_float(t) and t.dim() >= 1)
    if a is None or "layer_norm" not in g.features or not g.exact.get(a):
        return False
    v = g.new_name()
    return g.try_add(f"{v} = F.layer_norm({a}, ({a}.shape[-1],))",
                     f"{v} = layer_norm({a}, {a}.shape[-1])", {v: False}, "layer_norm")


def cross_entropy(g) -> bool:
    a = g.pick(lambda t: is_float(t) and t.dim() == 2 and t.shape[1] > 0)
    if a is None or "cross_entropy" not in g.features:
        return False
    n, c = g.env[a].shape
    target = [g.rng.randrange(c) for _ in range(n)]
    reduction_ = g.rng.choice(["mean", "sum", "none"])
    v = g.new_name()
    return g.try_add(
        f"{v} = F.cross_entropy({a}, torch.tensor({target}), reduction={reduction_!r})",
        f"{v} = cross_entropy({a}, np.array({target}, dtype=np.int64), {reduction_!r})",
        {v: False}, "cross_entropy")


def matmul(g) -> bool:
    a = g.pick(lambda t: t.dim() >= 1)
    if a is None or "matmul" not in g.features:
        return False
    k = g.env[a].shape[-1]
    partners = g.tensors(lambda t: t.dim() >= 1 and t.dtype == g.env[a].dtype
                         and (t.shape[0] if t.dim() == 1 else t.shape[-2]) == k)
    b = g.rng.choice(partners) if partners and g.rng.random() < 0.7 else None
    if b is None and g.env[a].dim() >= 2:
        b, nb = f"{a}.transpose(-1, -2)", f"np.swapaxes({a}, -1, -2)"
    elif b is None:
        b, nb = a, a
    else:
        nb = b
    v = g.new_name()
    return g.try_add(f"{v} = {a} @ {b}", f"{v} = np.matmul({a}, {nb})", {v: False}, "matmul")


VIEWS = [  # (min rank, max rank, torch, numpy)
    (0, 2, "{a}.t()", "np.transpose({a})"),
    (1, 9, "{a}.transpose(0, -1)", "np.swapaxes({a}, 0, -1)"),
    (3, 3, "{a}.permute(2, 0, 1)", "np.transpose({a}, (2, 0, 1))"),
    (0, 9, "{a}.reshape(-1)", "np.reshape({a}, -1)"),
    (0, 9, "{a}.view(-1)", "np.reshape({a}, -1)"),
    (0, 9, "{a}.unsqueeze(0)", "np.expand_dims({a}, 0)"),
    (0, 9, "{a}.squeeze()", "np.squeeze({a})"),
    (0, 9, "{a}.flatten()", "np.reshape({a}, -1)"),  # a view where torch has one (not ravel)
    (0, 9, "{a}.expand(2, *{a}.shape)", "np.broadcast_to({a}, (2,) + {a}.shape)"),
    (0, 9, "{a}.contiguous()", "contiguous({a})"),
    (1, 9, "{a}[1:]", "{a}[1:]"),
    (2, 9, "{a}[:, ::2]", "{a}[:, ::2]"),
    (1, 9, "{a}[..., -1]", "{a}[..., -1]"),
    (1, 9, "{a}[0]", "{a}[0, ...]"),  # a 0-d view of a 1-d array, as torch (not a copy)
    (2, 9, "{a}.reshape({a}.shape[0], -1)", "np.reshape({a}, ({a}.shape[0], -1))"),
    (2, 9, "{a}.mT", "np.swapaxes({a}, -1, -2)"),
    (1, 9, "{a}.narrow(-1, 0, 1)", "{a}[..., 0:1]"),
    (1, 9, "{a}[None, ..., 1:]", "{a}[None, ..., 1:]"),
]


def view(g) -> bool:
    a = g.pick()
    if a is None or "views" not in g.features:
        return False
    lo, hi, t_tpl, n_tpl = g.rng.choice(VIEWS)
    if not lo <= g.env[a].dim() <= hi:
        return False
    v = g.new_name()
    return g.try_add(f"{v} = " + t_tpl.format(a=a), f"{v} = " + n_tpl.format(a=a),
                     {v: g.exact.get(a, False)}, "views")


def index_tensor(g) -> bool:
    a = g.pick(lambda t: t.dim() >= 1 and t.shape[0] > 0)
    if a is None or "index_tensor" not in g.features:
        return False
    t = g.env[a]
    dim = 1 if t.dim() >= 2 and t.shape[1] > 0 and g.rng.random() < 0.4 else 0
    n = t.shape[dim]
    idx = [g.rng.randrange(-n, n) for _ in range(g.rng.randint(1, 4))]
    oob = "index_oob" in g.features and g.rng.random() < 0.2
    if oob:
        idx[g.rng.randrange(len(idx))] = g.rng.choice([n, -n - 1, n + 3])
    prefix = ":, " if dim else ""
    feature = "index_oob" if oob else "index_tensor"
    if t.numel() == 0 and t.requires_grad:
        if "index_empty_grad" not in g.features:
            return False
        feature = "index_empty_grad"
    v = g.new_name()
    t_src = f"{v} = {a}[{prefix}torch.tensor({idx})]"
    kept = g.try_add(t_src, f"{v} = index({a}, {idx}, {dim})",
                     {v: g.exact.get(a, False)}, feature)
    if oob and not kept:
        g.force_error(t_src, "index_oob")
    return kept


def bool_mask(g) -> bool:
    a = g.pick()
    if a is None or "bool_mask" not in g.features or not g.exact.get(a):
        return False
    v = g.new_name()
    return g.try_add(f"{v} = {a}[{a} > 0]", f"{v} = {a}[{a} > 0]", {v: True}, "bool_mask")


ABSORBING = ["({a} + 1e8) - 1e8", "({a} - 1e8) + {a}", "{a} * 3e38 * 10.0", "({a} * 1e30) / 1e30"]


def large_constant(g) -> bool:
    """float32 absorption and overflow that reassociation or float64 temporaries would hide."""
    a = g.pick(is_float)
    if a is None or "large_constants" not in g.features:
        return False
    v = g.new_name()
    return g.try_add(f"{v} = " + g.rng.choice(ABSORBING).format(a=a), None, {v: False},
                     "large_constants")
