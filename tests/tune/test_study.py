"""End-to-end studies on digits: a 3-trial search under one budget, and its release."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import pytest

from raydp_synth.accountant.ledger import Ledger
from raydp_synth.errors import ConfigError
from raydp_synth.privacy import pricing
from raydp_synth.privacy.accounting import epsilon_of
from raydp_synth.privacy.events import event_from_json
from raydp_synth.tune.study import StudyRequest, run_study
from tests.release.privacy_schema import check_privacy_json

TINY = Path(__file__).with_name("tiny_dpaf.yaml")


def tiny_without_split(directory: Path) -> Path:
    """TINY's space without its budget split, for a random-stopping study of one trial
    (K = 1) that must release: a split far from the default's can have no plan
    dominated by E_ref (a no-op run, docs/budget-pricing.md 6.2), and the study then
    releases nothing (CI on a4765bf drew dpagg's share at 3%)."""
    space = directory / "tiny_no_split.yaml"
    space.write_text("\n".join(line for line in TINY.read_text().splitlines()
                               if "budget_split" not in line) + "\n")
    return space


def test_random_stopping_refuses_an_adaptive_sampler_naming_compose() -> None:
    with pytest.raises(ConfigError, match="--strategy compose") as err:
        StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, strategy="random-stopping",
                     sampler="tpe")
    assert "\n" not in str(err.value)


