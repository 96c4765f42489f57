"""The operator's view of a running study (raydp_synth/tune/progress.py): Tune's table
with each trial's score and epsilon sorted by score and the study's budget in its
header, and one line per grant, per finished trial and at the end, from a real
accountant actor; under random stopping neither the count of grants nor the spent
epsilon appears while the search runs (the gauges' rule)."""

from __future__ import annotations

import logging
import math
import time
import uuid

import pytest

from raydp_synth.tune.progress import (
    METRIC_COLUMNS,
    StudyProgressReporter,
    StudySummaryLog,
    budget_line,
    grant_line,
    legacy_tune_output,
    trial_line,
)
from raydp_synth.tune.trial import TRIAL_METRICS

DELTA = 1e-5


def _status(mode: str, *, spent: float = 6.2, granted: int = 2) -> dict:
    return {"study": "s", "mode": mode, "budget_epsilon": 10.0, "delta": DELTA,
            "spent_epsilon": spent, "unspent_epsilon": 10.0 - spent,
            "trials_granted": granted, "trials_refused": 0, "can_grant": True,
            "ledger_error": None}


def test_the_table_shows_only_keys_a_trial_may_report() -> None:
    assert set(METRIC_COLUMNS) <= TRIAL_METRICS
    assert {"score", "trial_epsilon"} <= set(METRIC_COLUMNS)


def test_the_budget_line_under_compose_states_spent_budget_and_grants() -> None:
    line = budget_line(_status("compose"), trials=3)
    assert line == ("budget: spent epsilon 6.2 of epsilon 10, delta 1e-05 (compose); "
                    "2 of at most 3 trials granted")
    assert budget_line(None).startswith("budget: asking")
    assert budget_line(_status("compose", granted=1), trials=2).endswith(
        "1 of at most 2 trials granted")
    assert budget_line(_status("compose", granted=1)).endswith("; 1 trial granted")


@pytest.mark.parametrize("mode", ["random-stopping", "subsampled"])
def test_the_budget_line_hides_the_count_and_the_spent_epsilon_elsewhere(mode) -> None:
    line = budget_line(_status(mode, spent=6.789, granted=4), trials=3)
    assert "epsilon 10" in line and "1e-05" in line and mode in line
    assert "6.789" not in line and "4" not in line and "granted" not in line


def test_grant_and_trial_lines() -> None:
    assert grant_line("s", _status("compose"), trials=3) == (
        "study s: trial 2 of at most 3 granted; spent epsilon 6.2 of 10 (delta 1e-05)")
    assert trial_line("s", "a1", {"score": 0.41234, "trial_epsilon": 3.1}) == (
        "study s: trial a1 finished: score 0.4123, trial epsilon 3.1")
    assert trial_line("s", "a2", {"score": -math.inf, "granted": 0}) == (
        "study s: trial a2 finished: refused, no score")
    assert trial_line("s", "a3", {"epoch": 1}) is None


def test_legacy_output_is_set_for_the_fit_only(monkeypatch) -> None:
    monkeypatch.delenv("RAY_AIR_NEW_OUTPUT", raising=False)
    import os

    with legacy_tune_output():
        assert os.environ["RAY_AIR_NEW_OUTPUT"] == "0"
    assert "RAY_AIR_NEW_OUTPUT" not in os.environ
    monkeypatch.setenv("RAY_AIR_NEW_OUTPUT", "1")  # the user's choice stands
    with legacy_tune_output():
        assert os.environ["RAY_AIR_NEW_OUTPUT"] == "1"
    assert os.environ["RAY_AIR_NEW_OUTPUT"] == "1"


def _trials(tmp_path) -> list:
    """Three finished Tune trials: scores 0.2 and 0.5, and a refused one."""
    from ray.train._internal.storage import StorageContext
    from ray.tune.experiment import Trial

    trials = []
    for i, (score, epsilon) in enumerate([(0.2, 3.1), (0.5, 3.05), (-math.inf, None)]):
        storage = StorageContext(storage_path=str(tmp_path), experiment_dir_name="tune",
                                 trial_dir_name=f"t{i}")
        trial = Trial("run_trial", config={"mu": i}, stub=True, trial_id=f"trial{i}",
                      storage=storage)
        trial.set_status(Trial.TERMINATED)
        result = {"score": score, "epoch": 2, "training_iteration": 3}
        if epsilon is not None:
            result["trial_epsilon"] = epsilon
        trial.run_metadata.last_result = result
        trials.append(trial)
    return trials


