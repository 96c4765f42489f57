"""``--strategy subsampled`` end to end, and its pieces: the secret Poisson subset,
the request's refusals, what a tuning trial reads, the final config."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from raydp_synth.errors import ConfigError
from raydp_synth.tune.study import StudyRequest, run_study
from raydp_synth.tune.subsampled_search import (
    draw_tuning_subset,
    secret_tuning_subset,
    subset_records,
)
from tests.tune.test_study import TINY


@pytest.mark.ray
@pytest.mark.slow
def test_subsampled_study_tunes_on_the_subset_then_releases_the_final_run(
        ray_local, tmp_path, capsys) -> None:
    """Geometric with mean 1 draws K = 1 surely: one tuning trial, then the final run."""
    from raydp_synth.accountant.ledger import Ledger
    from raydp_synth.budget import main as budget_main
    from raydp_synth.privacy.accounting import dominates, rdp_curve
    from raydp_synth.privacy.events import event_from_json
    from raydp_synth.privacy.subsampled_tuning import (
        amplified_tuning_rdp,
        epsilon_from_rdp,
        variant1_rdp,
    )
    from raydp_synth.tune.extrapolation import subset_size

    q = 0.5
    run_study(StudyRequest(
        method="dpaf", epsilon=6.0, delta=1e-5, trials=1, strategy="subsampled",
        distribution="geometric", sampler="random", search_space=TINY, storage=tmp_path,
        name="e2e-sub", evaluate=False, tune_fraction=q, tune_share=0.3, synthetic_samples=20,
        default_share=0.5,  # the anchored prior's sampler, through Tune (pickled, restored)
    ))
    study = tmp_path / "e2e-sub"
    entries = Ledger(study / "ledger.jsonl").entries()
    header, grants = entries[0], [e for e in entries if e["kind"] == "grant"]
    assert header["mode"] == "subsampled" and header["tune_fraction"] == q
    assert header["trial_count"] == 1 and len(grants) == 2
    tuning, final = grants
    assert "phase" not in tuning and final["phase"] == "final"
    reference = event_from_json(header["reference_event"])
    assert dominates(reference, event_from_json(tuning["event"]))
    curve = amplified_tuning_rdp(reference, mean=1.0, shape=1.0, tune_fraction=q)
    total = epsilon_from_rdp(variant1_rdp(curve, event_from_json(final["event"])), 1e-5)
    statement = json.loads((study / "release" / "privacy.json").read_text())
    assert statement["epsilon"] == pytest.approx(total, rel=1e-12) and 5.9 <= total <= 6.0
    pricing = statement["details"]["study"]
    assert pricing["mode"] == "subsampled" and pricing["tune_fraction"] == q
    assert pricing["tuning_epsilon"] == pytest.approx(epsilon_from_rdp(curve, 1e-5))
    assert pricing["tuning_epsilon"] == pytest.approx(0.3 * 6.0, rel=5e-3)
    assert pricing["final_run_epsilon"] == pytest.approx(
        epsilon_from_rdp(rdp_curve(event_from_json(final["event"])), 1e-5))
    assert "Koskela & Kulkarni" in pricing["theorem"] and "Zhu & Wang" in pricing["theorem"]
    assert statement["selection"] == "subsampled" and "trial_count" not in json.dumps(statement)
    # The tuning trial planned and scored on the subset's public sizes; the final run
    # on all the data, with the trial's batch size extrapolated.
    info = json.loads((study / "study.json").read_text())
    assert info["request"]["default_share"] == 0.5
    n = info["data_info"]["num_records"]
    [trial_json] = list((study / "subsampled-search").glob("*/checkpoint_*/trial.json"))
    trial = json.loads(trial_json.read_text())
    assert trial["generator"]["data_info"]["num_records"] == subset_size(n, q)
    assert trial["score"]["num_records"] == subset_size(165, q) or trial["score"]["private"]
    assert trial["generator"]["config"]["batch_size"] == round(512 * q)
    run = json.loads((study / "run.json").read_text())
    assert run["subsampled_search"]["final_config"]["batch_size"] == 512
    released = json.loads((study / "release" / "generator.json").read_text())
    assert released["config"]["batch_size"] == 512
    assert released["data_info"]["num_records"] == n
    capsys.readouterr()
    assert budget_main([str(study)]) == 0
    out = capsys.readouterr().out
    assert "subsampled tuning" in out and "grant*" in out and f"{total:.4f}" in out


def test_the_subset_is_a_poisson_draw_of_each_split() -> None:
    """Counts over seeded draws: mean within 4 standard errors of q n, every count
    within 5 binomial standard deviations; records are in independently."""
    n_train, n_val, q = 4000, 500, 0.1
    rng = np.random.default_rng(20261124)
    draws = [draw_tuning_subset(n_train, n_val, q, rng) for _ in range(200)]
    for size, counts in ((n_train, [len(d.train) for d in draws]),
                         (n_val, [len(d.val) for d in draws])):
        sd = math.sqrt(size * q * (1 - q))
        assert abs(np.mean(counts) - q * size) <= 4 * sd / math.sqrt(len(counts))
        assert all(abs(c - q * size) <= 5 * sd for c in counts)
        assert np.std(counts) == pytest.approx(sd, rel=0.25)
    d = draws[0]
    assert np.all(np.diff(d.train) > 0) and d.train.min() >= 0 and d.train.max() < n_train
    # each record's inclusion frequency is q (no record favoured)
    hits = np.zeros(n_val)
    for draw in draws:
        hits[draw.val] += 1
    assert abs(hits.mean() / len(draws) - q) <= 4 * math.sqrt(q * (1 - q) / len(draws) / n_val)
    assert "<secret>" in repr(d) and str(len(d.train)) not in repr(d)


def test_the_study_draws_the_subset_from_os_entropy(monkeypatch) -> None:
    """The real path seeds from 256 OS bits (``secret_rng.secret_numpy_rng``): not the
    user seed, nor NumPy's global state."""
    import raydp_synth.tune.strategies.subsampled as strategy
    from raydp_synth.privacy import secret_rng

    calls: list[int] = []
    real = secret_rng.secrets.randbits
    monkeypatch.setattr(secret_rng.secrets, "randbits", lambda k: calls.append(k) or real(k))
    np.random.seed(0)
    a = secret_tuning_subset(2000, 100, 0.5)
    np.random.seed(0)
    b = secret_tuning_subset(2000, 100, 0.5)
    assert calls == [256, 256] and not np.array_equal(a.train, b.train)
    from pathlib import Path

    source = Path(strategy.__file__).read_text()
    assert "secret_tuning_subset(" in source  # the strategy's own draw
    assert strategy.secret_tuning_subset is secret_tuning_subset


