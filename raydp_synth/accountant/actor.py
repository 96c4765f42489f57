"""The study's budget accountant: one named, detached Ray actor with a durable ledger.

Every trial asks the accountant for its plan (a serialised ``DpEvent``) *before* it
reads sensitive data; a refused trial reads nothing. The accountant prices the plan
itself from the event, never from an epsilon that a trial sends, records each grant
in the ledger (fsync'd) before returning it, and states the guarantee of the whole
search from the ledger.

The decisions and the privacy argument are :mod:`raydp_synth.accountant.core`'s
(:class:`~raydp_synth.accountant.core.StudyBudget`, Ray-free). This actor holds one
``StudyBudget``, rebuilt from the ledger when it starts or restarts, appends every
decision to the ledger before anyone learns of it, and publishes the gauges.

Atomicity: Ray runs the calls of a (non-async) actor one at a time (the default
``max_concurrency=1``), so "decide against the current state, append, record" is
atomic without locks. Keep it that way: never give this class an ``async def``
method (that makes Ray run calls concurrently) and never raise ``max_concurrency``.
The one other thread, the gauges' (:class:`~raydp_synth.accountant.gauges.HeldGauges`),
only sets again the numbers the call thread published; it never reads the budget.
Every call is idempotent (requests are keyed by trial id), so Ray may retry a call
after the actor crashed (``max_task_retries=-1``) without double-charging.

Fail closed: a grant that cannot be made durable (full disk, unwritable ledger,
storage gone) is refused (:data:`REASON_LEDGER`), the budget's state is left as it
was, and :meth:`BudgetAccountant.status` reports ``can_grant=False`` with the
``ledger_error`` until an append succeeds again, so the search stops instead of
spending budget that the ledger would forget. A restarted accountant whose ledger
is gone refuses to start (it would forget every grant).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ray
from dp_accounting import dp_event

from raydp_synth.accountant.core import (
    LEDGER_NAME,
    StudyBudget,
    StudySettings,
    check_ledger,
    new_study_header,
)
from raydp_synth.accountant.gauges import (
    STUDY_TAG,
    HeldGauges,
    budget_gauges,
    release_values,
    running_values,
)
from raydp_synth.accountant.ledger import Ledger
from raydp_synth.errors import ConfigError, LedgerError, PrivacyInvariantError
from raydp_synth.privacy.events import event_to_json

__all__ = [
    "ENDED_BEFORE_ASKING",
    "LEDGER_NAME",
    "NAMESPACE",
    "REASON_LEDGER",
    "BudgetAccountant",
    "StudySettings",
    "actor_name",
    "check_ledger",
    "get_accountant",
    "get_or_create_accountant",
]

#: The ``attempt`` of the no-op grant a DP-HyPO draw gets when its trial ended before
#: it asked (:meth:`BudgetAccountant.undraw` with ``as_no_ops``).
ENDED_BEFORE_ASKING = "ended-before-asking"

#: The Ray namespace of every accountant actor.
NAMESPACE = "raydp_synth"

#: The reason of a grant refused because the ledger cannot be written.
REASON_LEDGER = "the ledger cannot be written"


def actor_name(name: str) -> str:
    """The Ray actor name of study ``name``'s accountant."""
    return f"accountant-{name}"


def _reconstructed() -> bool:
    """Whether this runs in a Ray actor that Ray restarted after a crash."""
    if not ray.is_initialized():
        return False
    import warnings

    context = ray.get_runtime_context()
    with warnings.catch_warnings():  # Ray's own property reads its deprecated actor_id
        warnings.simplefilter("ignore", DeprecationWarning)
        return context.get_actor_id() is not None and context.was_current_actor_reconstructed


