"""The import swap (`jitgrad.patch_torch`) and `python -m jitgrad.run`."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap

import pytest

import jitgrad
from jitgrad._patch import MissingTorchAPIError, MissingTorchModuleError
from jitgrad.run import run_script

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# every import form of research/real_programs.md §3, with the jitgrad object it must bind
IMPORT_FORMS = [
    ("import torch", "torch", jitgrad),
    ("import torch.nn as nn", "nn.Linear", jitgrad.nn.Linear),
    ("from torch import nn, optim", "optim.AdamW", jitgrad.optim.AdamW),
    ("from torch.nn import functional as F", "F.cross_entropy",
     jitgrad.nn.functional.cross_entropy),
    ("import torch.nn.functional as F", "F.softmax", jitgrad.nn.functional.softmax),
    ("import torch.optim as optim", "optim.SGD", jitgrad.optim.SGD),
    ("from torch.optim.lr_scheduler import StepLR", "StepLR", jitgrad.optim.lr_scheduler.StepLR),
    ("import torch.optim.lr_scheduler", "torch.optim.lr_scheduler.OneCycleLR",
     jitgrad.optim.lr_scheduler.OneCycleLR),
    ("import torch.utils.data", "torch.utils.data.TensorDataset",
     jitgrad.utils.data.TensorDataset),
    ("from torch.utils.data import Dataset", "Dataset", jitgrad.utils.data.Dataset),
    ("from torch.utils.data.dataloader import DataLoader", "DataLoader",
     jitgrad.utils.data.DataLoader),
    ("from torch.utils.tensorboard import SummaryWriter", "SummaryWriter", None),
    ("from torch.nn.parallel import DistributedDataParallel", "DistributedDataParallel", None),
    ("from torch.distributed import init_process_group, destroy_process_group",
     "init_process_group", jitgrad.distributed.init_process_group),
    ("import torch.backends.cudnn", "torch.backends.cudnn.allow_tf32",
     jitgrad.backends.cudnn.allow_tf32),
    ("import torch", "torch.compile", jitgrad.compile),
    ("import torch", "torch.Tensor", jitgrad.Tensor),
]


@pytest.mark.parametrize(("statement", "expression", "expected"), IMPORT_FORMS,
                         ids=[f"{s} -> {e}" for s, e, _ in IMPORT_FORMS])
def test_import_forms_bind_jitgrads_objects(statement, expression, expected, torch_swap):
    namespace: dict = {}
    exec(statement, namespace)
    value = eval(expression, namespace)
    if expression == "torch":
        assert value is torch_swap and value.__name__ == "torch"
        assert value.tensor is jitgrad.tensor
    elif expected is not None:
        assert value is expected
    else:
        assert value.__module__.startswith("jitgrad.")


def test_unpatch_removes_every_alias():
    alias = jitgrad.patch_torch()
    assert importlib.import_module("torch.nn.functional").softmax is jitgrad.nn.functional.softmax
    assert jitgrad.patch_torch() is alias  # idempotent
    jitgrad.unpatch_torch()
    assert not [name for name in sys.modules if name == "torch" or name.startswith("torch.")]
    with pytest.raises(ModuleNotFoundError):
        import torch  # noqa: F401


def _write(tmp_path, name: str, source: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def test_missing_attribute_names_the_torch_api_and_the_line(tmp_path):
    path = _write(tmp_path, "uses_fft.py", """\
        import torch

        x = torch.ones(8)
        spectrum = torch.fft.rfft(x)
        """)
    with pytest.raises(MissingTorchAPIError) as info:
        run_script(path)
    message = str(info.value)
    assert message.startswith("module 'torch' has no attribute 'fft': jitgrad does not "
                              "implement torch.fft")
    assert f"(used at {path}:4)" in message
    assert isinstance(info.value, AttributeError)


def test_missing_name_in_a_from_import_names_it_and_the_line(tmp_path):
    path = _write(tmp_path, "uses_adaptive_softmax.py", """\
        import torch
        from torch.nn import AdaptiveLogSoftmaxWithLoss
        """)
    with pytest.raises(MissingTorchModuleError) as info:
        run_script(path)
    assert f"jitgrad does not implement torch.nn.AdaptiveLogSoftmaxWithLoss (imported at " \
        f"{path}:2)" in str(info.value)
    assert isinstance(info.value, ImportError)


def test_missing_submodule_import(tmp_path):
    path = _write(tmp_path, "uses_fft.py", "import torch.fft\n")
    with pytest.raises(ImportError, match=r"jitgrad does not implement torch\.fft \(imported at "):
        run_script(path)


def test_run_script_restores_argv_path_and_the_swap(tmp_path):
    path = _write(tmp_path, "echo.py", """\
        import sys
        import torch
        seen = (__name__, list(sys.argv), sys.path[0], torch.__name__)
        """)
    argv, path_before = list(sys.argv), list(sys.path)
    result = run_script(path, ["--flag", "3"])
    assert result["seen"] == ("__main__", [path, "--flag", "3"], str(tmp_path), "torch")
    assert sys.argv == argv and sys.path == path_before and "torch" not in sys.modules


def test_python_dash_m_jitgrad_run_runs_a_script_like_python_does(tmp_path):
    _write(tmp_path, "helper_module.py", "VALUE = 41\n")
    path = _write(tmp_path, "train.py", """\
        import sys
        import torch
        import torch.nn as nn
        from helper_module import VALUE  # found next to the script, as with `python train.py`

        model = nn.Linear(2, 1)
        print(__name__, sys.argv[1:], VALUE + 1, type(model).__module__, torch.ones(2).sum().item())
        sys.exit(3)
        """)
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-m", "jitgrad.run", path, "--lr", "0.1"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "__main__ ['--lr', '0.1'] 42 jitgrad.nn.modules.linear 2.0\n"


def test_python_dash_m_jitgrad_run_without_a_script_prints_usage():
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-m", "jitgrad.run"], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 2
    assert done.stderr == "usage: python -m jitgrad.run script.py [args...]\n"


def test_star_import_takes_jitgrads_public_names(torch_swap):
    namespace: dict = {}
    exec("from torch import *", namespace)
    assert namespace["tensor"] is jitgrad.tensor and namespace["no_grad"] is jitgrad.no_grad
    assert not [name for name in namespace if name.startswith("_") and name != "__builtins__"]


def test_submodules_are_attributes_without_an_import_as_in_torch():
    code = ("import jitgrad; torch = jitgrad.patch_torch(); "
            "print(torch.nn.parallel.DistributedDataParallel.__module__, "
            "torch.utils.tensorboard.SummaryWriter.__name__, hasattr(torch.nn, 'quantized'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT, timeout=120)
    # torch.nn.parallel.DistributedDataParallel.__module__ is torch.nn.parallel.distributed too
    assert done.stdout == "jitgrad.nn.parallel.distributed SummaryWriter False\n", done.stderr


def test_torch_trace_is_the_matrix_trace_although_jitgrad_trace_is_the_tracer(tmp_path):
    # Note [Shadowed torch names]: jitgrad.trace stays the tracer package
    path = _write(tmp_path, "uses_trace.py", """\
        import torch
        from torch import trace

        m = torch.arange(6.0).reshape(2, 3)
        result = (torch.trace(m).item(), trace(m).item(), m.trace().item())
        """)
    assert run_script(path)["result"] == (4.0, 4.0, 4.0)
    assert isinstance(jitgrad.trace, type(jitgrad))
