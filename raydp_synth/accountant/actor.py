"""The study's budget accountant: one named, detached Ray actor with a durable ledger.

Every trial asks the accountant for its plan (a serialised ``DpEvent``) *before* it
reads sensitive data (docs/architecture.md, invariant 2); a refused trial reads nothing. The
accountant prices the plan itself from the event, never from an epsilon that a trial
sends, records each grant in the ledger (fsync'd) before returning it, and states the
guarantee of the whole search from the ledger (docs/architecture.md, invariant 7).

Privacy argument, by mode (docs/budget-pricing.md, section 6):

* ``compose``: the study's output is the adaptive composition of every granted
  plan; RDP composes additively at every order, also when a later plan is chosen
  from earlier DP outputs (Mironov 2017, Prop. 1). A plan is granted only if the
  composition of all grants plus this plan is within the budget, so the stated
  total never exceeds the budget. Composition only grows (RDP is non-negative), so
  a refused plan could not have fit later either.
* ``random-stopping``: Papernot & Steinke (ICLR 2022), Theorems 2 and 6. The
  number of trials K is drawn here, once, from OS entropy, when the study is
  created and so before any trial touches data: K must be independent of the data
  and of every trial's output, and unknown to anyone who sees the release, which is
  why it is drawn from ``secrets`` (not from a user seed), stored only in the
  curator-only ledger, and never put into :meth:`BudgetAccountant.statement`. Every
  granted plan must be dominated by the study's reference plan E_ref at every RDP
  order; the whole study then costs ``RepeatAndSelectDpEvent(E_ref, mean, shape)``.
  A granted trial counts as one of the K runs even if it crashes (score -inf).

Never refund: a granted plan counts in full even if its trial crashes, is pruned or
stops early. Whatever the trial released before stopping (metrics, checkpoints, its
score) may depend on any part of its plan, and in random-stopping mode "refunding"
a run would change the distribution of K that the theorem assumes.

Atomicity: Ray runs the calls of a (non-async) actor one at a time (the default
``max_concurrency=1``), so "price against the current state, then append" is atomic
without locks. Keep it that way: never give this class an ``async def`` method
(that makes Ray run calls concurrently) and never raise ``max_concurrency``.
Every call is idempotent (requests are keyed by trial id), so Ray may retry a call
after the actor crashed (``max_task_retries=-1``) without double-charging.

Fail closed: a grant that cannot be made durable (full disk, unwritable ledger,
storage gone) is refused (:data:`REASON_LEDGER`), the in-memory state is left as it
was, and :meth:`BudgetAccountant.status` reports ``can_grant=False`` with the
``ledger_error`` until an append succeeds again, so the search stops instead of
spending budget that the ledger would forget.
"""

from __future__ import annotations

import copy
import math
import numbers
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from typing import Any

import dp_accounting as dpa
import numpy as np
import ray
from dp_accounting.rdp import RdpAccountant
from ray.util.metrics import Gauge

from raydp_synth.accountant.ledger import Ledger
from raydp_synth.accountant.pricing import (
    dominates,
    draw_trial_count,
    parse_distribution,
    random_stopping_epsilon,
)
from raydp_synth.errors import ConfigError, LedgerError, PrivacyInvariantError
from raydp_synth.privacy.events import event_from_json, event_to_json

__all__ = [
    "LEDGER_NAME",
    "MODES",
    "NAMESPACE",
    "REASON_BUDGET",
    "REASON_CHANGED",
    "REASON_RERUN",
    "REASON_INVALID",
    "REASON_LEDGER",
    "REASON_NOT_DOMINATED",
    "REASON_TRIAL_COUNT",
    "BudgetAccountant",
    "StudySettings",
    "actor_name",
    "check_ledger",
    "get_accountant",
    "get_or_create_accountant",
]

#: The ledger's file name inside the study directory.
LEDGER_NAME = "ledger.jsonl"
#: The Ray namespace of every accountant actor.
NAMESPACE = "raydp_synth"
MODES = ("compose", "random-stopping")
_LEDGER_FORMAT = 1

#: Reasons of refusals (the start of ``reason``; the rest says what was asked).
REASON_BUDGET = "budget exhausted"
REASON_TRIAL_COUNT = "the study's trial count is reached"
REASON_NOT_DOMINATED = "plan is not dominated by the study's reference plan"
REASON_INVALID = "not a valid plan"
REASON_CHANGED = "plan differs from the one already granted to this trial"
REASON_RERUN = "trial already ran"
REASON_LEDGER = "the ledger cannot be written"