def test_a_tuning_trial_reads_only_the_subset_records() -> None:
    from raydp_synth.data import load_training_data, parse_dataset_spec

    splits, _ = load_training_data(parse_dataset_spec("digits"), public=None)
    subset = draw_tuning_subset(len(splits.train), len(splits.val), 0.2,
                                np.random.default_rng(1))
    train = subset_records(splits.train, subset.train)
    assert len(train) == len(subset.train)
    assert np.array_equal(train.images, splits.train.images[subset.train])
    assert np.array_equal(train.labels, splits.train.labels[subset.train])
    assert 0 < len(train) < len(splits.train)
    with pytest.raises(RuntimeError, match="changed"):
        subset.select(splits.val, subset.val, len(splits.val) + 1)


def test_trial_configs_are_scaled_to_the_subset_and_the_final_config_back(tmp_path) -> None:
    from raydp_synth.config import config_to_dict
    from raydp_synth.data import data_info, load_training_data, parse_dataset_spec
    from raydp_synth.methods import get_method
    from raydp_synth.tune.extrapolation import subset_size
    from raydp_synth.tune.final_run import subsampled_final_settings
    from raydp_synth.tune.search_space import load_search_space
    from raydp_synth.tune.subsampled_search import full_config, subset_config, subset_data
    from tests.tune.test_study_settings import _settings

    splits, public = load_training_data(parse_dataset_spec("digits"), public=None)
    data = data_info(splits.train, public)
    method = get_method("dpaf")
    trial = subset_config(method, {"batch_size": 512, "epochs": 2}, data, 0.25)
    assert trial.batch_size == 128 and trial.epochs == 2
    assert subset_data(data, 0.25).num_records == subset_size(data.num_records, 0.25)
    final = full_config(config_to_dict(trial), 0.25)
    assert final["batch_size"] == 512 and final["epochs"] == 2
    space = load_search_space(TINY, "dpaf", data)
    study = _settings(tmp_path, space=space, data=data, role="subsampled", tune_fraction=0.25,
                      tuning_rdp=(0.1,) * 3)
    fixed = subsampled_final_settings(study, final)
    assert fixed.role_name == "subsampled-final" and not fixed.space.params
    assert fixed.space.settings_from_trial_config({})["batch_size"] == 512


