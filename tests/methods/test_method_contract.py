"""The contract of every registered method, incl. the neighbouring-dataset test.

design.md 3.8: each mechanism's pre-noise computation, run on a batch and on the
batch without one record (every record tried, so the adversarial choice is
covered), changes by at most the sensitivity its plan declares.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from raydp_synth.data import load_dataset
from raydp_synth.methods import DataInfo, get_method, method_names

SMALL = {"dpaf": {"epochs": 2, "classifier_epochs": 1, "base_width": 8},
         "dpwgan": {"epochs": 2, "capacity": 4},
         "dpgan": {"epochs": 2, "capacity": 4},
         "privimage-g": {"epochs": 2, "capacity": 4, "k1": 2},
         "privimage-d": {"epochs": 1, "width": 8, "multiplicity": 2, "k1": 2}}
# Methods that need declared public data are checked with some.
NEEDS_PUBLIC = {"privimage-g", "privimage-d"}
# Extra configurations whose mechanisms compute differently (each gets the test too).
VARIANTS = {"dpaf": [{"aggregation": "batch"}, {"aggregation": "class", "layer_split": "C1-C1-C1"}],
            "dpgan": [{"groups": 1}, {"conditional": False}]}
CASES = [(name, {**SMALL.get(name, {}), **extra})
         for name in method_names() for extra in [{}, *VARIANTS.get(name, [])]]
FORBIDDEN = ("real_loss", "d_loss_real", "accuracy", "train_acc", "clean")


@pytest.fixture(scope="module")
def digits():
    splits = load_dataset("digits", seed=0)
    t = splits.train
    info = DataInfo(num_records=len(t), image_size=t.image_shape[1], channels=t.image_shape[0], num_classes=t.num_classes)
    return t, info


def _info_for(name: str, info: DataInfo) -> DataInfo:
    return dataclasses.replace(info, public_records=100) if name in NEEDS_PUBLIC else info


@pytest.mark.parametrize("name", method_names())
def test_every_plan_mechanism_has_a_neighbouring_test(name: str, digits) -> None:
    info = _info_for(name, digits[1])
    method = get_method(name)
    config = method.make_config(SMALL.get(name, {}), info)
    plan = method.plan(config, epsilon=3.0, delta=1e-5, data=info)
    releases = method.pre_noise_releases(config, info, seed=0)
    assert {r.mechanism for r in releases} == {m.name for m in plan.mechanisms}
    for r in releases:
        assert r.sensitivity == pytest.approx(plan.mechanism(r.mechanism).sensitivity)


@pytest.mark.parametrize(("name", "values"), CASES)
def test_neighbouring_datasets_differ_by_at_most_the_sensitivity(name: str, values: dict, digits) -> None:
    train, info = digits[0], _info_for(name, digits[1])
    method = get_method(name)
    config = method.make_config(values, info)
    images = torch.as_tensor(train.images[:12])
    labels = torch.as_tensor(train.labels[:12])
    for release in method.pre_noise_releases(config, info, seed=0):
        full = release.compute(images, labels)
        worst = 0.0
        for i in range(len(labels)):
            keep = torch.arange(len(labels)) != i
            worst = max(worst, (full - release.compute(images[keep], labels[keep])).norm().item())
        assert worst <= release.sensitivity * (1 + 1e-4), (release.mechanism, worst, release.sensitivity)
        # The bound is attained up to a margin: the test would see a wrong (too small) sensitivity.
        assert worst >= 0.5 * release.sensitivity, (release.mechanism, worst, release.sensitivity)
        empty = release.compute(images[:0], labels[:0])
        assert torch.count_nonzero(empty) == 0


@pytest.mark.parametrize("name", method_names())
def test_allowlist_holds_no_raw_real_data_metric(name: str) -> None:
    allow = get_method(name).metric_allowlist
    assert "epsilon_spent" in allow
    assert not any(bad in key for key in allow for bad in FORBIDDEN)
