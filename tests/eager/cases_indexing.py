"""Op cases for indexing (`x[...]`, gather/scatter, index_select/index_add/index_put,
masked_select, take_along_dim) and for in-place ops and `x[i] = v` written on clones,
so gradcheck differentiates through CopySlices and the rebased history."""

import numpy as np

import jitgrad as jg
from tests.eager.op_table import Arg, OpCase

A = Arg((3, 4))
T = Arg((3, 4), layout="transposed")
S = Arg((3, 4), layout="strided")
B3 = Arg((2, 3, 4))
IDX = jg.tensor([[0, 2, 1, 0], [2, 2, 0, 1]])
IDX_UNIQUE = jg.tensor([[0, 2, 1, 0], [2, 1, 0, 1]])  # no target written twice (scatter)
IDX_COLS = jg.tensor([[1, 3, 0], [2, 2, 1]])
DUP = [0, 0, 2, 0]
MASK = np.array([[True, False, True, True],
                 [False, False, True, False],
                 [True, True, False, False]])


def _gather_ref(a, dim, index):
    return np.take_along_axis(a, index, axis=dim)


def _scatter_ref(a, index, src, accumulate):
    out = a.copy()
    rows = index
    cols = np.broadcast_to(np.arange(index.shape[1]), index.shape)
    if accumulate:
        np.add.at(out, (rows, cols), src[:index.shape[0], :index.shape[1]])
    else:
        out[rows, cols] = src[:index.shape[0], :index.shape[1]]
    return out


def _put(a, index, values, accumulate=False):
    out = a.copy()
    if accumulate:
        np.add.at(out, index, values)
    else:
        out[index] = values
    return out


def _index_add_ref(a, src, index, alpha=1.0):
    out = a.copy()
    np.add.at(out, (slice(None), index), alpha * src)
    return out


def _setitem(fn):
    """Run `fn(copy, *args)` on a clone (a setitem statement cannot be a lambda)."""
    def run(a, *args):
        out = _copy(a)
        fn(out, *args)
        return out
    return run


def _set_rows(out, v):
    out[1:3] = v


def _set_mask(out, v):
    out[MASK if isinstance(out, np.ndarray) else jg.tensor(MASK)] = v


def _set_list(out, v):
    out[[2, 0]] = v


def _set_mixed(out, v):
    out[1, [0, 2]] = v


def _set_scalar(out):
    out[:, 1] = 2.5


def _iadd_row(out, v):
    out[0] += v


