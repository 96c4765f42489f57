"""A dp-hypo study end to end (Ray): priced by DP-HyPO's bound, stated with it."""

from __future__ import annotations

import json

import pytest

from raydp_synth.accountant.ledger import Ledger
from raydp_synth.privacy.accounting import dominates
from raydp_synth.privacy.adaptive_tuning import adaptive_random_stopping_epsilon
from raydp_synth.privacy.events import event_from_json
from raydp_synth.tune.study import StudyRequest, run_study
from tests.tune.test_study import tiny_without_split


@pytest.mark.ray
@pytest.mark.slow
def test_dp_hypo_study_is_priced_by_dp_hypo(ray_local, tmp_path) -> None:
    """Geometric with mean 1 draws K = 1 surely: one trial, from the candidates, with
    c = 2: the reference plan, the ledger header and the release's statement carry
    DP-HyPO's price (Theorem 1), not plain random stopping's (over TINY's space without
    its budget split, so that the one trial can run and the study releases)."""
    space = tiny_without_split(tmp_path)
    run_study(StudyRequest(
        method="dpaf", epsilon=5.0, delta=1e-5, trials=1, strategy="random-stopping",
        distribution="geometric", sampler="dp-hypo", hypo_c=2.0, search_space=space,
        storage=tmp_path, name="e2e-hypo", evaluate=False,
    ))
    study = tmp_path / "e2e-hypo"
    entries = Ledger(study / "ledger.jsonl").entries()
    header, grants = entries[0], [e for e in entries if e["kind"] == "grant"]
    assert header["density_ratio"] == 2.0 and header["trial_count"] == 1 and len(grants) == 1
    reference = event_from_json(header["reference_event"])
    assert dominates(reference, event_from_json(grants[0]["event"]))
    statement = json.loads((study / "release" / "privacy.json").read_text())
    expected = adaptive_random_stopping_epsilon(reference, mean=1.0, shape=1.0, delta=1e-5,
                                                density_ratio=2.0)
    assert statement["epsilon"] == pytest.approx(expected, rel=1e-9) and expected <= 5.0
    pricing = statement["details"]["study"]
    assert "DP-HyPO" in pricing["theorem"] and pricing["density_ratio"] == 2.0