@pytest.mark.parametrize(("argv", "needle"), [
    (["--tune-fraction", "1"], "--tune-fraction 1.0 must be"),
    (["--tune-fraction", "0"], "--tune-fraction 0.0 must be"),
    (["--tune-share", "1.5"], "--tune-share 1.5"),
    (["--name", "x", "--resume"], "cannot --resume"),
    (["--tune-on-public", "folder:/x"], "choose one"),
    (["--sampler", "tpe"], "--sampler random"),
    (["--sampler", "dp-hypo", "--hypo-c", "2"], "--sampler random"),
    (["--epsilon", "0.05"], "cannot pay for mean 3 trials"),  # checked before Ray starts
])
def test_subsampled_refusals_are_one_line_before_anything_is_written(
        argv, needle, capsys, tmp_path) -> None:
    from raydp_synth.cli import run_cli
    from raydp_synth.tune.__main__ import main

    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, ["dpaf", "--strategy", "subsampled", *argv, "--storage", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and needle in err
    assert not any(tmp_path.iterdir())
    with pytest.raises(ConfigError):
        StudyRequest(method="dpaf", epsilon=1.0, delta=1e-5, strategy="subsampled",
                     sampler="random", tune_fraction=math.nan)


@pytest.mark.slow
def test_planned_tuning_trials_and_final_run_are_granted_within_the_total() -> None:
    """The planners the study and its trials run, against the accountant's core:
    a tuning trial of another config is dominated by E_ref, the default config's
    final run fits the variant-1 total exactly, a less noised one is refused."""
    from dataclasses import replace

    from raydp_synth.accountant.core import (
        REASON_BUDGET,
        StudyBudget,
        StudySettings,
        new_study_header,
    )
    from raydp_synth.accountant.strategies.subsampled import SubsampledPricing
    from raydp_synth.methods import get_method
    from raydp_synth.methods.base import DataInfo
    from raydp_synth.privacy.events import event_to_json
    from raydp_synth.tune.planning import (
        plan_dominated_by,
        plan_for_subsampled_final,
        subsampled_reference_plan,
    )
    from raydp_synth.tune.subsampled_search import subset_config, subset_data

    data = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)
    dpaf, q, eps = get_method("dpaf"), 0.25, 5.0
    small = {"epochs": 2, "classifier_epochs": 0.5, "base_width": 4}
    reference = subsampled_reference_plan(
        dpaf, subset_config(dpaf, small, data, q), subset_data(data, q), target_epsilon=1.0,
        delta=1e-5, mean_trials=2.0, shape=1.0, tune_fraction=q, score_share=0.2)
    settings = StudySettings(epsilon=eps, delta=1e-5, mode="subsampled", trials=2,
                             distribution="geometric", tune_fraction=q,
                             reference_event=event_to_json(reference.event()))
    budget = StudyBudget(settings, new_study_header(settings, name="s") | {"trial_count": 1})
    trial = plan_dominated_by(dpaf, subset_config(dpaf, {**small, "mu": 2}, data, q),
                              subset_data(data, q), reference_event=reference.event(),
                              delta=1e-5, score_share=0.2)
    budget.take_draws(budget.decide_draw("t")[1])  # the search's draw, then the grant
    budget.record(budget.decide("t", event_to_json(trial.event())))
    assert budget.ledger_statement()["tuning_epsilon"] == pytest.approx(1.0, rel=2e-3)
    final = plan_for_subsampled_final(dpaf, dpaf.make_config(small, data), data,
                                      tuning_rdp=tuple(SubsampledPricing.tuning_rdp(settings)), target_epsilon=eps,
                                      delta=1e-5, score_share=0.2)
    louder = replace(final, mechanisms=tuple(replace(m, noise_multiplier=m.noise_multiplier * 0.97)
                                             for m in final.mechanisms))
    refused = budget.decide("f0", event_to_json(louder.event()), final=True)
    assert not refused.granted and refused.reason.startswith(REASON_BUDGET)
    granted = budget.decide("f", event_to_json(final.event()), final=True)
    assert granted.granted
    budget.record(granted)
    assert 0.99 * eps <= budget.statement()["epsilon"] <= eps


