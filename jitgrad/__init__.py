"""jitgrad: a PyTorch-style deep-learning library in Python, with a JIT compiler.

Eager mode (the default) runs every op at once on numpy arrays and records autograd
history; `import jitgrad as torch` runs small PyTorch programs.
"""

from jitgrad import eager as _eager  # noqa: F401  (installs Tensor methods)
from jitgrad.eager.dtypes import (
    bfloat16,
    complex64,
    complex128,
    dtype,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    promote_types,
    set_default_dtype,
    uint8,
)
from jitgrad.eager.dtypes import bool_ as bool  # noqa: A001 - PyTorch's name
from jitgrad.eager.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from jitgrad.eager.ops.activation import *  # noqa: F403
from jitgrad.eager.ops.comparison import *  # noqa: F403
from jitgrad.eager.ops.counting import *  # noqa: F403
from jitgrad.eager.ops.creation import *  # noqa: F403
from jitgrad.eager.ops.creation import inclusive_range as range  # noqa: A001 - torch.range
from jitgrad.eager.ops.indexing import *  # noqa: F403
from jitgrad.eager.ops.inplace import *  # noqa: F403
from jitgrad.eager.ops.linalg import *  # noqa: F403
from jitgrad.eager.ops.matrix import *  # noqa: F403
from jitgrad.eager.ops.nn_ops import *  # noqa: F403
from jitgrad.eager.ops.pointwise import *  # noqa: F403
from jitgrad.eager.ops.pointwise_math import *  # noqa: F403
from jitgrad.eager.ops.random import *  # noqa: F403
from jitgrad.eager.ops.reduction import *  # noqa: F403
from jitgrad.eager.ops.shape import *  # noqa: F403
from jitgrad.eager.legacy_types import *  # noqa: F403
from jitgrad.eager.ops import out as _out
from jitgrad.eager.printing import get_printoptions, set_printoptions
from jitgrad.eager.devices import device
from jitgrad.eager.tensor import Size, Tensor
from jitgrad.eager.type_info import finfo, iinfo

_out.install(globals())  # torch's functions that take out= (jitgrad.eager.ops.out)

from jitgrad import autograd, cuda, distributed, linalg, nn, optim, special, utils  # noqa: E402  (after the Tensor methods exist)
from jitgrad import distributions  # noqa: E402
from jitgrad import accelerator, amp, backends, onnx  # noqa: E402  (torch's CPU-only answers)
from jitgrad._patch import patch_torch, unpatch_torch  # noqa: E402
from jitgrad.serialization import load, save  # noqa: E402

float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16
cfloat = complex64
cdouble = complex128

__version__ = "0.1.0"

from jitgrad.compile import (  # noqa: E402
    CheckError,
    CheckWarning,
    CompileError,
    allow_in_graph,
    compile,
    disable,
    explain,
    graph_break,
    mark_dynamic,
    mark_static,
    reset,
    show,
)
