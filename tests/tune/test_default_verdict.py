"""A study that releases the method's default configuration says so in its last
lines (issue 46: ``tune`` never spends a budget silently where one run would do)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from raydp_synth.config import config_to_dict
from raydp_synth.data import DataInfo
from raydp_synth.methods import get_method
from raydp_synth.tune.search_space import load_search_space
from raydp_synth.tune.study import StudyRequest
from raydp_synth.tune.study_release import default_verdict

DIGITS = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)
DPAF = get_method("dpaf")


def _default() -> Any:
    return DPAF.make_config(load_search_space(None, "dpaf", DIGITS).fixed, DIGITS)


def _as_checkpointed(config: Any) -> dict[str, Any]:
    """The released config as the trial's checkpoint holds it (JSON)."""
    return json.loads(json.dumps(config_to_dict(config)))


def test_a_released_default_is_named_with_the_single_run_to_weigh() -> None:
    request = StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, trials=3)
    default = _default()
    verdict = default_verdict(request, default, _as_checkpointed(replace(default, seed=7)))
    assert verdict is not None
    assert "dpaf's default" in verdict and "found none that scored higher" in verdict
    assert "python -m raydp_synth.train dpaf --epsilon 5 --delta 1e-05 --dataset digits" in verdict


def test_another_released_configuration_gets_no_verdict() -> None:
    request = StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, trials=3)
    default = _default()
    other = replace(default, mu=default.mu + 1)
    assert default_verdict(request, default, _as_checkpointed(other)) is None


def test_restarts_of_the_default_release_it_by_design_and_say_nothing() -> None:
    request = StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, trials=3,
                           strategy="random-stopping", sampler="random", default_share=1.0)
    default = _default()
    assert default_verdict(request, default, _as_checkpointed(default)) is None
