"""save/load: checkpoints round-trip (values, dtypes, Parameter class, optimizer state) and
weights_only refuses globals that could run code, as torch.load does since 2.6."""

import dataclasses
import io
import pickle

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn


def _trained_model():
    jg.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))
    opt = jg.optim.AdamW(model.parameters(), lr=0.1)
    model(jg.ones(2, 3)).sum().backward()
    opt.step()
    return model, opt


def test_checkpoint_round_trip_through_a_path_resumes_identically(tmp_path):
    model, opt = _trained_model()
    path = tmp_path / "ckpt.pt"
    jg.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "iter_num": 1,
             "best_val_loss": jg.tensor(1.5), "config": {"n_layer": 2}}, str(path))
    checkpoint = jg.load(path, map_location="cpu")
    assert checkpoint["iter_num"] == 1 and checkpoint["config"] == {"n_layer": 2}
    assert checkpoint["best_val_loss"].item() == 1.5
    assert list(checkpoint["model"]) == ["0.weight", "0.bias", "1.weight", "1.bias"]

    restored = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))
    restored.load_state_dict(checkpoint["model"])
    restored_opt = jg.optim.AdamW(restored.parameters(), lr=0.1)
    restored_opt.load_state_dict(checkpoint["optimizer"])
    assert restored_opt.state[restored[0].weight]["step"].item() == 1.0
    for m, o in ((model, opt), (restored, restored_opt)):
        o.zero_grad()
        m(jg.ones(2, 3)).sum().backward()
        o.step()
    for a, b in zip(model.parameters(), restored.parameters(), strict=True):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_tensors_keep_dtype_class_and_requires_grad_through_a_file_object():
    buffer = io.BytesIO()
    weight = nn.Parameter(jg.arange(6.0).view(2, 3))
    jg.save({"w": weight, "ids": jg.tensor([1, 2]), "mask": jg.tensor([True]),
             "row": weight.detach()[1], "x64": jg.ones(2, dtype=jg.float64)}, buffer)
    buffer.seek(0)
    loaded = jg.load(buffer)
    assert type(loaded["w"]) is nn.Parameter and loaded["w"].requires_grad
    assert loaded["w"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert loaded["ids"].dtype is jg.int64 and loaded["mask"].dtype is jg.bool
    assert loaded["row"].tolist() == [3.0, 4.0, 5.0] and loaded["x64"].dtype is jg.float64


def test_weights_only_refuses_modules_and_unknown_classes(tmp_path):
    path = tmp_path / "model.pt"
    jg.save(nn.Linear(2, 2), path)
    with pytest.raises(pickle.UnpicklingError, match="unsupported global jitgrad.nn.modules.linear"
                                                     ".Linear") as excinfo:
        jg.load(path)
    assert "weights_only=False" in str(excinfo.value)
    assert isinstance(jg.load(path, weights_only=False), nn.Linear)
    jg.save({"os": __import__("os").system}, path)
    with pytest.raises(pickle.UnpicklingError, match="unsupported global"):
        jg.load(path)


@dataclasses.dataclass
class _Config:
    n_layer: int = 2


def test_add_safe_globals_allows_a_config_class(tmp_path):
    path = tmp_path / "cfg.pt"
    jg.save({"config": _Config(n_layer=4)}, path)
    with pytest.raises(pickle.UnpicklingError, match="add_safe_globals"):
        jg.load(path)
    jg.serialization.add_safe_globals([_Config])
    assert jg.load(path)["config"] == _Config(n_layer=4)


def test_load_to_a_cuda_map_location_raises():
    buffer = io.BytesIO()
    jg.save(jg.ones(1), buffer)
    buffer.seek(0)
    with pytest.raises(RuntimeError, match="jitgrad runs on the CPU only"):
        jg.load(buffer, map_location="cuda")


def test_safe_globals_allows_a_pickled_transformer_inside_the_block_only(tmp_path):
    # word_language_model's torch.load of its best model (pytorch/examples)
    path = tmp_path / "model.pt"
    jg.manual_seed(0)
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 1)
    jg.save(model, path)
    allowed = [nn.modules.transformer.TransformerEncoder,
               nn.modules.transformer.TransformerEncoderLayer, nn.functional.relu,
               nn.modules.activation.MultiheadAttention, nn.modules.container.ModuleList,
               nn.modules.dropout.Dropout, nn.modules.linear.Linear,
               nn.modules.linear.NonDynamicallyQuantizableLinear,
               nn.modules.normalization.LayerNorm]
    with jg.serialization.safe_globals(allowed):
        loaded = jg.load(path)
    with pytest.raises(pickle.UnpicklingError, match="TransformerEncoder"):
        jg.load(path)
    x = jg.tensor(np.random.default_rng(0).standard_normal((3, 2, 8)).astype(np.float32))
    np.testing.assert_array_equal(loaded(x).detach().numpy(), model(x).detach().numpy())
    assert type(loaded.layers[0].self_attn.out_proj).__name__ == "NonDynamicallyQuantizableLinear"
