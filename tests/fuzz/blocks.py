"""Statement builders for mutation, grad modes, control flow and graph breaks.

Same contract as tests.fuzz.statements: propose torch and numpy text to the Generator,
which keeps the statement if eager jitgrad runs it.
"""

from tests.fuzz.statements import is_float

INPLACE = [  # (torch, numpy, exact-preserving, min rank)
    ("{c}.mul_(2.0)", "{c} *= 2.0", True, 0),
    ("{c}.add_({b})", "{c} += {b}", False, 0),
    ("{c} += {b}", "{c} += {b}", False, 0),
    ("{c}.sub_(1)", "{c} -= 1", False, 0),
    ("{c} *= 0.5", "{c} *= 0.5", True, 0),
    ("{c}.relu_()", "{c}[...] = relu({c})", True, 0),
    ("{c}.clamp_(-1.0, 1.0)", "{c}[...] = np.clip({c}, -1.0, 1.0)", True, 0),
    ("{c}[0] = 1.5", "{c}[0] = 1.5", True, 1),
    ("{c}[..., 0] = {b0}", "{c}[..., 0] = {b0}", True, 1),
    ("{c}[torch.tensor([0])] = 0.0", "{c}[np.array([0])] = 0.0", True, 1),
    ("{c}.zero_()", "{c}[...] = 0", True, 0),
    ("{c}.fill_(2.0)", "{c}[...] = 2.0", True, 0),
    ("{c}.copy_({b})", "{c}[...] = {b}", True, 0),
]

VIEW_OF = [  # (torch, numpy, min rank)
    ("{c}[1:]", "{c}[1:]", 1), ("{c}[:, 0]", "{c}[:, 0]", 2), ("{c}.t()", "{c}.T", 0),
    ("{c}.view(-1)", "np.reshape({c}, -1)", 0), ("{c}[..., ::2]", "{c}[..., ::2]", 1),
    ("{c}.unsqueeze(0)", "{c}[None]", 0),
]


def inplace_text(g, c, rank, empty=False, target=None):
    """(torch, numpy, exact) of one in-place op on `c` (rank `rank`), or None. The numpy
    text is None when `target` (the tensor written, if known) is not floating point: a
    write casts to its dtype (1.5 into int64 is 1), which the float64 translation cannot."""
    t_tpl, n_tpl, exact, min_rank = g.rng.choice(INPLACE)
    if rank < min_rank or (empty and "inplace_empty" not in g.features):
        return None
    if empty:
        g.used.add("inplace_empty")
    b = g.pick() or "1.0"
    b0 = "0.25" if g.rng.random() < 0.5 else f"{b}.sum()"
    fmt = {"c": c, "b": b, "b0": b0}
    if target is not None and not is_float(target) and b in g.env and \
            getattr(g.env[b], "requires_grad", False) and "{b" in t_tpl:
        # torch flags an int/bool tensor written with a value requiring grad as requiring
        # grad, then refuses autograd on it ("Autograd not support dtype"): not probed
        return None
    exact = exact and (b not in g.env or g.exact.get(b, False)) and "sum" not in b0
    numpy_text = n_tpl.format(**fmt) if target is None or is_float(target) else None
    return t_tpl.format(**fmt), numpy_text, exact


def inplace(g) -> bool:
    a = g.pick()
    if a is None or "inplace" not in g.features:
        return False
    c = g.new_name()
    text = inplace_text(g, c, g.env[a].dim(), g.env[a].numel() == 0, g.env[a])
    if text is None:
        return False
    t_op, n_op, exact = text
    n_src = None if n_op is None else f"{c} = np.array({a}, copy=True)\n{n_op}"
    return g.try_add(f"{c} = {a}.clone()\n{t_op}", n_src,
                     {c: exact and g.exact.get(a, False)}, "inplace")


def inplace_view(g) -> bool:
    """Mutate a view of a fresh clone, then both the view and its base stay live."""
    a = g.pick()
    if a is None or "inplace_view" not in g.features:
        return False
    t_view, n_view, min_rank = g.rng.choice(VIEW_OF)
    c, w = g.new_name(), g.new_name()
    if g.env[a].dim() < min_rank or (t_view.endswith(".t()") and g.env[a].dim() > 2):
        return False
    text = inplace_text(g, w, max(g.env[a].dim() - 1, 0), g.env[a].numel() == 0, g.env[a])
    if text is None:
        return False
    t_op, n_op, exact = text
    exact = exact and g.exact.get(a, False)
    # the clone in C order, as eager's: numpy ufuncs keep a non-contiguous input's layout,
    # and np.reshape of another layout copies where `.view(-1)` aliases (campaign seed
    # 1056573: layer_norm of a non-contiguous input, the write through the view missed the
    # base)
    n_src = None if n_op is None else \
        f"{c} = np.array({a}, copy=True, order='C')\n{w} = {n_view.format(c=c)}\n{n_op}"
    return g.try_add(f"{c} = {a}.clone()\n{w} = {t_view.format(c=c)}\n{t_op}", n_src,
                     {c: exact, w: exact}, "inplace_view")


