"""The accountant's Ray-free core: replay, grant or refuse, the statement.

Property tests run the actor's request path (decide, append to the ledger, record)
without Ray, hundreds of examples each, and check it against an independent
pricing of the ledger; they use Gaussian plans, which dp-accounting prices in closed
form (a Poisson-subsampled plan costs tens of milliseconds per pricing).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import dp_accounting as dpa
import pytest
from dp_accounting import dp_event
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raydp_synth.accountant.core import (
    LEDGER_NAME,
    REASON_BUDGET,
    REASON_CHANGED,
    REASON_INVALID,
    REASON_NOT_DOMINATED,
    REASON_NOT_DRAWN,
    REASON_RERUN,
    REASON_TRIAL_COUNT,
    Decision,
    StudyBudget,
    StudySettings,
    new_study_header,
)
from raydp_synth.accountant.ledger import Ledger
from raydp_synth.errors import ConfigError
from raydp_synth.privacy import pricing
from raydp_synth.privacy.accounting import dominates, epsilon_of
from raydp_synth.privacy.events import event_from_json, event_to_json, subsampled_gaussian_event

DELTA = 1e-5
# 150 examples: each replays a whole request sequence through the accountant and
# prices it twice (RDP and PLD); CI runs on 2 cores.
PROPERTY = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _plan(sigma: float, q: float | None, steps: int) -> dict:
    return event_to_json(
        subsampled_gaussian_event(noise_multiplier=sigma, sample_rate=q, num_steps=steps)
    )


@pytest.fixture(autouse=True, scope="module")
def _coarse_pld():
    """What is tested here (grants, refusals, replay, never overspending) holds at any PLD
    discretization; a coarse one keeps the properties' hundreds of examples fast. The
    stated interval's numbers are pinned in tests/privacy/test_pld_pricing.py."""
    patch = pytest.MonkeyPatch()
    patch.setattr(pricing, "STATED", pricing.Pricing(orders=None, pld_interval=1e-2))
    yield
    patch.undo()


def _stated(events: list) -> float:
    """The stated epsilon of a composition, priced independently of the accountant."""
    return pricing.epsilon(dpa.ComposedDpEvent(list(events)), delta=DELTA)


def _compose(budget: float, trials: int = 10) -> StudySettings:
    return StudySettings(epsilon=budget, delta=DELTA, mode="compose", trials=trials)


def _random_stopping(reference: dict, trials: int = 2, distribution: str = "geometric",
                     headroom: float = 2.0) -> StudySettings:
    cost = epsilon_of(
        dp_event.RepeatAndSelectDpEvent(event_from_json(reference), float(trials),
                                        {"geometric": 1.0, "poisson": math.inf}[distribution]),
        delta=DELTA,
    )
    return StudySettings(epsilon=cost * headroom, delta=DELTA, mode="random-stopping",
                         trials=trials, distribution=distribution, reference_event=reference)


class Study:
    """The actor's request path without Ray: decide, append to the ledger, record;
    and its draw path (the searcher's ``draw`` before it proposes a configuration)."""

    def __init__(self, directory: Path, study: StudySettings, trial_count: int | None = None):
        self.ledger = Ledger(directory / LEDGER_NAME)
        header = new_study_header(study, name="test")
        if trial_count is not None:
            header["trial_count"] = trial_count
        self.ledger.append(header, create=True)
        self.budget = StudyBudget(study, header, source=self.ledger.path)
        self.decisions: list[Decision] = []

    def draw(self, trial_id: str) -> bool:
        drawn, entry = self.budget.decide_draw(trial_id)
        if entry is not None:
            self.ledger.append(entry)
            self.budget.take_draws(entry)
        return drawn

    def undraw(self, trial_ids: list[str] | None = None, keep: tuple = ()) -> list[str]:
        entry = self.budget.undraw_entry(trial_ids, keep=keep)
        if entry is None:
            return []
        self.ledger.append(entry)
        self.budget.take_draws(entry)
        return list(entry["trial_ids"])

    def request(self, trial_id: str, event: dict, attempt: str | None = None, *,
                draw: bool = False) -> Decision:
        """``draw``: the search draws the trial first, as a live study does."""
        if draw:
            self.draw(trial_id)
        decision = self.budget.decide(trial_id, event, attempt)
        if decision.entry is not None:
            self.ledger.append(decision.entry)
            self.budget.record(decision)
        self.decisions.append(decision)
        return decision

    def replay(self, study: StudySettings | None = None) -> StudyBudget:
        return StudyBudget.replay(self.ledger.entries(), settings=study, source=self.ledger.path)


