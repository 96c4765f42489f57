"""PrivImage+G: the plan (query + fine-tuning), the query's noise read from the plan,
selection as post-processing, public data required, and the loop."""

from __future__ import annotations

import dataclasses
import math
import warnings

import dp_accounting as dpa
import numpy as np
import pytest
import torch

from raydp_synth.data import (
    DataInfo,
    ImageDataset,
    load_training_data,
    parse_dataset_spec,
    parse_public_spec,
)
from raydp_synth.errors import ConfigError
from raydp_synth.methods import get_method
from raydp_synth.methods.privimage import SEMANTIC_QUERY, release_semantics
from raydp_synth.methods.privimage.semantics import SemanticQuery, select_public, semantic_histogram
from raydp_synth.privacy.pricing import epsilon as stated_epsilon
from raydp_synth.runtime.context import WorkerContext
from tests.methods.loop_run import run_loop
from tests.stats import assert_gaussian_std

PRIVIMAGE = get_method("privimage-g")
DIFFUSION = get_method("privimage-d")


@pytest.fixture(scope="module")
def digits():
    splits, public = load_training_data(parse_dataset_spec("digits"), public=parse_public_spec("digits:fraction=0.3"))
    train = splits.train
    info = DataInfo(num_records=len(train), image_size=16, channels=1, num_classes=10,
                    public_records=len(public))
    return train, public, info


def test_public_data_is_required() -> None:
    with pytest.raises(ConfigError, match="declare public data"):
        PRIVIMAGE.make_config({}, DataInfo(num_records=1000, image_size=16, channels=1,
                                           num_classes=10))
    assert PRIVIMAGE.default_public == {"digits": "digits:fraction=0.3"}
    with pytest.raises(ConfigError, match="declare public data"):
        DIFFUSION.make_config({}, DataInfo(num_records=1000, image_size=16, channels=1,
                                           num_classes=10))


@pytest.mark.slow
def test_plan_is_the_one_shot_query_composed_with_the_fine_tuning(digits) -> None:
    """Theorem F.2: epsilon of Gaussian(z_q) (no subsampling) + T Poisson-subsampled
    Gaussian fine-tuning steps (+ the selection score), as dp-accounting prices it."""
    _, _, info = digits
    config = PRIVIMAGE.make_config({"k1": 3, "query_share": 0.1, "epochs": 5}, info)
    plan = PRIVIMAGE.plan(config, target_epsilon=4.0, delta=1e-5, data=info, score_share=0.05)
    query, critic = plan.mechanism(SEMANTIC_QUERY), plan.mechanism("critic")
    assert query.sample_rate is None and query.num_steps == 1
    assert query.sensitivity == pytest.approx(math.sqrt(3))
    assert critic.sample_rate == pytest.approx(config.batch_size / info.num_records)
    score = plan.mechanism("selection_score")
    direct = dpa.ComposedDpEvent([
        dpa.GaussianDpEvent(query.noise_multiplier),
        dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(
            critic.sample_rate, dpa.GaussianDpEvent(critic.noise_multiplier)), critic.num_steps),
        dpa.GaussianDpEvent(score.noise_multiplier),
    ])
    assert plan.epsilon() == pytest.approx(stated_epsilon(direct, delta=1e-5), rel=1e-9)
    assert 0.99 * 4.0 <= plan.epsilon() <= 4.0


@pytest.mark.slow
def test_query_noise_is_the_plans_multiplier_times_sqrt_k1(digits) -> None:
    """With no sensitive record the release is noise only: std z * sqrt(k1), z read
    from the plan's semantic_query mechanism (the one source of the noise)."""
    train, public, info = digits
    config = PRIVIMAGE.make_config({"k1": 4, "query_share": 0.2}, info)
    plan = PRIVIMAGE.plan(config, target_epsilon=2.0, delta=1e-5, data=info)
    empty = ImageDataset(images=train.images[:0], labels=train.labels[:0], num_classes=10,
                         name="empty")
    query = SemanticQuery(public)
    draws = []
    for seed in range(300):  # 300 releases x 100 bins
        ctx = WorkerContext(config=config, plan=plan, data=info, train=empty, rank=0, world_size=1,
                            device=torch.device("cpu"),
                            noise_generator=torch.Generator().manual_seed(seed),
                            report=lambda m, s: None, log=lambda line: None, dp_seed=1,
                            public=public)
        draws.append(release_semantics(ctx, query).flatten())
    mech = plan.mechanism(SEMANTIC_QUERY)
    assert_gaussian_std(torch.cat(draws).double().numpy(), mech.noise_multiplier * 2.0)


