"""Which fusion groups are worth a kernel launch.

Note [Groups too small for a kernel]: a kernel call has a fixed cost that numpy's ufunc
calls do not pay in full: the program allocates the outputs, the kernel looks up its
layout plan and numba's dispatcher unboxes every array argument. A pointwise group of k
ops over n elements costs, as one kernel, LAUNCH_US + n × KERNEL_ELEMENT_NS (one pass);
as its ops' numpy forwards (what eager runs), the sum over its ops of NUMPY_CALL_US + n ×
the op's cost per element: ARITHMETIC_ELEMENT_NS, or MATH_ELEMENT_NS for an op whose
lowering calls a math function (numpy's exp and tanh may be SIMD loops or scalar libm
calls, 20 ns per element for float64 tanh). Where the second is smaller, the group runs
as its ops' numpy forwards: each member becomes an extern of the graph's program (Note
[Graph programs] in program.py), computed exactly as eager computes it, and no kernel is
compiled for it. With these constants: one arithmetic op up to about 50k elements, two up
to about 8k, three up to about 1k, a math op up to about 140, four ops never. An `x + 1`
on 8 elements and the 0-d loss arithmetic of a training step run as numpy. A graph over
symbolic sizes is compiled per set of concrete sizes (SymbolicGraph,
jitgrad/trace/runtime/dynamic.py), so the rule decides per set; a group whose shape still
holds a symbol keeps its kernel, and so do reduction and row groups (one pass where eager
makes several).

The constants were measured on the benchmark machine: benchmarks/compile_overhead.py
prints kernel against numpy for chains of 1-3 ops over 1 to 32768 elements, with the
rule's choice beside them. ARITHMETIC_ELEMENT_NS allows for a forward of a few numpy
passes (leaky_relu's where) and MATH_ELEMENT_NS for scalar libm, so the rule errs towards
the kernel. `config.SMALL_GROUPS_AS_NUMPY = False` gives every group its kernel.
"""

from __future__ import annotations

import math

from jitgrad import config
from jitgrad.codegen.fusion import FusionGroup
from jitgrad.codegen.lowering import calls_math

LAUNCH_US = 4.0  # a kernel call's fixed cost, from the program (1 output)
KERNEL_ELEMENT_NS = 0.1  # the kernel's one pass, per float32 element in cache
NUMPY_CALL_US = 1.2  # one op's numpy forward called from the program
ARITHMETIC_ELEMENT_NS = 0.15  # per element of an arithmetic op's numpy forward
MATH_ELEMENT_NS = 20.0  # per element of an op calling a math function, at the slow end


def numpy_cost_us(math_calls: list[bool], elements: int) -> float:
    """What numpy forwards of ops over `elements` elements cost, by the rule's model; one
    entry per op: whether it calls a math function."""
    return sum(NUMPY_CALL_US + elements * 1e-3 * (MATH_ELEMENT_NS if calls else
                                                  ARITHMETIC_ELEMENT_NS)
               for calls in math_calls)


def kernel_cost_us(elements: int) -> float:
    """What one kernel launch over `elements` elements costs, by the rule's model."""
    return LAUNCH_US + elements * 1e-3 * KERNEL_ELEMENT_NS


def worth_a_kernel(group: FusionGroup) -> bool:
    """Whether `group` runs as a kernel rather than as its ops' numpy forwards (see the
    Note)."""
    if not config.SMALL_GROUPS_AS_NUMPY or not group.pointwise or \
            any(type(size) is not int for size in group.shape):
        return True
    elements = math.prod(group.shape)
    return numpy_cost_us([calls_math(node) for node in group.nodes], elements) >= \
        kernel_cost_us(elements)
