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

The data path runs on three kinds of data: the embedded digits (1 channel, 16x16),
and the same digits coloured per record (3 channels) at 32x32 and 64x64, read from a
Parquet file through the data layer with another file of coloured digits declared
public (:func:`coloured_digits`). Runs are shared between the tests that read them
(:func:`audited_runs`): the audited run of a method's smoke settings is also the run
whose checkpoint must sample images, and the reference of the seeds test.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from raydp_synth.config import MethodConfig
from raydp_synth.data import (
    DataInfo,
    ImageDataset,
    data_info,
    load_training_data,
    parse_dataset_spec,
    parse_public_spec,
    write_parquet,
)
from raydp_synth.data.digits import load_digits_raw
from raydp_synth.errors import ConfigError
from raydp_synth.methods import get_method, method_names
from raydp_synth.privacy.records import RecordBatch
from raydp_synth.runtime.fixed_shapes import BatchShapes
from tests.methods.loop_run import run_loop, shared_plan

# Extra configurations whose mechanisms compute differently (each gets the test too).
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "dpaf": [{"aggregation": "batch"}, {"aggregation": "class", "layer_split": "C1-C1-C1",
                                                  "clip_conv2": 0.05}],
    "dpgan": [{"groups": 1}, {"conditional": False}],
}
PUBLIC_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "dpgan": [{"groups": 4, "adaptive_clip": True, "warm_start_iters": 2}],
}
#: The data of the contract: the digits (1x16x16) and coloured digits (3x32x32, 3x64x64).
DATA_KINDS = ("digits", "rgb32", "rgb64")
RECORDS = 240
#: The 3-channel runs check the data path (shapes, public data of 3 channels, the
#: bound on larger images) on 80 records with batches of 8: the sample rates and
#: release counts of the digits runs, so both share their calibrated plans. The
#: digits runs, with batches of 24, keep the power to catch records coupled within a
#: batch (both catch the two couplings docs/privacy.md describes).
RGB_RECORDS = 80
RGB_BATCHES = {"batch_size": 8, "classifier_batch_size": 8}


def settings(name: str, kind: str) -> dict[str, Any]:
    """The settings of ``name``'s runs on data of ``kind``: its smoke settings, with
    smaller batches on 3-channel data (for the fields its config has)."""
    method = get_method(name)
    values = dict(method.smoke_settings)
    if kind != "digits":
        fields = {f.name for f in dataclasses.fields(method.config_class)}
        values.update({k: v for k, v in RGB_BATCHES.items() if k in fields})
    return values


# Each method runs with its settings (a few releases of every mechanism), and with
# declared public data if it needs some: every variant on the digits, every method on
# each kind of 3-channel data, the public variants on 3x32x32 too.
CASES = ([(name, {**settings(name, "digits"), **extra}, get_method(name).requires_public,
           "digits")
          for name in method_names() for extra in [{}, *VARIANTS.get(name, [])]]
         + [(name, {**settings(name, "digits"), **extra}, True, "digits")
            for name in method_names() for extra in PUBLIC_VARIANTS.get(name, [])]
         + [(name, settings(name, kind), get_method(name).requires_public, kind)
            for kind in DATA_KINDS[1:] for name in method_names()]
         + [(name, {**settings(name, "rgb32"), **extra}, True, "rgb32")
            for name in method_names() for extra in PUBLIC_VARIANTS.get(name, [])])
FORBIDDEN = ("real_loss", "d_loss_real", "accuracy", "train_acc", "clean")
#: Which releases of each mechanism are audited (every record of each batch).
AUDITED_RELEASES = {1, 2, 5}


def _case_id(case: tuple[str, dict[str, Any], bool, str]) -> str:
    name, values, with_public, kind = case
    base = settings(name, kind)
    extra = ",".join(f"{k}={v}" for k, v in values.items() if base.get(k, None) != v)
    return "-".join([name, kind, *([extra] if extra else []), *(["public"] if with_public else [])])


def _digits() -> tuple[ImageDataset, ImageDataset]:
    splits, public = load_training_data(parse_dataset_spec("digits"), public=parse_public_spec("digits:fraction=0.3"))
    assert public is not None
    return _first(splits.train, RECORDS), public


def _first(data: ImageDataset, count: int) -> ImageDataset:
    assert len(data) >= count, (len(data), count)
    return ImageDataset(images=data.images[:count], labels=data.labels[:count],
                        num_classes=data.num_classes, name=f"{data.name} (contract)")