@pytest.mark.ray
@pytest.mark.slow
def test_three_trial_compose_study_releases_the_best_trial_with_the_whole_search_statement(
        ray_local, tmp_path, monkeypatch) -> None:
    """Also: the accountant actor is killed mid-study (after the first grant); Ray
    restarts it from the ledger, and nothing is lost or overspent. The dataset and
    the public data are given as paths relative to the user's directory (the trials'
    workers run elsewhere)."""
    import ray

    from raydp_synth.accountant import get_accountant
    from tests.train.test_relative_paths import _digits_folder, _digits_parquet

    (tmp_path / "data").mkdir()
    _digits_parquet(tmp_path / "data" / "digits.parquet")
    _digits_folder(tmp_path / "public", 120, invert=True)  # not the training records
    monkeypatch.chdir(tmp_path)

    study = tmp_path / "e2e-compose"
    killed: list[int] = []

    def kill_after_first_grant() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            ledger = study / "ledger.jsonl"
            if ledger.exists() and any(e["kind"] == "grant" for e in Ledger(ledger).entries()):
                ray.kill(get_accountant("e2e-compose"), no_restart=False)
                killed.append(1)
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_after_first_grant, daemon=True)
    killer.start()
    result = run_study(StudyRequest(
        method="dpaf", epsilon=6.0, delta=1e-5, trials=3, search_space=TINY, storage=tmp_path,
        name="e2e-compose", evaluate=False, dataset="parquet:data/digits.parquet:size=8:channels=1:classes=10",
        public="folder:public", synthetic_samples=50,
        settings={"epochs": 1},  # TINY's 2 epochs halved: three trials' length is CI's
    ))
    killer.join(timeout=5)
    assert killed, "the accountant was never killed"
    grants = [e for e in Ledger(study / "ledger.jsonl").entries() if e["kind"] == "grant"]
    assert len(grants) == 3 and len({g["trial_id"] for g in grants}) == 3
    # The statement is the accountant's: the composition of every granted plan.
    events = [event_from_json(g["event"]) for g in grants]
    import dp_accounting as dpa

    total = pricing.epsilon(dpa.ComposedDpEvent(events), delta=1e-5)  # min(RDP, PLD)
    statement = json.loads((study / "release" / "privacy.json").read_text())
    assert statement["epsilon"] == pytest.approx(total, rel=1e-9)
    assert 0.9 * 6.0 <= statement["epsilon"] <= 6.0
    assert statement["details"]["study"]["mode"] == "compose"
    check_privacy_json(statement)  # a study's release: the statement first, details below
    facts = statement["public_facts"]
    assert facts["num_records"] == json.loads((study / "study.json").read_text())["data_info"]["num_records"]
    assert facts["classes"]["count"] == 10 and facts["score_validation"]["records"] > 0
    # The digits' own facts, declared: undeclared, Parquet loads as the default 32x32 RGB,
    # and the study takes twice as long.
    assert statement["dataset"] == (
        f"parquet:{tmp_path}/data/digits.parquet:size=8:channels=1:classes=10")
    import pyarrow.parquet as pq

    assert pq.read_table(study / "release" / "synthetic.parquet").num_rows == 50
    # The released trial is the best by private score, and its plan was granted.
    scores = {t["trial"]: t["score"] for t in result.trials}
    assert result.best_score == max(s for s in scores.values() if s is not None)
    assert statement["details"]["released_trial_plan"]["event"] in [g["event"] for g in grants]
    for name in ("generator.safetensors", "generator.json", "samples.png", "synthetic.parquet"):
        assert (study / "release" / name).is_file()
    # What reached Tune (progress, dashboard, result.json): Tune's own bookkeeping,
    # the trial's TRIAL_METRICS and DPAF's allow-listed worker metrics, nothing else.
    from ray.tune.result import AUTO_RESULT_KEYS

    from raydp_synth.methods import get_method
    from raydp_synth.tune.trial import TRIAL_METRICS

    tune_keys = set(AUTO_RESULT_KEYS) | {"trial_id", "done", "checkpoint_path", "should_checkpoint"}
    allowed = tune_keys | TRIAL_METRICS | get_method("dpaf").metric_allowlist
    results = [json.loads(line) for path in study.glob("tune/*/result.json")
               for line in path.read_text().splitlines() if line.strip()]
    assert len(results) >= 3
    assert {key for r in results for key in r} <= allowed
    assert all("score" in r for r in results if r.get("done"))
    # The search ran DPAF's defaults that the space holds (mu 1, lr_d 1e-3) first.
    params = [json.loads(p.read_text()) for p in study.glob("tune/*/params.json")]
    assert [(p["mu"], p["lr_d"]) for p in params].count((1, 1e-3)) == 1
    # The budget CLI prices the ledger the same way, without Ray.
    from raydp_synth.budget import ledger_statement

    offline, _ = ledger_statement(study)
    assert offline["epsilon"] == pytest.approx(statement["epsilon"], rel=1e-9)
    assert offline["trials_granted"] == 3
    # The results table states the whole search's epsilon; no evaluation, no figures.
    from raydp_synth.report import read_row

    row = read_row(study)
    assert row.kind == "study" and row.method == "dpaf"
    assert row.epsilon == pytest.approx(statement["epsilon"], rel=1e-9)
    assert row.counts == "whole search (compose, 3 trials)"
    assert row.cas == {} and row.figures == {} and row.public == f"folder:{tmp_path}/public"
    # What run_study returns and the Optuna journal it keeps (tests/tune/test_study_api.py).
    from tests.tune.test_study_api import check_result_grid_and_optuna_journal

    check_result_grid_and_optuna_journal(result, study, trials=3)


def check_random_stopping_prices_repeat_and_select_of_the_reference_plan(
        study: Path, epsilon: float) -> None:
    """A random-stopping study of one random draw (geometric with mean 1 draws K = 1
    surely; TINY's space without its split, at ``epsilon``): one trial, dominated by
    E_ref, and the statement is repeat-and-select of E_ref.

    Checked on the study of tests/tune/test_metrics_port.py (the real CLI, the same
    request): one study serves both, CI's time is the suite's."""
    from dp_accounting import dp_event

    from raydp_synth.privacy.accounting import dominates

    entries = Ledger(study / "ledger.jsonl").entries()
    header, grants = entries[0], [e for e in entries if e["kind"] == "grant"]
    assert header["trial_count"] == 1 and len(grants) == 1
    reference = event_from_json(header["reference_event"])
    assert dominates(reference, event_from_json(grants[0]["event"]))
    statement = json.loads((study / "release" / "privacy.json").read_text())
    expected = epsilon_of(dp_event.RepeatAndSelectDpEvent(reference, 1.0, 1.0), delta=1e-5)
    assert statement["epsilon"] == pytest.approx(expected, rel=1e-9) and expected <= epsilon
    text = json.dumps(statement)
    assert "trial_count" not in text and "trials_granted" not in text  # K stays secret
    from raydp_synth.report import read_row

    row = read_row(study)
    assert row.epsilon == pytest.approx(expected, rel=1e-9)
    assert row.counts == "whole search (random stopping, geometric, mean 1 trial)"


