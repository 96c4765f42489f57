"""``--default-share P``: random stopping's trials are the default config with
probability P, else random draws of the space; one fixed, non-adaptive prior.

The searcher is the one the study builds (:func:`raydp_synth.tune.study.optuna_search`),
driven as Tune drives it, without Ray. The CLI's one-line refusals are in
``test_cli_errors.py``.
"""

from __future__ import annotations

import math
import pickle
from typing import Any

import optuna
import pytest

from raydp_synth.config import config_to_dict
from raydp_synth.data import DataInfo
from raydp_synth.errors import ConfigError
from raydp_synth.methods import get_method
from raydp_synth.privacy import secret_rng
from raydp_synth.tune.__main__ import build_parser
from raydp_synth.tune.search_space import SearchSpace, load_search_space
from raydp_synth.tune.study import StudyRequest, optuna_search

optuna.logging.set_verbosity(optuna.logging.WARNING)

DIGITS = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)
DPAF = get_method("dpaf")


def _request(share: float, strategy: str = "random-stopping", **kw: Any) -> StudyRequest:
    return StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, strategy=strategy,
                        sampler="random", default_share=share, **kw)


def _space_and_default() -> tuple[SearchSpace, Any, dict[str, Any]]:
    space = load_search_space(None, "dpaf", DIGITS)
    default = DPAF.make_config(space.fixed, DIGITS)
    point = space.default_point(config_to_dict(default))
    assert point and set(point) == {  # every sampled key of the packaged space
        key for key in _draw(_request(0.0), space, default, 1)[0] if key not in space.fixed}
    return space, default, point


def _draw(request: StudyRequest, space: SearchSpace, default: Any, n: int,
          score: Any = lambda config, i: 0.1 * i) -> list[dict[str, Any]]:
    """The first n configs the study's searcher suggests, each then completed with
    ``score(config, i)`` (what Tune reports back)."""
    search = optuna_search(request, space, default)
    configs = []
    for i in range(n):
        config = search.suggest(f"t{i}")
        configs.append(config)
        search.on_trial_complete(f"t{i}", {"score": score(config, i)})
    return configs


def _is_default(config: dict[str, Any], point: dict[str, Any]) -> bool:
    return all(config[key] == value for key, value in point.items())


@pytest.mark.parametrize("share", [0.25, 0.5])
def test_a_trial_is_the_default_with_probability_share(share: float) -> None:
    """n trials: the default count is Binomial(n, P); 4.5 standard deviations
    (two-sided, about 7e-6 under the null). Other trials are the space's continuous
    draws, which never hit the default point."""
    space, default, point = _space_and_default()
    n = 400
    configs = _draw(_request(share), space, default, n)
    hits = sum(_is_default(c, point) for c in configs)
    assert abs(hits - n * share) <= 4.5 * math.sqrt(n * share * (1 - share))
    others = [c for c in configs if not _is_default(c, point)]
    assert all(c[key] != point[key] for c in others for key in ("lr_d", "lr_g"))
    # the draws off the atom are spread over the space, not a second atom
    assert len({c["lr_d"] for c in others}) == len(others)


def test_the_coins_do_not_depend_on_the_scores(monkeypatch) -> None:
    """Same secret seed, opposite score histories (one rewards the default, one
    punishes it): the same trials. The prior is fixed, so random stopping's pricing
    of i.i.d. trials holds."""
    space, default, point = _space_and_default()
    words = [0x5EC2E75E, 0xED123456, 0x789ABCDE, 0xF0C0FFEE]

    def draws(reward: float) -> list[dict[str, Any]]:
        it = iter(words)
        monkeypatch.setattr(secret_rng.secrets, "randbits", lambda k: next(it))
        return _draw(_request(0.5), space, default, 24,
                     score=lambda c, i: reward if _is_default(c, point) else -reward)

    favoured, punished = draws(1.0), draws(-1.0)
    assert favoured == punished
    assert 0 < sum(_is_default(c, point) for c in favoured) < 24