def test_histogram_counts_top_k1_per_class() -> None:
    top = np.array([[2, 0], [2, 1], [1, 0]])
    hist = semantic_histogram(top, np.array([0, 0, 1]), num_semantics=3, num_classes=2,
                              conditional=True)
    assert hist.tolist() == [[1, 1, 2], [1, 1, 0]]
    flat = semantic_histogram(top, np.array([0, 0, 1]), num_semantics=3, num_classes=2,
                              conditional=False)
    assert flat.tolist() == [[2, 2, 2]]


def test_selection_is_deterministic_post_processing_of_the_noisy_histogram(digits) -> None:
    _, public, _ = digits
    query = SemanticQuery(public)
    noisy = torch.zeros(10, query.num_semantics)
    for c in range(10):
        noisy[c, (c + 1) % 10] = 5.0  # class c picks semantic c+1
    noisy[3] = 0.0  # a tie everywhere: the lowest semantic index wins
    first, chosen = select_public(noisy, public, query.public_semantics, k2=1, conditional=True,
                                  num_classes=10)
    again, _ = select_public(noisy, public, query.public_semantics, k2=1, conditional=True,
                             num_classes=10)
    assert np.array_equal(first.images, again.images) and np.array_equal(first.labels, again.labels)
    assert chosen[:, 0].tolist() == [1, 2, 3, 0, 5, 6, 7, 8, 9, 0]
    # Class 0's pre-training set: the public images of semantic 1, relabelled 0.
    ones = public.images[public.labels == 1]
    assert np.array_equal(first.images[first.labels == 0], ones)
    assert first.public


@pytest.mark.slow
def test_diffusion_plan_is_the_query_composed_with_the_denoiser_steps(digits) -> None:
    _, _, info = digits
    config = DIFFUSION.make_config({"k1": 2, "epochs": 3, "query_share": 0.1}, info)
    plan = DIFFUSION.plan(config, target_epsilon=3.0, delta=1e-5, data=info)
    query, denoiser = plan.mechanism(SEMANTIC_QUERY), plan.mechanism("denoiser")
    assert query.sensitivity == pytest.approx(math.sqrt(2)) and denoiser.sensitivity == config.clip
    direct = dpa.ComposedDpEvent([
        dpa.GaussianDpEvent(query.noise_multiplier),
        dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(
            denoiser.sample_rate, dpa.GaussianDpEvent(denoiser.noise_multiplier)),
            denoiser.num_steps)])
    assert plan.epsilon() == pytest.approx(stated_epsilon(direct, delta=1e-5), rel=1e-9)


def test_denoiser_per_record_gradients_match_a_loop_and_are_per_record() -> None:
    from raydp_synth.methods.privimage.diffusion import (
        DDPMSchedule,
        UNet,
        denoiser_record_grads,
        denoising_loss,
    )
    from raydp_synth.runtime.seeding import seeded

    rng = torch.Generator().manual_seed(0)
    model = seeded(lambda: UNet(channels=1, num_classes=10, width=8), rng)
    schedule = DDPMSchedule()
    x, y = torch.randn(3, 1, 16, 16, generator=rng), torch.tensor([1, 4, 7])
    t = torch.randint(1000, (3, 2), generator=rng)
    noise = torch.randn(3, 2, 1, 16, 16, generator=rng)
    batched = denoiser_record_grads(model, schedule, x, y, t, noise)
    for i in range(3):
        loss = denoising_loss(model, schedule, x[i:i + 1].expand(2, -1, -1, -1), y[i:i + 1].expand(2),
                              t[i], noise[i]).mean()
        for g_loop, g_vmap in zip(torch.autograd.grad(loss, list(model.parameters())), batched,
                                  strict=True):
            assert torch.allclose(g_loop, g_vmap[i], atol=1e-5, rtol=1e-4)
    # Record 0's gradient is the same alone as in the batch: no batch statistics.
    alone = denoiser_record_grads(model, schedule, x[:1], y[:1], t[:1], noise[:1])
    assert all(torch.allclose(a[0], b[0], atol=1e-6) for a, b in zip(alone, batched, strict=True))


