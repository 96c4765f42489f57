"""A study's budget, without Ray: ledger replay, grant or refuse, the statement.

:class:`StudyBudget` is the accountant's whole decision logic, as plain Python: it
is rebuilt from a ledger's entries (:meth:`StudyBudget.replay`), decides on a
trial's plan (:meth:`StudyBudget.decide`), takes a decision into its state once the
decision's ledger entry is durable (:meth:`StudyBudget.record`), and states the
guarantee of the whole study (:meth:`StudyBudget.statement`). The Ray actor
(:mod:`raydp_synth.accountant.actor`) holds one, with the ledger file and the gauges;
``python -m raydp_synth.budget`` replays one from the ledger. Every epsilon comes
from :mod:`raydp_synth.privacy.accounting`.

Privacy argument, by mode:

* ``compose``: the study's output is the adaptive composition of every granted
  plan, priced by :mod:`raydp_synth.privacy.pricing`: the smaller of RDP's epsilon
  (RDP composes additively at every order, also when a later plan is chosen from
  earlier DP outputs: Mironov, 2017, "Renyi Differential Privacy", Proposition 1) and
  PLD's (the PLD composition of all grants, pessimistic estimates; PLD composition is
  adaptive too). Both are upper bounds, so their minimum is. A plan is granted only if
  the composition of all grants plus this plan is within the budget, so the stated
  total never exceeds the budget. Composition only grows, so a refused plan could
  not have fit later either.
* ``random-stopping``: Papernot & Steinke, 2022, "Hyperparameter Tuning with Renyi
  Differential Privacy", Theorems 2 and 6. The number of trials K is drawn once,
  from OS entropy, when the study's header is written (:func:`new_study_header`),
  so before any trial touches data: K must be independent of the data and of every
  trial's output, and unknown to anyone who sees the release, which is why it is
  drawn from ``secrets`` (not from a user seed), stored only in the curator-only
  ledger, and never put into :meth:`StudyBudget.statement`. Every granted plan must
  be dominated by the study's reference plan E_ref at every RDP order; the whole
  study then costs ``RepeatAndSelectDpEvent(E_ref, mean, shape)``. A granted trial
  counts as one of the K runs even if it crashes (score -inf). The K runs are the
  first K configurations the search *drew*, whatever order their trials ask in:
  the search records each draw in the ledger before it proposes the configuration
  (:meth:`StudyBudget.decide_draw`), stops at K draws, and only drawn trials are
  granted. With several trials at once, granting the first K to *ask* would select
  configurations by how fast they plan (the theorem needs i.i.d. draws).
* ``subsampled``: Koskela & Kulkarni, 2023, "Practical Differentially Private
  Hyperparameter Tuning with Subsampling", variant 1
  (:mod:`raydp_synth.privacy.subsampled_tuning`). The tuning phase is random stopping
  as above (K drawn the same way, every tuning plan dominated by E_ref, where E_ref
  and the plans are sized for the public subset size ``round(q n)``) on a Poisson(q)
  subset of the sensitive records, priced by Zhu & Wang's amplification of
  ``RepeatAndSelectDpEvent(E_ref, mean, shape)``; then exactly one final run on all
  the data (a grant with ``final=True``, only after the K tuning grants), priced by
  RDP composition of the tuning curve and the final plan's curve. The final plan is
  granted only if that composition is within the budget.

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
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from types import MappingProxyType
from typing import Any

import dp_accounting as dpa
import numpy as np

from raydp_synth.accountant.ledger import Ledger
from raydp_synth.errors import ConfigError, PrivacyInvariantError
from raydp_synth.privacy.accounting import (
    dominates,
    draw_trial_count,
    parse_distribution,
    random_stopping_epsilon,
)
from raydp_synth.privacy.adaptive_tuning import (
    adaptive_random_stopping_epsilon,
    validate_density_ratio,
)
from raydp_synth.privacy.events import event_from_json, event_to_json
from raydp_synth.privacy.pricing import Composition, Price, rdp_only_price
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
MODES = ("compose", "random-stopping", "subsampled")
#: The modes that draw a secret trial count K and check plans against E_ref.
_RANDOM_STOPPING_MODES = ("random-stopping", "subsampled")
#: The random-stopping header's key that says the study records its draws: a trial is
#: granted only if it is one of the first K the search drew (``draw`` entries), so the
#: K runs are the first K i.i.d. draws whatever order the trials ask in. A ledger
#: without it (written before) grants the first K to ask, as it did.
DRAW_ORDER_KEY = "draw_order"
#: A grant entry's ``phase`` for a subsampled study's final run.
FINAL_PHASE = "final"
#: The name of the bound a ``subsampled`` statement states.
SUBSAMPLED_BOUND = (
    "Koskela & Kulkarni, NeurIPS 2023, variant 1: the tuning phase's "
    "RepeatAndSelectDpEvent (Papernot & Steinke, ICLR 2022) on a Poisson(q) subset, "
    "amplified by Zhu & Wang's (ICML 2019) Poisson-subsampled RDP bound, composed "
    "(RDP, Mironov 2017) with the final run on all the data "
    "(raydp_synth.privacy.subsampled_tuning)")

#: Reasons of refusals (the start of ``reason``; the rest says what was asked).
REASON_BUDGET = "budget exhausted"
REASON_TRIAL_COUNT = "the study's trial count is reached"
REASON_NOT_DRAWN = "the trial is not one of the study's K draws"
REASON_NOT_DOMINATED = "plan is not dominated by the study's reference plan"
REASON_INVALID = "not a valid plan"
REASON_CHANGED = "plan differs from the one already granted to this trial"
REASON_RERUN = "trial already ran"
REASON_TUNING_UNFINISHED = "the tuning phase has not finished"
REASON_FINAL_DONE = "the final run was already granted"

#: What a malformed or unpriceable event raises while it is read or priced.
_UNREADABLE = (ConfigError, KeyError, TypeError, ValueError)
_UNPRICEABLE = (dpa.UnsupportedEventError, TypeError, ValueError, ArithmeticError)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


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
            except _UNREADABLE as exc:
                raise ConfigError(f"the study's reference plan is not a DpEvent: {exc}") from exc
            object.__setattr__(self, "reference_event", canonical)
        object.__setattr__(self, "density_ratio", validate_density_ratio(self.density_ratio))
        if self.density_ratio != 1 and self.mode != "random-stopping":
            raise ConfigError("a density-ratio bound c > 1 (dp-hypo) is priced under random stopping only")
        if self.mode == "subsampled":
            q = self.tune_fraction
            if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 < q < 1:
                raise ConfigError(f"the tuning fraction {q!r} must be a number in (0, 1), e.g. 0.1")
            object.__setattr__(self, "tune_fraction", float(q))
        elif self.tune_fraction is not None:
            raise ConfigError("a tuning fraction is priced under --selection subsampled only")
        if self.mode in _RANDOM_STOPPING_MODES:
            parse_distribution(self.distribution)
            object.__setattr__(self, "distribution", self.distribution.strip().lower())
            if self.reference_event is None:
                raise ConfigError(
                    "random-stopping pricing needs the study's reference plan "
                    "(reference_event): every trial is checked against it"
                )
            cost = self.random_stopping_epsilon()
            if self.mode == "subsampled" and not cost < self.epsilon:
                raise ConfigError(
                    f"the tuning phase alone (reference plan, mean {self.trials} trials, "
                    f"q={self.tune_fraction:g}) costs epsilon={cost:.4g}, leaving nothing of "
                    f"the study's epsilon {self.epsilon:g} for the final run: calibrate the "
                    "reference plan to a share of this budget"
                )
            if not cost <= self.epsilon:
                raise ConfigError(
                    f"the reference plan repeated {self.trials} times on average "
                    f"({self.distribution}) costs epsilon={cost:.4g} > the study's epsilon "
                    f"{self.epsilon:g}: calibrate the reference plan to this budget"
                )

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

    def tuning_rdp(self) -> np.ndarray:
        """``subsampled``: the tuning phase's RDP curve on ORDERS (random stopping of
        E_ref amplified by the Poisson(q) draw of the subset)."""
        from raydp_synth.privacy.subsampled_tuning import amplified_tuning_rdp

        if self.mode != "subsampled" or self.tune_fraction is None:
            raise ConfigError("only a subsampled study has a tuning phase")
        return amplified_tuning_rdp(self.reference(), mean=self.trials, shape=self.shape,
                                    tune_fraction=self.tune_fraction)

    def random_stopping_epsilon(self) -> float:
        """Epsilon of ``RepeatAndSelectDpEvent(E_ref, trials, shape)`` at ``delta``;
        with c = :attr:`density_ratio` > 1, DP-HyPO's bound (adaptive_tuning);
        ``subsampled``: of the amplified tuning phase (:meth:`tuning_rdp`)."""
        if self.mode == "subsampled":
            from raydp_synth.privacy.subsampled_tuning import epsilon_from_rdp

            return epsilon_from_rdp(self.tuning_rdp(), self.delta)
        if self.density_ratio != 1:
            return adaptive_random_stopping_epsilon(
                self.reference(), mean=self.trials, shape=self.shape, delta=self.delta,
                density_ratio=self.density_ratio,
            )
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
            "distribution": self.distribution if self.mode in _RANDOM_STOPPING_MODES else None,
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
        if self.mode in _RANDOM_STOPPING_MODES and not isinstance(header.get("trial_count"), int):
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
    header.update(name=name, time=_now(), dp_accounting=version("dp-accounting"))
    if settings.mode in _RANDOM_STOPPING_MODES:
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


@dataclass(frozen=True, kw_only=True)
class Decision:
    """:meth:`StudyBudget.decide`'s answer to one request.

    Attributes:
        trial_id: who asked.
        granted: whether the plan is granted.
        reason: why it was refused (None if granted).
        entry: the ledger entry to append before anyone learns of the decision, then
            to :meth:`StudyBudget.record`; None for a retried request of a grant that
            is already recorded (nothing to append, nothing to record).
    """

    trial_id: str
    granted: bool
    reason: str | None
    entry: dict[str, Any] | None
    _composition: Composition | None = field(default=None, repr=False, compare=False)
    _basis: int = field(default=-1, repr=False, compare=False)


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
        self._reference = settings.reference() if settings.reference_event is not None else None
        self._random_stopping_epsilon = (
            settings.random_stopping_epsilon() if settings.mode == "random-stopping" else None
        )
        #: subsampled: the tuning phase's curve (fixed by the settings) and the final
        #: run's granted plan (None until granted).
        self._tuning_rdp = settings.tuning_rdp() if settings.mode == "subsampled" else None
        self._final_event: dpa.DpEvent | None = None
        self._composition = Composition()  # compose mode: every grant, in ledger order
        self._grants: dict[str, dict[str, Any]] = {}
        self._refused: set[str] = set()
        #: random-stopping with a draw-ordered ledger: the trials the search drew, in
        #: the order it drew them (at most K); None: grants go to the first K to ask.
        self._draws: dict[str, None] | None = (
            {} if settings.mode in _RANDOM_STOPPING_MODES and header.get(DRAW_ORDER_KEY)
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
            try:
                event = event_from_json(entry["event"])
                if self.settings.mode == "compose":
                    self._composition = self._composition.plus(event)
            except (*_UNREADABLE, *_UNPRICEABLE) as exc:
                raise ConfigError(
                    f"ledger {self.source}, line {line}: grant with an unreadable "
                    f"event ({exc}); restore the ledger from a backup"
                ) from exc
            if entry.get("phase") == FINAL_PHASE:
                if self.settings.mode != "subsampled" or self._final_event is not None:
                    raise ConfigError(
                        f"ledger {self.source}, line {line}: a final-run grant in a "
                        f"{self.settings.mode} study that cannot have one; restore the "
                        "ledger from a backup")
                self._final_event = event
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
        if self._final_event is not None or len(self._draws) >= self.trial_count:
            return False, None
        return True, {"kind": "draw", "trial_id": trial_id, "time": _now()}

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
        return {"kind": "undraw", "trial_ids": pending, "time": _now()}

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
        return len(self._grants) - (self._final_event is not None)

    def subsampled_epsilons(self) -> dict[str, float | None]:
        """``subsampled``: the tuning phase's epsilon alone, the final run's alone
        (None before its grant) and their composition (variant 1; the tuning phase
        alone before the final grant), all by RDP at the study's delta."""
        from raydp_synth.privacy.accounting import rdp_curve
        from raydp_synth.privacy.subsampled_tuning import epsilon_from_rdp, variant1_rdp

        if self._tuning_rdp is None:
            raise ConfigError("only a subsampled study has a tuning phase")
        delta = self.settings.delta
        tuning = epsilon_from_rdp(self._tuning_rdp, delta)
        if self._final_event is None:
            return {"tuning": tuning, "final": None, "total": tuning}
        return {
            "tuning": tuning,
            "final": epsilon_from_rdp(rdp_curve(self._final_event), delta),
            "total": epsilon_from_rdp(variant1_rdp(self._tuning_rdp, self._final_event), delta),
        }

    def spent_price(self) -> Price | None:
        """The study's epsilon so far by each accountant (None: nothing granted in
        compose mode). random-stopping: RDP alone (the theorem is an RDP theorem).
        subsampled: RDP alone, the tuning phase's (priced in full from the start, as
        random stopping's), composed with the final run once it is granted."""
        if self._tuning_rdp is not None:
            return rdp_only_price(float(self.subsampled_epsilons()["total"] or 0.0))
        if self._random_stopping_epsilon is not None:
            return rdp_only_price(self._random_stopping_epsilon)
        return self._composition.price(self.settings.delta) if self._grants else None

    def spent_epsilon(self) -> float:
        """The study's epsilon so far, as :meth:`statement` states it."""
        spent = self.spent_price()
        return 0.0 if spent is None else spent.epsilon

    def remaining_epsilon(self) -> float:
        return max(0.0, self.settings.epsilon - self.spent_epsilon())

    def can_grant(self) -> bool:
        """random-stopping: whether K still allows a grant; subsampled: whether K
        still allows a tuning trial (the final run is granted apart); compose:
        whether any budget is left at all (a given plan may still not fit)."""
        if self.settings.mode in _RANDOM_STOPPING_MODES:
            return not self.search_finished()
        return self.spent_epsilon() < self.settings.epsilon

    def granted_events(self) -> list[dict[str, Any]]:
        """The granted plans' events (``event_to_json``), in grant order."""
        return [g["event"] for g in self._grants.values()]

    def statement(self) -> dict[str, Any]:
        """The guarantee of the whole study, priced from the grants by dp-accounting.

        compose: the composition of every grant, the smaller of RDP's and PLD's
        epsilon (``accountant`` names the one stated, ``pricing`` gives both).
        random-stopping: RDP's epsilon of ``RepeatAndSelectDpEvent(E_ref, mean=trials,
        shape)``; never K itself, nor the number of trials run (which is K once the
        study is finished).
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
        if s.mode == "compose":
            return {
                **common,
                "trials_granted": len(self._grants),
                "events": self.granted_events(),
            }
        if s.mode == "subsampled":
            eps = self.subsampled_epsilons()
            return {
                **common,
                "selection": "subsampled",
                "variant": 1,
                "tune_fraction": s.tune_fraction,
                "distribution": s.distribution,
                "mean_trials": s.trials,
                "reference_event": s.reference_event,
                "tuning_epsilon": eps["tuning"],
                "final_run_epsilon": eps["final"],
                "total_epsilon": eps["total"],
                "final_event": None if self._final_event is None
                else event_to_json(self._final_event),
                "theorem": SUBSAMPLED_BOUND,
            }
        return {
            **common,
            "distribution": s.distribution,
            "mean_trials": s.trials,
            "reference_event": s.reference_event,
            "theorem": "Papernot & Steinke, ICLR 2022 (RepeatAndSelectDpEvent)"
            if s.density_ratio == 1 else
            f"Wang, Gao, Zhang, Su & Shen, NeurIPS 2023 (DP-HyPO, Theorem 1), proposals within "
            f"[1/{s.density_ratio:g}, {s.density_ratio:g}] x prior, over Papernot & Steinke's "
            "RepeatAndSelectDpEvent (raydp_synth.privacy.adaptive_tuning)",
            **({"density_ratio": s.density_ratio} if s.density_ratio != 1 else {}),
        }

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
            return self._refusal(trial_id, f"{REASON_INVALID}: {exc}", None)

        prior = self._grants.get(trial_id)
        if prior is not None:
            if prior.get("attempt") != attempt:
                return self._refusal(
                    trial_id,
                    f"{REASON_RERUN}: trial {trial_id} was granted to another attempt; a "
                    "granted trial is never rerun (its grant stays spent)",
                    event_json,
                )
            if prior["event"] == event_json:
                return Decision(trial_id=trial_id, granted=True, reason=None, entry=None)
            return self._refusal(
                trial_id,
                f"{REASON_CHANGED}: a trial's plan cannot change after its grant; "
                "give the new plan a new trial id",
                event_json,
            )

        if final and self.settings.mode != "subsampled":
            return self._refusal(
                trial_id, f"{REASON_INVALID}: a final run is priced in subsampled mode only",
                event_json)
        if final:
            return self._decide_final(trial_id, plan, event_json, attempt)

        if self.settings.mode == "compose":
            try:
                composed = self._composition.plus(plan)
            except _UNPRICEABLE as exc:
                return self._refusal(
                    trial_id, f"{REASON_INVALID}: RDP cannot price it ({exc})", event_json
                )
            total = composed.epsilon(self.settings.delta)
            if not total <= self.settings.epsilon:  # NaN-safe: NaN is refused
                return self._refusal(
                    trial_id,
                    f"{REASON_BUDGET}: granting this plan would bring the study to "
                    f"epsilon={total:.6g} > budget {self.settings.epsilon:g} "
                    f"(spent so far {self.spent_epsilon():.6g}, at "
                    f"delta={self.settings.delta:g})",
                    event_json,
                )
            return self._grant(trial_id, event_json, composed, attempt)

        if self.trial_count is None or self._reference is None:
            raise PrivacyInvariantError(
                f"a {self.settings.mode} study without its trial count or reference plan")
        if self._final_event is not None:
            return self._refusal(trial_id, f"{REASON_TRIAL_COUNT}: {REASON_FINAL_DONE}",
                                 event_json)
        if self.tuning_grants() >= self.trial_count:
            return self._refusal(trial_id, REASON_TRIAL_COUNT, event_json)
        if self._draws is not None and trial_id not in self._draws:
            return self._refusal(
                trial_id, f"{REASON_NOT_DRAWN}: grants go to the first K trials the search "
                "drew, in the order it drew them, not to the first to ask", event_json)
        try:
            covered = dominates(self._reference, plan)
        except _UNPRICEABLE as exc:
            return self._refusal(
                trial_id, f"{REASON_INVALID}: RDP cannot price it ({exc})", event_json
            )
        if not covered:
            return self._refusal(
                trial_id,
                f"{REASON_NOT_DOMINATED} at every RDP order: calibrate the trial against "
                "the reference plan (more noise, fewer steps or a lower sample rate)",
                event_json,
            )
        return self._grant(trial_id, event_json, self._composition, attempt)

    def _decide_final(self, trial_id: str, plan: dpa.DpEvent, event_json: dict[str, Any],
                      attempt: str | None) -> Decision:
        """A subsampled study's final run: after exactly K tuning grants (the theorem
        prices the best of K), once, and only if tuning + final fits the budget."""
        from raydp_synth.privacy.subsampled_tuning import epsilon_from_rdp, variant1_rdp

        if self.trial_count is None or self._tuning_rdp is None:
            raise PrivacyInvariantError("a subsampled study without its trial count or curve")
        if self._final_event is not None:
            return self._refusal(trial_id, REASON_FINAL_DONE, event_json)
        if not self.search_finished():
            return self._refusal(
                trial_id, f"{REASON_TUNING_UNFINISHED}: the final run is granted after the "
                "study's random number of tuning trials", event_json)
        try:
            total = epsilon_from_rdp(variant1_rdp(self._tuning_rdp, plan), self.settings.delta)
        except _UNPRICEABLE as exc:
            return self._refusal(
                trial_id, f"{REASON_INVALID}: RDP cannot price it ({exc})", event_json)
        if not total <= self.settings.epsilon:  # NaN-safe
            return self._refusal(
                trial_id,
                f"{REASON_BUDGET}: the tuning phase composed with this final run would bring "
                f"the study to epsilon={total:.6g} > budget {self.settings.epsilon:g} "
                f"(tuning phase {self.spent_epsilon():.6g}, at delta={self.settings.delta:g})",
                event_json,
            )
        decision = self._grant(trial_id, event_json, self._composition, attempt)
        assert decision.entry is not None
        decision.entry["phase"] = FINAL_PHASE
        return decision

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
            if decision._composition is None:
                raise PrivacyInvariantError("a grant without the composition it was decided on")
            self._composition = decision._composition
            if decision.entry.get("phase") == FINAL_PHASE:
                self._final_event = event_from_json(decision.entry["event"])
            self._grants[trial_id] = decision.entry
            self._refused.discard(trial_id)
        elif trial_id not in self._grants:
            self._refused.add(trial_id)
        self._recorded += 1

    def _refusal(
        self, trial_id: str, reason: str, event_json: dict[str, Any] | None
    ) -> Decision:
        entry: dict[str, Any] = {"kind": "refusal", "trial_id": trial_id, "reason": reason}
        if event_json is not None:
            entry["event"] = event_json
        entry["time"] = _now()
        return Decision(
            trial_id=trial_id, granted=False, reason=reason, entry=entry, _basis=self._recorded
        )

    def _grant(
        self,
        trial_id: str,
        event_json: dict[str, Any],
        composed: Composition,
        attempt: str | None,
    ) -> Decision:
        entry = {"kind": "grant", "trial_id": trial_id, "event": event_json, "time": _now()}
        if attempt is not None:
            entry["attempt"] = attempt
        return Decision(
            trial_id=trial_id, granted=True, reason=None, entry=entry,
            _composition=composed, _basis=self._recorded,
        )