def test_the_coins_are_secret_fresh_per_study_and_not_from_the_public_seed() -> None:
    space, default, point = _space_and_default()
    runs = [[_is_default(c, point) for c in _draw(_request(0.5, seed=0), space, default, 40)]
            for _ in range(3)]
    assert runs[0] != runs[1] or runs[1] != runs[2]  # equal by chance: 2**-80


def test_the_searcher_holds_no_readable_seed(monkeypatch) -> None:
    space, default, _ = _space_and_default()
    words = iter([0x5EC2E75E, 0xED123456, 0x789ABCDE, 0xF0C0FFEE])
    monkeypatch.setattr(secret_rng.secrets, "randbits", lambda k: next(words))
    search = optuna_search(_request(0.5), space, default)
    search.suggest("t0")
    blob = pickle.dumps(search)
    for word in (0x5EC2E75E, 0xED123456, 0x789ABCDE, 0xF0C0FFEE):
        assert str(word).encode() not in blob
        assert word.to_bytes(4, "little") not in blob and word.to_bytes(4, "big") not in blob


@pytest.mark.parametrize(("selection", "sampler", "share"), [
    ("random-stopping", "random", 0.5), ("subsampled", "random", 0.5),
    ("compose", "tpe", 0.0), ("compose", "random", 0.0),
])
def test_unset_the_share_is_half_where_it_applies(selection, sampler, share) -> None:
    from raydp_synth.tune.study import DEFAULT_SHARE

    assert DEFAULT_SHARE == 0.5
    request = StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, strategy=selection,
                           sampler=sampler)
    assert request.default_share == share
    geometric = StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, sampler="dp-hypo",
                             strategy="random-stopping", distribution="geometric")
    assert geometric.default_share == 0.5  # dp-hypo's prior gets the atom too
    tpe = StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, sampler="tpe")
    assert tpe.default_share == 0.0  # compose runs the default first
    args = build_parser().parse_args(["dpaf", "--strategy", "random-stopping"])
    assert args.default_share is None  # the request decides


def test_share_one_restarts_the_default_in_every_trial() -> None:
    """``--default-share 1``: every trial of a random-stopping study is the default
    point (restarts; only the training's randomness differs), whatever the scores."""
    space, default, point = _space_and_default()
    configs = _draw(_request(1.0), space, default, 40,
                    score=lambda c, i: (-1.0) ** i)
    assert all(_is_default(c, point) for c in configs)
    assert all(c == configs[0] for c in configs)  # the fixed settings too


def test_dp_hypo_refuses_a_prior_of_the_default_alone() -> None:
    from raydp_synth.tune.search_space.dp_hypo import DPHyPOSampler, space_distributions

    with pytest.raises(ConfigError, match="nothing to adapt"):
        _dp_hypo_request(1.0, 1.25)
    space, _, point = _space_and_default()
    with pytest.raises(ConfigError, match="nothing to adapt"):  # the sampler itself too
        DPHyPOSampler(space_distributions(space.define_by_run), density_ratio=1.25, seed=0,
                      default_point=point, default_share=1.0)


def test_share_zero_is_the_plain_random_sampler() -> None:
    space, default, _ = _space_and_default()
    search = optuna_search(_request(0.0), space, default)
    assert type(search._sampler) is optuna.samplers.RandomSampler


@pytest.mark.parametrize(("kw", "needle"), [
    ({"share": 1.01}, "must be in [0, 1]"),
    ({"share": -0.1}, "must be in [0, 1]"),
    ({"share": 0.5, "strategy": "compose"}, "already runs it first"),
    ({"share": 1.0, "strategy": "compose"}, "already runs it first"),
    ({"share": 1.0, "strategy": "subsampled"}, "selects nothing"),
])
def test_bad_requests_are_refused(kw: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as error:
        _request(**kw)
    assert needle in str(error.value)


def _dp_hypo_request(share: float, hypo_c: float) -> StudyRequest:
    return StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, strategy="random-stopping",
                        distribution="geometric", sampler="dp-hypo", hypo_c=hypo_c,
                        default_share=share)


