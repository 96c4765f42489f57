"""A study's budget, without Ray: ledger replay, grant or refuse, the statement.

:class:`StudyBudget` is the accountant's whole decision logic, as plain Python: it
is rebuilt from a ledger's entries (:meth:`StudyBudget.replay`), decides on a
trial's plan (:meth:`StudyBudget.decide`), takes a decision into its state once the
decision's ledger entry is durable (:meth:`StudyBudget.record`), and states the
guarantee of the whole study (:meth:`StudyBudget.statement`). The Ray actor
(:mod:`raydp_synth.accountant.actor`) holds one, with the ledger file and the gauges;
``python -m raydp_synth.budget`` replays one from the ledger. Every epsilon comes
from :mod:`raydp_synth.privacy.accounting`.

Privacy argument: each kind of search (the ledger header's ``mode``) is priced by
its :class:`~raydp_synth.accountant.strategies.base.PricingStrategy`, whose module
states the argument: ``compose``
(:mod:`~raydp_synth.accountant.strategies.compose`), ``random-stopping``
(:mod:`~raydp_synth.accountant.strategies.random_stopping`, and
:mod:`~raydp_synth.accountant.strategies.dp_hypo` for an adaptive sampler) and
``subsampled`` (:mod:`~raydp_synth.accountant.strategies.subsampled`). What every
kind shares is here:

Never refund: a granted plan counts in full even if its trial crashes, is pruned or
stops early. Whatever the trial released before stopping (metrics, checkpoints, its
score) may depend on any part of its plan, and in random-stopping mode "refunding"
a run would change the distribution of K that the theorem assumes.

Fail closed: a plan that cannot be read or priced is refused (:data:`REASON_INVALID`);
an epsilon that is NaN is refused (``not total <= budget``); a ledger line that
cannot be replayed stops the replay with a :class:`~raydp_synth.errors.ConfigError`
(nothing is granted from a ledger that cannot be read). A decision changes the state
only through :meth:`StudyBudget.record`, which the caller runs after the decision's
entry is durable, and only on the state it was decided on.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from types import MappingProxyType
from typing import Any

import dp_accounting as dpa

from raydp_synth.accountant.decisions import (
    FINAL_PHASE,
    REASON_BUDGET,
    REASON_CHANGED,
    REASON_FINAL_DONE,
    REASON_INVALID,
    REASON_NOT_DOMINATED,
    REASON_NOT_DRAWN,
    REASON_RERUN,
    REASON_TRIAL_COUNT,
    REASON_TUNING_UNFINISHED,
    Decision,
    now,
)
from raydp_synth.accountant.ledger import Ledger
from raydp_synth.accountant.strategies import (
    PricingStrategy,
    pricing_class,
    pricing_for,
    pricing_modes,
)
from raydp_synth.accountant.strategies.base import UNPRICEABLE
from raydp_synth.accountant.strategies.subsampled import SUBSAMPLED_BOUND
from raydp_synth.errors import ConfigError, PrivacyInvariantError
from raydp_synth.privacy.accounting import draw_trial_count, parse_distribution
from raydp_synth.privacy.adaptive_tuning import validate_density_ratio
from raydp_synth.privacy.events import event_from_json, event_to_json
from raydp_synth.privacy.pricing import Price
from raydp_synth.privacy.secret_rng import secret_numpy_rng

__all__ = [
    "LEDGER_FORMAT",
    "LEDGER_NAME",
    "MODES",
    "FINAL_PHASE",
    "REASON_BUDGET",
    "REASON_CHANGED",
    "REASON_INVALID",
    "REASON_NOT_DOMINATED",
    "REASON_FINAL_DONE",
    "REASON_RERUN",
    "REASON_TUNING_UNFINISHED",
    "REASON_NOT_DRAWN",
    "REASON_TRIAL_COUNT",
    "Decision",
    "StudyBudget",
    "SUBSAMPLED_BOUND",
    "StudySettings",
    "check_ledger",
    "new_study_header",
]

#: The ledger's file name inside the study directory.
LEDGER_NAME = "ledger.jsonl"
#: The ``format`` of the study header that :func:`new_study_header` writes.
LEDGER_FORMAT = 1
#: The modes a ledger may name: the pricing table's.
MODES = pricing_modes()
#: The random-stopping header's key that says the study records its draws: a trial is
#: granted only if it is one of the first K the search drew (``draw`` entries), so the
#: K runs are the first K i.i.d. draws whatever order the trials ask in. A ledger
#: without it (written before) grants the first K to ask, as it did.
DRAW_ORDER_KEY = "draw_order"

#: What a malformed event raises while it is read.
_UNREADABLE = (ConfigError, KeyError, TypeError, ValueError)
_UNPRICEABLE = UNPRICEABLE


@dataclass(frozen=True, kw_only=True)
class StudySettings:
    """What a study's accountant prices with; validated on construction.

    Attributes:
        epsilon: the study's total budget (finite, > 0).
        delta: the delta of every statement (0 < delta < 1).
        mode: ``"compose"``, ``"random-stopping"`` or ``"subsampled"``.
        trials: the planned number of trials N_max (compose) or the mean E[K]
            (random-stopping); >= 1.
        distribution: the distribution of K (random-stopping only; see
            :func:`~raydp_synth.privacy.accounting.parse_distribution`).
        reference_event: E_ref as ``event_to_json`` data (required in
            random-stopping mode), stored in canonical form.
        density_ratio: c >= 1 (random-stopping only): the sampler's proposals stay
            within [1/c, c] times a fixed prior (``--sampler dp-hypo``), priced by
            :func:`~raydp_synth.privacy.adaptive_tuning.adaptive_random_stopping_epsilon`;
            1 is Papernot & Steinke's i.i.d. trials.
        tune_fraction: q in (0, 1), the Poisson fraction of the tuning subset
            (``subsampled`` only; None otherwise).
    """

    epsilon: float
    delta: float
    mode: str
    trials: int
    distribution: str = "poisson"
    reference_event: dict[str, Any] | None = field(default=None)
    density_ratio: float = 1.0
    tune_fraction: float | None = None

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
        pricing_class(self.mode)  # a mode of the pricing table
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
            except _UNREADABLE as exc:
                raise ConfigError(f"the study's reference plan is not a DpEvent: {exc}") from exc
            object.__setattr__(self, "reference_event", canonical)
        object.__setattr__(self, "density_ratio", validate_density_ratio(self.density_ratio))
        for name, value in self.pricing().check(self).items():
            object.__setattr__(self, name, value)

    def pricing(self) -> type[PricingStrategy]:
        """The pricing strategy of these settings (the mode's; DP-HyPO's bound for
        random stopping with c > 1)."""
        return pricing_for(self)

    @classmethod
    def from_header(cls, header: Mapping[str, Any], *, path: Path | str) -> StudySettings:
        """The settings a ledger's study header was written with.

        Raises:
            ConfigError: ``header`` is not a study header, or holds invalid settings.
        """
        _check_is_header(header, path=path)
        try:
            return cls(
                epsilon=header["epsilon"], delta=header["delta"], mode=header["mode"],
                trials=header["trials"], distribution=header.get("distribution") or "poisson",
                reference_event=header.get("reference_event"),
                density_ratio=header.get("density_ratio") or 1.0,
                tune_fraction=header.get("tune_fraction"),
            )
        except KeyError as exc:
            raise ConfigError(f"ledger {path}: the study header has no {exc}") from exc

    @property
    def shape(self) -> float:
        return parse_distribution(self.distribution)

    def reference(self) -> dpa.DpEvent:
        if self.reference_event is None:
            raise ConfigError("this study has no reference plan")
        return event_from_json(self.reference_event)

    def random_stopping_epsilon(self) -> float:
        """What the search costs, priced up front from the settings (random stopping:
        ``RepeatAndSelectDpEvent(E_ref, trials, shape)`` at ``delta``; DP-HyPO's bound
        with c > 1; subsampled: the amplified tuning phase).

        Raises:
            ConfigError: a compose study, which is priced by its grants.
        """
        return self.pricing().search_epsilon(self)

    def header_fields(self) -> dict[str, Any]:
        """The settings as the ledger header stores (and compares) them."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "mode": self.mode,
            "trials": self.trials,
            "distribution": self.distribution if self.pricing().draws_trial_count else None,
            "reference_event": self.reference_event,
            # absent (None) for c = 1, so ledgers written before dp-hypo still match
            "density_ratio": self.density_ratio if self.density_ratio != 1 else None,
            # absent (None) outside subsampled mode, so older ledgers still match
            "tune_fraction": self.tune_fraction,
        }

    def check_header(self, header: Mapping[str, Any], *, path: Path | str) -> None:
        """Raise unless ``header`` (a ledger's first entry) was written for these settings."""
        _check_is_header(header, path=path)
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
        if self.pricing().draws_trial_count and not isinstance(header.get("trial_count"), int):
            raise ConfigError(f"ledger {path}: the {self.mode} header has no trial count")


