"""Whether LLVM vectorized a kernel's loop, asked so that the answer does not depend on the CPU.

The vector width LLVM picks is the host's: `<8 x float>` with AVX2, `<16 x float>` where
AVX-512 registers are preferred, `<4 x float>` with SSE alone. A loop counts as vectorized
when its optimized IR operates on `<N x float>` (or `<N x double>`) values with N >= 2.
"""

import re
from typing import Any


def vector_lanes(llvm_ir: str, element: str, instruction: str = "") -> list[int]:
    """The lane counts N of the `<N x element>` types in `llvm_ir` (element: "float" or
    "double"); with `instruction` ("load", "store", "fadd", ...), only those it operates on."""
    prefix = rf"\b{instruction} (?:reassoc )?" if instruction else ""
    return [int(n) for n in re.findall(rf"{prefix}<(\d+) x {element}>", llvm_ir)]


def assert_vectorized(llvm_ir: str, element: str, instructions: tuple[str, ...] = ("",)) -> None:
    """Each of `instructions` ("" for any) operates on vectors of at least 2 `element`s."""
    for instruction in instructions:
        lanes = vector_lanes(llvm_ir, element, instruction)
        assert any(n >= 2 for n in lanes), (
            f"no {instruction or 'value'} of type <N x {element}>, N >= 2: not vectorized")


def optimized_ir(dispatcher: Any) -> str:
    """The optimized LLVM IR of a numba dispatcher's first compiled signature."""
    return dispatcher.inspect_llvm(dispatcher.signatures[0])


def uncached_module(kernel: Any) -> dict[str, Any]:
    """The namespace of `kernel`'s module (a Kernel or ReductionKernel) compiled without
    numba's disk cache: numba cannot show the LLVM IR of functions it loaded from it."""
    namespace: dict[str, Any] = {}
    source = kernel.source.replace("cache=True", "cache=False")
    exec(compile(source, str(kernel.path), "exec"), namespace)
    return namespace