def _state(budget: StudyBudget) -> tuple:
    return (
        list(budget.grants.items()),
        budget.draws,
        budget.refused,
        budget.spent_epsilon(),
        budget.can_grant(),
        budget.granted_events(),
        budget.statement(),
    )


# -- strategies ----------------------------------------------------------------

_gaussian = st.builds(
    lambda sigma, steps: _plan(sigma, None, steps),
    st.floats(0.5, 8.0), st.integers(1, 30),
)
_laplace = st.builds(lambda b: event_to_json(dpa.LaplaceDpEvent(b)), st.floats(0.2, 5.0))
_composed = st.builds(
    lambda a, b: {"type": "ComposedDpEvent", "events": [a, b]}, _gaussian, _laplace
)
_garbage = st.sampled_from([
    {"type": "Nope"},
    {"no": "type"},
    "not even a dict",
    event_to_json(dpa.NonPrivateDpEvent()),
    {"type": "GaussianDpEvent", "noise_multiplier": math.nan},
    {"type": "GaussianDpEvent", "noise_multiplier": -1.0},
    {"type": "GaussianDpEvent", "noise_multiplier": "loud"},
    {"type": "SelfComposedDpEvent", "event": _plan(1.0, None, 1), "count": -3},
    event_to_json(dpa.SampledWithoutReplacementDpEvent(100, 10, dpa.GaussianDpEvent(1.0))),
])
PLANS = st.one_of(_gaussian, _gaussian, _laplace, _composed, _garbage)
REQUESTS = st.lists(
    st.tuples(
        st.sampled_from([f"t{i}" for i in range(6)]),
        PLANS,
        st.sampled_from([None, "a1", "a2"]),
        st.booleans(),  # also sent a second time, as a retry would
    ),
    max_size=14,
)


def _run(study: Study, requests: list, *, draw: bool = False) -> None:
    for trial_id, plan, attempt, retried in requests:
        study.request(trial_id, plan, attempt, draw=draw)
        if retried:
            study.request(trial_id, plan, attempt)


# -- properties ----------------------------------------------------------------


@PROPERTY
@given(requests=REQUESTS, budget=st.floats(0.5, 40.0))
def test_compose_replay_is_live_and_never_overspends(tmp_path_factory, requests, budget):
    study_settings = _compose(budget)
    study = Study(tmp_path_factory.mktemp("study"), study_settings)
    charged: list[dict] = []  # independent bookkeeping of what the ledger may charge
    for trial_id, plan, attempt, retried in requests:
        for _ in range(1 + retried):
            before = study.budget.spent_epsilon()
            decision = study.request(trial_id, plan, attempt)
            spent = study.budget.spent_epsilon()
            assert spent <= budget  # never over the budget, after every request
            if decision.granted and decision.entry is not None:
                charged.append(decision.entry["event"])
            elif not decision.granted:
                assert spent == before  # a refusal charges nothing
                if decision.reason.startswith(REASON_BUDGET):
                    granted = [event_from_json(e) for e in charged]
                    assert not _stated([*granted, event_from_json(plan)]) <= budget
            assert (decision.granted, decision.reason is None) in {(True, True), (False, False)}

    entries = study.ledger.entries()
    grants = [e for e in entries if e["kind"] == "grant"]
    # the ledger holds exactly the grants that were answered, once per trial
    assert [g["event"] for g in grants] == charged
    assert len({g["trial_id"] for g in grants}) == len(grants)
    refused_ids = {e["trial_id"] for e in entries if e["kind"] == "refusal"}
    assert study.budget.refused == refused_ids - set(study.budget.grants)
    # the state is the ledger, priced independently
    expected = _stated([event_from_json(e) for e in charged]) if charged else 0.0
    assert study.budget.spent_epsilon() == expected
    assert study.budget.statement()["epsilon"] == expected <= budget
    # a restarted accountant rebuilds the same state from the ledger
    assert _state(study.replay(study_settings)) == _state(study.budget)
    assert _state(study.replay()) == _state(study.budget)  # the budget CLI's replay


