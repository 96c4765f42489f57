"""The published files explain themselves: the labelled sample grid and its caption,
privacy.json's method, software versions and creation time, the safetensors weights
(old ``.pt`` releases still load)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from raydp_synth.config import config_to_dict
from raydp_synth.data import DataInfo
from raydp_synth.methods import get_method
from raydp_synth.release import TrainedGenerator, write_release
from raydp_synth.release.bundle import (
    NEIGHBOURING_RELATION,
    release_provenance,
    sample_caption,
    sample_figure,
)
from raydp_synth.release.generator import GENERATOR_WEIGHTS, LEGACY_GENERATOR_WEIGHTS

INFO = DataInfo(num_records=500, image_size=16, channels=1, num_classes=3)
NAMES = ("circle", "square", "triangle")
STATEMENT = {"epsilon": 2.5, "delta": 1e-5, "private": True, "dataset": "shapes",
             "scope": "one training run and its selection score (no hyperparameter search)",
             "accountant": "rdp"}


@pytest.fixture(scope="module")
def generator() -> TrainedGenerator:
    method = get_method("dpaf")
    config = method.make_config({}, INFO)
    torch.manual_seed(0)
    module = method.build_generator(config, INFO)
    return TrainedGenerator.build(method="dpaf", config=config_to_dict(config),
                                  data_info=INFO.__dict__, class_names=NAMES,
                                  state_dict=module.state_dict())


@pytest.fixture(scope="module")
def release(generator: TrainedGenerator, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "release"
    write_release(out, generator=generator, statement=STATEMENT, num_synthetic=12, seed=0,
                  samples_per_class=4)
    return out


def _texts(figure) -> list[str]:
    return [t.get_text() for t in figure.findobj(lambda a: hasattr(a, "get_text"))]


def test_sample_grid_labels_each_row_with_its_class_and_captions_the_guarantee() -> None:
    images = np.zeros((3 * 4, 1, 16, 16), dtype=np.uint8)
    caption = sample_caption(STATEMENT, "dpaf")
    figure = sample_figure(images, NAMES, caption=caption)
    (ax,) = figure.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == list(NAMES)
    assert caption in _texts(figure)
    assert caption == "dpaf on shapes: (epsilon=2.5, delta=1e-05)-DP; see privacy.json"
    with pytest.raises(ValueError, match="one row for each"):
        sample_figure(images[:5], NAMES, caption=caption)


def test_caption_names_the_whole_search_and_a_non_private_run() -> None:
    study = {**STATEMENT, "scope": "the whole hyperparameter search (every trial ...)"}
    assert sample_caption(study, "dpgan").endswith("-DP for the whole search; see privacy.json")
    reference = {**STATEMENT, "epsilon": None, "private": False}
    assert "NOT PRIVATE" in sample_caption(reference, "dpgan")


def test_samples_png_carries_its_caption_and_class_names(release: Path) -> None:
    with Image.open(release / "samples.png") as png:
        text = dict(png.text)
        assert png.width > 4 * 16 and png.height > 3 * 16
    assert text["Description"] == sample_caption(STATEMENT, "dpaf")
    assert json.loads(text["Classes"]) == list(NAMES)


def test_privacy_json_names_method_versions_and_creation_time(release: Path) -> None:
    written = json.loads((release / "privacy.json").read_text())
    for key, value in STATEMENT.items():  # the caller's keys stay (the accountant once)
        assert (written["accounting"] if key == "accountant" else written)[key] == value
    assert written["neighbouring_relation"] == NEIGHBOURING_RELATION
    assert list(written)[:4] == ["summary", "epsilon", "delta", "private"]
    assert written["summary"].startswith("(2.5, 1e-05)-DP for one training run")
    assert list(written)[-1] == "details"
    assert written["public_facts"]["classes"]["names"] == list(NAMES)
    assert written["method"] == "dpaf"
    software = written["details"]["software"]
    assert set(software) == {"raydp_synth", "torch", "opacus", "dp-accounting"}
    assert software["torch"] == torch.__version__.split("+")[0] or \
        software["torch"] == torch.__version__
    import opacus

    assert software["opacus"] == opacus.__version__
    assert software["dp-accounting"] is not None
    created = datetime.fromisoformat(written["details"]["created"].replace("Z", "+00:00"))
    assert written["details"]["created"].endswith("Z") and created.utcoffset().total_seconds() == 0
    assert abs((datetime.now(timezone.utc) - created).total_seconds()) < 600


def test_provenance_time_is_utc_iso_8601() -> None:
    from datetime import timedelta

    local = datetime(2026, 11, 24, 21, 30, 5, tzinfo=timezone(timedelta(hours=2)))
    assert release_provenance("dpgan", now=local)["created"] == "2026-11-24T19:30:05Z"


def _same_samples(a: TrainedGenerator, b: TrainedGenerator) -> bool:
    labels = torch.arange(6) % 3
    return torch.equal(a.sample(labels, seed=3), b.sample(labels, seed=3))


def test_weights_are_safetensors_and_load_from_str_or_path(generator: TrainedGenerator,
                                                          release: Path) -> None:
    from safetensors.torch import load_file

    assert GENERATOR_WEIGHTS == "generator.safetensors"
    assert (release / GENERATOR_WEIGHTS).is_file()
    assert not (release / LEGACY_GENERATOR_WEIGHTS).exists()
    tensors = load_file(str(release / GENERATOR_WEIGHTS))
    assert tensors.keys() == generator.module.state_dict().keys()
    for loaded in (TrainedGenerator.from_release(release),
                   TrainedGenerator.from_release(str(release))):
        assert loaded.class_names == NAMES and loaded.method.name == "dpaf"
        assert _same_samples(loaded, generator)


def test_a_release_with_pickled_pt_weights_still_loads(generator: TrainedGenerator,
                                                       release: Path, tmp_path: Path) -> None:
    old = tmp_path / "old-release"
    old.mkdir()
    (old / "generator.json").write_text((release / "generator.json").read_text())
    torch.save(generator.module.state_dict(), old / LEGACY_GENERATOR_WEIGHTS)
    loaded = TrainedGenerator.from_release(str(old))
    assert _same_samples(loaded, generator)


def test_missing_weights_name_the_folder(tmp_path: Path) -> None:
    from raydp_synth.errors import ConfigError

    (tmp_path / "generator.json").write_text("{}")
    with pytest.raises(ConfigError, match="generator.safetensors is missing"):
        TrainedGenerator.from_release(tmp_path)


def test_privacy_json_follows_its_schema(release: Path) -> None:
    """docs/privacy-json.schema.json: the statement first, the accounting and the
    relation once, the details below (a study's release is checked in tests/tune)."""
    from tests.release.privacy_schema import check_privacy_json

    check_privacy_json(json.loads((release / "privacy.json").read_text()))
