"""Eager mode: the numpy-backed Tensor, its ops and the autograd engine."""

import warnings

from jitgrad.eager import tensor_methods

# numpy reports log(0), 0/0 and overflow as RuntimeWarnings; PyTorch returns inf/nan
# silently. Filtering by module costs nothing per op (np.errstate costs ~1.5 us).
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"jitgrad\.")

tensor_methods.install()