@pytest.fixture
def lines(caplog):
    """The ``raydp_synth`` logger's INFO records (it may not propagate to the root)."""
    logger = logging.getLogger("raydp_synth")
    level, own_handler = logger.level, not logger.propagate
    if own_handler:
        logger.addHandler(caplog.handler)
    logger.setLevel(logging.INFO)
    try:
        yield caplog
    finally:
        if own_handler:
            logger.removeHandler(caplog.handler)
        logger.setLevel(level)


def _wait_for(poll, deadline_s: float = 60):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        status = poll.latest(wait_s=1.0)
        if status is not None:
            return status
    raise AssertionError("no status from the accountant")


@pytest.mark.ray
def test_table_and_lines_of_a_compose_study(ray_local, tmp_path, lines) -> None:
    import pickle

    import ray

    from raydp_synth.accountant import get_or_create_accountant
    from raydp_synth.privacy.events import event_to_json, subsampled_gaussian_event

    name = f"test-reporter-{uuid.uuid4().hex[:8]}"
    handle = get_or_create_accountant(tmp_path / "study", name, epsilon=10.0, delta=DELTA,
                                      mode="compose", trials=3)
    try:
        reporter = StudyProgressReporter(name, trials=3)
        reporter.setup(start_time=time.time(), total_samples=3)
        _wait_for(reporter.poll)
        printed: list[str] = []
        reporter._print = printed.append  # type: ignore[method-assign]
        reporter.report(_trials(tmp_path), True, "Logical resource usage: 1.0/2 CPUs")
        [table] = printed
        assert "budget: spent epsilon 0 of epsilon 10, delta 1e-05 (compose); 0 of at most 3 " \
               "trials granted" in table
        assert "score" in table and "trial epsilon" in table
        rows = [line for line in table.splitlines() if line.startswith("| run_trial")]
        assert [row.split("|")[1].strip() for row in rows] == \
            ["run_trial_trial1", "run_trial_trial0", "run_trial_trial2"]  # best first
        assert "3.05" in rows[0] and "3.1" in rows[1]

        log = StudySummaryLog(name, trials=3)
        caplog = lines
        log.on_experiment_end([])  # before any grant: the budget, no grant line
        assert log._granted_seen == 0  # the baseline: a grant from now on is new
        plan = event_to_json(subsampled_gaussian_event(noise_multiplier=1.0, sample_rate=0.01,
                                                       num_steps=100))
        assert ray.get(handle.request.remote("trial0", plan))["granted"]
        deadline = time.monotonic() + 60
        while not any("granted;" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, caplog.text
            log._polled_at = -math.inf
            log.on_step_end(0, [])
            time.sleep(0.2)
        [granted] = [r.getMessage() for r in caplog.records if "granted;" in r.getMessage()]
        assert granted.startswith(f"study {name}: trial 1 of at most 3 granted; spent epsilon ")
        trial = _trials(tmp_path)[0]
        log.on_trial_complete(0, [], trial)
        assert f"study {name}: trial trial0 finished: score 0.2000, trial epsilon 3.1" \
            in caplog.text
        # Pickled with Tune's experiment state: no handle, no pending query.
        copy = pickle.loads(pickle.dumps(log))
        assert copy.poll._handle is None and copy.poll._pending is None
        assert pickle.loads(pickle.dumps(reporter)).poll._handle is None
    finally:
        ray.kill(handle, no_restart=True)


@pytest.mark.ray
def test_lines_of_a_random_stopping_study_say_no_count(ray_local, tmp_path, lines) -> None:
    import ray

    from raydp_synth.accountant import get_or_create_accountant
    from raydp_synth.privacy.events import event_to_json, subsampled_gaussian_event

    reference = event_to_json(subsampled_gaussian_event(noise_multiplier=2.0,
                                                        sample_rate=0.01, num_steps=50))
    name = f"test-reporter-rs-{uuid.uuid4().hex[:8]}"
    handle = get_or_create_accountant(tmp_path / "study", name, epsilon=50.0, delta=DELTA,
                                      mode="random-stopping", trials=2,
                                      distribution="geometric", reference_event=reference)
    try:
        log = StudySummaryLog(name, trials=2)
        caplog = lines
        assert ray.get(handle.draw.remote("t0")) == "drawn"
        assert ray.get(handle.request.remote("t0", reference))["granted"]
        _wait_for(log.poll)
        for _ in range(3):
            log._polled_at = -math.inf
            log.on_step_end(0, [])
            time.sleep(0.3)
        log.on_trial_complete(0, [], _trials(tmp_path)[1])
        log.on_experiment_end([])
        messages = [r.getMessage() for r in caplog.records]
        assert messages == [f"study {name}: search done; budget: epsilon 50, delta 1e-05 for "
                            "the whole search (random-stopping: the spent epsilon is stated "
                            "at the release)"]
    finally:
        ray.kill(handle, no_restart=True)