def _check_is_header(header: Any, *, path: Path | str) -> None:
    if not isinstance(header, Mapping) or header.get("kind") != "study":
        raise ConfigError(
            f"ledger {path} does not start with a study header; it is not a raydp_synth "
            "ledger, or it is damaged: use a new study directory"
        )


def new_study_header(settings: StudySettings, *, name: str) -> dict[str, Any]:
    """The first entry of a new study's ledger; random-stopping: with K drawn here.

    K comes from OS entropy, never from a seed: it must be unpredictable and
    independent of the data. Call it once per study, before any trial runs.
    """
    header: dict[str, Any] = {"kind": "study", "format": LEDGER_FORMAT, **settings.header_fields()}
    header.update(name=name, time=now(), dp_accounting=version("dp-accounting"))
    if settings.pricing().draws_trial_count:
        rng = secret_numpy_rng()
        header["trial_count"] = draw_trial_count(settings.distribution, settings.trials, rng)
        header[DRAW_ORDER_KEY] = True
    return header


def check_ledger(study_dir: str | Path, settings: StudySettings) -> None:
    """Check that an existing ledger in ``study_dir`` matches ``settings``."""
    path = Path(study_dir) / LEDGER_NAME
    entries = Ledger(path).entries()
    if entries:
        settings.check_header(entries[0], path=path)


