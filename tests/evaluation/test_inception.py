"""The FID Inception-v3: weights from a file only, the shim, and the field's figures
on a randomly initialised network (tests/evaluation/inception_helpers.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from raydp_synth.data import load_dataset
from raydp_synth.errors import ConfigError
from raydp_synth.evaluation import inception
from raydp_synth.evaluation.inception import (
    WEIGHTS_FILE_NAMES,
    InceptionFeatures,
    cached_weights,
    extractor_class,
    inception_figures,
    load_without_package_init,
    missing_weights_note,
    resolve_weights,
    to_uint8_rgb,
)
from raydp_synth.evaluation.metrics import frechet_distance, precision_recall
from tests.evaluation.inception_helpers import small_inputs, write_random_inception_weights

NOISE_LEVELS = (0.0, 0.1, 0.3, 0.8)


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> Path:
    return write_random_inception_weights(tmp_path_factory.mktemp("inception") / "random.pth")


@pytest.fixture(scope="module")
def digits() -> np.ndarray:
    """16 real 16x16 digit images in [-1, 1], two of each of 8 classes."""
    test = load_dataset("digits", image_size=16).test
    picks = np.concatenate([np.flatnonzero(test.labels == k)[:2] for k in range(8)])
    return test.images[picks]


@pytest.fixture(scope="module")
def network(weights) -> InceptionFeatures:
    return InceptionFeatures(weights)


@pytest.fixture(scope="module")
def noisy_pool3(network, digits) -> dict[float, np.ndarray]:
    """Pool3 features of the digits with Gaussian noise of each level (one draw, scaled)."""
    noise = np.random.default_rng(0).normal(size=digits.shape).astype(np.float32)
    with small_inputs():
        return {level: network(np.clip(digits + level * noise, -1, 1)).pool3
                for level in NOISE_LEVELS}


def test_fid_of_a_set_against_itself_is_zero_and_grows_with_noise(noisy_pool3) -> None:
    clean = noisy_pool3[0.0]
    assert clean.shape == (16, 2048)
    scale = float(np.trace(np.cov(clean, rowvar=False)))
    assert scale > 0
    assert frechet_distance(clean, clean) <= 1e-6 * scale
    fids = [frechet_distance(clean, noisy_pool3[level]) for level in NOISE_LEVELS[1:]]
    assert fids[0] > 1e-3 * scale
    assert fids == sorted(fids) and len(set(fids)) == len(fids), fids


def test_precision_and_recall_of_a_set_against_itself_are_one(noisy_pool3) -> None:
    clean = noisy_pool3[0.0]
    assert precision_recall(clean, clean) == (1.0, 1.0)


def test_inception_figures_of_a_set_against_itself(network, weights, digits) -> None:
    with small_inputs():
        figures, record = inception_figures(digits, digits, network)
    assert set(figures) == {"fid_inception", "is_inception", "precision", "recall"}
    assert figures["fid_inception"] == pytest.approx(0.0, abs=1e-6)
    assert (figures["precision"], figures["recall"]) == (1.0, 1.0)
    assert 1.0 <= figures["is_inception"] <= 1008
    assert figures["is_inception"] == pytest.approx(record["is_real_test"])
    assert record["synthetic_samples"] == record["real_samples"] == 16
    assert record["weights"] == str(weights) and len(record["sha256"]) == 64
    assert "torch-fidelity" in record["network"]


@pytest.mark.slow
def test_full_resolution_features(weights, digits) -> None:
    """The real 299x299 path, on 3-channel images."""
    rgb = np.repeat(digits[:4], 3, axis=1)
    out = InceptionFeatures(weights, batch_size=2)(rgb)
    assert out.pool3.shape == (4, 2048) and out.logits.shape == (4, 1008)
    assert np.isfinite(out.pool3).all() and np.isfinite(out.logits).all()
    gray = InceptionFeatures(weights)(digits[:4])
    np.testing.assert_allclose(gray.pool3, out.pool3, rtol=1e-4, atol=1e-6)


def test_images_become_uint8_rgb() -> None:
    gray = torch.tensor([-1.0, -0.5, 0.0, 1.0, 2.0, -3.0]).reshape(1, 1, 2, 3)
    out = to_uint8_rgb(gray)
    assert out.dtype == torch.uint8 and out.shape == (1, 3, 2, 3)
    assert out[0, 0].flatten().tolist() == [0, 64, 128, 255, 255, 0]
    assert torch.equal(out[0, 0], out[0, 2])
    rgb = np.stack([np.full((2, 2), v, np.float32) for v in (-1.0, 0.0, 1.0)])[None]
    assert to_uint8_rgb(rgb)[0, :, 0, 0].tolist() == [0, 128, 255]
    with pytest.raises(ValueError, match="1 or 3"):
        to_uint8_rgb(np.zeros((1, 2, 4, 4), np.float32))


def test_no_weights_means_none_and_one_line(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    assert cached_weights() is None and resolve_weights(None) is None
    note = missing_weights_note()
    assert "\n" not in note
    for needle in ("--fid-weights", WEIGHTS_FILE_NAMES[0], "https://", "fid_cnn",
                   str(tmp_path / "hub" / "checkpoints")):
        assert needle in note


def test_weights_are_found_in_the_torch_hub_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    folder = tmp_path / "hub" / "checkpoints"
    folder.mkdir(parents=True)
    (folder / WEIGHTS_FILE_NAMES[1]).write_bytes(b"pytorch-fid's copy")
    assert resolve_weights(None) == folder / WEIGHTS_FILE_NAMES[1]
    (folder / WEIGHTS_FILE_NAMES[0]).write_bytes(b"torch-fidelity's copy")
    assert resolve_weights(None) == folder / WEIGHTS_FILE_NAMES[0]


def test_a_named_weights_file_must_exist(tmp_path) -> None:
    with pytest.raises(ConfigError, match="--fid-weights .*nope.pth is not a file"):
        resolve_weights(tmp_path / "nope.pth")
    with pytest.raises(ConfigError, match="is not a file"):
        resolve_weights(tmp_path)  # a folder


def test_a_bad_weights_file_is_one_clear_error(tmp_path) -> None:
    garbage = tmp_path / "garbage.pth"
    garbage.write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="cannot read safely|not a weights file"):
        InceptionFeatures(garbage)
    wrong = tmp_path / "wrong.pth"
    torch.save({"fc.weight": torch.zeros(3, 3)}, wrong)
    with pytest.raises(ConfigError, match="does not hold the FID Inception-v3 weights") as info:
        InceptionFeatures(wrong)
    assert "\n" not in str(info.value)


@pytest.fixture
def isolated_modules():
    """Restores every torch_fidelity and torchvision module entry after the test."""
    names = ("torch_fidelity", "torchvision")
    saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] in names}
    try:
        yield
    finally:
        for key in [k for k in sys.modules if k.split(".")[0] in names]:
            del sys.modules[key]
        sys.modules.update(saved)


def _forget_torch_fidelity() -> None:
    for key in [k for k in sys.modules if k.split(".")[0] == "torch_fidelity"]:
        del sys.modules[key]


def test_the_shim_loads_the_inception_module_without_the_package_init(isolated_modules) -> None:
    """Where the package's __init__ cannot be imported (here: torchvision made
    unimportable), the Inception module still loads, and no stand-in package stays."""
    for key in [k for k in sys.modules if k.split(".")[0] == "torchvision"]:
        del sys.modules[key]
    sys.modules["torchvision"] = None  # type: ignore[assignment]  # import fails
    _forget_torch_fidelity()
    module = load_without_package_init()
    assert Path(module.__file__).parent.name == "torch_fidelity"
    assert module.FeatureExtractorInceptionV3.INPUT_IMAGE_SIZE == 299
    assert "torch_fidelity" not in sys.modules
    assert "torch_fidelity.feature_extractor_clip" not in sys.modules

    _forget_torch_fidelity()
    cls = extractor_class()
    assert cls.__name__ == "FeatureExtractorInceptionV3"
    assert cls.get_default_feature_layer_for_metric("fid") == "2048"
    assert "torch_fidelity" not in sys.modules  # the real package failed; no stub left
    with pytest.raises(ImportError):
        import torch_fidelity  # noqa: F401


def test_the_shim_refuses_without_torch_fidelity(isolated_modules, monkeypatch) -> None:
    monkeypatch.setattr(inception.importlib.util, "find_spec", lambda name: None)
    _forget_torch_fidelity()
    with pytest.raises(ImportError, match="pip install 'torch-fidelity"):
        load_without_package_init()