CASES = [
    # ----- getitem: basic (views) --------------------------------------------------
    OpCase("getitem_int", lambda a: a[1], lambda a: a[1], (A,)),
    OpCase("getitem_negative_int_transposed", lambda a: a[-1], lambda a: a[-1], (T,)),
    OpCase("getitem_slices_step", lambda a: a[::2, 1:], lambda a: a[::2, 1:], (S,)),
    OpCase("getitem_ellipsis_none", lambda a: a[..., None, 1], lambda a: a[..., None, 1], (B3,)),
    OpCase("getitem_all_ints_0d", lambda a: a[1, 2], lambda a: a[1, 2], (A,)),
    OpCase("getitem_0d_ellipsis", lambda a: a[...], lambda a: a[...], (Arg(()),)),
    OpCase("getitem_int_tensor_scalar", lambda a: a[jg.tensor(2)], lambda a: a[2], (A,)),
    # ----- getitem: advanced (copies) ------------------------------------------------
    OpCase("getitem_list_duplicates", lambda a: a[DUP], lambda a: a[DUP], (A,)),
    OpCase("getitem_int_tensor_2d", lambda a: a[IDX], lambda a: a[IDX.numpy()], (T,)),
    OpCase("getitem_negative_indices", lambda a: a[:, [-1, 0, -1]], lambda a: a[:, [-1, 0, -1]],
           (A,)),
    OpCase("getitem_bool_mask", lambda a: a[jg.tensor(MASK)], lambda a: a[MASK], (S,)),
    OpCase("getitem_bool_row_mask", lambda a: a[jg.tensor([True, False, True])],
           lambda a: a[[True, False, True]], (A,)),
    OpCase("getitem_int_then_list", lambda a: a[1, :, [0, 2]],
           lambda a: a[1][:, [0, 2]], (B3,)),
    OpCase("getitem_separated_arrays", lambda a: a[[0, 1], :, [1, 3]],
           lambda a: a[[0, 1], :, [1, 3]], (B3,)),
    OpCase("getitem_adjacent_arrays_broadcast", lambda a: a[:, [[0], [2]], [1, 3]],
           lambda a: a[:, [[0], [2]], [1, 3]], (B3,)),
    OpCase("getitem_slice_then_array", lambda a: a[1:, [3, 0]], lambda a: a[1:, [3, 0]], (A,)),
    OpCase("getitem_true", lambda a: a[True], lambda a: a[None], (A,)),
    # ----- index-based ops ---------------------------------------------------------
    OpCase("gather_dim0", lambda a: jg.gather(a, 0, IDX), lambda a: _gather_ref(a, 0, IDX.numpy()),
           (A,)),
    OpCase("gather_dim1_transposed", lambda a: a.gather(1, IDX_COLS),
           lambda a: _gather_ref(a[:2], 1, IDX_COLS.numpy()), (T,)),
    OpCase("take_along_dim", lambda a: jg.take_along_dim(a, jg.tensor([[1], [0], [3]]), 1),
           lambda a: np.take_along_axis(a, np.array([[1], [0], [3]]), 1), (A,)),
    OpCase("take_along_dim_flat", lambda a: a.take_along_dim(jg.tensor([5, 0, 5])),
           lambda a: a.reshape(-1)[[5, 0, 5]], (S,)),
    OpCase("scatter_src", lambda a, s: jg.scatter(a, 0, IDX_UNIQUE, s),
           lambda a, s: _scatter_ref(a, IDX_UNIQUE.numpy(), s, False), (A, Arg((2, 4)))),
    OpCase("scatter_larger_src", lambda a, s: a.scatter(0, IDX_UNIQUE[:, :2], s),
           lambda a, s: _scatter_ref(a, IDX_UNIQUE.numpy()[:, :2], s, False), (A, Arg((3, 4)))),
    OpCase("scatter_value", lambda a: a.scatter(0, IDX, 1.5),
           lambda a: _scatter_ref(a, IDX.numpy(), np.full((2, 4), 1.5), False), (T,)),
    OpCase("scatter_add", lambda a, s: jg.scatter_add(a, 0, IDX, s),
           lambda a, s: _scatter_ref(a, IDX.numpy(), s, True), (A, Arg((2, 4)))),
    OpCase("index_select_duplicates", lambda a: a.index_select(1, jg.tensor([2, 2, 0])),
           lambda a: a[:, [2, 2, 0]], (S,)),
    OpCase("index_select_dim0", lambda a: jg.index_select(a, 0, jg.tensor([1])),
           lambda a: a[[1]], (A,)),
    OpCase("index_add", lambda a, s: jg.index_add(a, 1, jg.tensor([0, 3, 0]), s, alpha=2.0),
           lambda a, s: _index_add_ref(a, s, [0, 3, 0], 2.0), (A, Arg((3, 3)))),
    OpCase("index_put", lambda a, v: jg.index_put(a, (jg.tensor([0, 2]), jg.tensor([1, 1])), v),
           lambda a, v: _put(a, ([0, 2], [1, 1]), v), (A, Arg((2,)))),
    OpCase("index_put_accumulate_duplicates",
           lambda a, v: a.index_put((jg.tensor([0, 0, 2]),), v, accumulate=True),
           lambda a, v: _put(a, ([0, 0, 2],), v, True), (T, Arg((4,)))),
    OpCase("take_negative", lambda a: jg.take(a, jg.tensor([[0, -1], [5, 5]])),
           lambda a: a.reshape(-1)[[[0, -1], [5, 5]]], (T,)),
    OpCase("masked_select", lambda a: jg.masked_select(a, jg.tensor(MASK)), lambda a: a[MASK],
           (A,)),
    OpCase("masked_select_broadcast",
           lambda a: a.masked_select(jg.tensor([True, False, True, True])),
           lambda a: a[:, [0, 2, 3]].reshape(-1), (A,)),
    # ----- setitem and in-place ops on clones ----------------------------------------
    OpCase("setitem_slice_tensor", _setitem(_set_rows), _setitem(_set_rows), (A, Arg((4,)))),
    OpCase("setitem_mask_broadcast", _setitem(_set_mask), _setitem(_set_mask), (A, Arg(()))),
    OpCase("setitem_int_list", _setitem(_set_list), _setitem(_set_list),
           (A, Arg((4,)))),
    OpCase("setitem_int_then_list", _setitem(_set_mixed), _setitem(_set_mixed), (T, Arg((2,)))),
    OpCase("setitem_scalar", _setitem(_set_scalar), _setitem(_set_scalar), (S,)),
    OpCase("iadd_view", _setitem(_iadd_row), _setitem(_iadd_row), (A, Arg((4,)))),
    OpCase("mul_on_view", lambda a, b: _mul_view(a.clone(), b), lambda a, b: _mul_view(a.copy(), b),
           (A, Arg((2,)))),
    OpCase("add_alpha_inplace", lambda a, b: a.clone().add_(b, alpha=0.5), lambda a, b: a + 0.5 * b,
           (A, Arg((4,)))),
    OpCase("mul_inplace_saves_old_self", lambda a, b: a.clone().mul_(b) * a,
           lambda a, b: a * b * a, (A, T)),
    OpCase("div_inplace_transposed", lambda a, b: a.t().clone().div_(b),
           lambda a, b: a.T / b, (T, Arg((3,), 0.5, 2.0))),
    OpCase("exp_inplace_then_use", lambda a: a.clone().exp_() * 2, lambda a: np.exp(a) * 2, (A,)),
    OpCase("tanh_inplace_on_transposed_view", lambda a: _unary_view(a.clone(), "tanh_"),
           lambda a: _unary_view(a.copy(), np.tanh), (A,)),
    OpCase("sigmoid_inplace", lambda a: a.clone().sigmoid_(), lambda a: 1 / (1 + np.exp(-a)), (A,)),
    OpCase("mul_sub_relu_chain_inplace", lambda a: a.clone().mul_(2).sub_(0.5).relu_(),
           lambda a: np.maximum(2 * a - 0.5, 0), (A,)),
    OpCase("clamp_inplace", lambda a: a.clone().clamp_(-0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5),
           (Arg((3, 4), -1.9, 1.9),)),
    OpCase("copy_broadcast", lambda a, b: a.clone().copy_(b),
           lambda a, b: np.broadcast_to(b, a.shape),
           (A, Arg((4,)))),
    OpCase("fill_tensor_value", lambda a, v: a.clone()[:, 1:].fill_(v).sum() + a.sum(),
           lambda a, v: v * 9 + a.sum(), (A, Arg(()))),
    OpCase("masked_fill_inplace", lambda a: a.clone().masked_fill_(jg.tensor(MASK), 0.0),
           lambda a: np.where(MASK, 0.0, a), (A,)),
    OpCase("index_add_inplace", lambda a, s: a.clone().index_add_(1, jg.tensor([0, 3, 0]), s),
           lambda a, s: _index_add_ref(a, s, [0, 3, 0]), (A, Arg((3, 3)))),
    OpCase("scatter_inplace", lambda a, s: a.clone().scatter_(0, IDX_UNIQUE, s),
           lambda a, s: _scatter_ref(a, IDX_UNIQUE.numpy(), s, False), (A, Arg((2, 4)))),
    OpCase("two_views_modified", lambda a, b: _two_views(a.clone(), b),
           lambda a, b: _two_views(a.copy(), b), (A, Arg((3,)))),
]


def _copy(x):
    return x.clone() if isinstance(x, jg.Tensor) else x.copy()


def _mul_view(x, b):
    x[0, 1:3] *= b
    return x


def _unary_view(x, op):
    view = x.T[1]
    if callable(op):
        view[...] = op(view)
    else:
        getattr(view, op)()
    return x


def _two_views(x, b):
    x[:, 0] += b
    col = x[:, 1]
    col *= _copy(x[:, 0])  # reads the first modification (a copy: mul_ saves its operand)
    return x.sum(1)
