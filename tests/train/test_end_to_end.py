"""A whole DP run on digits with 2 Ray Train workers: the run directory is valid."""

from __future__ import annotations

import json
import stat

import numpy as np
import pytest
from PIL import Image

from raydp_synth.data.parquet import load_parquet_raw
from raydp_synth.methods import get_method
from raydp_synth.privacy.events import event_from_json
from raydp_synth.privacy.plan import PrivacyPlan
from raydp_synth.privacy.pricing import epsilon as stated_epsilon
from raydp_synth.privacy.selection_score import SELECTION_SCORE
from raydp_synth.train.driver import TrainRequest, run_training
from tests.evaluation.small_evaluation import SAMPLES, small_evaluation
from tests.release.privacy_schema import check_privacy_json

pytestmark = [pytest.mark.ray, pytest.mark.slow]

DP_SEED = 784_193_552_600_317  # a distinctive value, to look for in the written files


@pytest.fixture(scope="module")
def run_dir(ray_local, tmp_path_factory):
    out = tmp_path_factory.mktemp("e2e") / "run"
    from raydp_synth.train import driver

    # The curator's evaluation runs in this process (run_training's end), at test size.
    with small_evaluation("dpaf", driver):
        result = run_training(TrainRequest(
            method="dpaf", epsilon=4.0, delta=1e-5, out=out, workers=2, dp_seed=DP_SEED,
            settings={"epochs": "2", "classifier_epochs": "0.5", "base_width": "8"},
            # The curve's machinery on two checkpoints (first and last), not all ten:
            # the figures are the same code per checkpoint.
            curve_checkpoints=2,
            synthetic_samples=500,  # the release's synthetic.parquet: 50 of each class
        ))
    return out, result


def test_release_bundle_is_complete(run_dir) -> None:
    out, _ = run_dir
    release = out / "release"
    assert sorted(p.name for p in release.iterdir()) == [
        "generator.json", "generator.safetensors", "privacy.json", "samples.png",
        "synthetic.parquet"]
    grid = Image.open(release / "samples.png")
    assert grid.height > 10 * 16 and grid.width > 10 * 16
    assert json.loads(grid.text["Classes"]) == [str(i) for i in range(10)]
    # The run has a --dp-seed (to test that it is written nowhere): no DP release, and
    # the caption says so instead of an epsilon.
    assert grid.text["Description"].startswith(
        "dpaf on digits: reproducibility run, NOT A DP RELEASE")
    raw = load_parquet_raw(str(release / "synthetic.parquet"))
    assert raw.images.shape[1:] == (1, 16, 16)
    assert raw.class_names == tuple(str(i) for i in range(10))
    assert np.bincount(raw.labels).min() > 0  # every class is synthesised


def test_privacy_statement_is_dp_accountings_value_and_within_budget(run_dir) -> None:
    out, result = run_dir
    statement = json.loads((out / "release" / "privacy.json").read_text())
    check_privacy_json(statement)
    event = event_from_json(statement["details"]["plan"]["event"])
    assert statement["epsilon"] == pytest.approx(stated_epsilon(event, delta=statement["delta"]), rel=1e-12)
    assert 0.95 * 4.0 <= statement["epsilon"] <= 4.0
    assert result.epsilon == statement["epsilon"]
    # The plan covers the private selection score: a one-shot Gaussian, sensitivity 1.
    score = {m["name"]: m for m in statement["details"]["plan"]["mechanisms"]}["selection_score"]
    assert score["sample_rate"] is None and score["num_steps"] == 1 and score["sensitivity"] == 1.0


def test_selection_score_is_released_with_the_planned_noise(run_dir) -> None:
    out, result = run_dir
    saved = json.loads((out / "score.json").read_text())
    assert saved == result.score.to_dict() and saved["private"] is True
    statement = json.loads((out / "release" / "privacy.json").read_text())
    sigma = {m["name"]: m for m in statement["details"]["plan"]["mechanisms"]}["selection_score"]["noise_multiplier"]
    assert saved["noise_std"] == pytest.approx(sigma / saved["num_records"])


def test_training_run_ends_with_the_curators_evaluation(run_dir) -> None:
    out, result = run_dir
    assert result.evaluation is not None
    final = set(result.evaluation["final"])
    assert final >= {"cas_logreg", "cas_mlp", "cas_cnn", "fid_cnn", "is_cnn"}
    # No Inception weights in tests: none of the field's figures, and a note why.
    assert not final & {"fid_inception", "is_inception", "precision", "recall"}
    assert result.evaluation["inception"]["available"] is False
    assert (out / "evaluation.json").is_file() and (out / "privacy_utility.png").is_file()
    assert result.evaluation["curve"], "no checkpoint was evaluated"


def test_the_results_table_reads_the_run_directory(run_dir) -> None:
    from raydp_synth.report import read_row

    out, result = run_dir
    row = read_row(out)
    assert (row.kind, row.method, row.dataset) == ("run", "dpaf", "digits")
    assert row.epsilon == result.epsilon and row.delta == 1e-5
    final = result.evaluation["final"]
    assert row.cas == {k[4:]: v for k, v in final.items() if k.startswith("cas_")}
    assert row.figures["fid_cnn"] == final.get("fid_cnn", final.get("fid"))
    assert row.figures["is_cnn"] == final.get("is_cnn", final.get("inception_score"))
    assert row.num_synthetic == result.evaluation["settings"]["num_synthetic"]
    assert row.num_synthetic == SAMPLES[0]  # the patched count was used
    assert row.train_s is not None and row.train_s > 0  # timing.json


def test_reported_metrics_are_on_the_allowlist(run_dir) -> None:
    out, result = run_dir
    allow = get_method("dpaf").metric_allowlist
    assert result.metrics, "no metrics were reported"
    for row in result.metrics:
        assert set(row) <= allow
    phases = {row["phase"] for row in result.metrics}
    assert phases == {1.0, 2.0}
    # epsilon_spent grows to the epsilon of the training mechanisms; the selection
    # score is released after training and completes the plan.
    spent = [row["epsilon_spent"] for row in result.metrics]
    assert spent == sorted(spent)
    statement = json.loads((out / "release" / "privacy.json").read_text())
    plan = PrivacyPlan.from_dict(statement["details"]["plan"])
    assert spent[-1] == pytest.approx(plan.without(SELECTION_SCORE).epsilon(), rel=1e-9)
    assert spent[-1] < result.epsilon
    assert json.loads((out / "metrics.json").read_text()) == result.metrics


def test_run_directory_is_owner_only(run_dir) -> None:
    out, _ = run_dir
    for path in [out, out / "release", out / "release" / "privacy.json", out / "metrics.json"]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, f"{path} is readable by others: {oct(mode)}"


def test_secret_dp_seed_is_written_nowhere(run_dir) -> None:
    out, _ = run_dir
    needle = str(DP_SEED).encode()
    for path in out.rglob("*"):
        if path.is_file():
            assert needle not in path.read_bytes(), f"the secret DP seed leaked into {path}"
