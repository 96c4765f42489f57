"""Random stopping's sampler has a secret seed from OS entropy; compose's is the public --seed.

Papernot & Steinke (2022) need i.i.d. trials whose randomness nobody can replay: with
a public seed the released configuration would give away its index among the trials
(a lower bound on the secret trial count K). These tests build the searcher with the
function the study calls (:func:`raydp_synth.tune.study.optuna_search`) and draw
configurations from it without starting Ray.
"""

from __future__ import annotations

import pickle
from typing import Any

import optuna
import pytest

from raydp_synth.data import DataInfo
from raydp_synth.methods import get_method
from raydp_synth.privacy import secret_rng
from raydp_synth.tune.search_space import FloatParam, SearchSpace, WeightsParam, load_search_space
from raydp_synth.tune.study import StudyRequest, optuna_search

optuna.logging.set_verbosity(optuna.logging.WARNING)

DIGITS = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)
DPAF = get_method("dpaf")


def _space() -> SearchSpace:
    space = load_search_space(None, "dpaf", DIGITS)
    # continuous params: two independent draws collide with probability ~0
    assert any(isinstance(p, FloatParam | WeightsParam) for p in space.params.values())
    return space


def _request(selection: str, seed: int = 0, *, sampler: str = "random", **kw: Any) -> StudyRequest:
    # default_share 0: every trial a random draw (with the default's atom two studies'
    # first trials coincide with probability 1/4; tests/tune/test_default_share.py)
    kw.setdefault("default_share", 0.0 if selection != "compose" else None)
    return StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, strategy=selection,
                        sampler=sampler, seed=seed, **kw)


def _configs(request: StudyRequest, space: SearchSpace, n: int = 1) -> list[dict[str, Any]]:
    """The first n configs that the study's searcher suggests (what Tune would run)."""
    default = DPAF.make_config({**space.fixed, "seed": request.seed}, DIGITS)
    search = optuna_search(request, space, default)
    configs = []
    for i in range(n):
        configs.append(search.suggest(f"t{i}"))
        search.on_trial_complete(f"t{i}", {"score": 0.1 * i})
    return configs


def test_random_stopping_first_config_differs_between_studies_with_the_same_seed() -> None:
    space = _space()
    first = [_configs(_request("random-stopping", seed=0), space)[0] for _ in range(3)]
    assert first[0] != first[1] and first[1] != first[2] and first[0] != first[2]
    # a resume that rebuilds the searcher (Tune's state gone) draws afresh too
    resumed = _configs(_request("random-stopping", seed=0, resume=True), space)[0]
    assert resumed not in first


def test_random_stopping_seed_comes_from_os_entropy_not_from_the_public_seed(monkeypatch) -> None:
    """Same OS entropy, different --seed: the same trials; --seed plays no part."""
    space = _space()
    drawn: list[int] = []

    def fake_randbits(k: int) -> int:
        drawn.append(k)
        return 0x5EC2E75E + len(drawn) % 4

    monkeypatch.setattr(secret_rng.secrets, "randbits", fake_randbits)
    a = _configs(_request("random-stopping", seed=0), space, n=3)
    b = _configs(_request("random-stopping", seed=12345), space, n=3)
    assert drawn == [32] * 8 and a == b  # 128 bits of entropy per sampler


def test_random_stopping_searcher_holds_no_readable_seed(monkeypatch) -> None:
    """The secret seed is not kept as a value in the searcher (which Tune pickles for
    its resume, curator-only): only the sampler's random state is."""
    space = _space()
    words = iter([0x5EC2E75E, 0xED123456, 0x789ABCDE, 0xF0C0FFEE])
    monkeypatch.setattr(secret_rng.secrets, "randbits", lambda k: next(words))
    default = DPAF.make_config(space.fixed, DIGITS)
    search = optuna_search(_request("random-stopping"), space, default)
    search.suggest("t0")
    blob = pickle.dumps(search)
    for word in (0x5EC2E75E, 0xED123456, 0x789ABCDE, 0xF0C0FFEE):
        assert str(word).encode() not in blob
        assert word.to_bytes(4, "little") not in blob and word.to_bytes(4, "big") not in blob


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_compose_is_reproducible_from_the_public_seed(sampler: str) -> None:
    space = _space()
    first = _configs(_request("compose", seed=7, sampler=sampler), space, n=3)
    again = _configs(_request("compose", seed=7, sampler=sampler), space, n=3)
    assert first == again
    # the seed matters: another --seed samples other trials (after the default first one)
    other = _configs(_request("compose", seed=8, sampler=sampler), space, n=3)
    assert other[1:] != first[1:]


def test_compose_does_not_use_os_entropy(monkeypatch) -> None:
    def refuse(k: int) -> int:
        raise AssertionError("compose must use the public --seed")

    monkeypatch.setattr(secret_rng.secrets, "randbits", refuse)
    _configs(_request("compose", seed=3), _space())