@pytest.mark.ray
@pytest.mark.slow
def test_packed_random_stopping_runs_exactly_the_first_k_draws(ray_local, tmp_path) -> None:
    """Two trials at once, K = 1 (geometric, mean 1): the search records its draw in
    the ledger before it proposes a configuration and stops at K draws, so one trial
    runs, and it is the drawn one that is granted. Before draws were recorded the
    search proposed two and granted whichever asked first, which packed trials do
    in an order their configurations set (docs/budget-pricing.md, 6.2).

    Also (one study serves both): a random-stopping draw with no plan is one of the K
    runs. Every draw of this space (dpwgan at batch 128, epsilon 0.2, E_ref at batch
    64) has no plan dominated by E_ref (docs/budget-pricing.md, 6.2). The trial reads
    nothing and takes a no-op grant, so the study's one run (geometric, mean 1) is
    spent on it, as the theorem's i.i.d. runs of "draw, then train or output nothing"
    are; with no scored trial it releases nothing, in one line."""
    from dp_accounting import dp_event

    from raydp_synth.errors import BudgetExhausted

    space = tmp_path / "wide.yaml"
    space.write_text("method: dpwgan\nparams:\n  batch_size: {type: categorical, choices: [128]}\n"
                     "  lr_d: {type: float, low: 3.0e-4, high: 3.0e-3, log: true}\n")
    with pytest.raises(BudgetExhausted) as err:
        run_study(StudyRequest(
            method="dpwgan", epsilon=0.2, delta=1e-5, trials=1, strategy="random-stopping",
            distribution="geometric", sampler="random", default_share=0.0,
            search_space=space, settings={"epochs": 1}, storage=tmp_path / "studies",
            name="e2e-packed", evaluate=False, max_concurrent=2,
        ))
    study = tmp_path / "studies" / "e2e-packed"
    entries = Ledger(study / "ledger.jsonl").entries()
    assert entries[0]["trial_count"] == 1 and entries[0]["draw_order"] is True
    assert [e["kind"] for e in entries] == ["study", "draw", "grant"]
    assert entries[1]["trial_id"] == entries[2]["trial_id"]
    assert len(list(study.glob("tune/*/result.json"))) == 1
    from raydp_synth.tune.tuner import unfinished_trials as _unfinished_trials

    assert _unfinished_trials(study / "tune") == set()  # Tune's own state: all TERMINATED
    # The draw with no plan: a no-op grant, one of the K runs; nothing released.
    assert "\n" not in str(err.value)
    assert isinstance(event_from_json(entries[2]["event"]), dp_event.NoOpDpEvent)
    (result,) = [json.loads(p.read_text().splitlines()[-1])
                 for p in study.glob("tune/*/result.json")]
    assert (result["granted"], result["invalid"]) == (1, 1)
    assert "dominated by E_ref" in result["reason"]
    assert not (study / "release").exists()


def test_a_resume_keeps_the_draws_of_the_trials_tune_restores(tmp_path) -> None:
    """On --resume, the draws kept are those of the trials that Tune's restore resumes:
    neither TERMINATED nor ERROR in the latest experiment's latest saved state (an
    unreadable state keeps none, so no trial outside the draws can be granted; with
    none kept, a random-stopping study starts a new experiment)."""
    from raydp_synth.tune.tuner import latest_experiment as _latest_experiment
    from raydp_synth.tune.tuner import unfinished_trials as _unfinished_trials

    experiment = tmp_path / "tune"
    experiment.mkdir()
    trials = [json.dumps({"trial_id": t, "status": status}) for t, status in
              [("a", "TERMINATED"), ("b", "RUNNING"), ("c", "PENDING"), ("d", "ERROR"),
               ("e", "PAUSED")]]
    (experiment / "experiment_state-2026-11-27_10-00-00.json").write_text(
        json.dumps({"trial_data": [[t, "{}"] for t in trials[:2]]}))
    (experiment / "experiment_state-2026-11-27_11-00-00.json").write_text(
        json.dumps({"trial_data": [[t, "{}"] for t in trials]}))
    assert _unfinished_trials(experiment) == {"b", "c", "e"}  # the latest state
    later = tmp_path / "tune-resume-1"  # a resume's experiment is the latest
    later.mkdir()
    (later / "experiment_state-2026-11-27_09-00-00.json").write_text(
        json.dumps({"trial_data": [[trials[2], "{}"]]}))
    assert _latest_experiment(tmp_path) == later
    assert _unfinished_trials(later) == {"c"}
    assert _latest_experiment(tmp_path / "none") is None
    (experiment / "experiment_state-2026-11-27_12-00-00.json").write_text("{torn")
    assert _unfinished_trials(experiment) == set()