def coloured_digits(start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits ``start:stop`` as RGB ``uint8 [N, 3, 8, 8]``: record i
    is painted in its own ink colour on the complementary paper colour, both drawn
    from a generator seeded with i (deterministic, and different between records)."""
    raw = load_digits_raw()
    gray = raw.images[start:stop, 0].astype(np.float64) / 255.0
    ink = np.stack([np.random.default_rng(i).integers(0, 256, 3) for i in range(start, stop)])
    rgb = ((255 - ink)[:, :, None, None] * (1 - gray[:, None])
           + ink[:, :, None, None] * gray[:, None])
    return np.rint(rgb).astype(np.uint8), raw.labels[start:stop]


def _coloured(root: Path, size: int) -> tuple[ImageDataset, ImageDataset]:
    """The training split of 130 coloured digits and 100 other coloured digits
    declared public (another dataset: the 3-channel path of the public data),
    both resized to ``size`` by the data layer."""
    names = [str(k) for k in range(10)]
    for file, (start, stop) in {"private": (0, 130), "public": (1600, 1700)}.items():
        if not (root / f"{file}.parquet").exists():
            write_parquet(root / f"{file}.parquet", *coloured_digits(start, stop), names)
    splits, public = load_training_data(parse_dataset_spec(f"parquet:{root / 'private.parquet'}"),
                                        public=parse_public_spec(f"parquet:{root / 'public.parquet'}"),
                                        image_size=size)
    assert public is not None and public.image_shape == (3, size, size)
    return _first(splits.train, RGB_RECORDS), public


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory
             ) -> Callable[[str], tuple[ImageDataset, ImageDataset]]:
    """(training records, declared public records) by data kind, each built once."""
    cache: dict[str, tuple[ImageDataset, ImageDataset]] = {}
    root = tmp_path_factory.mktemp("coloured-digits")

    def get(kind: str) -> tuple[ImageDataset, ImageDataset]:
        if kind not in cache:
            cache[kind] = _digits() if kind == "digits" else _coloured(
                root, int(kind.removeprefix("rgb")))
        return cache[kind]

    return get


@pytest.fixture(scope="module")
def digits(datasets) -> tuple[ImageDataset, ImageDataset]:
    return datasets("digits")


def _plan(method: Any, config: Any, info: DataInfo) -> Any:
    """The method's plan at epsilon 3, delta 1e-5 (shared by runs of the same schedule)."""
    return shared_plan(method, config, info)


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
        check_fixed_shapes(mechanism, pre_noise, batch, full,
                           poisson=self.plan.mechanism(mechanism).sample_rate is not None)
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


def check_fixed_shapes(mechanism: str, pre_noise: Any, batch: RecordBatch,
                       full: torch.Tensor, *, poisson: bool) -> None:
    """The loop's function is the padded one (a Poisson mechanism), and padding and
    chunking change its sum by float rounding only: the function the loop wrapped, on
    the batch as it came, and on chunks of at most 8 rows (so that chunking runs)."""
    inner = getattr(pre_noise, "__wrapped__", None)
    assert (inner is not None) == poisson, f"{mechanism}: a Poisson batch runs padded, only it"
    if inner is None:  # a one-shot release over the whole shard: one shape already
        return
    scale = max(1.0, full.abs().max().item())
    unpadded = inner(batch)
    chunked = BatchShapes(granule=4, top=8).wrap(inner)(batch)
    for name, other in (("unpadded", unpadded), ("chunked", chunked)):
        assert other.shape == full.shape
        gap = (other - full).abs().max().item()
        assert gap <= 1e-5 * scale, f"{mechanism}: the padded sum and the {name} one differ by {gap}"


@dataclasses.dataclass(frozen=True)
class AuditedRun:
    """One audited run of a method's loop (seeds: public 0, DP 1) and what it gave."""

    method: Any
    config: Any
    info: DataInfo
    plan: Any
    auditor: NeighbourAuditor
    reports: list[dict[str, float]]
    states: list[dict[str, Any]]


def _run_audited(name: str, values: dict[str, Any], with_public: bool,
                 data: tuple[ImageDataset, ImageDataset]) -> AuditedRun:
    train, public = data
    public = public if with_public else None
    info = data_info(train, public)
    method = get_method(name)
    config = method.make_config(values, info)
    plan = _plan(method, config, info)
    auditor = NeighbourAuditor(plan)
    reports, states = run_loop(method, config, plan, info, train, public, auditor=auditor)
    return AuditedRun(method, config, info, plan, auditor, reports, states)


@pytest.fixture(scope="module")
def audited_runs(datasets) -> Callable[..., AuditedRun]:
    """Audited runs by (method, settings, public data?, data kind), each computed once
    and shared: the neighbouring-dataset test audits it, the checkpoint test samples
    from its generator, the seeds test reruns it unaudited."""
    cache: dict[tuple[str, str, bool, str], AuditedRun] = {}

    def get(name: str, values: dict[str, Any] | None = None, with_public: bool | None = None,
            kind: str = "digits") -> AuditedRun:
        method = get_method(name)
        values = settings(name, kind) if values is None else values
        with_public = method.requires_public if with_public is None else with_public
        key = (name, repr(sorted(values.items())), with_public, kind)
        if key not in cache:
            cache[key] = _run_audited(name, values, with_public, datasets(kind))
        return cache[key]

    return get


@pytest.mark.slow
@pytest.mark.parametrize(("name", "values", "with_public", "kind"), CASES,
                         ids=[_case_id(c) for c in CASES])
def test_neighbouring_datasets_differ_by_at_most_the_sensitivity(
        name: str, values: dict, with_public: bool, kind: str, audited_runs, datasets) -> None:
    run = audited_runs(name, values, with_public, kind)
    plan, auditor, reports, states = run.plan, run.auditor, run.reports, run.states
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
    # The checkpoint and seeds checks read this very run (see _SMOKE_CASES). They run
    # here, not in tests of their own: CI's xdist scheduler hands out each test of this
    # module on its own, so a test of its own recomputed the shared run on the other
    # worker about half the time (checkpoint[privimage-d-rgb64]: 30 s of its 38).
    if _is_smoke_case(name, values, with_public, kind):
        check_checkpoint_samples_images_of_the_data_shape(run, kind)
        if kind == "digits":
            check_seeds_make_runs_reproducible_and_distinct(name, run, datasets("digits"))


#: Settings under which G is never updated (the smoke runs' 10 critic steps, fewer
#: than n_critic): its released buffers must then not depend on any real record.
NO_G_STEP: dict[str, dict[str, Any]] = {
    "dpwgan": {"n_critic": 50},
    "dpgan": {"n_critic": 50},
    "privimage-g": {"n_critic": 50},
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
        # The smoke schedule (its plan is shared), G never updated within it.
        config = method.make_config({**method.smoke_settings, **NO_G_STEP[name]}, info)
        plan = _plan(method, config, info)
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
def test_configs_take_3_channel_images_of_32_and_64_and_refuse_sizes_the_networks_cannot(
        name: str) -> None:
    """Every method builds its config and generator for 3-channel 32x32 and 64x64
    images; a size its networks cannot take (18: neither a power of two nor a
    multiple of 4) is refused by ``make_config`` in one line that names image_size."""
    method = get_method(name)

    def info(size: int) -> DataInfo:
        return DataInfo(num_records=RGB_RECORDS, image_size=size, channels=3, num_classes=10,
                        public_records=60 if method.requires_public else 0)

    for size in (32, 64):
        config = method.make_config(settings(name, f"rgb{size}"), info(size))
        assert config.image_size == size
        method.build_generator(config, info(size))
    with pytest.raises(ConfigError, match="image_size=18") as err:
        method.make_config(dict(method.smoke_settings), info(18))
    assert "\n" not in str(err.value)


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


def _smoke_run(name: str, digits, *, seed: int = 0, dp_seed: int = 1) -> list[dict[str, Any]]:
    """The checkpoint states of one unaudited run of ``name``'s loop with its smoke settings."""
    method = get_method(name)
    train, public = digits[0], (digits[1] if method.requires_public else None)
    info = data_info(train, public)
    config = method.make_config({**method.smoke_settings, "seed": seed}, info)
    plan = _plan(method, config, info)
    _, states = run_loop(method, config, plan, info, train, public, dp_seed=dp_seed)
    return states


def _is_smoke_case(name: str, values: dict[str, Any], with_public: bool, kind: str) -> bool:
    """The case of ``name``'s smoke settings on ``kind`` (the run the checkpoint and
    seeds checks read)."""
    return values == settings(name, kind) and with_public == get_method(name).requires_public


#: (method, data kind) of the smoke cases: the sensitivity test checks their checkpoints.
_SMOKE_CASES = [(c[0], c[3]) for c in CASES if _is_smoke_case(*c)]


def test_every_method_and_data_kind_has_its_checkpoint_and_seeds_checked() -> None:
    """Each method's smoke run on each kind of data is a case of the sensitivity test
    (which then checks its checkpoint, and on the digits its seeds), exactly once."""
    assert sorted(_SMOKE_CASES) == sorted((n, k) for n in method_names() for k in DATA_KINDS)


def check_checkpoint_samples_images_of_the_data_shape(run: AuditedRun, kind: str) -> None:
    """The last checkpoint's generator state loads into ``build_generator`` (what a
    release does) and ``sample`` gives one image per label, shaped like the data
    (1x16x16 digits; 3-channel 32x32 and 64x64 coloured digits)."""
    method, config, info = run.method, run.config, run.info
    generator = method.build_generator(config, info)
    generator.load_state_dict(run.states[-1]["generator"])
    generator.eval()
    labels = torch.arange(info.num_classes)
    images = method.sample(generator, config, labels, rng=torch.Generator().manual_seed(0))
    size = 16 if kind == "digits" else int(kind.removeprefix("rgb"))
    channels = 1 if kind == "digits" else 3
    assert (info.channels, info.image_size) == (channels, size)
    assert images.shape == (info.num_classes, channels, size, size)
    assert torch.isfinite(images).all()


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def check_seeds_make_runs_reproducible_and_distinct(
        name: str, run: AuditedRun, digits: tuple[ImageDataset, ImageDataset]) -> None:
    """The same (public seed, DP seed) gives the same generator, bit for bit, whether
    the run is audited or not (the auditor's extra pre-noise calls change nothing);
    another DP seed (batches, per-record draws, noise) gives another one."""
    first = run.states[-1]["generator"]
    again = _smoke_run(name, digits)[-1]["generator"]
    assert _same(first, again), "same seeds, different generator (or the audit changed the run)"
    other = _smoke_run(name, digits, dp_seed=2)[-1]["generator"]
    assert not _same(first, other), "DP seed ignored"
