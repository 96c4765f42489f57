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

from raydp_synth.config import MethodConfig
from raydp_synth.data import DataInfo, ImageDataset, data_info, load_training_data
from raydp_synth.errors import ConfigError
from raydp_synth.methods import get_method, method_names
from raydp_synth.privacy.records import RecordBatch
from tests.methods.loop_run import run_loop

# Extra configurations whose mechanisms compute differently (each gets the test too).
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "dpaf": [{"aggregation": "batch"}, {"aggregation": "class", "layer_split": "C1-C1-C1",
                                                  "clip_conv2": 0.05}],
    "dpgan": [{"groups": 1}, {"conditional": False}],
}
PUBLIC_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "dpgan": [{"groups": 4, "adaptive_clip": True, "warm_start_iters": 2}],
}
# Each method runs with its smoke settings (a few releases of every mechanism on 240
# records), and with declared public data if it needs some.
CASES = ([(name, {**get_method(name).smoke_settings, **extra}, get_method(name).requires_public)
          for name in method_names() for extra in [{}, *VARIANTS.get(name, [])]]
         + [(name, {**get_method(name).smoke_settings, **extra}, True)
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
    info = data_info(train, public)
    method = get_method(name)
    config = method.make_config(values, info)
    plan = method.plan(config, target_epsilon=3.0, delta=1e-5, data=info)
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
        method = get_method(name)
        pub = public if method.requires_public else None
        info = data_info(split, pub)
        config = method.make_config({**method.smoke_settings, **NO_G_STEP[name],
                                     "batch_size": 120}, info)
        plan = method.plan(config, target_epsilon=3.0, delta=1e-5, data=info)
        _, states = run_loop(method, config, plan, info, split, pub)
        generator = states[-1]["generator"]
        named = {k: v for k, v in generator.items() if "running" in k or "num_batches" in k}
        assert named, "the generator has no buffers to check"
        buffers.append(named)
    for key in buffers[0]:
        assert torch.equal(buffers[0][key], buffers[1][key]), key


@pytest.mark.parametrize("name", method_names())
def test_requires_public_says_whether_the_method_refuses_data_without_public_records(
        name: str, digits) -> None:
    """``requires_public`` is what ``make_config`` does: a method that needs declared
    public data refuses data without any (one line saying to declare public data); any other
    builds its smoke config from the private data alone."""
    train, public = digits
    method = get_method(name)
    assert method.smoke_settings, f"{name} has no smoke settings"
    method.make_config(method.smoke_settings, data_info(train, public))
    if method.requires_public:
        with pytest.raises(ConfigError, match="declare public data") as err:
            method.make_config(method.smoke_settings, data_info(train, None))
        assert "\n" not in str(err.value)
    else:
        method.make_config(method.smoke_settings, data_info(train, None))


@pytest.mark.parametrize("name", method_names())
def test_config_follows_the_named_base(name: str) -> None:
    """Every config is a frozen :class:`MethodConfig` (``image_size``, ``seed``), and
    ``make_config`` takes the image size from the data."""
    method = get_method(name)
    assert issubclass(method.config_class, MethodConfig)
    info = DataInfo(num_records=240, image_size=16, channels=1, num_classes=10,
                    public_records=60 if method.requires_public else 0)
    config = method.make_config(dict(method.smoke_settings), info)
    assert (config.image_size, config.seed) == (16, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.seed = 1  # type: ignore[misc]


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


def _smoke_run(name: str, digits, *, seed: int = 0, dp_seed: int = 1):
    """One run of ``name``'s loop with its smoke settings: (method, config, info, states)."""
    method = get_method(name)
    train, public = digits[0], (digits[1] if method.requires_public else None)
    info = data_info(train, public)
    config = method.make_config({**method.smoke_settings, "seed": seed}, info)
    plan = method.plan(config, target_epsilon=3.0, delta=1e-5, data=info)
    _, states = run_loop(method, config, plan, info, train, public, dp_seed=dp_seed)
    return method, config, info, states


@pytest.fixture(scope="module")
def smoke_runs(digits):
    """Smoke runs by (method, public seed, DP seed), each computed once and shared by
    the tests below."""
    cache: dict[tuple[str, int, int], Any] = {}

    def get(name: str, seed: int = 0, dp_seed: int = 1):
        if (name, seed, dp_seed) not in cache:
            cache[(name, seed, dp_seed)] = _smoke_run(name, digits, seed=seed, dp_seed=dp_seed)
        return cache[(name, seed, dp_seed)]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("name", method_names())
def test_checkpoint_rebuilds_a_generator_that_samples_images_of_the_data_shape(
        name: str, smoke_runs) -> None:
    """The last checkpoint's generator state loads into ``build_generator`` (what a
    release does) and ``sample`` gives one image per label, shaped like the data."""
    method, config, info, states = smoke_runs(name)
    generator = method.build_generator(config, info)
    generator.load_state_dict(states[-1]["generator"])
    generator.eval()
    labels = torch.arange(info.num_classes)
    images = method.sample(generator, config, labels, rng=torch.Generator().manual_seed(0))
    assert images.shape == (info.num_classes, info.channels, info.image_size, info.image_size)
    assert torch.isfinite(images).all()


def _generator_state(run) -> dict[str, torch.Tensor]:
    return run[3][-1]["generator"]


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
@pytest.mark.parametrize("name", method_names())
def test_seeds_make_runs_reproducible_and_distinct(name: str, digits, smoke_runs) -> None:
    """The same (public seed, DP seed) gives the same generator, bit for bit; another
    DP seed (batches, per-record draws, noise) gives another one."""
    first = _generator_state(smoke_runs(name))
    again = _generator_state(_smoke_run(name, digits))
    assert _same(first, again), "same seeds, different generator"
    assert not _same(first, _generator_state(smoke_runs(name, dp_seed=2))), "DP seed ignored"