class BudgetAccountant:
    """Grants or refuses trials' plans under one study budget; states the total.

    Run it as a detached Ray actor through :func:`get_or_create_accountant` (one per
    study, named ``accountant-<name>``). Calls run one at a time (Ray's default
    ``max_concurrency=1`` for a non-async actor): that is what makes
    decide-append-record atomic; do not add ``async`` methods or raise the concurrency.

    Args:
        study_dir: the study's directory (shared storage on a cluster); the ledger
            is ``study_dir/ledger.jsonl``. If it exists, the state is rebuilt from it.
        epsilon, delta, mode, trials, distribution, reference_event, density_ratio,
            tune_fraction:
            the study's settings (:class:`StudySettings`); events as ``event_to_json``
            dicts.
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
        density_ratio: float = 1.0,
        tune_fraction: float | None = None,
        name: str | None = None,
    ) -> None:
        settings = StudySettings(
            epsilon=epsilon,
            delta=delta,
            mode=mode,
            trials=trials,
            distribution=distribution,
            reference_event=reference_event,
            density_ratio=density_ratio,
            tune_fraction=tune_fraction,
        )
        self._dir = Path(study_dir)
        self._name = name or self._dir.name
        self._ledger = Ledger(self._dir / LEDGER_NAME)
        self._ledger_error: str | None = None

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
            self._budget = StudyBudget.replay(entries, settings=settings, source=self._ledger.path)
        else:
            header = new_study_header(settings, name=self._name)
            try:
                self._ledger.append(header, create=True)
            except OSError as exc:
                raise ConfigError(self._ledger_message(exc, granted=False)) from exc
            self._budget = StudyBudget(settings, header, source=self._ledger.path)

        # Which gauges exist, and when they are set, depends on the mode: a count of
        # grants under random stopping is K (gauges.py; docs/privacy.md, "The trust
        # boundary").
        self._gauges = HeldGauges({
            key: (name, description, (STUDY_TAG,))
            for key, (name, description) in budget_gauges(settings.mode).items()
        })
        self._publish()

    # -- state -------------------------------------------------------------------

    def _publish(self) -> None:
        """Set the gauges that the mode lets go out while the study runs (compose: all;
        otherwise none, :func:`~raydp_synth.accountant.gauges.running_values`)."""
        values = running_values(
            self._budget.settings.mode, spent_epsilon=self._budget.spent_epsilon(),
            unspent_epsilon=self._budget.unspent_epsilon(),
            trials_granted=len(self._budget.grants), trials_refused=len(self._budget.refused))
        for key, value in values.items():
            self._gauges.set(key, value, {STUDY_TAG: self._name})

    def _response(self, trial_id: str, granted: bool, reason: str | None) -> dict[str, Any]:
        return {
            "granted": granted,
            "reason": reason,
            "trial_id": trial_id,
            "spent_epsilon": self._budget.spent_epsilon(),
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

    # -- public API --------------------------------------------------------------

    def request(
        self, trial_id: str, event: dict[str, Any], attempt: str | None = None,
        final: bool = False,
    ) -> dict[str, Any]:
        """Grant or refuse a trial's plan, before the trial touches data.

        Idempotent by ``(trial_id, attempt)``: a retried call (Ray retries calls after
        an actor crash) gets the same grant again, without a second charge. A trial
        that was granted under another ``attempt`` is refused: a rerun would release
        its mechanisms a second time under one grant. The cost is recomputed from
        ``event``; no epsilon sent by the trial is trusted
        (:meth:`~raydp_synth.accountant.core.StudyBudget.decide`).

        The arguments are :meth:`~raydp_synth.accountant.core.StudyBudget.decide`'s.

        Returns:
            ``{"granted", "reason" (None if granted), "trial_id", "spent_epsilon"}``,
            ``spent_epsilon`` being the study's total as :meth:`statement` prices it.

        Raises:
            ConfigError: ``trial_id`` is not a non-empty string.
        """
        decision = self._budget.decide(trial_id, event, attempt, final=final)
        if decision.entry is None:  # a retried request of a recorded grant
            return self._response(trial_id, decision.granted, decision.reason)
        try:
            self._append(decision.entry)  # durable before anyone learns of the decision
        except OSError as exc:
            if decision.granted:
                # Fail closed: the grant is not made, the state is left as it was.
                if self._ledger_error is None:
                    raise PrivacyInvariantError("a failed ledger append left no ledger error") from exc
                return self._response(trial_id, False, self._ledger_error)
            # a refusal spends nothing: answering it without a record is safe
        self._budget.record(decision)
        self._publish()
        return self._response(trial_id, decision.granted, decision.reason)

    def draw(self, trial_id: str) -> str:
        """Whether the search may propose a configuration for ``trial_id`` now:
        ``"drawn"`` (under random stopping: one of the first K draws, recorded in the
        ledger before this answer; :meth:`~raydp_synth.accountant.core.StudyBudget.decide_draw`;
        else: a grant is still possible), ``"wait"`` (K draws are made and some drawn
        trial has not asked yet: it may end without asking, and be drawn again) or
        ``"finished"`` (no further grant; also when the ledger cannot be written, the
        error in :meth:`status`: fail closed, a trial that is not drawn is never
        granted)."""
        drawn, entry = self._budget.decide_draw(trial_id)
        if entry is not None:
            try:
                self._append(entry)
            except OSError:
                return "finished"
            self._budget.take_draws(entry)
        if drawn and self._ledger_error is None:
            return "drawn"
        if self._ledger_error is None and self._budget.draws_pending():
            return "wait"
        return "finished"

    def undraw(self, trial_ids: list[str] | None = None, keep: list[str] | None = None,
               as_no_ops: bool = False) -> int:
        """Take back draws that were neither granted nor refused, so the search draws
        afresh in their place: those of ``trial_ids`` (a trial that ended before it
        asked), or all but ``keep`` (on ``--resume``: the trials that will not come
        back to ask). Returns how many; 0 if none, or if the ledger cannot be written
        (the error in :meth:`status`).

        ``as_no_ops`` (a DP-HyPO search): the draws are not taken back but each is
        granted a no-op plan, one of the K runs that released nothing. DP-HyPO's bound
        needs every run's configuration to come from a proposal whose density is within
        c of the prior's; drawing again after a failure would run the proposal
        conditioned on not failing, and where failures depend on the configuration
        that conditional density can exceed c times the prior's. A non-adaptive
        sampler's conditional proposal is still one fixed, data-independent law, so
        there a draw is taken back as before."""
        if as_no_ops:
            return self._grant_no_ops(self._budget.undecided_draws(trial_ids, keep=keep or ()))
        entry = self._budget.undraw_entry(trial_ids, keep=keep or ())
        if entry is None:
            return 0
        try:
            self._append(entry)
        except OSError:
            return 0
        self._budget.take_draws(entry)
        return len(entry["trial_ids"])

    def _grant_no_ops(self, trial_ids: list[str]) -> int:
        """Grant each of ``trial_ids`` (undecided draws) a no-op plan; stops at the
        first ledger error (fail closed: an ungranted draw stays undecided)."""
        granted = 0
        for trial_id in trial_ids:
            decision = self._budget.decide(trial_id, event_to_json(dp_event.NoOpDpEvent()),
                                           attempt=ENDED_BEFORE_ASKING)
            if not decision.granted or decision.entry is None:
                continue
            try:
                self._append(decision.entry)
            except OSError:
                break
            self._budget.record(decision)
            granted += 1
        if granted:
            self._publish()
        return granted

    def fits(self, event: dict[str, Any]) -> bool:
        """Whether a plan of this size would be granted to a new trial now (compose:
        the composition with it is within the budget; random stopping: dominated by
        E_ref). A question: nothing is granted or recorded
        (:meth:`~raydp_synth.accountant.core.StudyBudget.fits`). The unspent epsilon
        does not answer it: composition is not additive."""
        return self._budget.fits(event)

    def granted_events(self) -> list[dict[str, Any]]:
        """The granted plans' events (``event_to_json``), in grant order: a compose
        study sizes the next trial's plan against them."""
        return self._budget.granted_events()

    def statement(self) -> dict[str, Any]:
        """The guarantee of the whole study, priced from the ledger by dp-accounting
        (:meth:`~raydp_synth.accountant.core.StudyBudget.statement`): never K itself,
        nor the number of trials run in random-stopping mode."""
        return self._budget.statement()

    def publish_release(self) -> dict[str, float]:
        """Set the budget gauges to the statement's totals; the study's driver calls it
        once its release is written. Under every mode but compose this is the only
        time they are set (:func:`~raydp_synth.accountant.gauges.release_values`:
        spent and unspent epsilon, never a count). Idempotent. Returns the values."""
        values = release_values(self._budget.statement())
        for key, value in values.items():
            self._gauges.set(key, value, {STUDY_TAG: self._name})
        return values

    def status(self) -> dict[str, Any]:
        """Curator-facing progress: spent and unspent epsilon, trials granted/refused.

        ``can_grant``: random-stopping: whether the (internal) trial count K still
        allows a grant; compose: whether any budget is left at all (a given plan may
        still not fit); False in both while the ledger cannot be written.
        ``ledger_error``: why the last append to the ledger failed (None if it
        succeeded).
        """
        budget = self._budget
        spent = budget.spent_epsilon()
        return {
            "study": self._name,
            "mode": budget.settings.mode,
            "budget_epsilon": budget.settings.epsilon,
            "delta": budget.settings.delta,
            "spent_epsilon": spent,
            "unspent_epsilon": max(0.0, budget.settings.epsilon - spent),
            "trials_granted": len(budget.grants),
            "trials_refused": len(budget.refused),
            "can_grant": self._ledger_error is None and budget.can_grant(),
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
        budget = self._budget
        StudySettings(**settings).check_header(
            budget.settings.header_fields()
            | {"kind": "study", "trial_count": budget.trial_count},
            path=self._ledger.path,
        )


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
