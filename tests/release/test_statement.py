"""The release's privacy statement: dp-accounting's epsilon, or loudly NOT PRIVATE."""

from __future__ import annotations

import json

import pytest

from raydp_synth.data import DataInfo
from raydp_synth.methods import get_method
from raydp_synth.privacy.events import event_from_json
from raydp_synth.privacy.pricing import epsilon as stated_epsilon
from raydp_synth.privacy.selection_score import SELECTION_SCORE
from raydp_synth.release import privacy_statement

INFO = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)


def _config():
    method = get_method("dpaf")
    return method, method.make_config({"epochs": 10}, INFO)


@pytest.mark.slow
def test_statement_prices_the_whole_plan_including_the_score() -> None:
    method, config = _config()
    plan = method.plan(config, target_epsilon=3.0, delta=1e-5, data=INFO, score_share=0.1)
    statement = json.loads(json.dumps(privacy_statement(plan, scope="run", dataset="digits")))
    event = event_from_json(statement["plan"]["event"])
    assert statement["epsilon"] == pytest.approx(stated_epsilon(event, delta=1e-5), rel=1e-12)
    assert statement["private"] is True and statement["epsilon"] <= 3.0
    assert SELECTION_SCORE in [m["name"] for m in statement["plan"]["mechanisms"]]


def test_non_private_reference_is_marked_and_has_no_epsilon() -> None:
    method, config = _config()
    plan = method.non_private_plan(config, delta=1e-5, data=INFO)
    statement = privacy_statement(plan, scope="run", dataset="digits")
    text = json.dumps(statement, allow_nan=False)  # strict JSON: no Infinity anywhere
    assert statement["epsilon"] is None and statement["private"] is False
    assert "NOT PRIVATE" in statement["warning"] and "NOT PRIVATE" in text


def test_a_chosen_dp_seed_marks_the_statement_not_a_dp_release(tmp_path) -> None:
    """``--dp-seed`` fixes the DP randomness: a reused seed replays batches and noise,
    which composition does not cover, so privacy.json says ``"dp_release": false``
    with the reason; a run without it carries neither key."""
    from raydp_synth.config import config_to_dict
    from raydp_synth.release import TrainedGenerator, write_release
    from raydp_synth.release.bundle import REPRODUCIBILITY_RUN, sample_caption

    method, config = _config()
    plan = method.non_private_plan(config, delta=1e-5, data=INFO)
    module = method.build_generator(config, INFO)
    generator = TrainedGenerator.build(method="dpaf", config=config_to_dict(config),
                                       data_info=INFO.__dict__,
                                       class_names=tuple(str(k) for k in range(10)),
                                       state_dict=module.state_dict())
    for seeded in (True, False):
        statement = privacy_statement(plan, scope="run", dataset="digits",
                                      reproducibility_seed=seeded)
        release = tmp_path / str(seeded)
        write_release(release, generator=generator, statement=statement, num_synthetic=20,
                      seed=0)
        written = json.loads((release / "privacy.json").read_text())
        if seeded:
            assert written["dp_release"] is False and written["reason"] == REPRODUCIBILITY_RUN
            # The first things a reader sees: the summary says so, then the reason.
            assert list(written)[:3] == ["summary", "dp_release", "reason"]
            assert written["summary"].startswith("NOT A DP RELEASE")
            assert "reproducibility run, not a DP release" in written["reason"]
        else:
            assert "dp_release" not in written and "reason" not in written
    caption = sample_caption({"dp_release": False, "epsilon": 1.0, "delta": 1e-5}, "dpaf")
    assert "NOT A DP RELEASE" in caption