def inplace_input(g) -> bool:
    """Mutate an argument that does not require grad (a side effect the caller sees)."""
    params = [p for p in g.params if p in g.env and hasattr(g.env[p], "requires_grad")
              and not g.env[p].requires_grad]
    if not params or "inplace_input" not in g.features:
        return False
    a = g.rng.choice(params)
    text = inplace_text(g, a, g.env[a].dim(), g.env[a].numel() == 0, g.env[a])
    if text is None:
        return False
    t_op, n_op, exact = text
    # .float() of a float32 argument is the argument itself (torch's rule), but the numpy
    # translation holds float32 arguments widened: whether a conversion aliases differs
    n_op = None if g.conversions else n_op
    return g.try_add(t_op, n_op, {a: exact and g.exact.get(a, False)}, "inplace_input")


def no_grad_leaf_inplace(g) -> bool:
    """The optimizer pattern: update a leaf that requires grad under no_grad."""
    params = [p for p in g.params if p in g.env and hasattr(g.env[p], "requires_grad")
              and g.env[p].requires_grad and g.env[p].is_leaf]
    if not params or "no_grad_leaf_inplace" not in g.features:
        return False
    a = g.rng.choice(params)
    # as in inplace_input: a conversion of the argument may alias it in one and not the other
    return g.try_add(f"with torch.no_grad():\n    {a}.mul_(0.5)",
                     None if g.conversions else f"{a} *= 0.5", {a: g.exact.get(a, False)},
                     "no_grad_leaf_inplace")


def smooth_expr(g, a):
    """A continuous expression of `a` as (torch, numpy) text."""
    return g.rng.choice([
        (f"torch.tanh({a}) * 0.5", f"np.tanh(f64({a})) * 0.5"),  # np.tanh(bool) is float16
        (f"{a} * 2.0 + 1", f"{a} * 2.0 + 1"),
        (f"torch.sigmoid({a}) - {a}", f"sigmoid({a}) - {a}"),
        (f"{a}.abs() + 0.5", f"np.abs({a}) + 0.5"),
        (f"{a} * {a}", f"{a} * {a}"),
    ])


def grad_mode(g) -> bool:
    a = g.pick()
    if a is None:
        return False
    v = g.new_name()
    t_expr, n_expr = smooth_expr(g, a)
    choice = g.rng.random()
    if choice < 0.15 and "enable_grad_in_no_grad" in g.features:
        return g.try_add(f"with torch.no_grad():\n    with torch.enable_grad():\n"
                         f"        {v} = {t_expr}", f"{v} = {n_expr}", {v: False},
                         "enable_grad_in_no_grad")
    if "no_grad" not in g.features:
        return False
    if choice < 0.6:
        return g.try_add(f"with torch.no_grad():\n    {v} = {t_expr}", f"{v} = {n_expr}",
                         {v: False}, "no_grad")
    return g.try_add(f"{v} = {a}.detach() * 2", f"{v} = {a} * 2",
                     {v: g.exact.get(a, False)}, "no_grad")


def python_control(g) -> bool:
    a = g.pick(is_float)
    if a is None or "python_control" not in g.features:
        return False
    v = g.new_name()
    t1, n1 = smooth_expr(g, v)
    if "k" in g.env and g.rng.random() < 0.5:
        return g.try_add(f"{v} = {a}\nfor i in range(k):\n    {v} = {t1} + i",
                         f"{v} = {a}\nfor i in range(k):\n    {v} = {n1} + i", {v: False},
                         "python_control")
    if "flag" in g.env and g.rng.random() < 0.6:
        t2, n2 = smooth_expr(g, a)
        return g.try_add(f"if flag:\n    {v} = {t2}\nelse:\n    {v} = {a} - 1",
                         f"if flag:\n    {v} = {n2}\nelse:\n    {v} = {a} - 1", {v: False},
                         "python_control")
    return g.try_add(f"{v} = {a}\nfor i in range(2):\n    {v} = {v} * 0.5 + {a}.shape[-1]"
                     if g.env[a].dim() else f"{v} = {a} * 3",
                     f"{v} = {a}\nfor i in range(2):\n    {v} = {v} * 0.5 + {a}.shape[-1]"
                     if g.env[a].dim() else f"{v} = {a} * 3", {v: False}, "python_control")


