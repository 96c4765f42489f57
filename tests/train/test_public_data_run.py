"""A dpGAN run with declared public data, on 2 Ray Train workers: warm start and
adaptive clip groups run, the public part is out of the training split, and the
release names the declaration."""

from __future__ import annotations

import json

import pytest

from raydp_synth.data import load_dataset, load_training_data, parse_dataset_spec, parse_public_spec
from raydp_synth.methods import get_method
from raydp_synth.train.driver import TrainRequest, run_training

pytestmark = [pytest.mark.ray, pytest.mark.slow]

#: Rows of each release's synthetic.parquet (10,000 by default: for privimage-d, that
#: many samples of its diffusion model). What is checked here is the run, not them.
SYNTHETIC_SAMPLES = 100


def test_dpgan_with_a_public_fraction_of_digits(ray_local, tmp_path) -> None:
    out = tmp_path / "run"
    run_training(TrainRequest(
        method="dpgan", epsilon=5.0, delta=1e-5, out=out, workers=2, evaluate=False,
        public="digits:fraction=0.05", synthetic_samples=SYNTHETIC_SAMPLES,
        settings={"epochs": "1", "capacity": "4", "groups": "3", "warm_start_iters": "4",
                  "public_batch_size": "16"},
    ))
    run = json.loads((out / "run.json").read_text())
    splits, public = load_training_data(parse_dataset_spec("digits"), public=parse_public_spec("digits:fraction=0.05"))
    assert run["public"] == "digits:fraction=0.05"
    assert run["data_info"]["num_records"] == len(splits.train) < len(load_dataset("digits").train)
    assert run["data_info"]["public_records"] == len(public)
    assert run["config"]["adaptive_clip"] is True
    statement = json.loads((out / "release" / "privacy.json").read_text())
    assert statement["public_data"]["declared"] == "digits:fraction=0.05"
    assert statement["epsilon"] <= 5.0
    critic = statement["details"]["plan"]["mechanisms"][0]
    assert critic["name"] == "critic" and critic["sensitivity"] == pytest.approx(3 ** 0.5)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics and all(set(m) <= get_method("dpgan").metric_allowlist for m in metrics)
    assert metrics[-1]["clip_bound"] > 0


@pytest.mark.parametrize(("method", "settings", "fine_tuning"), [
    ("privimage-g", {"epochs": "1", "capacity": "4", "pretrain_iters": "4"}, "critic"),
    # extended: the declaration's code is privimage-g's; the denoiser's loop is audited
    # by tests/methods/test_method_contract.py in CI.
    pytest.param("privimage-d", {"epochs": "0.5", "width": "8", "pretrain_iters": "4",
                                 "multiplicity": "2", "sample_steps": "5"}, "denoiser",
                 marks=pytest.mark.extended),
])
def test_privimage_on_digits_uses_the_documented_public_declaration(
        ray_local, tmp_path, method: str, settings: dict, fine_tuning: str) -> None:
    out = tmp_path / "run"
    run_training(TrainRequest(
        method=method, epsilon=5.0, delta=1e-5, out=out, workers=1, evaluate=False,
        settings=settings, synthetic_samples=SYNTHETIC_SAMPLES,
    ))
    run = json.loads((out / "run.json").read_text())
    assert run["public"] == "digits:fraction=0.3"
    statement = json.loads((out / "release" / "privacy.json").read_text())
    assert statement["public_data"]["declared"] == "digits:fraction=0.3"
    assert {m["name"] for m in statement["details"]["plan"]["mechanisms"]} == {
        "semantic_query", fine_tuning, "selection_score"}
    assert (out / "release" / "samples.png").is_file()
    assert statement["epsilon"] <= 5.0
