"""`einsum`: numpy's einsum forward, contracted pairwise; backward is einsum again.

Note [Einsum backward]: for out = einsum("s_a,s_b->s_o", a, b), the gradient of `a` is
einsum("s_o,s_b->s_a", g, b), with three repairs:
- a letter repeated in s_a (a diagonal, "ii->i") cannot be an einsum output: its second
  occurrence is renamed to a fresh letter c' and an identity operand "cc'" is added, so
  the gradient lands on the diagonal only;
- a letter only in s_a (summed away inside `a`, "ij->i") is absent from g and b: the
  result gets a size-1 axis there and is expanded;
- a letter of size 1 in `a` broadcast against size n elsewhere gets a size-n gradient,
  which the engine sums back to 1; a letter of size n in `a` whose other occurrences
  are all size 1 gets a size-1 gradient, expanded to n (HIPS/autograd#376 class).
More than two operands are contracted left to right, one `einsum` op per pair (each
intermediate keeps the letters still needed), as PyTorch does.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np

from jitgrad.eager.ops._binary import as_tensor, result_dtype
from jitgrad.eager.ops.registry import apply_op, register
from jitgrad.eager.tensor import Tensor


def _einsum_forward(a: np.ndarray, b: np.ndarray | None, equation: str) -> np.ndarray:
    return np.asarray(np.einsum(equation, a) if b is None else np.einsum(equation, a, b))


def _operand_grad(xp: Any, ctx: Any, g: Any, subs: list[str], out: str, operands: list[Any],
                  i: int) -> Any:
    """Gradient of operand i (see Note [Einsum backward])."""
    target = subs[i]
    shape, np_dtype = ctx.input_metadata[i]
    free = iter(c for c in string.ascii_letters if c not in "".join(subs) + out)
    renamed, seen = [], set()
    terms, values = [out], [g]
    for j, sub in enumerate(subs):
        if j != i:
            terms.append(sub)
            values.append(operands[j])
    for k, c in enumerate(target):
        if c in seen:  # a diagonal: a fresh letter tied to c by an identity operand
            fresh = next(free)
            terms.append(c + fresh)
            values.append(xp.cast(xp.eye_mask(shape[k], (shape[k], shape[k])), np_dtype))
            c = fresh
        seen.add(c)
        renamed.append(c)
    present = set("".join(terms))
    produced = "".join(c for c in renamed if c in present)
    grad = xp.einsum(",".join(terms) + "->" + produced, *values)
    sizes = _letter_sizes(terms, [_shape(v) for v in values])
    result = tuple(sizes[c] if c in present else 1 for c in renamed)
    grad = xp.reshape(grad, result) if len(produced) != len(renamed) else grad
    wanted = tuple(r if r == s else max(r, s) for r, s in zip(result, shape, strict=True))
    return xp.expand(grad, wanted) if wanted != result else grad


def _shape(value: Any) -> tuple[int, ...]:
    return tuple(value.shape)


def _letter_sizes(terms: list[str], shapes: list[tuple[int, ...]]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for term, shape in zip(terms, shapes, strict=True):
        for c, n in zip(term, shape, strict=True):
            sizes[c] = max(sizes.get(c, 1), n)
    return sizes


def _einsum_backward(xp: Any, ctx: Any, g: Any, a: Any, b: Any) -> tuple:
    inputs, out = ctx.params["equation"].split("->")
    subs = inputs.split(",")
    operands = [a] if b is None else [a, b]
    return tuple(_operand_grad(xp, ctx, g, subs, out, operands, i) if need else None
                 for i, need in enumerate(ctx.needs_input_grad[:len(operands)])) + \
        (None,) * (2 - len(operands))


EINSUM = register("einsum", _einsum_forward, _einsum_backward, saves=("a", "b"),
                  source="einsum with the operand's and output's subscripts swapped")


def _parse(equation: str, ndims: list[int]) -> tuple[list[str], str]:
    """Explicit subscripts: ellipses become reserved letters (right-aligned, as numpy
    broadcasts them) and an implicit output becomes the sorted letters used once."""
    equation = equation.replace(" ", "")
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        raise RuntimeError(f"einsum(): {len(terms)} subscript terms in {equation!r} but "
                           f"{len(ndims)} operands were given")
    reserved = [c for c in string.ascii_letters if c not in equation]
    widths = [n - len(t.replace("...", "")) for t, n in zip(terms, ndims, strict=True)]
    width = max([w for t, w in zip(terms, widths, strict=True) if "..." in t], default=0)
    ellipsis = "".join(reserved[:width])
    for t, w, n in zip(terms, widths, ndims, strict=True):
        if ("..." not in t and w != 0) or w < 0:
            raise RuntimeError(f"einsum(): the term {t!r} does not match an operand with {n} "
                               f"dims in {equation!r}")
    terms = [t.replace("...", ellipsis[width - w:]) for t, w in zip(terms, widths, strict=True)]
    if arrow:
        return terms, out.replace("...", ellipsis)
    letters = "".join(terms).replace("...", "")
    singles = sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ellipsis)
    return terms, ellipsis + "".join(singles)


def _needed_letters(left: str, right: str, later: list[str], out: str) -> str:
    keep = set("".join(later) + out)
    return "".join(dict.fromkeys(c for c in left + right if c in keep))


def einsum(equation: str, *operands: Any) -> Tensor:
    """Einstein summation, e.g. `einsum("bij,bjk->bik", a, b)`; `...` and implicit output
    supported. Operands may also be passed as one list.

    Dtype: the promoted dtype of the operands. Gradient: Note [Einsum backward].
    Raises RuntimeError when the subscripts do not match the operands.
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    tensors = [as_tensor(x) for x in operands]
    np_dtype = result_dtype(*tensors).np
    terms, out = _parse(equation, [t._data.ndim for t in tensors])
    arrays = [t._data.astype(np_dtype, copy=False) for t in tensors]
    try:
        if len(tensors) == 1:
            return apply_op(EINSUM, (tensors[0], None), (arrays[0], None),
                            {"equation": f"{terms[0]}->{out}"})
        left, left_terms = tensors[0], terms[0]
        left_array = arrays[0]
        for j in range(1, len(tensors)):
            keep = out if j == len(tensors) - 1 else _needed_letters(left_terms, terms[j],
                                                                      terms[j + 1:], out)
            left = apply_op(EINSUM, (left, tensors[j]), (left_array, arrays[j]),
                            {"equation": f"{left_terms},{terms[j]}->{keep}"})
            left_terms, left_array = keep, left._data
    except ValueError as err:
        raise RuntimeError(f"einsum(): {err} (equation {equation!r}, shapes "
                           f"{[list(t._data.shape) for t in tensors]})") from None
    return left