def test_the_noise_std_the_warning_quotes_is_the_one_a_trial_reports() -> None:
    """``score_noise_std`` is the ``noise_std`` that ``release_score`` (the function a
    tuning trial calls) reports for the same plan and divisor; a plan without a score
    mechanism has none."""
    import random

    from raydp_synth.privacy.plan import Mechanism, PrivacyPlan
    from raydp_synth.privacy.selection_score import (
        SELECTION_SCORE,
        release_score,
        score_noise_std,
    )

    train = Mechanism(name="critic", noise_multiplier=1.1, sample_rate=0.05, num_steps=100,
                      sensitivity=1.0)
    score = Mechanism(name=SELECTION_SCORE, noise_multiplier=5.9, sample_rate=None,
                      num_steps=1, sensitivity=1.0)
    plan = PrivacyPlan(mechanisms=(train, score), delta=1e-5, target_epsilon=2.0)
    labels = np.arange(40) % 10
    released = release_score(labels, labels, mechanism=score, public=False,
                             noise_source=random.Random(0),
                             classifier="logreg", divisor=17)
    assert score_noise_std(plan, 17) == pytest.approx(released.noise_std, rel=1e-15)
    assert score_noise_std(plan, 17) == pytest.approx(5.9 / 17)
    assert score_noise_std(PrivacyPlan(mechanisms=(train,), delta=1e-5, target_epsilon=2.0),
                           17) is None


@pytest.mark.slow  # two subsampled plannings on digits: about 10 s
@pytest.mark.parametrize(("fraction", "warned"), [(0.1, True), (0.5, False)])
def test_a_tuning_score_too_noisy_to_rank_trials_is_said_before_anything_is_spent(
        fraction, warned, tmp_path, caplog) -> None:
    """On digits (165 validation records), q = 0.1 leaves a tuning trial about 16 to
    score on, and E_ref's score noise std is far above NOISY_SCORE_STD: the study says
    so while it prepares (before Ray, the ledger or any grant). q = 0.5 scores on 82,
    below the threshold: no warning."""
    import logging

    from raydp_synth.privacy.selection_score import NOISY_SCORE_STD, score_noise_std
    from raydp_synth.tune.extrapolation import subset_size
    from raydp_synth.tune.preparation import prepare
    from raydp_synth.tune.study import _with_absolute_paths

    request = _with_absolute_paths(StudyRequest(
        method="dpaf", epsilon=10.0, delta=1e-5, strategy="subsampled", sampler="random",
        tune_fraction=fraction, storage=tmp_path, name="s"))
    with caplog.at_level(logging.INFO, logger="raydp_synth"):
        prepared = prepare(request)
    std = score_noise_std(prepared.reference, subset_size(prepared.num_val, fraction))
    assert (std > NOISY_SCORE_STD) is warned
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if warned:
        assert len(warnings) == 1, warnings
        divisor = subset_size(prepared.num_val, fraction)
        assert f"about {divisor} validation records with noise std {std:.2f}" in warnings[0]
        assert "raise --tune-fraction or --tune-share" in warnings[0]
    else:
        assert not warnings
    assert not any(tmp_path.iterdir())
