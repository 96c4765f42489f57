"""A request parses its dataset specs and public declaration once, at the edge, and
carries them typed; what files record is their canonical string, unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raydp_synth.data.public import PublicDeclaration
from raydp_synth.data.spec import DatasetSpec, parse_dataset_spec
from raydp_synth.errors import ConfigError, DataError
from raydp_synth.train.driver import TrainRequest
from raydp_synth.tune.resume_checks import check_same_settings, request_json
from raydp_synth.tune.study import StudyRequest

DATASET = "parquet:data/x.parquet:size=8:channels=1:classes=10"


def _study(tmp_path: Path, **changes: object) -> StudyRequest:
    values: dict[str, object] = dict(
        method="dpaf", epsilon=4.0, delta=1e-5, trials=2, storage=tmp_path, name="s",
        dataset=DATASET, public="digits:fraction=0.3", public_validation="folder:/pub")
    return StudyRequest(**{**values, **changes})  # type: ignore[arg-type]


def test_a_request_built_from_strings_carries_typed_specs(tmp_path: Path) -> None:
    request = _study(tmp_path)
    assert isinstance(request.dataset, DatasetSpec)
    assert request.dataset == parse_dataset_spec(DATASET)
    assert isinstance(request.public, PublicDeclaration) and request.public.fraction == 0.3
    assert request.public_validation == parse_dataset_spec("folder:/pub")
    train = TrainRequest(method="dpaf", epsilon=1.0, delta=1e-5, out=tmp_path / "run",
                         dataset=DATASET)
    assert train.dataset == request.dataset
    # The default is typed too, and a typed spec is taken as it is.
    assert StudyRequest(method="dpaf", epsilon=1.0, delta=1e-5,
                        storage=tmp_path).dataset == DatasetSpec(kind="digits")
    assert _study(tmp_path, dataset=request.dataset).dataset is request.dataset


def test_the_recorded_request_holds_the_canonical_strings(tmp_path: Path) -> None:
    request = _study(tmp_path, tune_on_public="folder:/public/x")
    assert request.tune_on_public == parse_dataset_spec("folder:/public/x")
    recorded = json.loads(json.dumps(request_json(request)))  # as study.json holds it
    assert recorded["dataset"] == DATASET
    assert recorded["public"] == "digits:fraction=0.3"
    assert recorded["public_validation"] == "folder:/pub"
    assert recorded["tune_on_public"] == "folder:/public/x"
    assert recorded["storage"] == str(tmp_path)
    # A request rebuilt from the record is the same request, and a resume of it passes
    # the recorded-settings check.
    rebuilt = _study(tmp_path, dataset=recorded["dataset"], public=recorded["public"],
                     public_validation=recorded["public_validation"],
                     tune_on_public=recorded["tune_on_public"])
    assert rebuilt == request
    study = tmp_path / "s"
    study.mkdir()
    (study / "study.json").write_text(json.dumps({"request": request_json(request)}))
    check_same_settings(rebuilt, study)
    with pytest.raises(ConfigError, match="was started with --dataset"):
        check_same_settings(_study(tmp_path, dataset="digits",
                                   tune_on_public="folder:/public/x"), study)


def test_a_fraction_of_data_to_tune_on_is_refused_at_the_edge(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not a fraction"):
        _study(tmp_path, tune_on_public="folder:/public/x:fraction=0.5")
