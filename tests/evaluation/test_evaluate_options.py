"""The evaluate CLI's CAS options reach the evaluation settings."""

from __future__ import annotations

import pytest

from raydp_synth.evaluate import main
from raydp_synth.evaluation import report
from raydp_synth.evaluation.classifiers import DEFAULT_CLASSIFIERS


@pytest.fixture
def captured(monkeypatch) -> list:
    seen: list = []
    monkeypatch.setattr(report, "evaluate_run", lambda run_dir, **kw: seen.append(kw) or {})
    monkeypatch.setattr(report, "format_table", lambda result: "table")
    return seen


def test_classifiers_and_cas_samples_become_settings(tmp_path, captured) -> None:
    assert main([str(tmp_path), "--classifiers", "logreg, resnet9,logreg", "--cas-samples",
                 "60000", "--device", "cpu"]) == 0
    settings = captured[0]["settings"]
    assert settings.classifiers == ("logreg", "resnet9") and settings.num_synthetic == 60000


def test_the_default_is_the_three_classifiers(tmp_path, captured) -> None:
    assert main([str(tmp_path), "--num-synthetic", "500", "--device", "cpu"]) == 0
    settings = captured[0]["settings"]
    assert settings.classifiers == DEFAULT_CLASSIFIERS and settings.num_synthetic == 500


def test_an_unknown_classifier_is_a_usage_error(tmp_path, captured, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path), "--classifiers", "logreg,svm"])
    assert exit_info.value.code == 2 and not captured
    assert "choose classifiers from logreg, mlp, cnn, resnet9" in capsys.readouterr().err
