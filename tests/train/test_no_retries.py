"""No DP run is retried, for any reason: Ray Train's and Tune's own failure handling,
fed the configuration and the environment the product gives them.

A retried run executes its DP loop again under the same grant (docs/privacy.md, "No
automatic retries"). Ray 2.60 retries in two places that ``max_failures=0`` alone does
not close: Ray Train keeps a separate, unlimited budget for workers that died on a
node drained for preemption (``max_preemption_failures=-1``), and Tune does not count
such a death as a trial failure. Each test below first shows Ray's default doing it,
so that a Ray upgrade that renames a knob fails here rather than silently retrying.
The end-to-end case (a node drained for preemption mid-trial) is
tests/faults/test_multinode.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from ray.exceptions import RayActorError
from ray.train.v2._internal.execution.failure_handling import FailureDecision
from ray.train.v2._internal.execution.failure_handling.default import DefaultFailurePolicy
from ray.train.v2.api.config import FailureConfig
from ray.train.v2.api.exceptions import PreemptionError, WorkerGroupError
from ray.train.v2.api.preemption import PreemptionInfo
from ray.tune.experiment.trial import Trial

from raydp_synth.runtime.ray_session import RAY_SETTINGS
from raydp_synth.train.pipeline import no_retries

PACKAGE = Path(__file__).resolve().parents[2] / "raydp_synth"


def _preempted_worker() -> WorkerGroupError:
    return WorkerGroupError("a worker died", {1: RayActorError(preempted=True)})


def _crashed_worker() -> WorkerGroupError:
    return WorkerGroupError("a worker died", {1: RayActorError()})


def _preemption() -> PreemptionError:
    return PreemptionError(PreemptionInfo(deadline_ms=None,
                                          preempted_node_to_ranks={"n": [1]}))


def test_ray_trains_default_retries_a_preempted_worker() -> None:
    """Why no_retries exists: max_failures=0 alone still retries a preemption."""
    policy = DefaultFailurePolicy(FailureConfig(max_failures=0))
    assert policy.make_decision(_preempted_worker()) is FailureDecision.RETRY


@pytest.mark.parametrize("error", [_preempted_worker, _crashed_worker, _preemption])
def test_the_runs_failure_config_raises_on_every_worker_death(error) -> None:
    config = no_retries()
    assert isinstance(config, FailureConfig)  # Ray Train v2's, the one that runs
    policy = DefaultFailurePolicy(config)
    for _ in range(3):  # and again: no budget that refills
        assert policy.make_decision(error()) is FailureDecision.RAISE


def _failed_on_preempted_actor() -> Trial:
    """A trial as the study's Tune run has it (``max_failures=0``,
    trial_metrics.study_run_config) after its actor died on a preempted node: the count
    that ``Trial.handle_error`` makes for a ``RayActorError`` (its error files need a
    Ray session; the count does not)."""
    trial = Trial("any", stub=True, max_failures=0)
    trial._handle_ray_actor_error(RayActorError(preempted=True))
    return trial


def test_tune_counts_a_preempted_trial_as_failed_under_the_products_settings(
        monkeypatch) -> None:
    monkeypatch.delenv("RAY_TRAIN_COUNT_PREEMPTION_AS_FAILURE", raising=False)
    assert _failed_on_preempted_actor().should_recover()  # Ray's default: rerun it
    monkeypatch.setenv("RAY_TRAIN_COUNT_PREEMPTION_AS_FAILURE",
                       RAY_SETTINGS["RAY_TRAIN_COUNT_PREEMPTION_AS_FAILURE"])
    assert not _failed_on_preempted_actor().should_recover()


def _calls(name: str) -> list[tuple[Path, ast.Call]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called == name:
                    found.append((path, node))
    return found


def test_every_ray_train_run_is_built_with_no_retries() -> None:
    """The function tested above is the one the runs use: every Ray Train RunConfig
    of the package passes ``failure_config=no_retries()``, the only Ray Train
    FailureConfig built; Tune's (trial_metrics.study_run_config) has max_failures=0."""
    runs = _calls("RunConfig")
    train_runs = [(p, c) for p, c in runs if "tune" not in p.parts]
    assert train_runs
    for path, call in train_runs:
        value = {k.arg: k.value for k in call.keywords}.get("failure_config")
        assert isinstance(value, ast.Call) and getattr(value.func, "id", "") == "no_retries", (
            f"{path}:{call.lineno}")
    for path, call in _calls("FailureConfig"):
        keywords = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        if path.name == "pipeline.py":
            assert keywords == {"max_failures": 0, "max_preemption_failures": 0}
        else:
            assert keywords == {"max_failures": 0}, f"{path}:{call.lineno}"
