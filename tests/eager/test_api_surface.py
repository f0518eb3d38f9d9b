"""The v1 op tier of research/eager_autograd.md §2 exists as functions and Tensor methods."""

import pytest

import jitgrad as jg

FUNCTIONS = """
tensor as_tensor from_numpy zeros ones full empty zeros_like ones_like full_like empty_like
arange linspace eye rand randn randint randperm manual_seed Generator
neg abs sign floor ceil round trunc frac exp log log2 log1p sqrt rsqrt reciprocal square
sin cos tanh sigmoid relu erf pow clamp clip
add sub mul div floor_divide maximum minimum where masked_fill
eq ne lt le gt ge logical_and logical_or logical_not logical_xor isnan isinf isfinite equal allclose
sum mean max min amax amin argmax argmin var std logsumexp cumsum
matmul mm bmm
reshape flatten permute transpose t squeeze unsqueeze cat stack split chunk unbind narrow select
flip tril triu gather scatter scatter_add index_select
softmax log_softmax
""".split()

METHODS = """
numpy item tolist clone detach contiguous to float double half long int bool type_as
view reshape flatten unflatten permute transpose t expand expand_as squeeze unsqueeze
split chunk unbind narrow select repeat flip tril triu gather scatter_ index_select
masked_fill masked_fill_ add_ sub_ mul_ div_ clamp_ zero_ fill_ copy_ relu_
sum mean max min amax amin argmax argmin var std logsumexp cumsum prod
abs exp log sqrt tanh sigmoid relu pow clamp softmax log_softmax backward register_hook
retain_grad requires_grad_ size dim numel
""".split()

FUNCTIONALS = """
linear relu gelu silu tanh sigmoid softmax log_softmax layer_norm embedding dropout
cross_entropy nll_loss mse_loss binary_cross_entropy_with_logits one_hot
scaled_dot_product_attention
""".split()

MODULES = """
Module Parameter Linear Embedding LayerNorm Dropout ReLU GELU SiLU Tanh Sigmoid Softmax
Flatten Sequential ModuleList ModuleDict Identity MSELoss CrossEntropyLoss
""".split()


@pytest.mark.parametrize("name", FUNCTIONS)
def test_function_exists(name):
    assert callable(getattr(jg, name))


@pytest.mark.parametrize("name", METHODS)
def test_tensor_method_exists(name):
    assert callable(getattr(jg.Tensor, name))


@pytest.mark.parametrize("name", FUNCTIONALS)
def test_nn_functional_exists(name):
    assert callable(getattr(jg.nn.functional, name))


@pytest.mark.parametrize("name", MODULES)
def test_nn_module_exists(name):
    assert isinstance(getattr(jg.nn, name), type)


def test_optim_and_autograd_names():
    for name in ("SGD", "Adam", "AdamW"):
        assert isinstance(getattr(jg.optim, name), type)
    for name in ("grad", "backward", "Function", "gradcheck"):
        assert hasattr(jg.autograd, name)
    assert callable(jg.nn.utils.clip_grad_norm_)
    assert callable(jg.nn.init.kaiming_uniform_)
