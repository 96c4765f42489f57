"""What the release's guarantee treats as public, its neighbouring relation, and the
size of ``synthetic.parquet`` (a user choice, never n)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import dp_accounting as dpa
import pytest
from dp_accounting import rdp

from raydp_synth.config import config_to_dict
from raydp_synth.data import DataInfo
from raydp_synth.data.parquet import load_parquet_raw
from raydp_synth.errors import ConfigError
from raydp_synth.methods import get_method
from raydp_synth.privacy.selection_score import DEFAULT_SCORE_SHARE
from raydp_synth.release import TrainedGenerator, privacy_statement, write_release
from raydp_synth.release.bundle import (
    DEFAULT_SYNTHETIC_SAMPLES,
    NEIGHBOURING_RELATION,
    public_facts,
)

INFO = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)
NAMES = tuple(str(k) for k in range(10))


@functools.cache
def _default_dpaf_plan():
    """DPAF's default configuration planned at the CLI's default budget."""
    method = get_method("dpaf")
    config = method.make_config({}, INFO)
    return method.plan(config, target_epsilon=10.0, delta=1e-5, data=INFO,
                       score_share=DEFAULT_SCORE_SHARE)


def _epsilon(event: dpa.DpEvent, relation: dpa.NeighboringRelation) -> float:
    accountant = rdp.RdpAccountant(neighboring_relation=relation)
    accountant.compose(event)
    return float(accountant.get_epsilon(1e-5))


@pytest.mark.slow
def test_zero_out_relation_prices_the_default_dpaf_plan_like_add_or_remove() -> None:
    """n is published, so the relation is zero-out (REPLACE_SPECIAL); dp-accounting's
    RDP accountant prices the plan's Poisson-subsampled and one-shot Gaussians the
    same way under it as under ADD_OR_REMOVE_ONE, the relation every stated epsilon
    is computed with, and so does its PLD accountant (the stated epsilon is the
    smaller of the two)."""
    from dp_accounting.pld import pld_privacy_accountant

    from raydp_synth.privacy import pricing

    plan = _default_dpaf_plan()
    event = plan.event()
    zero_out = _epsilon(event, dpa.NeighboringRelation.REPLACE_SPECIAL)
    add_remove = _epsilon(event, dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
    assert zero_out == add_remove
    pld = {}
    for relation in (dpa.NeighboringRelation.REPLACE_SPECIAL,
                     dpa.NeighboringRelation.ADD_OR_REMOVE_ONE):
        accountant = pld_privacy_accountant.PLDAccountant(
            neighboring_relation=relation, value_discretization_interval=pricing.PLD_INTERVAL)
        accountant.compose(event)
        pld[relation] = float(accountant.get_epsilon(1e-5))
    assert len(set(pld.values())) == 1
    # The stated epsilon is the smaller of RDP's and the PLD's. The package's PLD prices
    # the score's discrete Gaussian by its own privacy loss, which PLDAccountant would
    # read as a continuous Gaussian (docs/budget-pricing.md, section 5): compare with it.
    stated = pricing.epsilon(event, delta=1e-5)
    assert stated <= zero_out
    assert plan.epsilon() == pytest.approx(stated, rel=1e-12)
    assert any(isinstance(e, dpa.SelfComposedDpEvent) for e in event.events)  # subsampled steps


@pytest.mark.slow
def test_statement_lists_the_public_facts_and_the_relation() -> None:
    plan = _default_dpaf_plan()
    facts = public_facts(INFO, NAMES, public=None, validation_records=165)
    statement = json.loads(json.dumps(privacy_statement(plan, scope="run", dataset="digits",
                                                        facts=facts)))
    listed = statement["public_facts"]
    assert listed["num_records"] == 1442
    assert listed["classes"] == {"count": 10, "names": list(NAMES)}
    assert (listed["image_size"], listed["channels"]) == (16, 1)
    assert listed["public_data"] is None
    assert listed["score_validation"] == {"records": 165}
    relation = statement["neighbouring_relation"]
    assert set(relation) == {"relation", "note"}  # one name for the relation
    assert "add or remove one record" in relation["relation"]
    assert "zero-out" in relation["note"]


def test_public_data_and_public_validation_are_listed() -> None:
    info = DataInfo(num_records=1300, image_size=16, channels=1, num_classes=10,
                    public_records=40)
    facts = public_facts(info, NAMES, public="digits:fraction=0.03",
                         validation_records=165, public_validation="folder:/pub")
    assert facts["public_data"] == {"declared": "digits:fraction=0.03", "records": 40}
    assert facts["score_validation"] == {"declared_public": "folder:/pub"}


def test_the_overlap_left_to_the_curator_is_stated_next_to_the_public_data() -> None:
    """What the overlap check leaves unchecked (invariant 16) is declared, not hidden."""
    for declared in ({"public": "folder:/pub"}, {"public_validation": "folder:/pub"}):
        note = public_facts(INFO, NAMES, **declared)["public_data_overlap"]
        assert "1%" in note and "near duplicates" in note and "curator's declaration" in note
    assert "public_data_overlap" not in public_facts(INFO, NAMES, validation_records=165)


@pytest.fixture(scope="module")
def generator() -> TrainedGenerator:
    method = get_method("dpaf")
    config = method.make_config({}, INFO)
    module = method.build_generator(config, INFO)
    return TrainedGenerator.build(method="dpaf", config=config_to_dict(config),
                                  data_info=INFO.__dict__, class_names=NAMES,
                                  state_dict=module.state_dict())


def test_release_states_facts_the_caller_left_out(generator, tmp_path: Path) -> None:
    """A statement without public facts (the study's) gets the generator's, the
    declared public data, and the relation, whatever the caller wrote."""
    statement = {"epsilon": 3.0, "delta": 1e-5, "neighbouring_relation": "add or remove one record",
                 "public_data": {"declared": "folder:/pub", "note": "..."}}
    write_release(tmp_path / "release", generator=generator, statement=statement,
                  num_synthetic=50, seed=0)
    written = json.loads((tmp_path / "release" / "privacy.json").read_text())
    assert written["neighbouring_relation"] == NEIGHBOURING_RELATION
    facts = written["public_facts"]
    assert facts["num_records"] == 1442 and facts["classes"]["count"] == 10
    assert facts["public_data"] == {"declared": "folder:/pub", "records": 0}
    assert statement["neighbouring_relation"] == "add or remove one record"  # not mutated


def test_synthetic_parquet_has_the_requested_size_not_n(generator, tmp_path: Path) -> None:
    write_release(tmp_path / "release", generator=generator, statement={}, num_synthetic=37,
                  seed=0)
    raw = load_parquet_raw(tmp_path / "release" / "synthetic.parquet")
    assert len(raw) == 37 != INFO.num_records
    assert raw.class_names == NAMES  # the declared class set, read back from its metadata
    assert DEFAULT_SYNTHETIC_SAMPLES == 10_000
    for bad in (0, -5):
        with pytest.raises(ConfigError, match="number of synthetic samples"):
            write_release(tmp_path / "other", generator=generator, statement={},
                          num_synthetic=bad, seed=0)
    assert not (tmp_path / "other").exists()


def test_the_class_set_image_size_and_channels_are_listed_as_declared() -> None:
    facts = public_facts(INFO, NAMES)
    assert facts["declared"] == ["classes", "image_size", "channels"]
    assert "never read off the records" in facts["note"]