class StudyBudget:
    """One study's budget: its grants, its refusals and what they cost.

    Not thread-safe: one caller decides and records at a time (the Ray actor runs
    its calls one at a time). The live path is :meth:`decide`, an append of the
    decision's ``entry`` to the ledger, then :meth:`record`; the replay path applies
    the same entries in the same order (:meth:`apply`), and gives the same state.

    Args:
        settings: the study's settings.
        header: the ledger's first entry (:func:`new_study_header`), checked against
            ``settings``; it holds K in random-stopping mode.
        source: where the entries come from, for error messages (the ledger's path).

    Raises:
        ConfigError: ``header`` was not written for ``settings``.
    """

    def __init__(
        self, settings: StudySettings, header: Mapping[str, Any], *, source: Path | str = "ledger"
    ) -> None:
        settings.check_header(header, path=source)
        self.settings = settings
        self.source = source
        #: random-stopping: K, the number of trials that will be granted (secret).
        self.trial_count: int | None = header.get("trial_count")
        #: How this kind of search is priced, with its pricing state.
        self.pricing: PricingStrategy = settings.pricing()(settings)
        self._grants: dict[str, dict[str, Any]] = {}
        self._refused: set[str] = set()
        #: random-stopping with a draw-ordered ledger: the trials the search drew, in
        #: the order it drew them (at most K); None: grants go to the first K to ask.
        self._draws: dict[str, None] | None = (
            {} if self.pricing.draws_trial_count and header.get(DRAW_ORDER_KEY)
            else None)
        self._recorded = 0  # entries applied or recorded: the state a decision is based on

    @classmethod
    def replay(
        cls,
        entries: Sequence[Mapping[str, Any]],
        *,
        settings: StudySettings | None = None,
        source: Path | str = "ledger",
    ) -> StudyBudget:
        """The state that a ledger's entries (header first) describe.

        Args:
            entries: ``Ledger.entries()``.
            settings: the settings the ledger must have been written for (None: the
                header's own).
            source: the ledger's path, for error messages.

        Raises:
            ConfigError: no header, a header for other settings, or an entry that
                cannot be replayed (naming the line).
        """
        if not entries:
            raise ConfigError(f"ledger {source} is empty: it has no study header")
        header = entries[0]
        if settings is None:
            settings = StudySettings.from_header(header, path=source)
        budget = cls(settings, header, source=source)
        for number, entry in enumerate(entries[1:], start=2):
            budget.apply(entry, line=number)
        return budget

    # -- state -------------------------------------------------------------------

    @property
    def grants(self) -> Mapping[str, dict[str, Any]]:
        """The granted trials' ledger entries, by trial id, in grant order."""
        return MappingProxyType(self._grants)

    @property
    def refused(self) -> frozenset[str]:
        """Trials refused and never granted."""
        return frozenset(self._refused)

    def apply(self, entry: Mapping[str, Any], *, line: int) -> None:
        """Replay one ledger entry (a grant, a refusal, a draw or an undraw) that was
        recorded live.

        Every grant line is charged, even a (never expected) duplicate.

        Raises:
            ConfigError: a grant whose event cannot be read or priced, or an entry
                of another kind (naming ``line``).
        """
        kind = entry.get("kind")
        trial_id = entry.get("trial_id")
        if kind == "grant":
            if entry.get("phase") == FINAL_PHASE and (
                    not self.pricing.has_final_run or self.pricing.final_runs()):
                raise ConfigError(
                    f"ledger {self.source}, line {line}: a final-run grant in a "
                    f"{self.settings.mode} study that cannot have one; restore the "
                    "ledger from a backup")
            try:
                self.pricing.take_grant(event_from_json(entry["event"]), entry)
            except (*_UNREADABLE, *_UNPRICEABLE) as exc:
                raise ConfigError(
                    f"ledger {self.source}, line {line}: grant with an unreadable "
                    f"event ({exc}); restore the ledger from a backup"
                ) from exc
            self._grants.setdefault(str(trial_id), dict(entry))
            self._refused.discard(str(trial_id))
        elif kind == "refusal":
            if trial_id not in self._grants:
                self._refused.add(str(trial_id))
        elif kind in ("draw", "undraw") and self._draws is not None:
            try:
                self._take_draws(entry)
            except (KeyError, TypeError) as exc:
                raise ConfigError(
                    f"ledger {self.source}, line {line}: {kind} entry without its trial "
                    f"({exc}); restore the ledger from a backup") from exc
        else:
            raise ConfigError(
                f"ledger {self.source}, line {line}: unexpected entry kind {kind!r}; "
                "a ledger holds one study: use a new study directory"
            )
        self._recorded += 1

    @property
    def draws(self) -> tuple[str, ...] | None:
        """random-stopping with a draw-ordered ledger: the trials the search drew, in
        draw order (at most K); None for other modes and older ledgers."""
        return None if self._draws is None else tuple(self._draws)

    def _undecided_draws(self) -> list[str]:
        """Drawn trials that were neither granted nor refused (yet)."""
        return [t for t in (self._draws or ()) if t not in self._grants and t not in self._refused]

    def search_finished(self) -> bool:
        """random-stopping and a subsampled study's tuning phase: whether all K runs are
        over. Draw-ordered: K trials drawn and each granted or refused (a refused draw
        is one of the K runs that outputs nothing: it read no data, and a refusal
        depends on plans only). Older ledgers: K grants."""
        if self.trial_count is None:
            raise PrivacyInvariantError(f"a {self.settings.mode} study without its trial count")
        if self._draws is None:
            return self.tuning_grants() >= self.trial_count
        return len(self._draws) >= self.trial_count and not self._undecided_draws()

    def draws_pending(self) -> bool:
        """Draw-ordered random stopping: K draws are made and some drawn trial has
        neither been granted nor refused yet."""
        return (self._draws is not None and self.trial_count is not None
                and len(self._draws) >= self.trial_count and bool(self._undecided_draws()))

    def decide_draw(self, trial_id: str) -> tuple[bool, dict[str, Any] | None]:
        """Whether the search may draw a configuration for trial ``trial_id`` now, and
        the ledger entry to append before it does (None: nothing to record).

        Random stopping prices the best of the first K i.i.d. draws. With several
        trials at once, the order in which trials ask for their grants depends on
        their configurations (a plan that takes longer to calibrate asks later), so
        granting the first K to ask would select configurations by their speed: the
        runs would no longer be i.i.d. draws of one distribution. So a draw-ordered
        study numbers the draws as the search makes them: the first K are drawn, later
        ones are not, and :meth:`decide` grants drawn trials only.

        Compose, and random-stopping ledgers written before draws were recorded:
        whether a grant is possible at all (:meth:`can_grant`), nothing recorded.

        Raises:
            ConfigError: ``trial_id`` is not a non-empty string.
        """
        if not isinstance(trial_id, str) or not trial_id:
            raise ConfigError(f"Expected trial_id={trial_id!r} to be a non-empty string.")
        if self._draws is None:
            return self.can_grant(), None
        if trial_id in self._draws:
            return True, None
        assert self.trial_count is not None
        if self.pricing.drawing_closed() or len(self._draws) >= self.trial_count:
            return False, None
        return True, {"kind": "draw", "trial_id": trial_id, "time": now()}

    def undraw_entry(self, trial_ids: Sequence[str] | None = None, *,
                     keep: Sequence[str] = ()) -> dict[str, Any] | None:
        """The ledger entry that takes back undecided draws (None if there are none):
        those of ``trial_ids`` (a trial that ended before it asked), or all but
        ``keep`` (on ``--resume``: the trials an interrupted study drew that will not
        come back to ask; ``keep``, those Tune's restore resumes). They read nothing;
        the search draws afresh in their place."""
        pending = self.undecided_draws(trial_ids, keep=keep)
        if not pending:
            return None
        return {"kind": "undraw", "trial_ids": pending, "time": now()}

    def undecided_draws(self, trial_ids: Sequence[str] | None = None, *,
                        keep: Sequence[str] = ()) -> list[str]:
        """Drawn trials neither granted nor refused: those of ``trial_ids`` (all if
        None), less ``keep``."""
        return [t for t in self._undecided_draws()
                if (trial_ids is None or t in trial_ids) and t not in keep]

    def take_draws(self, entry: Mapping[str, Any]) -> None:
        """Take a ``draw`` or ``undraw`` entry into the state, once it is durable."""
        self._take_draws(entry)
        self._recorded += 1

    def _take_draws(self, entry: Mapping[str, Any]) -> None:
        if self._draws is None:
            raise PrivacyInvariantError("a draw in a study that does not record its draws")
        if entry["kind"] == "draw":
            self._draws.setdefault(str(entry["trial_id"]), None)
        else:
            for trial_id in entry["trial_ids"]:
                self._draws.pop(str(trial_id), None)

    def tuning_grants(self) -> int:
        """Grants of trials (every grant but a subsampled study's final run)."""
        return len(self._grants) - self.pricing.final_runs()

    def spent_price(self) -> Price | None:
        """The study's epsilon so far by each accountant (None: nothing spent yet),
        as the study's pricing strategy prices it."""
        return self.pricing.spent_price(self)

    def spent_epsilon(self) -> float:
        """The study's epsilon so far, as :meth:`statement` states it."""
        spent = self.spent_price()
        return 0.0 if spent is None else spent.epsilon

    def unspent_epsilon(self) -> float:
        """The budget less the spent epsilon. Not what one more plan may use:
        composition is not additive (two plans of epsilon 2 compose to less than 4),
        so a plan of a larger epsilon may still fit; :meth:`fits` answers for a plan."""
        return max(0.0, self.settings.epsilon - self.spent_epsilon())

    def fits(self, event: Any) -> bool:
        """Whether the plan ``event`` (``event_to_json`` data) would be granted to a new
        trial now, by the study's pricing (compose: the composition with it is within
        the budget; random stopping: it is dominated by E_ref, whatever K). Changes
        nothing and records nothing."""
        try:
            plan = event_from_json(event)
        except _UNREADABLE:
            return False
        return self.pricing.fits(self, plan)

    def can_grant(self) -> bool:
        """Whether any further grant is possible (random stopping: whether K still
        allows a tuning trial; compose: whether any budget is left at all; a given
        plan may still not fit)."""
        return self.pricing.can_grant(self)

    def granted_events(self) -> list[dict[str, Any]]:
        """The granted plans' events (``event_to_json``), in grant order."""
        return [g["event"] for g in self._grants.values()]

    def statement(self) -> dict[str, Any]:
        """The guarantee of the whole study, priced from the grants by dp-accounting:
        the fields every statement has, then the pricing strategy's
        (:meth:`~raydp_synth.accountant.strategies.base.PricingStrategy.statement_fields`).
        Never K itself, nor the number of trials run under random stopping (which is
        K once the study is finished).
        """
        s = self.settings
        spent = self.spent_price()
        common = {
            "mode": s.mode,
            "epsilon": 0.0 if spent is None else spent.epsilon,
            "delta": s.delta,
            "budget_epsilon": s.epsilon,
            "accountant": "none: nothing is granted yet" if spent is None else spent.accountant,
            "dp_accounting": version("dp-accounting"),
        }
        if spent is not None:
            common["pricing"] = spent.to_dict()
        return {**common, **self.pricing.statement_fields(self)}

    def ledger_statement(self) -> dict[str, Any]:
        """The curator's view (``python -m raydp_synth.budget``): the spent epsilon,
        the counts, and the pricing strategy's own fields (random stopping: K, which
        the ledger holds and the curator must never publish)."""
        s = self.settings
        return {"mode": s.mode, "epsilon": self.spent_epsilon(), "delta": s.delta,
                "budget_epsilon": s.epsilon, "trials_granted": len(self._grants),
                "trials_refused": len(self._refused), **self.pricing.ledger_fields(self)}

    # -- decisions ---------------------------------------------------------------

    def decide(
        self, trial_id: str, event: Any, attempt: str | None = None, *, final: bool = False
    ) -> Decision:
        """Grant or refuse a trial's plan against the current state; changes nothing.

        Idempotent by ``(trial_id, attempt)``: a retried request gets the same grant
        again without a second charge (``entry`` None). A trial that was granted under
        another ``attempt`` is refused: a rerun would release its mechanisms a second
        time under one grant. The cost is computed from ``event``; no epsilon sent by
        the trial is trusted.

        Args:
            trial_id: the trial's unique id (a non-empty string).
            event: the trial's whole plan, ``event_to_json(plan.event())``.
            attempt: a fresh random nonce per execution of the trial (None: the
                caller promises a trial id is never executed twice).
            final: the plan is a subsampled study's final run on all the data
                (granted once, after the K tuning grants, if the composition fits).

        Raises:
            ConfigError: ``trial_id`` is not a non-empty string.
        """
        if not isinstance(trial_id, str) or not trial_id:
            raise ConfigError(f"Expected trial_id={trial_id!r} to be a non-empty string.")
        try:
            plan = event_from_json(event)
            event_json = event_to_json(plan)
        except _UNREADABLE as exc:
            return self.refusal(trial_id, f"{REASON_INVALID}: {exc}", None)

        prior = self._grants.get(trial_id)
        if prior is not None:
            if prior.get("attempt") != attempt:
                return self.refusal(
                    trial_id,
                    f"{REASON_RERUN}: trial {trial_id} was granted to another attempt; a "
                    "granted trial is never rerun (its grant stays spent)",
                    event_json,
                )
            if prior["event"] == event_json:
                return Decision(trial_id=trial_id, granted=True, reason=None, entry=None)
            return self.refusal(
                trial_id,
                f"{REASON_CHANGED}: a trial's plan cannot change after its grant; "
                "give the new plan a new trial id",
                event_json,
            )

        if final:
            return self.pricing.decide_final(self, trial_id, plan, event_json, attempt)
        return self.pricing.decide(self, trial_id, plan, event_json, attempt)

    def record(self, decision: Decision) -> None:
        """Take a decision into the state, once its ``entry`` is durable.

        A refusal is recorded also when its entry could not be written (it spends
        nothing). A grant whose entry could not be made durable must not be recorded.

        Raises:
            ValueError: ``decision`` was made on another state than this one (it was
                decided before another decision or entry was taken in): decide again.
        """
        if decision.entry is None:
            return
        if decision._basis != self._recorded:
            raise ValueError(
                f"the decision on trial {decision.trial_id} was made on an older state of "
                "the study's budget; decide again"
            )
        trial_id = decision.trial_id
        if decision.granted:
            self.pricing.take_grant(event_from_json(decision.entry["event"]), decision.entry,
                                    state=decision._state)
            self._grants[trial_id] = decision.entry
            self._refused.discard(trial_id)
        elif trial_id not in self._grants:
            self._refused.add(trial_id)
        self._recorded += 1

    def refusal(
        self, trial_id: str, reason: str, event_json: dict[str, Any] | None
    ) -> Decision:
        """A refusal of ``trial_id``'s plan, decided on the current state."""
        entry: dict[str, Any] = {"kind": "refusal", "trial_id": trial_id, "reason": reason}
        if event_json is not None:
            entry["event"] = event_json
        entry["time"] = now()
        return Decision(
            trial_id=trial_id, granted=False, reason=reason, entry=entry, _basis=self._recorded
        )

    def grant(
        self, trial_id: str, event_json: dict[str, Any], attempt: str | None, *,
        state: Any = None,
    ) -> Decision:
        """A grant of ``trial_id``'s plan, decided on the current state; ``state``: the
        pricing state after it (compose: the composition with it), taken into the
        pricing strategy when the grant is recorded."""
        entry = {"kind": "grant", "trial_id": trial_id, "event": event_json, "time": now()}
        if attempt is not None:
            entry["attempt"] = attempt
        return Decision(
            trial_id=trial_id, granted=True, reason=None, entry=entry,
            _state=state, _basis=self._recorded,
        )