# (torch, numpy), on an exact operand. A sum is taken of small integers (clamped, rounded, in
# float64): a float sum's rounding and overflow depend on its order, which differs between
# numpy, numba and torch (campaign seed 1043240: nan_to_num's +-max summed to inf in one
# order, to a finite value in another, and the branch flipped)
CONDITIONS = [
    ("{a}.double().clamp(-1000, 1000).round().sum() > 0",
     "np.sum(np.round(np.clip(np.asarray({a}, dtype=np.float64), -1000, 1000))) > 0"),
    ("{a}.amax() > 0.5", "np.max({a}) > 0.5"),
    ("{a}.max().item() > 0", "np.max({a}) > 0"), ("bool(({a} > 0).any())", "bool(np.any({a} > 0))"),
    ("{a}.numel() > 5", "{a}.size > 5"),
]


def data_branch(g) -> bool:
    a = g.pick(lambda t: t.numel() > 0)
    b = g.pick(is_float)
    if a is None or b is None or not g.exact.get(a) or "data_branch" not in g.features:
        return False
    t_cond, n_cond = g.rng.choice(CONDITIONS)
    v = g.new_name()
    t1, n1 = smooth_expr(g, b)
    t2, n2 = smooth_expr(g, b)
    return g.try_add(f"if {t_cond.format(a=a)}:\n    {v} = {t1}\nelse:\n    {v} = {t2}",
                     f"if {n_cond.format(a=a)}:\n    {v} = {n1}\nelse:\n    {v} = {n2}",
                     {v: False}, "data_branch")


def graph_break(g) -> bool:
    a = g.pick()
    if a is None or "graph_break" not in g.features:
        return False
    text = g.rng.choice([f"print(list({a}.shape), file=SINK)", "graph_break()",
                         f"print({a}.dim(), {a}.numel(), file=SINK)"])
    return g.try_add(text, "pass", {}, "graph_break")


def item(g) -> bool:
    a, b = g.pick(), g.pick(is_float)
    # a sum of inexact values can be rounding noise around 0 (of a layer_norm output, say)
    if a is None or b is None or "item" not in g.features or not g.exact.get(a):
        return False
    s, v = g.new_name(), g.new_name()
    return g.try_add(f"{s} = {a}.sum().item()\n{v} = {b} * {s}",
                     f"{s} = np.sum({a}).item()\n{v} = {b} * {s}", {v: False}, "item")


def layout_query(g) -> bool:
    a = g.pick()
    if a is None or "layout_queries" not in g.features:
        return False
    v = g.new_name()
    if g.rng.random() < 0.5:
        return g.try_add(f"print({a}.stride(), file=SINK)\n{v} = {a} + 1", None, {v: False},
                         "layout_queries")
    return g.try_add(f"if {a}.is_contiguous():\n    {v} = {a} + 1\nelse:\n    {v} = {a} - 1",
                     None, {v: False}, "layout_queries")


def cat_stack(g) -> bool:
    a = g.pick()
    if a is None or "cat_stack" not in g.features or g.env[a].dim() == 0:
        return False
    b = g.pick(lambda t: t.shape == g.env[a].shape) or a
    v = g.new_name()
    exact = g.exact.get(a, False) and g.exact.get(b, False)
    # torch's cat and stack give C-contiguous results, numpy's may keep an F-ordered
    # input's layout (fuzz seed 962220: a view of a clone of it was then a copy)
    if g.rng.random() < 0.5:
        d = g.rng.randrange(-g.env[a].dim(), g.env[a].dim())
        return g.try_add(f"{v} = torch.cat([{a}, {b} * 2], dim={d})",
                         f"{v} = c_order(np.concatenate([{a}, {b} * 2], axis={d}))", {v: exact},
                         "cat_stack")
    return g.try_add(f"{v} = torch.stack([{a}, {b}])", f"{v} = c_order(np.stack([{a}, {b}]))",
                     {v: exact}, "cat_stack")


def creation(g) -> bool:
    a = g.pick()
    if a is None or "creation" not in g.features:
        return False
    v = g.new_name()
    t_src, n_src = g.rng.choice([
        (f"torch.zeros_like({a}) + {a}", f"np.zeros_like({a}) + {a}"),
        (f"torch.ones_like({a}) * 3", f"np.ones_like({a}) * 3"),
        (f"torch.full_like({a}, 2.0) - {a}", f"np.full_like({a}, 2.0) - {a}"),
        (f"torch.arange({a}.shape[-1]) * 1.5" if g.env[a].dim() else "torch.arange(3)",
         f"np.arange({a}.shape[-1]) * 1.5" if g.env[a].dim() else "np.arange(3)"),
        (f"torch.zeros({a}.shape, dtype=torch.float64) + {a}",
         f"np.zeros({a}.shape) + {a}"),
    ])
    return g.try_add(f"{v} = {t_src}", f"{v} = {n_src}", {v: g.exact.get(a, False)}, "creation")