def actor_name(name: str) -> str:
    """The Ray actor name of study ``name``'s accountant."""
    return f"accountant-{name}"


def _reconstructed() -> bool:
    """Whether this runs in a Ray actor that Ray restarted after a crash."""
    if not ray.is_initialized():
        return False
    context = ray.get_runtime_context()
    return context.get_actor_id() is not None and context.was_current_actor_reconstructed


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


@dataclass(frozen=True, kw_only=True)
class StudySettings:
    """What a study's accountant prices with; validated on construction.

    Attributes:
        epsilon: the study's total budget (finite, > 0).
        delta: the delta of every statement (0 < delta < 1).
        mode: ``"compose"`` or ``"random-stopping"``.
        trials: the planned number of trials N_max (compose) or the mean E[K]
            (random-stopping); >= 1.
        distribution: the distribution of K (random-stopping only; see
            :func:`~raydp_synth.accountant.pricing.parse_distribution`).
        reference_event: E_ref as ``event_to_json`` data (required in
            random-stopping mode), stored in canonical form.
    """

    epsilon: float
    delta: float
    mode: str
    trials: int
    distribution: str = "poisson"
    reference_event: dict[str, Any] | None = field(default=None)

    def __post_init__(self) -> None:
        if (
            isinstance(self.epsilon, bool)
            or not isinstance(self.epsilon, (int, float))
            or not (math.isfinite(self.epsilon) and self.epsilon > 0)
        ):
            raise ConfigError(f"the study's epsilon {self.epsilon!r} must be a finite number > 0")
        if (
            isinstance(self.delta, bool)
            or not isinstance(self.delta, (int, float))
            or not (0 < self.delta < 1)
        ):
            raise ConfigError(f"the study's delta {self.delta!r} must satisfy 0 < delta < 1")
        if self.mode not in MODES:
            raise ConfigError(f"the pricing mode {self.mode!r} must be one of {', '.join(MODES)}")
        if (
            isinstance(self.trials, bool)
            or not isinstance(self.trials, numbers.Integral)
            or self.trials < 1
        ):
            raise ConfigError(
                f"the study's number of trials {self.trials!r} must be an integer >= 1")
        object.__setattr__(self, "trials", int(self.trials))
        object.__setattr__(self, "epsilon", float(self.epsilon))
        object.__setattr__(self, "delta", float(self.delta))
        if self.reference_event is not None:
            try:
                canonical = event_to_json(event_from_json(self.reference_event))
            except (ConfigError, KeyError, TypeError, ValueError) as exc:
                raise ConfigError(f"the study's reference plan is not a DpEvent: {exc}") from exc
            object.__setattr__(self, "reference_event", canonical)
        if self.mode == "random-stopping":
            parse_distribution(self.distribution)
            object.__setattr__(self, "distribution", self.distribution.strip().lower())
            if self.reference_event is None:
                raise ConfigError(
                    "random-stopping pricing needs the study's reference plan "
                    "(reference_event): every trial is checked against it"
                )
            cost = self.random_stopping_epsilon()
            if not cost <= self.epsilon:
                raise ConfigError(
                    f"the reference plan repeated {self.trials} times on average "
                    f"({self.distribution}) costs epsilon={cost:.4g} > the study's epsilon "
                    f"{self.epsilon:g}: calibrate the reference plan to this budget"
                )

    @property
    def shape(self) -> float:
        return parse_distribution(self.distribution)

    def reference(self) -> dpa.DpEvent:
        if self.reference_event is None:
            raise ConfigError("this study has no reference plan")
        return event_from_json(self.reference_event)

    def random_stopping_epsilon(self) -> float:
        """Epsilon of ``RepeatAndSelectDpEvent(E_ref, trials, shape)`` at ``delta``."""
        return random_stopping_epsilon(
            self.reference(), mean=self.trials, shape=self.shape, delta=self.delta
        )

    def header_fields(self) -> dict[str, Any]:
        """The settings as the ledger header stores (and compares) them."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "mode": self.mode,
            "trials": self.trials,
            "distribution": self.distribution if self.mode == "random-stopping" else None,
            "reference_event": self.reference_event,
        }

    def check_header(self, header: dict[str, Any], *, path: Path) -> None:
        """Raise unless ``header`` (a ledger's first entry) was written for these settings."""
        if header.get("kind") != "study":
            raise ConfigError(
                f"ledger {path} does not start with a study header; it is not a raydp_synth "
                "ledger, or it is damaged: use a new study directory"
            )
        ours = self.header_fields()
        for key, value in ours.items():
            theirs = header.get(key)
            if key == "distribution" and value is not None and theirs is not None:
                same = parse_distribution(str(theirs)) == parse_distribution(value)
            else:
                same = theirs == value
            if not same:
                raise ConfigError(
                    f"the ledger {path} belongs to another study: it was started with "
                    f"{key}={theirs!r}, this run asks for {key}={value!r}. Start a new study "
                    "under a new study name (a new study directory), or resume the study with "
                    "the same settings as the ledger's"
                )
        if self.mode == "random-stopping" and not isinstance(header.get("trial_count"), int):
            raise ConfigError(f"ledger {path}: the random-stopping header has no trial count")


def check_ledger(study_dir: str | Path, settings: StudySettings) -> None:
    """Check, without Ray, that an existing ledger in ``study_dir`` matches ``settings``."""
    path = Path(study_dir) / LEDGER_NAME
    entries = Ledger(path).entries()
    if entries:
        settings.check_header(entries[0], path=path)


class BudgetAccountant:
    """Grants or refuses trials' plans under one study budget; states the total.

    Run it as a detached Ray actor through :func:`get_or_create_accountant` (one per
    study, named ``accountant-<name>``). Calls run one at a time (Ray's default
    ``max_concurrency=1`` for a non-async actor): that is what makes
    check-then-append atomic; do not add ``async`` methods or raise the concurrency.

    Args:
        study_dir: the study's directory (shared storage on a cluster); the ledger
            is ``study_dir/ledger.jsonl``. If it exists, the state is rebuilt from it.
        epsilon, delta, mode, trials, distribution, reference_event: the study's
            settings (:class:`StudySettings`); events as ``event_to_json`` dicts.
        name: the study's name, used as the metrics' ``study`` tag (default: the
            directory's name).

    Raises:
        ConfigError: invalid settings, or a ledger written for other settings.
    """

    def __init__(
        self,
        study_dir: str,
        *,
        epsilon: float,
        delta: float,
        mode: str,
        trials: int,
        distribution: str = "poisson",
        reference_event: dict[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        self._settings = StudySettings(
            epsilon=epsilon,
            delta=delta,
            mode=mode,
            trials=trials,
            distribution=distribution,
            reference_event=reference_event,
        )
        self._dir = Path(study_dir)
        self._name = name or self._dir.name
        self._ledger = Ledger(self._dir / LEDGER_NAME)
        self._rdp = RdpAccountant()  # compose mode: every grant, in ledger order
        self._grants: dict[str, dict[str, Any]] = {}
        self._refused: set[str] = set()
        self._ledger_error: str | None = None
        self._reference = (
            self._settings.reference() if self._settings.reference_event is not None else None
        )
        self._random_stopping_epsilon = (
            self._settings.random_stopping_epsilon()
            if self._settings.mode == "random-stopping"
            else None
        )

        entries = self._ledger.entries()
        if not entries and _reconstructed():
            # Ray restarted this actor after a crash, so its ledger existed: a missing
            # one means vanished storage. Starting afresh would forget every grant.
            raise LedgerError(
                f"{REASON_LEDGER}: {self._ledger.path} is gone (storage deleted or "
                "unmounted?) after a restart of the accountant; nothing is granted: bring "
                "the study directory back, then resume the study"
            )
        if entries:
            header = entries[0]
            self._settings.check_header(header, path=self._ledger.path)
        else:
            header = {"kind": "study", "format": _LEDGER_FORMAT, **self._settings.header_fields()}
            header.update(name=self._name, time=_now(), dp_accounting=version("dp-accounting"))
            if self._settings.mode == "random-stopping":
                # OS entropy, not a seed: K must be unpredictable and independent of the data.
                rng = np.random.default_rng(secrets.randbits(128))
                header["trial_count"] = draw_trial_count(
                    self._settings.distribution, self._settings.trials, rng
                )
            try:
                self._ledger.append(header, create=True)
            except OSError as exc:
                raise ConfigError(self._ledger_message(exc, granted=False)) from exc
        self._trial_count: int | None = header.get("trial_count")
        for number, entry in enumerate(entries[1:], start=2):
            self._replay(entry, number)

        tags = ("study",)
        self._gauges = {
            "spent": Gauge("raydp_synth_epsilon_spent", "Epsilon of the study so far", tags),
            "remaining": Gauge(
                "raydp_synth_epsilon_remaining", "Budget epsilon minus spent epsilon", tags
            ),
            "granted": Gauge("raydp_synth_trials_granted", "Trials whose plan was granted", tags),
            "refused": Gauge(
                "raydp_synth_trials_refused", "Trials refused and never granted", tags
            ),
        }
        self._publish()

    # -- state -------------------------------------------------------------------

    def _replay(self, entry: dict[str, Any], number: int) -> None:
        kind = entry.get("kind")
        trial_id = entry.get("trial_id")
        if kind == "grant":
            try:
                event = event_from_json(entry["event"])
            except (ConfigError, KeyError, TypeError, ValueError) as exc:
                raise ConfigError(
                    f"ledger {self._ledger.path}, line {number}: grant with an unreadable "
                    f"event ({exc}); restore the ledger from a backup"
                ) from exc
            if self._settings.mode == "compose":
                # Every grant line is charged, even a (never expected) duplicate.
                self._rdp.compose(event)
            self._grants.setdefault(str(trial_id), entry)
            self._refused.discard(str(trial_id))
        elif kind == "refusal":
            if trial_id not in self._grants:
                self._refused.add(str(trial_id))
        else:
            raise ConfigError(
                f"ledger {self._ledger.path}, line {number}: unexpected entry kind {kind!r}; "
                "a ledger holds one study: use a new study directory"
            )

    def _spent(self) -> float:
        if self._settings.mode == "random-stopping":
            if self._random_stopping_epsilon is None:
                raise PrivacyInvariantError("a random-stopping accountant without its price")
            return self._random_stopping_epsilon
        return float(self._rdp.get_epsilon(self._settings.delta)) if self._grants else 0.0

    def _can_grant(self) -> bool:
        if self._ledger_error is not None:
            return False
        if self._settings.mode == "random-stopping":
            if self._trial_count is None:
                raise PrivacyInvariantError("a random-stopping accountant without its trial count")
            return len(self._grants) < self._trial_count
        return self._spent() < self._settings.epsilon

    def _publish(self) -> None:
        spent = self._spent()
        tags = {"study": self._name}
        self._gauges["spent"].set(spent, tags=tags)
        self._gauges["remaining"].set(max(0.0, self._settings.epsilon - spent), tags=tags)
        self._gauges["granted"].set(len(self._grants), tags=tags)
        self._gauges["refused"].set(len(self._refused), tags=tags)

    def _response(self, trial_id: str, granted: bool, reason: str | None) -> dict[str, Any]:
        return {
            "granted": granted,
            "reason": reason,
            "trial_id": trial_id,
            "spent_epsilon": self._spent(),
        }

    def _ledger_message(self, exc: OSError, *, granted: bool = True) -> str:
        what = "nothing was granted" if granted else "the study cannot start"
        return (
            f"{REASON_LEDGER}: {self._ledger.path}: {exc.strerror or exc} ({what}; free "
            f"disk space or fix the permissions of {self._dir}, then resume the study)"
        )

    def _append(self, entry: dict[str, Any]) -> None:
        """Append to the ledger; remember (and re-raise) a failure, forget it on success."""
        try:
            self._ledger.append(entry)
        except OSError as exc:
            self._ledger_error = self._ledger_message(exc)
            self._publish()
            raise
        self._ledger_error = None

    def _refuse(
        self, trial_id: str, reason: str, event_json: dict[str, Any] | None
    ) -> dict[str, Any]:
        entry: dict[str, Any] = {"kind": "refusal", "trial_id": trial_id, "reason": reason}
        if event_json is not None:
            entry["event"] = event_json
        entry["time"] = _now()
        try:
            self._append(entry)
        except OSError:
            pass  # a refusal spends nothing: answering it without a record is safe
        if trial_id not in self._grants:
            self._refused.add(trial_id)
        self._publish()
        return self._response(trial_id, False, reason)

    def _grant(
        self, trial_id: str, event_json: dict[str, Any], composed: Any, attempt: str | None
    ) -> dict[str, Any]:
        entry = {"kind": "grant", "trial_id": trial_id, "event": event_json, "time": _now()}
        if attempt is not None:
            entry["attempt"] = attempt
        try:
            self._append(entry)  # durable before anyone learns of the grant
        except OSError as exc:
            # Fail closed: the grant is not made, the state is left as it was.
            if self._ledger_error is None:
                raise PrivacyInvariantError("a failed ledger append left no ledger error") from exc
            return self._response(trial_id, False, self._ledger_error)
        self._rdp = composed
        self._grants[trial_id] = entry
        self._refused.discard(trial_id)
        self._publish()
        return self._response(trial_id, True, None)

    # -- public API --------------------------------------------------------------

    def request(
        self, trial_id: str, event: dict[str, Any], attempt: str | None = None
    ) -> dict[str, Any]:
        """Grant or refuse a trial's plan, before the trial touches data.

        Idempotent by ``(trial_id, attempt)``: a retried call (Ray retries calls after
        an actor crash) gets the same grant again, without a second charge. A trial
        that was granted under another ``attempt`` is refused: a rerun would release
        its mechanisms a second time under one grant. The cost is recomputed from
        ``event``; no epsilon sent by the trial is trusted.

        Args:
            trial_id: the trial's unique id (a non-empty string).
            event: the trial's whole plan, ``event_to_json(plan.event())``.
            attempt: a fresh random nonce per execution of the trial (None: the
                caller promises a trial id is never executed twice).

        Returns:
            ``{"granted", "reason" (None if granted), "trial_id", "spent_epsilon"}``,
            ``spent_epsilon`` being the study's total as :meth:`statement` prices it.

        Raises:
            ConfigError: ``trial_id`` is not a non-empty string.
        """
        if not isinstance(trial_id, str) or not trial_id:
            raise ConfigError(f"Expected trial_id={trial_id!r} to be a non-empty string.")
        try:
            plan = event_from_json(event)
            event_json = event_to_json(plan)
        except (ConfigError, KeyError, TypeError, ValueError) as exc:
            return self._refuse(trial_id, f"{REASON_INVALID}: {exc}", None)

        prior = self._grants.get(trial_id)
        if prior is not None:
            if prior.get("attempt") != attempt:
                return self._refuse(
                    trial_id,
                    f"{REASON_RERUN}: trial {trial_id} was granted to another attempt; a "
                    "granted trial is never rerun (its grant stays spent)",
                    event_json,
                )
            if prior["event"] == event_json:
                return self._response(trial_id, True, None)
            return self._refuse(
                trial_id,
                f"{REASON_CHANGED}: a trial's plan cannot change after its grant; "
                "give the new plan a new trial id",
                event_json,
            )

        if self._settings.mode == "compose":
            composed = copy.deepcopy(self._rdp)
            try:
                composed.compose(plan)
            except dpa.UnsupportedEventError as exc:
                return self._refuse(
                    trial_id, f"{REASON_INVALID}: RDP cannot price it ({exc})", event_json
                )
            total = float(composed.get_epsilon(self._settings.delta))
            if not total <= self._settings.epsilon:  # NaN-safe: NaN is refused
                return self._refuse(
                    trial_id,
                    f"{REASON_BUDGET}: granting this plan would bring the study to "
                    f"epsilon={total:.6g} > budget {self._settings.epsilon:g} "
                    f"(spent so far {self._spent():.6g}, at delta={self._settings.delta:g})",
                    event_json,
                )
            return self._grant(trial_id, event_json, composed, attempt)

        if self._trial_count is None or self._reference is None:
            raise PrivacyInvariantError(
                "a random-stopping accountant without its trial count or reference plan")
        if len(self._grants) >= self._trial_count:
            return self._refuse(trial_id, REASON_TRIAL_COUNT, event_json)
        try:
            covered = dominates(self._reference, plan)
        except dpa.UnsupportedEventError as exc:
            return self._refuse(
                trial_id, f"{REASON_INVALID}: RDP cannot price it ({exc})", event_json
            )
        if not covered:
            return self._refuse(
                trial_id,
                f"{REASON_NOT_DOMINATED} at every RDP order: calibrate the trial against "
                "the reference plan (more noise, fewer steps or a lower sample rate)",
                event_json,
            )
        return self._grant(trial_id, event_json, self._rdp, attempt)

    def granted_events(self) -> list[dict[str, Any]]:
        """The granted plans' events (``event_to_json``), in grant order: a compose
        study sizes the next trial's plan against them."""
        return [g["event"] for g in self._grants.values()]

    def statement(self) -> dict[str, Any]:
        """The guarantee of the whole study, priced from the ledger by dp-accounting.

        compose: the RDP composition of every grant. random-stopping: the epsilon of
        ``RepeatAndSelectDpEvent(E_ref, mean=trials, shape)``; never K itself, nor
        the number of trials run (which is K once the study is finished).
        """
        s = self._settings
        common = {
            "mode": s.mode,
            "epsilon": self._spent(),
            "delta": s.delta,
            "budget_epsilon": s.epsilon,
            "accountant": "dp_accounting.rdp.RdpAccountant (add-or-remove-one, default orders)",
            "dp_accounting": version("dp-accounting"),
        }
        if s.mode == "compose":
            return {
                **common,
                "trials_granted": len(self._grants),
                "events": [g["event"] for g in self._grants.values()],
            }
        return {
            **common,
            "distribution": s.distribution,
            "mean_trials": s.trials,
            "reference_event": s.reference_event,
            "theorem": "Papernot & Steinke, ICLR 2022 (RepeatAndSelectDpEvent)",
        }

    def status(self) -> dict[str, Any]:
        """Curator-facing progress: spent and remaining epsilon, trials granted/refused.

        ``can_grant``: random-stopping: whether the (internal) trial count K still
        allows a grant; compose: whether any budget is left at all (a given plan may
        still not fit); False in both while the ledger cannot be written.
        ``ledger_error``: why the last append to the ledger failed (None if it
        succeeded).
        """
        spent = self._spent()
        return {
            "study": self._name,
            "mode": self._settings.mode,
            "budget_epsilon": self._settings.epsilon,
            "delta": self._settings.delta,
            "spent_epsilon": spent,
            "remaining_epsilon": max(0.0, self._settings.epsilon - spent),
            "trials_granted": len(self._grants),
            "trials_refused": len(self._refused),
            "can_grant": self._can_grant(),
            "ledger_error": self._ledger_error,
        }

    def check_settings(self, study_dir: str, **settings: Any) -> None:
        """Raise ConfigError unless this accountant runs ``study_dir`` with ``settings``.

        :func:`get_or_create_accountant` calls it: ``get_if_exists`` returns a live
        actor without looking at the arguments it was asked to start with.
        """
        if Path(study_dir).resolve() != self._dir.resolve():
            raise ConfigError(
                f"the accountant {actor_name(self._name)!r} runs the study in {self._dir}, "
                f"not {study_dir}: use another study name"
            )
        StudySettings(**settings).check_header(
            self._settings.header_fields() | {"kind": "study", "trial_count": self._trial_count},
            path=self._ledger.path,
        )

    def ledger_path(self) -> str:
        return str(self._ledger.path)


def get_or_create_accountant(study_dir: str | Path, name: str, **settings: Any) -> Any:
    """The study's accountant actor: the running one, or a new (detached) one.

    The actor is named ``accountant-<name>`` in namespace ``raydp_synth``, detached
    (it outlives the driver), restarted without limit after a crash
    (``max_restarts=-1``) with in-flight calls retried (``max_task_retries=-1``;
    calls are idempotent), and needs no CPU (``num_cpus=0``), so that it can always
    be (re)scheduled even when trials hold every CPU.

    Args:
        study_dir: the study directory (on storage every node can reach).
        name: the study's name.
        **settings: :class:`BudgetAccountant`'s keyword settings.

    Raises:
        ConfigError: invalid settings, a ledger or a running accountant of
            another study under this name.
    """
    if not isinstance(name, str) or not name or "/" in name:
        raise ConfigError(f"the study name {name!r} must be a non-empty string without '/'")
    study_dir = str(Path(study_dir).resolve())
    check_ledger(study_dir, StudySettings(**settings))  # clear errors before Ray
    handle: Any = (
        ray.remote(BudgetAccountant)
        .options(
            name=actor_name(name),
            namespace=NAMESPACE,
            lifetime="detached",
            max_restarts=-1,
            max_task_retries=-1,
            get_if_exists=True,
            num_cpus=0,
        )
        .remote(study_dir, name=name, **settings)
    )
    try:
        ray.get(handle.check_settings.remote(study_dir, **settings))
    except ray.exceptions.RayActorError as exc:
        if exc.actor_init_failed:
            raise ConfigError(
                f"the budget accountant of study {name!r} failed to start: {exc}"
            ) from exc
        raise
    return handle


def get_accountant(name: str) -> Any:
    """The running accountant of study ``name``.

    Raises:
        ConfigError: no such accountant is running.
    """
    try:
        return ray.get_actor(actor_name(name), namespace=NAMESPACE)
    except ValueError as exc:
        raise ConfigError(
            f"no budget accountant for study {name!r} is running: start the study, or "
            "resume it with its settings"
        ) from exc