@PROPERTY
@given(
    requests=REQUESTS,
    reference=st.builds(lambda s, n: _plan(s, None, n), st.floats(1.0, 4.0), st.integers(1, 10)),
    trial_count=st.integers(0, 5),
    drawn=st.booleans(),
)
def test_random_stopping_replay_is_live_and_grants_at_most_k_dominated_plans(
        tmp_path_factory, requests, reference, trial_count, drawn):
    """``drawn``: the search draws each trial before it asks (the live path); else no
    trial is drawn, and none may be granted."""
    study_settings = _random_stopping(reference)
    study = Study(tmp_path_factory.mktemp("study"), study_settings, trial_count=trial_count)
    statement = study.budget.statement()
    _run(study, requests, draw=drawn)

    entries = study.ledger.entries()
    grants = [e for e in entries if e["kind"] == "grant"]
    draws = [e["trial_id"] for e in entries if e["kind"] == "draw"]
    assert len(draws) <= trial_count and study.budget.draws == tuple(draws)
    assert len(grants) <= trial_count
    assert {g["trial_id"] for g in grants} <= set(draws)  # only drawn trials are granted
    assert len({g["trial_id"] for g in grants}) == len(grants)
    for grant in grants:
        assert dominates(event_from_json(reference), event_from_json(grant["event"]))
    for decision in study.decisions:
        if not decision.granted:
            assert decision.reason.startswith(
                (REASON_TRIAL_COUNT, REASON_NOT_DOMINATED, REASON_INVALID, REASON_RERUN,
                 REASON_CHANGED, REASON_NOT_DRAWN)
            )
    # the cost was fixed when the study started; K is never stated
    assert study.budget.statement() == statement
    assert statement["epsilon"] <= study_settings.epsilon
    assert not {"trial_count", "trials_granted", "events"} & set(statement)
    # every drawn trial asked at once, so the search is over once K were drawn
    assert study.budget.can_grant() == (len(draws) < trial_count)
    assert _state(study.replay(study_settings)) == _state(study.budget)
    assert _state(study.replay()) == _state(study.budget)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    requests=REQUESTS,
    budget=st.floats(0.5, 40.0),
    tail=st.one_of(
        st.binary(max_size=60).filter(lambda b: b"\n" not in b),  # a torn write
        st.just(b"\x00\x00\x00\x00\n"),  # size extended, data never written
        st.integers(1, 200),  # a prefix of a real grant line, newline never written
    ),
    then=_gaussian,
)
def test_a_torn_ledger_tail_is_never_charged(tmp_path_factory, requests, budget, tail, then):
    """A crash mid-append leaves a torn last line: it was never acknowledged (the
    grant is returned only after the fsync), so the replay ignores it, and the next
    append overwrites it. The state is the acknowledged ledger's."""
    study_settings = _compose(budget)
    study = Study(tmp_path_factory.mktemp("study"), study_settings)
    _run(study, requests)
    if isinstance(tail, int):
        line = json.dumps({"kind": "grant", "trial_id": "torn", "event": _plan(0.5, None, 30),
                           "time": "now"}, sort_keys=True, separators=(",", ":")).encode()
        tail = line[: min(tail, len(line))]
    with open(study.ledger.path, "ab") as f:
        f.write(tail)
    assert _state(study.replay(study_settings)) == _state(study.budget)

    study.request("t9", then)  # the next append drops the torn tail first
    assert b"torn" not in study.ledger.path.read_bytes()
    assert _state(study.replay(study_settings)) == _state(study.budget)


@pytest.mark.parametrize(
    "line",
    [
        b'{"kind":"grant","trial_id":"x","event":{"type":"Nope"},"time":"now"}\n',
        b'{"kind":"grant","trial_id":"x","time":"now"}\n',
        b'{"kind":"grant","trial_id":"x","event":{"type":"GaussianDpEvent",'
        b'"noise_multiplier":-1.0}}\n',
        b'{"kind":"study","epsilon":1.0}\n',
        b'{"kind":"refund","trial_id":"t0"}\n',
    ],
)
def test_a_complete_line_that_cannot_be_replayed_stops_the_replay(tmp_path, line):
    """Fail closed: a durable line that is not a grant or refusal the core can price
    is damage, never skipped (a skipped grant would be budget forgotten)."""
    study = Study(tmp_path, _compose(10.0))
    study.request("t0", _plan(2.0, None, 3))
    with open(study.ledger.path, "ab") as f:
        f.write(line)
    with pytest.raises(ConfigError, match=r"ledger .*line 3"):
        study.replay()


