"""Programs whose compiled run must equal eager's in autograd-visible ways (run by
tests/trace/test_autograd_parity.py on backend "eager" and tests/codegen/
test_training_semantics.py on "numba", through tests/trace/eager_parity.py).

Families: writes autograd does not see (no_grad, `.data`, `.detach()`), `.data`/`.detach()`
aliases returned to the caller (no history, shared memory and versions), gradient
None-ness (outputs the loss does not read, inputs no output reaches, structural zeros),
saved values modified in place before backward (after the region, or by an in-place op
inside it: Note [Saved values overwritten in the graph]), and grad-mode regions under each outer
mode.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

import jitgrad as jg


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    program: Callable[..., Any]
    shapes: tuple[tuple[int, ...], ...] = ((2, 3), (2, 3))
    requires_grad: tuple[bool, ...] = (True, True)
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    dtypes: tuple[str, ...] | None = None  # float32 each, unless given

    def make_inputs(self) -> list[jg.Tensor]:
        rng = np.random.default_rng(len(self.name))
        dtypes = self.dtypes or ("float32",) * len(self.shapes)
        return [jg.tensor((rng.normal(size=s) * 3).astype(d), requires_grad=r)
                for s, r, d in zip(self.shapes, self.requires_grad, dtypes, strict=True)]


# ----- writes autograd does not see -----------------------------------------------------

def sgd_like_update_then_use(x, w):
    with jg.no_grad():
        w.sub_(0.1 * w)
        w.mul_(2.0)
    return (x * w).sum()


def data_write_then_use(x, w):
    w.data.mul_(0.5)
    return x * w * w


def detach_write_then_use(x, w):
    w.detach().add_(1.0)
    return x * w


def setitem_under_no_grad_then_use(x, w):
    with jg.no_grad():
        w[0] = 0.0
    return x * w


def graph_value_written_under_no_grad(x, w):
    v = x * w
    with jg.no_grad():
        v.mul_(2.0)
    return v * 3.0, v


def no_grad_write_then_grad_write(x, w):
    v = x * 1.0
    with jg.no_grad():
        v.mul_(2.0)
    v.add_(w)
    return v


def leaf_written_with_grad_on(x, w):
    w.add_(1.0)  # eager's error for a leaf that requires grad
    return x * w


UNSEEN_WRITES = [
    Case("sgd_like_update_then_use", sgd_like_update_then_use),
    Case("sgd_like_update_of_an_unused_input", sgd_like_update_then_use,
         requires_grad=(False, True)),
    Case("data_write_then_use", data_write_then_use),
    Case("detach_write_then_use", detach_write_then_use),
    Case("setitem_under_no_grad_then_use", setitem_under_no_grad_then_use),
    Case("graph_value_written_under_no_grad", graph_value_written_under_no_grad),
    Case("no_grad_write_then_grad_write", no_grad_write_then_grad_write),
    Case("leaf_written_with_grad_on", leaf_written_with_grad_on),
]


# ----- None-ness of .grad -----------------------------------------------------------------

def first_output(outputs):
    return (outputs[0] * 1.5).sum()


def second_output(outputs):
    return outputs[1].sum()


def two_outputs(x, y):
    return x * 2.0, y * 3.0


def shared_input(x, y):
    return x * y, y.exp()


def unused_input(x, y):
    return x * 2.0, x.sum()


def non_differentiable_path(x, y):
    return x * (y > 0).float(), y.detach() * 2.0


def structural_zero(x, y):
    return x * y.floor(), x * 0.0


# gradients of constant zeros (folded out of the backward graph) that still connect an
# input to the output the loss reads: eager gives the input zeros, not None
def zeroed_clone_beside_another_output(x, y):
    v = x.clone()
    v.zero_()
    return v * 2.0, y * 3.0 + x


def floored_input_beside_another_output(x, y):
    return x.floor() * y, x * 3.0


def leaf_written_under_no_grad_then_zeroed(x, y):
    with jg.no_grad():
        x.mul_(0.5)
    v = x.clone()
    v.zero_()
    return v.sum(), y * 2.0


# outputs the loss does not read, behind derivatives that are infinite at 0: eager never
# runs their backward, so no 0 * inf reaches the shared inputs (Note [Outputs without a
# gradient] in jitgrad/codegen/joint_graphs.py)
def infinite_derivatives_at_zero(x, y):
    zero = x * y - x * y
    return zero * 2.0, zero.abs().sqrt(), zero.abs() ** 0.5, zero.abs().log(), 1.0 / zero


def unbound_rows_one_behind_sqrt(x, y):
    first, second = (x * y).unbind(0)
    return first * 2.0, (second - second).sqrt()


def product_behind_a_root(x, y):
    p = (x * (y > 10.0)).prod(1)  # rows of zeros
    return p * 3.0, p.abs() ** 0.5


GRAD_NONENESS = [
    Case("loss_reads_the_first_of_two_outputs", two_outputs, options={"loss": first_output}),
    Case("loss_reads_the_second_of_two_outputs", two_outputs, options={"loss": second_output}),
    Case("input_shared_by_a_used_and_an_unused_output", shared_input,
         options={"loss": first_output}),
    Case("input_reaching_only_the_unused_output", shared_input,
         options={"loss": second_output}),
    Case("input_no_output_reaches", unused_input),
    Case("input_behind_a_comparison_and_a_detach", non_differentiable_path),
    Case("structurally_zero_gradients", structural_zero),
    Case("outputs_without_gradient_behind_infinite_derivatives",
         infinite_derivatives_at_zero, options={"loss": first_output}),
    Case("outputs_with_gradient_behind_infinite_derivatives", infinite_derivatives_at_zero,
         options={"loss": second_output}),
    Case("multi_output_op_with_one_output_behind_sqrt", unbound_rows_one_behind_sqrt,
         options={"loss": first_output}),
    Case("product_with_zeros_behind_an_unread_root", product_behind_a_root,
         options={"loss": first_output}),
    Case("zeroed_clone_read_beside_an_unread_output", zeroed_clone_beside_another_output,
         options={"loss": first_output}),
    Case("floored_input_read_beside_an_unread_output", floored_input_beside_another_output,
         options={"loss": first_output}),
    Case("leaf_written_under_no_grad_then_zeroed", leaf_written_under_no_grad_then_zeroed,
         options={"loss": first_output}),
]


# ----- saved values modified in place -------------------------------------------------------

def write_first_output(outputs, inputs):
    with jg.no_grad():
        outputs[0].mul_(2.0)


def write_second_input(outputs, inputs):
    with jg.no_grad():
        inputs[1].add_(1.0)


def saves_its_output(x, y):
    return x.exp(), y * 2.0


def saves_a_returned_intermediate(x, y):
    h = x * y
    return h, h.sigmoid()


def saves_an_output_then_views_it(x, y):
    out = (x * y).tanh()
    return out.t(), out


def saves_nothing(x, y):
    return x + y, y - 1.0


def saves_its_inputs(x, y):
    return (x * y,)


def input_written_after_being_saved(x, y):
    out = x * y
    with jg.no_grad():
        y.add_(1.0)
    return (out,)


def intermediate_saved_then_written_in_the_region(x, y):
    v = x * y
    out = v * v
    v.zero_()
    return (out,)


def view_saved_then_its_base_written_in_the_region(x, y):
    v = x * y
    row = v[0]
    out = row * row
    v.add_(1.0)
    return (out,)


def in_place_op_saving_the_value_it_overwrites(x, y):
    v = x * 1.0
    v.mul_(y)  # mul_ saves the old v for y's gradient: eager keeps a copy
    v.add_(1.0)
    return (v,)


def saved_result_of_an_in_place_op_written_again(x, y):
    v = x * y
    v.exp_()  # exp_ saves its result, which is v itself
    v.add_(1.0)
    return (v,)


def written_saved_value_below_an_output_without_gradient(x, y):
    v = x * y
    out = v * v
    v.zero_()
    return out.detach(), y * 3.0


def saves_an_input_for_an_output_the_loss_skips(x, y):
    return x * 2.0, y.amax()  # amax saves y; the loss reads only the first output


def input_saved_for_a_skipped_output_written_in_the_region(x, y):
    peak = y.amax()
    with jg.no_grad():
        y.add_(1.0)
    return x * 2.0, peak


def input_written_under_no_grad_saved_then_written_again(x, y):
    with jg.no_grad():
        y.mul_(0.5)  # y keeps its history: the saved value is y's new value read with it
    out = x * y.prod(dim=-1, keepdim=True)
    with jg.no_grad():
        y.mul_(0.5)
    return (out,)


def view_of_an_input_written_under_no_grad_saved_then_written_again(x, y):
    row = y[0]
    with jg.no_grad():
        row.add_(1.0)
    out = x * row.exp()
    with jg.no_grad():
        y.mul_(0.5)
    return (out,)


def promoted_input_written_in_the_region(x, y):
    out = x / (y.abs() + 1.0)  # x is cast to y's dtype; eager saves x itself
    x.zero_()
    return (out,)


SAVED_WRITES_IN_THE_REGION = [
    Case("intermediate_saved_then_written", intermediate_saved_then_written_in_the_region),
    Case("view_saved_then_its_base_written", view_saved_then_its_base_written_in_the_region),
    Case("in_place_op_saving_the_value_it_overwrites",
         in_place_op_saving_the_value_it_overwrites),
    Case("saved_result_of_an_in_place_op_written_again",
         saved_result_of_an_in_place_op_written_again),
    Case("written_saved_value_below_an_output_without_gradient",
         written_saved_value_below_an_output_without_gradient),
    # fuzz seed 671436
    Case("input_written_under_no_grad_saved_then_written_again",
         input_written_under_no_grad_saved_then_written_again),
    Case("view_of_an_input_written_under_no_grad_saved_then_written_again",
         view_of_an_input_written_under_no_grad_saved_then_written_again),
    Case("promoted_float32_input_written", promoted_input_written_in_the_region,
         requires_grad=(False, True), dtypes=("float32", "float64")),
    Case("promoted_int_input_written", promoted_input_written_in_the_region,
         requires_grad=(False, True), dtypes=("int64", "float32")),
]

SAVED_WRITES = [
    Case("output_saved_for_backward_written_after", saves_its_output,
         options={"after": write_first_output}),
    Case("returned_intermediate_saved_by_a_later_op_written_after",
         saves_a_returned_intermediate, options={"after": write_first_output}),
    Case("view_of_a_saved_output_written_after", saves_an_output_then_views_it,
         options={"after": write_first_output}),
    Case("output_nothing_saves_written_after", saves_nothing,
         options={"after": write_first_output}),
    Case("saved_input_written_after", saves_its_inputs, options={"after": write_second_input}),
    Case("saved_input_written_inside_the_region", input_written_after_being_saved),
    # eager checks a saved value only when a gradient reaches the node saving it (seed 608017)
    Case("input_saved_for_an_output_without_gradient_written_after",
         saves_an_input_for_an_output_the_loss_skips,
         options={"after": write_second_input, "loss": first_output}),
    Case("input_saved_for_an_output_without_gradient_written_in_the_region",
         input_saved_for_a_skipped_output_written_in_the_region,
         options={"loss": first_output}),
    *SAVED_WRITES_IN_THE_REGION,
]
SAVED_WRITE_WORDS = "modified by an inplace operation"


# ----- aliases returned to the caller ---------------------------------------------------------

def returns_aliases(x, y):
    v = (x * y).exp()
    return v, v.detach(), v.data, v.detach()[0], y.detach()


def write_output(index):
    def after(outputs, inputs):
        outputs[index].mul_(2.0)  # no history: allowed with grad on

    return after


RETURNED_ALIASES = [
    Case("detach_and_data_of_a_graph_value_and_of_an_input", returns_aliases),
    Case("write_through_a_returned_detach", returns_aliases, options={"after": write_output(1)}),
    Case("write_through_a_returned_data", returns_aliases, options={"after": write_output(2)}),
    Case("write_through_a_view_of_a_returned_detach", returns_aliases,
         options={"after": write_output(3)}),
]


# ----- grad-mode regions -------------------------------------------------------------------

def enable_grad_inside(x, y):
    with jg.enable_grad():
        a = x * y
    return a, x * 2.0


def no_grad_inside(x, y):
    with jg.no_grad():
        a = x * y
    return a, x * 2.0


def set_grad_enabled_blocks(x, y):
    with jg.set_grad_enabled(False):
        a = x * y
        with jg.set_grad_enabled(True):
            b = x * 3.0
    return a, b, y * 2.0


def set_grad_enabled_calls(x, y):
    jg.set_grad_enabled(False)
    a = x * y
    jg.set_grad_enabled(True)
    return a, y * 2.0


def set_grad_enabled_left_off(x, y):
    b = x * y
    jg.set_grad_enabled(False)  # the caller's mode stays off after the call, as in eager
    return b, y * 2.0


def inference_mode_inside(x, y):
    with jg.inference_mode():
        a = x * y
    return a, y * 2.0


def nested_modes(x, y):
    with jg.no_grad():
        a = x * 2.0
        with jg.enable_grad():
            b = a * y
            with jg.no_grad():
                c = b * 2.0
            d = c * x
    return a, b, c, d


def unseen_write_inside_enable_grad(x, y):
    with jg.enable_grad():
        v = x * y
        with jg.no_grad():
            v.mul_(2.0)
    return v, y * 2.0


GRAD_MODES = [
    Case("enable_grad_inside", enable_grad_inside),
    Case("no_grad_inside", no_grad_inside),
    Case("set_grad_enabled_blocks", set_grad_enabled_blocks),
    Case("set_grad_enabled_calls", set_grad_enabled_calls),
    Case("set_grad_enabled_left_off", set_grad_enabled_left_off),
    Case("inference_mode_inside", inference_mode_inside),
    Case("nested_modes", nested_modes),
    Case("unseen_write_inside_enable_grad", unseen_write_inside_enable_grad),
]
OUTER_MODES = {"grad": jg.enable_grad, "no_grad": jg.no_grad,
               "set_grad_enabled_false": lambda: jg.set_grad_enabled(False),
               "inference_mode": jg.inference_mode}
