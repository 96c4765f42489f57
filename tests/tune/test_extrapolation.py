"""The rules that carry a configuration between a tuning subset and the full data."""

from __future__ import annotations

import dataclasses
import math

import pytest

from raydp_synth.config import HYPERPARAMETER_KINDS, MethodConfig
from raydp_synth.data.info import DataInfo
from raydp_synth.errors import ConfigError
from raydp_synth.methods.registry import get_method, method_names
from raydp_synth.tune.extrapolation import (
    Rule,
    rules,
    subset_size,
    to_full_data,
    to_tuning_subset,
)

N = 60_000  # MNIST-sized: the subset at q = 0.1 holds 6000 records
Q = 0.1


def _defaults(method: str) -> dict:
    config = get_method(method).config_class
    values = {
        f.name: f.default
        for f in dataclasses.fields(config)
        if f.default is not dataclasses.MISSING
    }
    values["image_size"] = 16
    return values


@pytest.mark.parametrize("method", method_names())
def test_every_hyperparameter_of_every_method_has_a_kind_beside_its_field(method):
    """The method declares each field's kind in its config class (no table elsewhere),
    exactly its fields, each a known kind; the rules follow from the kinds."""
    config = get_method(method).config_class
    fields = {f.name for f in dataclasses.fields(config)}
    kinds = config.hyperparameter_kinds()
    assert set(kinds) == fields, (sorted(fields - set(kinds)), sorted(set(kinds) - fields))
    assert set(kinds.values()) <= set(HYPERPARAMETER_KINDS)
    assert fields <= set(rules())


def test_a_new_field_is_classified_where_it_is_declared():
    """A config class's KINDS adds to its bases' (and may redeclare one)."""
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Toy(MethodConfig):
        KINDS = {"width": "architecture", "seed": "schedule"}
        width: int = 4

    assert Toy.hyperparameter_kinds() == {"image_size": "architecture", "seed": "schedule",
                                          "width": "architecture"}


@pytest.mark.parametrize("method", method_names())
def test_a_trial_on_the_subset_keeps_the_full_runs_rates_and_step_counts(method):
    """The per-kind rules together: the trial's privacy plan (sample rates, steps)
    on the public subset size equals the full run's, up to the rounding of batches."""
    spec = get_method(method)
    full = _defaults(method)
    trial = to_tuning_subset(full, Q)
    m = subset_size(N, Q)
    data_full = DataInfo(num_records=N, image_size=16, channels=1, num_classes=10,
                         public_records=1000)
    data_sub = dataclasses.replace(data_full, num_records=m)
    mechanisms_full = spec.schedule(spec.make_config(full, data_full), data_full)
    mechanisms_sub = spec.schedule(spec.make_config(trial, data_sub), data_sub)
    assert [x.name for x in mechanisms_full] == [x.name for x in mechanisms_sub]
    for a, b in zip(mechanisms_full, mechanisms_sub, strict=True):
        if a.sample_rate is None:
            assert b.sample_rate is None
            continue
        assert b.sample_rate == pytest.approx(a.sample_rate, rel=0.1)
        assert b.num_steps == pytest.approx(a.num_steps, rel=0.1)


def test_sensitive_batch_sizes_scale_with_the_data_and_come_back():
    config = {"batch_size": 512, "classifier_batch_size": 64, "epochs": 30.0}
    trial = to_tuning_subset(config, Q)
    assert trial == {"batch_size": 51, "classifier_batch_size": 6, "epochs": 30.0}
    assert to_full_data(trial, Q) == {"batch_size": 510, "classifier_batch_size": 60,
                                      "epochs": 30.0}
    exact = {"batch_size": 640}
    assert to_full_data(to_tuning_subset(exact, Q), Q) == exact
    # a batch never rounds to 0; a float batch is scaled exactly
    assert to_tuning_subset({"batch_size": 4}, 0.05) == {"batch_size": 1}
    assert to_tuning_subset({"batch_size": 100.0}, 0.25) == {"batch_size": 25.0}
    with pytest.raises(ConfigError, match="must be a number"):
        to_tuning_subset({"batch_size": "large"}, Q)


@pytest.mark.parametrize(
    "kind",
    ["epochs", "noise / budget weights", "learning rate", "clip norm", "schedule",
     "architecture", "public data"],
)
def test_every_other_kind_is_kept(kind):
    table = rules()
    keys = [key for key, (rule, k) in table.items() if k == kind]
    assert keys and all(table[key][0] is Rule.KEEP for key in keys)
    config = {key: (0.123, 0.456) if key == "budget_split" else 0.123 for key in keys}
    assert to_tuning_subset(config, Q) == config
    assert to_full_data(config, Q) == config


def test_only_sensitive_batches_scale():
    scaled = sorted(key for key, (rule, _) in rules().items() if rule is Rule.SCALE_WITH_DATA)
    assert scaled == ["batch_size", "classifier_batch_size"]


def test_unknown_keys_and_bad_fractions_are_refused():
    with pytest.raises(ConfigError, match="no extrapolation rule for the hyperparameter 'foo'"):
        to_tuning_subset({"foo": 1}, Q)
    for bad in (0.0, 1.5, -1.0, math.nan):
        with pytest.raises(ConfigError, match="tuning fraction"):
            to_full_data({"batch_size": 8}, bad)


def test_subset_size_is_the_public_expected_size():
    assert subset_size(1442, 0.1) == 144
    assert subset_size(60_000, 0.1) == 6000
    assert subset_size(5, 0.01) == 1
    assert subset_size(100, 1.0) == 100
    with pytest.raises(ConfigError, match="records"):
        subset_size(0, 0.1)
