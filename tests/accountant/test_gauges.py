"""Which gauges go out on Ray's metrics export port under which pricing mode
(design.md, invariant 15; docs/privacy.md, "The trust boundary").

The port has no token, so a count of grants there is K under random stopping, and a
series per trial counts the trials and gives their exact scores. These tests call the
functions the accountant (accountant/actor.py) and the study's Tune run config
(tune/trial_metrics.py) call, and the accountant class itself, without Ray: its gauges
are replaced by a recorder of what would be set. The real port is read during a study
in tests/tune/test_metrics_port.py.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from dp_accounting import dp_event

from raydp_synth.accountant import actor as actor_module
from raydp_synth.accountant.core import MODES
from raydp_synth.accountant.gauges import (
    BUDGET_GAUGES,
    LIVE_MODES,
    budget_gauges,
    prometheus_name,
    release_values,
    running_values,
)
from raydp_synth.privacy.accounting import epsilon_of
from raydp_synth.privacy.events import event_from_json, event_to_json, subsampled_gaussian_event
from raydp_synth.tune.study_settings import PUBLIC_SEARCH, SUBSAMPLED_FINAL, SUBSAMPLED_SEARCH
from raydp_synth.tune.trial_metrics import (
    TrialMetricsGauges,
    exports_trial_metrics,
    study_callbacks,
)

DELTA = 1e-5
COUNTS = {"granted", "refused"}
SECRET_COUNT_MODES = [m for m in MODES if m != "compose"]


def _plan(sigma: float, q: float, steps: int) -> dict[str, Any]:
    return event_to_json(
        subsampled_gaussian_event(noise_multiplier=sigma, sample_rate=q, num_steps=steps))


# ---------------------------------------------------------------- the policy


def test_only_compose_follows_the_study_live() -> None:
    assert LIVE_MODES == {"compose"}
    assert set(MODES) - LIVE_MODES == {"random-stopping", "subsampled"}


def test_compose_registers_and_sets_every_gauge_while_it_runs() -> None:
    assert budget_gauges("compose") == BUDGET_GAUGES
    values = running_values("compose", spent_epsilon=1.5, unspent_epsilon=2.5,
                            trials_granted=2, trials_refused=1)
    assert values == {"spent": 1.5, "unspent": 2.5, "granted": 2.0, "refused": 1.0}


@pytest.mark.parametrize("mode", [*SECRET_COUNT_MODES, "a-mode-added-later"])
def test_a_secret_trial_count_has_no_count_gauge_and_nothing_set_while_it_runs(mode: str) -> None:
    registered = budget_gauges(mode)
    assert set(registered) == {"spent", "unspent"}
    names = {name for name, _ in registered.values()}
    assert "raydp_synth_trials_granted" not in names and "raydp_synth_trials_refused" not in names
    assert running_values(mode, spent_epsilon=1.0, unspent_epsilon=1.0,
                          trials_granted=7, trials_refused=3) == {}


def test_the_release_sets_the_statements_totals_and_no_count() -> None:
    statement = {"mode": "random-stopping", "epsilon": 3.25, "budget_epsilon": 4.0,
                 "delta": DELTA}
    assert release_values(statement) == {"spent": 3.25, "unspent": 0.75}
    assert release_values({**statement, "epsilon": 5.0})["unspent"] == 0.0


@pytest.mark.parametrize(("selection", "exported"), [
    ("compose", True), (PUBLIC_SEARCH, True),
    ("random-stopping", False), ("subsampled", False), (SUBSAMPLED_SEARCH, False),
    (SUBSAMPLED_FINAL, False), ("a-selection-added-later", False),
])
def test_trial_series_go_out_under_compose_and_public_search_only(selection: str,
                                                                  exported: bool) -> None:
    assert exports_trial_metrics(selection) is exported
    study = SimpleNamespace(role=selection, method="dpaf", study_name="s")
    callbacks = study_callbacks(study)
    assert bool(callbacks) is exported
    assert all(isinstance(c, TrialMetricsGauges) for c in callbacks)


# ---------------------------------------------------------------- the accountant


class _Recorder:
    """Stands in for HeldGauges: records which gauges exist and every value set."""

    instances: list[_Recorder] = []

    def __init__(self, gauges: dict[str, tuple[str, str, tuple[str, ...]]],
                 period_s: float = 1.0) -> None:
        self.names = {key: name for key, (name, _, _) in gauges.items()}
        self.sets: list[tuple[str, float]] = []
        _Recorder.instances.append(self)

    def set(self, key: str, value: float, tags: dict[str, str]) -> None:
        assert key in self.names, f"{key} set but never registered"
        self.sets.append((key, value))


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> type[_Recorder]:
    _Recorder.instances = []
    monkeypatch.setattr(actor_module, "HeldGauges", _Recorder)
    return _Recorder


def _random_stopping(tmp_path: Path, reference: dict[str, Any], **extra: Any) -> Any:
    cost = epsilon_of(dp_event.RepeatAndSelectDpEvent(event_from_json(reference), 2.0, 1.0),
                      delta=DELTA)
    return actor_module.BudgetAccountant(
        str(tmp_path), epsilon=2 * cost, delta=DELTA, mode="random-stopping", trials=2,
        distribution="geometric", reference_event=reference, name="rs", **extra)


def test_random_stopping_accountant_sets_nothing_until_the_release(
        tmp_path: Path, recorder: type[_Recorder]) -> None:
    reference = _plan(1.0, 0.02, 200)
    accountant = _random_stopping(tmp_path, reference)
    (gauges,) = recorder.instances
    assert set(gauges.names) == {"spent", "unspent"}
    k = 0
    while accountant.draw(f"t{k}") == "drawn":  # every grant of the K, and one refusal
        assert accountant.request(f"t{k}", reference)["granted"]
        k += 1
    assert not accountant.request("late", reference)["granted"]
    assert k >= 1 and gauges.sets == []

    values = accountant.publish_release()
    statement = accountant.statement()
    assert values == {"spent": statement["epsilon"],
                      "unspent": statement["budget_epsilon"] - statement["epsilon"]}
    assert sorted(gauges.sets) == sorted(values.items())
    assert all(math.isfinite(v) for _, v in gauges.sets)


def test_compose_accountant_sets_every_gauge_on_every_decision(
        tmp_path: Path, recorder: type[_Recorder]) -> None:
    accountant = actor_module.BudgetAccountant(str(tmp_path), epsilon=10.0, delta=DELTA,
                                               mode="compose", trials=3, name="c")
    (gauges,) = recorder.instances
    assert set(gauges.names) == set(BUDGET_GAUGES)
    assert dict(gauges.sets)["granted"] == 0.0
    assert accountant.request("t0", _plan(1.0, 0.02, 100))["granted"]
    assert dict(gauges.sets)["granted"] == 1.0 and dict(gauges.sets)["spent"] > 0


def test_the_docs_name_every_gauge_as_prometheus_stores_it() -> None:
    """What an operator types into Prometheus or Grafana: Ray exports a metric N as
    ray_N, so README and docs give ray_N, never the bare N."""
    import re
    from pathlib import Path

    from raydp_synth.tune.trial_metrics import TRIAL_GAUGE

    repo = Path(__file__).resolve().parents[2]
    names = [name for name, _ in BUDGET_GAUGES.values()] + [TRIAL_GAUGE]
    text = {path: path.read_text() for path in
            [repo / "README.md", repo / "cluster" / "README.md", *sorted((repo / "docs").glob("*.md"))]}
    for name in names:
        assert any(prometheus_name(name) in t for t in text.values()), name
        for path, t in text.items():
            bare = re.findall(rf"(?<!ray_)\b{name}\b", t)
            assert not bare, f"{path.name} names {name} without Ray's prefix"