@pytest.mark.slow
def test_diffusion_loop_runs_its_plan_and_samples_with_ddim(digits) -> None:
    train, public, info = digits
    config = DIFFUSION.make_config({"epochs": 0.3, "width": 8, "multiplicity": 2,
                                    "pretrain_iters": 3, "sample_steps": 5}, info)
    plan = DIFFUSION.plan(config, target_epsilon=5.0, delta=1e-5, data=info)
    reports, states = run_loop(DIFFUSION, config, plan, info, train, public)
    assert all(set(r) <= DIFFUSION.metric_allowlist for r in reports)
    assert states[-1]["steps"] == {m.name: m.num_steps for m in plan.mechanisms}
    assert reports[-1]["epsilon_spent"] == pytest.approx(plan.epsilon(), rel=1e-12)
    model = DIFFUSION.build_generator(config, info)
    model.load_state_dict(states[-1]["generator"])
    images = DIFFUSION.sample(model, config, torch.arange(10), rng=torch.Generator().manual_seed(0))
    assert images.shape == (10, 1, 16, 16) and images.abs().max() <= 1
    again = DIFFUSION.sample(model, config, torch.arange(10), rng=torch.Generator().manual_seed(0))
    assert torch.equal(images, again)  # DDIM (eta = 0) is deterministic given x_T


def _selection_context(config, info, train, public, lines: list[str]) -> WorkerContext:
    plan = DIFFUSION.plan(config, target_epsilon=10.0, delta=1e-5, data=info)
    return WorkerContext(config=config, plan=plan, data=info, train=train, rank=0, world_size=1,
                         device=torch.device("cpu"), noise_generator=torch.Generator().manual_seed(0),
                         report=lambda m, s: None, log=lines.append, dp_seed=1, public=public)


@pytest.mark.slow
def test_selection_prints_the_released_distribution_and_warns_when_classes_collapse(digits) -> None:
    """Public data of two semantics cannot give ten classes distinct selections: the
    run warns (or, with strict_selection, stops) and prints each class's choice."""
    from raydp_synth.methods.privimage import pretraining_set
    from raydp_synth.methods.privimage.semantics import SelectionCollapsed, collapsed_classes

    train, public, info = digits
    two = public.labels < 2
    narrow = ImageDataset(images=public.images[two], labels=public.labels[two], num_classes=10,
                          name="two digits", public=True)
    narrow_info = dataclasses.replace(info, public_records=len(narrow))
    lines: list[str] = []
    config = DIFFUSION.make_config({"pretrain_iters": 0}, narrow_info)
    with pytest.warns(UserWarning, match="selected the same public semantics"):
        pretraining_set(_selection_context(config, narrow_info, train, narrow, lines), "privimage-d")
    assert sum(line.count("class ") for line in lines if "chose" in line) == 10
    assert any("WARNING" in line for line in lines)
    strict = DIFFUSION.make_config({"pretrain_iters": 0, "strict_selection": True}, narrow_info)
    with pytest.raises(SelectionCollapsed, match="strict_selection"):
        pretraining_set(_selection_context(strict, narrow_info, train, narrow, []), "privimage-d")
    # The documented digits declaration gives every class its own digit: no warning.
    lines.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pretraining_set(_selection_context(DIFFUSION.make_config({}, info), info, train, public,
                                           lines), "privimage-d")
    assert collapsed_classes(np.array([[1], [2], [1], [3]])) == [[0, 2]]