def test_a_corrupt_middle_line_stops_the_replay(tmp_path):
    study = Study(tmp_path, _compose(10.0))
    for i in range(3):
        study.request(f"t{i}", _plan(4.0, None, 1))
    lines = study.ledger.path.read_bytes().split(b"\n")
    lines[2] = lines[2][:20]
    study.ledger.path.write_bytes(b"\n".join(lines))
    with pytest.raises(ConfigError, match="corrupt at line 3"):
        study.replay()


def test_a_ledger_without_its_header_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="empty"):
        StudyBudget.replay([], source="x")
    grant = {"kind": "grant", "trial_id": "t0", "event": _plan(1.0, None, 1)}
    with pytest.raises(ConfigError, match="does not start with a study header"):
        StudyBudget.replay([grant])
    with pytest.raises(ConfigError, match="does not start with a study header"):
        StudyBudget.replay([grant], settings=_compose(1.0))


# -- decisions (the accountant's request path) ------------------------------------


def test_refuses_at_exhaustion_with_a_clear_reason(tmp_path):
    plan = _plan(1.0, 0.05, 100)
    budget = _stated([event_from_json(plan)] * 2)  # exactly two copies fit
    study = Study(tmp_path, _compose(budget, trials=2))
    first = study.request("a", plan)
    assert first.granted and first.reason is None
    assert study.budget.spent_epsilon() == _stated([event_from_json(plan)])
    assert study.request("b", plan).granted
    third = study.request("c", plan)
    assert not third.granted
    assert third.reason.startswith(f"{REASON_BUDGET}: granting this plan")
    assert study.budget.spent_epsilon() == budget and study.budget.unspent_epsilon() == 0.0
    assert len(study.budget.grants) == 2 and study.budget.refused == {"c"}
    assert not study.budget.can_grant()
    assert not study.request("d", _plan(50.0, 0.001, 1)).granted  # nothing fits
    assert list(study.budget.grants) == ["a", "b"]


def test_idempotent_retries_charge_once(tmp_path):
    plan = _plan(1.0, 0.05, 100)
    study = Study(tmp_path, _compose(10.0))
    decisions = [study.request("t1", plan) for _ in range(4)]
    assert all(d.granted for d in decisions)
    assert [d.entry is None for d in decisions] == [False, True, True, True]
    changed = study.request("t1", _plan(0.9, 0.05, 100))
    assert not changed.granted and changed.reason.startswith(REASON_CHANGED)
    assert study.request("t1", plan).granted
    assert [e["trial_id"] for e in study.ledger.entries() if e["kind"] == "grant"] == ["t1"]
    assert len(study.budget.grants) == 1 and study.budget.refused == frozenset()
    assert study.budget.spent_epsilon() == _stated([event_from_json(plan)])


def test_a_granted_trial_is_never_rerun_under_another_attempt(tmp_path):
    plan = _plan(2.0, None, 5)
    study = Study(tmp_path, _compose(10.0))
    assert study.request("t1", plan, attempt="a1").granted
    assert study.request("t1", plan, attempt="a1").granted
    rerun = study.request("t1", plan, attempt="a2")
    assert not rerun.granted and rerun.reason.startswith(REASON_RERUN)
    rerun = study.replay().decide("t1", plan, attempt="a3")  # also after a restart
    assert not rerun.granted and rerun.reason.startswith(REASON_RERUN)
    assert study.budget.granted_events() == [plan]


def test_unsupported_or_garbage_plans_are_refused(tmp_path):
    study = Study(tmp_path, _compose(3.0))
    for i, event in enumerate([
        {"type": "Nope"},
        {"no": "type"},
        event_to_json(dpa.NonPrivateDpEvent()),
        {"type": "GaussianDpEvent", "noise_multiplier": math.nan},  # dp-accounting: eps 0
        {"type": "SelfComposedDpEvent", "event": _plan(1.0, None, 1), "count": -3},
    ]):
        decision = study.request(f"g{i}", event)
        assert not decision.granted and decision.reason
    with pytest.raises(ConfigError):
        study.budget.decide("", _plan(1.0, 0.05, 10))
    assert study.budget.grants == {} and study.budget.spent_epsilon() == 0.0
    assert study.budget.refused == {f"g{i}" for i in range(5)}


