"""The contract of every registered method, incl. the neighbouring-dataset test.

The neighbouring-dataset test runs each method's real training loop, in-process,
with an auditor on ``WorkerContext.pre_noise_sum``: the one door through which a
loop reads sensitive records. At audited releases the auditor calls the loop's own
pre-noise function, with the loop's state at that moment (networks in the mode
the loop uses them, the loop's secret per-record draws), on the sampled batch and
on the batch without each of its records, and checks that the pre-noise sum moves
by at most the sensitivity the plan declares, and that the bound is attained within
2x (a too-small declared sensitivity would be caught too). A method is covered the
moment it is registered.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import pytest
import torch

from raydp_synth.data import ImageDataset, load_training_data
from raydp_synth.methods import DataInfo, get_method, method_names
from raydp_synth.privacy.records import RecordBatch
from tests.methods.loop_run import run_loop

#: Small settings per method (a few releases of every mechanism on 240 records).
SMALL: dict[str, dict[str, Any]] = {
    "dpaf": {"epochs": 2, "classifier_epochs": 1, "base_width": 8, "batch_size": 24},
    "dpwgan": {"epochs": 1, "capacity": 4, "batch_size": 24},
    "dpgan": {"epochs": 1, "capacity": 4, "batch_size": 24},
    "privimage-g": {"epochs": 1, "capacity": 4, "batch_size": 24, "k1": 2, "pretrain_iters": 2},
    "privimage-d": {"epochs": 0.3, "width": 8, "multiplicity": 2, "k1": 2, "batch_size": 24,
                    "pretrain_iters": 2},
}
# Methods that need declared public data are run with some.
NEEDS_PUBLIC = {"privimage-g", "privimage-d"}
# Extra configurations whose mechanisms compute differently (each gets the test too).
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "dpaf": [{"aggregation": "batch"}, {"aggregation": "class", "layer_split": "C1-C1-C1",
                                                  "clip_conv2": 0.05}],
    "dpgan": [{"groups": 1}, {"conditional": False}],
}
PUBLIC_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "dpgan": [{"groups": 4, "adaptive_clip": True, "warm_start_iters": 2}],
}
CASES = ([(name, {**SMALL.get(name, {}), **extra}, name in NEEDS_PUBLIC)
          for name in method_names() for extra in [{}, *VARIANTS.get(name, [])]]
         + [(name, {**SMALL.get(name, {}), **extra}, True)
            for name in method_names() for extra in PUBLIC_VARIANTS.get(name, [])])
FORBIDDEN = ("real_loss", "d_loss_real", "accuracy", "train_acc", "clean")
RECORDS = 240
#: Which releases of each mechanism are audited (every record of each batch).
AUDITED_RELEASES = {1, 2, 5}


@pytest.fixture(scope="module")
def digits() -> tuple[ImageDataset, ImageDataset]:
    splits, public = load_training_data("digits", public="digits:fraction=0.3")
    t = splits.train
    assert public is not None
    small = ImageDataset(images=t.images[:RECORDS], labels=t.labels[:RECORDS],
                         num_classes=t.num_classes, name="digits (contract)")
    return small, public


def _info(train: ImageDataset, public: ImageDataset | None) -> DataInfo:
    return DataInfo(num_records=len(train), image_size=train.image_shape[1],
                    channels=train.image_shape[0], num_classes=train.num_classes,
                    public_records=len(public) if public is not None else 0)


class NeighbourAuditor:
    """Checks each audited release on the batch and on the batch without each record."""

    def __init__(self, plan: Any) -> None:
        self.plan = plan
        self.releases: Counter[str] = Counter()
        self.worst: dict[str, list[float]] = {}

    def __call__(self, mechanism: str, pre_noise: Any, batch: RecordBatch) -> None:
        self.releases[mechanism] += 1
        if self.releases[mechanism] not in AUDITED_RELEASES:
            return
        sensitivity = self.plan.mechanism(mechanism).sensitivity
        full = pre_noise(batch)
        # The pre-noise function leaves the loop's state as it was: the same again.
        assert torch.equal(full, pre_noise(batch)), f"{mechanism}: pre-noise function has side effects"
        worst = 0.0
        for i in range(len(batch)):
            worst = max(worst, (full - pre_noise(batch.without(i))).norm().item())
        assert worst <= sensitivity * (1 + 1e-4), (
            f"{mechanism} release {self.releases[mechanism]}: removing one record moved the "
            f"pre-noise sum by {worst:.4f} > sensitivity {sensitivity:.4f}")
        empty = batch
        for _ in range(len(batch)):
            empty = empty.without(0)
        assert torch.count_nonzero(pre_noise(empty)) == 0, f"{mechanism}: an empty batch adds"
        if len(batch):
            self.worst.setdefault(mechanism, []).append(worst)


def _run_audited(name: str, values: dict[str, Any], with_public: bool, digits: Any
                 ) -> tuple[Any, NeighbourAuditor, list[dict[str, float]], list[dict[str, Any]]]:
    train, public = digits
    public = public if with_public else None
    info = _info(train, public)
    method = get_method(name)
    config = method.make_config(values, info)
    plan = method.plan(config, epsilon=3.0, delta=1e-5, data=info)
    auditor = NeighbourAuditor(plan)
    reports, states = run_loop(method, config, plan, info, train, public, auditor=auditor)
    return plan, auditor, reports, states


@pytest.mark.slow
@pytest.mark.parametrize(("name", "values", "with_public"), CASES)
def test_neighbouring_datasets_differ_by_at_most_the_sensitivity(
        name: str, values: dict, with_public: bool, digits) -> None:
    plan, auditor, reports, states = _run_audited(name, values, with_public, digits)
    for mech in plan.mechanisms:
        # Every mechanism of the plan reads its records through the audited door,
        # exactly as often as the plan says (the loop runs exactly its plan).
        assert auditor.releases[mech.name] == mech.num_steps, (mech.name, auditor.releases)
        assert auditor.worst.get(mech.name), f"{mech.name}: no non-empty batch audited"
        # The bound is attained up to a margin: a too-small sensitivity would show.
        assert max(auditor.worst[mech.name]) >= 0.5 * mech.sensitivity, (
            mech.name, auditor.worst[mech.name], mech.sensitivity)
    assert states[-1]["steps"] == {m.name: m.num_steps for m in plan.mechanisms}
    assert reports[-1]["epsilon_spent"] == pytest.approx(plan.epsilon(), rel=1e-9)
    allow = get_method(name).metric_allowlist
    assert all(set(r) <= allow for r in reports)


#: Settings under which G is never updated (fewer critic steps than n_critic): its
#: released buffers must then not depend on any real record.
NO_G_STEP: dict[str, dict[str, Any]] = {
    "dpwgan": {"epochs": 0.3, "n_critic": 50},
    "dpgan": {"epochs": 0.3, "n_critic": 50},
    "privimage-g": {"epochs": 0.3, "n_critic": 50},
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NO_G_STEP))
def test_released_generator_buffers_ignore_real_labels(name: str, digits) -> None:
    """G's BatchNorm statistics (saved with the released generator) come from
    synthetic or public batches only: changing one real label, every seed fixed,
    leaves them identical."""
    train, public = digits
    changed = train.labels.copy()
    changed[0] = (changed[0] + 1) % train.num_classes
    flipped = dataclasses.replace(train, labels=changed)
    buffers = []
    for split in (train, flipped):
        pub = public if name in NEEDS_PUBLIC else None
        info = _info(split, pub)
        method = get_method(name)
        config = method.make_config({**SMALL[name], **NO_G_STEP[name], "batch_size": 120}, info)
        plan = method.plan(config, epsilon=3.0, delta=1e-5, data=info)
        _, states = run_loop(method, config, plan, info, split, pub)
        generator = states[-1]["generator"]
        named = {k: v for k, v in generator.items() if "running" in k or "num_batches" in k}
        assert named, "the generator has no buffers to check"
        buffers.append(named)
    for key in buffers[0]:
        assert torch.equal(buffers[0][key], buffers[1][key]), key


@pytest.mark.parametrize("name", method_names())
def test_allowlist_holds_no_raw_real_data_metric(name: str) -> None:
    allow = get_method(name).metric_allowlist
    assert "epsilon_spent" in allow
    assert not any(bad in key for key in allow for bad in FORBIDDEN)


def test_loops_read_records_only_through_the_pre_noise_door() -> None:
    """No method module indexes the training split itself."""
    from pathlib import Path

    import raydp_synth.methods as methods

    root = Path(methods.__file__).parent
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if "ctx.train" in p.read_text() or "PoissonSampler" in p.read_text()]
    assert offenders == []
