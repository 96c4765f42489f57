"""A study that releases the method's default configuration says so in its last
lines (issue 46: ``tune`` never spends a budget silently where one run would do)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from raydp_synth.config import config_to_dict
from raydp_synth.data import DataInfo
from raydp_synth.methods import get_method
from raydp_synth.tune.search_space import SearchSpace, load_search_space
from raydp_synth.tune.study import StudyRequest
from raydp_synth.tune.study_release import default_verdict

DIGITS = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)
DPAF = get_method("dpaf")
REQUEST = StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, trials=3)


def _space_and_default() -> tuple[SearchSpace, Any]:
    space = load_search_space(None, "dpaf", DIGITS)
    return space, DPAF.make_config({**space.fixed, "seed": 0}, DIGITS)


def _as_checkpointed(config: Any) -> dict[str, Any]:
    """The released config as the trial's checkpoint holds it (JSON)."""
    return json.loads(json.dumps(config_to_dict(config)))


def _as_compose_first_trial(space: SearchSpace, default: Any, seed: int) -> dict[str, Any]:
    """What compose's first trial trains and checkpoints: the default's point in the
    space (budget weights rescaled to the space's range), back through the trial's
    own path (settings_from_trial_config, make_config)."""
    point = space.default_point(config_to_dict(default))
    settings = {**space.settings_from_trial_config(point), "seed": seed}
    return _as_checkpointed(DPAF.make_config(settings, DIGITS))


def test_the_default_as_compose_runs_it_first_is_named_with_the_single_run_to_weigh() -> None:
    space, default = _space_and_default()
    released = _as_compose_first_trial(space, default, seed=7)
    # the weights travel rescaled (0.05, 0.25, 0.7) -> (0.071.., 0.357.., 1.0): the same plan
    assert released["budget_split"] != list(default.budget_split)
    verdict = default_verdict(REQUEST, default, released, space)
    assert verdict is not None
    assert "dpaf's default" in verdict and "found none that scored higher" in verdict
    assert "python -m raydp_synth.train dpaf --epsilon 5 --delta 1e-05 --dataset digits" in verdict
    assert default_verdict(REQUEST, default, _as_checkpointed(default), space) is not None


def test_another_released_configuration_gets_no_verdict() -> None:
    space, default = _space_and_default()
    for other in (replace(default, mu=default.mu + 1),
                  replace(default, budget_split=(0.05, 0.25, 0.5)),  # other ratios
                  replace(default, classifier_epochs=default.classifier_epochs + 1)):  # fixed
        assert default_verdict(REQUEST, default, _as_checkpointed(other), space) is None


def test_restarts_of_the_default_release_it_by_design_and_say_nothing() -> None:
    request = StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, trials=3,
                           strategy="random-stopping", sampler="random", default_share=1.0)
    space, default = _space_and_default()
    assert default_verdict(request, default, _as_checkpointed(default), space) is None