def test_a_decision_changes_nothing_until_recorded_and_only_on_its_state(tmp_path):
    study = Study(tmp_path, _compose(10.0))
    budget = study.budget
    first = budget.decide("t0", _plan(2.0, None, 3))
    second = budget.decide("t1", _plan(2.0, None, 3))
    assert first.granted and second.granted
    assert budget.grants == {} and budget.spent_epsilon() == 0.0  # decide is pure
    budget.record(first)
    with pytest.raises(ValueError, match="older state"):
        budget.record(second)  # priced without t0's grant: it would undercount
    assert list(budget.grants) == ["t0"]


def test_random_stopping(tmp_path):
    reference = _plan(1.0, 0.02, 200)
    study_settings = _random_stopping(reference, trials=2, distribution="geometric")
    expected = epsilon_of(
        dp_event.RepeatAndSelectDpEvent(event_from_json(reference), 2.0, 1.0), delta=DELTA
    )
    study = Study(tmp_path, study_settings)
    statement = study.budget.statement()
    assert statement["epsilon"] == pytest.approx(expected, rel=1e-12)
    assert statement["mode"] == "random-stopping"
    assert statement["distribution"] == "geometric" and statement["mean_trials"] == 2
    assert statement["reference_event"] == reference
    assert statement["budget_epsilon"] == 2 * expected

    k = study.ledger.entries()[0]["trial_count"]  # drawn from OS entropy
    assert isinstance(k, int) and k >= 1 and study.budget.trial_count == k
    decisions = [study.request(f"t{i}", _plan(1.2, 0.02, 150), draw=True) for i in range(k)]
    assert all(d.granted for d in decisions)
    assert not study.budget.can_grant() and not study.draw("late")
    last = study.request("late", reference)
    assert not last.granted and last.reason == REASON_TRIAL_COUNT

    (tmp_path / "k3").mkdir()
    study = Study(tmp_path / "k3", study_settings, trial_count=3)
    less_noise = study.request("x1", _plan(0.9, 0.02, 200), draw=True)
    assert not less_noise.granted and less_noise.reason.startswith(REASON_NOT_DOMINATED)
    assert not study.request("x2", _plan(1.0, 0.02, 201), draw=True).granted  # more steps
    assert study.budget.can_grant()  # two of the three runs output nothing
    assert study.request("t0", reference, draw=True).granted
    assert not study.budget.can_grant()  # x1, x2 and t0 are the K = 3 runs
    assert study.budget.statement() == statement  # the cost was fixed at the start
    assert not {"trial_count", "trials_granted", "events"} & set(statement)
    assert _state(study.replay()) == _state(study.budget)


def test_random_stopping_grants_the_first_k_draws_whatever_order_they_ask_in(tmp_path):
    """Packed trials ask in an order their configurations set (a slower plan asks
    later): the K runs must be the first K draws, not the first K to ask."""
    reference = _plan(1.0, 0.02, 200)
    study = Study(tmp_path, _random_stopping(reference), trial_count=3)
    assert [study.draw(t) for t in ("a", "b", "c", "d")] == [True, True, True, False]
    assert study.draw("b")  # drawn already: idempotent, nothing recorded
    assert [e["trial_id"] for e in study.ledger.entries() if e["kind"] == "draw"] == ["a", "b", "c"]
    late = study.request("d", reference)  # the fourth proposal asks first
    assert not late.granted and late.reason.startswith(REASON_NOT_DRAWN)
    assert [study.request(t, reference).granted for t in ("c", "b")] == [True, True]
    assert study.budget.can_grant()  # "a" has not asked yet
    assert study.request("a", reference).granted
    assert not study.budget.can_grant() and list(study.budget.grants) == ["c", "b", "a"]
    assert _state(study.replay()) == _state(study.budget)