@pytest.mark.parametrize("share", [0.25, 0.5])
def test_dp_hypo_prior_holds_the_default_with_weight_share(share: float) -> None:
    """The study's dp-hypo searcher: the default point is a candidate of prior weight P.
    At c = 1 (no adaptation) its draws are the prior's, so the default count over n
    trials is Binomial(n, P) (4.5 standard deviations, as above), whatever the scores."""
    from raydp_synth.tune.search_space.dp_hypo import DPHyPOSampler

    space, default, point = _space_and_default()
    search = optuna_search(_dp_hypo_request(share, 2.0), space, default)
    sampler = search._sampler
    assert isinstance(sampler, DPHyPOSampler)
    assert _is_default(sampler.candidates[0], point)
    # r = round(P m/(1 - P)) copies of the default among m = 128 draws
    copies = round(share * 128 / (1 - share))
    assert sampler.prior[0] == copies / (128 + copies) == sampler.default_share
    assert abs(sampler.default_share - share) < 1 / 128
    assert sampler.prior.sum() == pytest.approx(1, abs=1e-12)
    share = sampler.default_share
    n = 400
    configs = _draw(_dp_hypo_request(share, 1.0), space, default, n,
                    score=lambda c, i: -1.0 if _is_default(c, point) else 1.0)
    hits = sum(_is_default(c, point) for c in configs)
    assert abs(hits - n * share) <= 4.5 * math.sqrt(n * share * (1 - share))


def test_dp_hypo_keeps_the_default_within_c_of_its_share() -> None:
    """c = 2, a history that punishes the default and one that rewards it: the
    default's weight stays in [P/c, c P] (DP-HyPO's condition on the atom)."""
    space, default, point = _space_and_default()
    sampler = optuna_search(_dp_hypo_request(0.25, 2.0), space, default)._sampler
    share = sampler.default_share
    others = sampler.candidates[1:9]
    for reward in (1.0, -1.0):
        history = [(sampler.candidates[0], reward)] + [(c, -reward) for c in others]
        weight = sampler.proposal(history)[0]
        assert share / 2 <= weight <= share * 2
        assert (weight > share) == (reward > 0)


def test_tpe_has_no_prior_to_anchor() -> None:
    with pytest.raises(ConfigError, match="use --sampler random or dp-hypo"):
        StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, strategy="random-stopping",
                     sampler="tpe", default_share=0.5)


def _started(tmp_path, request: StudyRequest):
    """A study folder whose study.json records ``request`` as the study writes it."""
    import json

    from raydp_synth.tune.study import request_json

    study_dir = tmp_path / "s"
    study_dir.mkdir()
    (study_dir / "study.json").write_text(json.dumps({"request": request_json(request)}))
    return study_dir


def test_a_random_stopping_resume_draws_its_trials_as_the_study_did(tmp_path) -> None:
    """The function the study runs on --resume, before Ray: another --default-share
    (restarts to a mixture, or back) is refused in one line; the same one passes."""
    from dataclasses import replace

    from raydp_synth.tune.preparation import check_study_dir as _check_study_dir

    started = _request(1.0)
    study_dir = _started(tmp_path, started)
    _check_study_dir(replace(started, resume=True), study_dir)  # the same: resumes
    with pytest.raises(ConfigError, match="--default-share 1.0, not 0.5") as error:
        _check_study_dir(_request(0.5, resume=True), study_dir)  # restarts to a mixture
    assert "\n" not in str(error.value)
    dp_hypo = StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, resume=True,
                           strategy="random-stopping", distribution="geometric",
                           sampler="dp-hypo")
    with pytest.raises(ConfigError, match="--sampler random, not dp-hypo"):
        _check_study_dir(dp_hypo, study_dir)
    compose = StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, resume=True)
    _check_study_dir(compose, study_dir)  # compose prices any choice: not checked