@pytest.mark.ray
@pytest.mark.slow
def test_restarts_study_trains_the_default_at_the_reference_plan(ray_local, tmp_path,
                                                                  caplog) -> None:
    """``--default-share 1``: the one trial (geometric, mean 1) is the default
    configuration, whose plan is E_ref's, the plan the statement's repeat-and-select
    prices: calibrated to be dominated by it, it gets E_ref's epsilon within the
    calibration's tolerance (a random draw gets at most that)."""
    from dp_accounting import dp_event

    from raydp_synth.config import config_to_dict
    from raydp_synth.data import DataInfo
    from raydp_synth.methods import get_method
    from raydp_synth.privacy.accounting import dominates
    from raydp_synth.tune.search_space import load_search_space

    with caplog.at_level(logging.INFO, logger="raydp_synth"):
        run_study(StudyRequest(
            method="dpaf", epsilon=5.0, delta=1e-5, trials=1, strategy="random-stopping",
            distribution="geometric", sampler="random", default_share=1.0,
            search_space=TINY, storage=tmp_path, name="e2e-restarts", evaluate=False,
            synthetic_samples=20,
        ))
    assert any("(random-stopping, mean 1 restarts of the default config)" in r.getMessage()
               for r in caplog.records)
    study = tmp_path / "e2e-restarts"
    entries = Ledger(study / "ledger.jsonl").entries()
    header, grants = entries[0], [e for e in entries if e["kind"] == "grant"]
    assert header["trial_count"] == 1 and len(grants) == 1
    reference, granted = (event_from_json(header["reference_event"]),
                          event_from_json(grants[0]["event"]))
    assert dominates(reference, granted)
    # The calibration returns a noise multiplier within rtol 1e-3 of the smallest
    # feasible one, so the epsilons differ by a few 1e-3 at most.
    assert epsilon_of(granted, delta=1e-5) == pytest.approx(
        epsilon_of(reference, delta=1e-5), rel=5e-3)
    info = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)
    space = load_search_space(TINY, "dpaf", info)
    point = space.default_point(config_to_dict(get_method("dpaf").make_config(space.fixed, info)))
    (params,) = [json.loads(p.read_text()) for p in study.glob("tune/*/params.json")]
    assert point and {key: params[key] for key in point} == point
    statement = json.loads((study / "release" / "privacy.json").read_text())
    expected = epsilon_of(dp_event.RepeatAndSelectDpEvent(reference, 1.0, 1.0), delta=1e-5)
    assert statement["epsilon"] == pytest.approx(expected, rel=1e-9) and expected <= 5.0
    # The restart drew its own initialisation (StudySettings.trial_seed), released with
    # its config; the study's seed (0) still split the data.
    released = json.loads((study / "release" / "generator.json").read_text())
    assert released["config"]["seed"] != 0
    # run.json names both: the trial's loop got the study's seed for its data splits
    # (recorded from the loop's own argument), the restart's for its initialisation.
    run = json.loads((study / "run.json").read_text())
    (trial,) = [json.loads(p.read_text()) for p in study.glob("tune/*/checkpoint_*/trial.json")]
    assert trial["data_seed"] == 0  # what fit_* got, not run.json's fallback
    assert (run["seed"], run["data_seed"]) == (0, 0)
    assert run["init_seed"] == released["config"]["seed"]