def test_a_draw_that_never_asks_is_taken_back_on_resume(tmp_path):
    """A trial drawn before an interruption that never asked for its grant read
    nothing: ``--resume`` takes the draw back and the search draws afresh; if the old
    trial is restored and asks, it is refused. A ledger line is replayed as it was."""
    reference = _plan(1.0, 0.02, 200)
    study = Study(tmp_path, _random_stopping(reference), trial_count=2)
    assert study.draw("a") and study.draw("b") and not study.draw("c")
    assert study.request("a", reference).granted
    assert study.budget.can_grant() and not study.draw("c")  # "b" is still out
    assert study.budget.draws_pending()
    assert study.undraw(keep=("b",)) == []  # Tune's restore resumes "b": it keeps its draw
    assert study.undraw() == ["b"] and study.undraw() == []
    assert not study.budget.draws_pending()
    assert _state(study.replay()) == _state(study.budget)
    assert study.draw("c")
    restored = study.request("b", reference)
    assert not restored.granted and restored.reason.startswith(REASON_NOT_DRAWN)
    assert study.request("c", reference).granted
    assert not study.budget.can_grant() and list(study.budget.grants) == ["a", "c"]
    assert study.undraw(["x"]) == []  # only undecided draws are taken back
    assert _state(study.replay()) == _state(study.budget)


def test_a_ledger_from_before_draws_grants_the_first_k_to_ask(tmp_path):
    """A random-stopping ledger written before draws were recorded resumes as it ran:
    no draw is recorded, and a draw entry in it cannot be replayed."""
    reference = _plan(1.0, 0.02, 200)
    study_settings = _random_stopping(reference)
    ledger = Ledger(tmp_path / LEDGER_NAME)
    header = {k: v for k, v in new_study_header(study_settings, name="old").items()
              if k != "draw_order"} | {"trial_count": 1}
    ledger.append(header, create=True)
    budget = StudyBudget(study_settings, header)
    assert budget.draws is None and budget.decide_draw("a") == (True, None)
    decision = budget.decide("a", reference)
    budget.record(decision)
    assert decision.granted and budget.decide_draw("b") == (False, None)
    with pytest.raises(ConfigError, match="line 2: unexpected entry kind 'draw'"):
        StudyBudget.replay([header, {"kind": "draw", "trial_id": "a"}])
    with pytest.raises(ConfigError, match="line 2: draw entry without its trial"):
        StudyBudget.replay([new_study_header(study_settings, name="new"), {"kind": "draw"}])


def test_compose_records_no_draws(tmp_path):
    study = Study(tmp_path, _compose(1.0))
    assert study.draw("a") and study.budget.draws is None
    assert [e["kind"] for e in study.ledger.entries()] == ["study"]


_BASE = {"epsilon": 1.0, "delta": DELTA, "mode": "compose", "trials": 10}


@pytest.mark.parametrize(
    "bad",
    [
        {"epsilon": 0.0},
        {"epsilon": float("inf")},
        {"epsilon": True},
        {"delta": 0.0},
        {"delta": 1.0},
        {"trials": 0},
        {"trials": 2.5},
        {"mode": "sum"},
        {"mode": "random-stopping"},  # no reference plan
        {"mode": "random-stopping", "reference_event": {"type": "Nope"}},
        {"mode": "random-stopping", "distribution": "binomial",
         "reference_event": _plan(1, 0.1, 9)},
        # the reference plan alone costs more than the budget
        {"mode": "random-stopping", "reference_event": _plan(0.5, 0.1, 1000)},
    ],
)
def test_settings_are_validated(bad):
    with pytest.raises(ConfigError):
        StudySettings(**(_BASE | bad))


def test_a_header_of_other_settings_is_refused(tmp_path):
    study = Study(tmp_path, _compose(10.0))
    study.request("t0", _plan(2.0, None, 1))
    entries = study.ledger.entries()
    with pytest.raises(ConfigError, match=r"belongs to another study.*new study name.*resume the study"):
        StudyBudget.replay(entries, settings=_compose(11.0))
    with pytest.raises(ConfigError, match="trials"):
        StudyBudget.replay(entries, settings=_compose(10.0, trials=11))
    with pytest.raises(ConfigError, match="started with mode='compose'"):
        StudyBudget.replay(entries, settings=StudySettings(
            epsilon=10.0, delta=DELTA, mode="random-stopping", trials=10,
            reference_event=_plan(2.0, 0.01, 50)))
    assert len(StudyBudget.replay(entries, settings=_compose(10.0)).grants) == 1
