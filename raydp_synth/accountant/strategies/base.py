"""The interface of a search strategy's pricing: how the accountant prices one kind
of search (the ledger header's ``mode``).

A :class:`PricingStrategy` subclass is the whole answer to "how is a trial priced?"
for its kind of search: which settings it needs (:meth:`PricingStrategy.check`),
what the search costs before any grant (:meth:`PricingStrategy.search_epsilon`),
whether a trial's plan is granted (:meth:`PricingStrategy.decide`,
:meth:`PricingStrategy.decide_final`), what the study has spent
(:meth:`PricingStrategy.spent_price`) and what its statement says
(:meth:`PricingStrategy.statement_fields`). The accountant's core
(:class:`~raydp_synth.accountant.core.StudyBudget`) keeps what every kind shares: the
ledger's grants, refusals and draws, retries and reruns, the durable-before-known
order. One instance serves one study; it holds that study's pricing state (compose:
the composition of its grants; subsampled: the final run's plan).

A new kind of search is one module with a subclass and one line in
:data:`raydp_synth.accountant.strategies.registry.PRICING`; the contract suite
(tests/accountant/test_pricing_contract.py) covers it at once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

import dp_accounting as dpa

from raydp_synth.accountant.decisions import REASON_INVALID, Decision
from raydp_synth.errors import ConfigError
from raydp_synth.privacy.pricing import Price

__all__ = ["UNPRICEABLE", "PricingStrategy", "StudyBudget", "StudySettings", "trials_phrase"]

#: What pricing an event may raise: the event is refused as unpriceable.
UNPRICEABLE = (dpa.UnsupportedEventError, TypeError, ValueError, ArithmeticError)


def trials_phrase(count: Any) -> str:
    """``"1 trial"``, ``"3 trials"``: a results-table summary's count."""
    return f"{count:g} trial" + ("" if count == 1 else "s")


class StudySettings(Protocol):
    """What a pricing strategy reads of a study's settings
    (:class:`raydp_synth.accountant.core.StudySettings`)."""

    @property
    def epsilon(self) -> float: ...

    @property
    def delta(self) -> float: ...

    @property
    def mode(self) -> str: ...

    @property
    def trials(self) -> int: ...

    @property
    def distribution(self) -> str: ...

    @property
    def reference_event(self) -> dict[str, Any] | None: ...

    @property
    def density_ratio(self) -> float: ...

    @property
    def tune_fraction(self) -> float | None: ...

    @property
    def shape(self) -> float: ...

    def reference(self) -> dpa.DpEvent: ...


class StudyBudget(Protocol):
    """What a pricing strategy reads and asks of a study's budget
    (:class:`raydp_synth.accountant.core.StudyBudget`): the state every kind of search
    shares, and the two ways to answer a trial."""

    trial_count: int | None

    @property
    def grants(self) -> Mapping[str, dict[str, Any]]: ...

    @property
    def draws(self) -> tuple[str, ...] | None: ...

    def tuning_grants(self) -> int: ...

    def search_finished(self) -> bool: ...

    def spent_epsilon(self) -> float: ...

    def granted_events(self) -> list[dict[str, Any]]: ...

    def grant(self, trial_id: str, event_json: dict[str, Any], attempt: str | None, *,
              state: Any = None) -> Decision: ...

    def refusal(self, trial_id: str, reason: str,
                event_json: dict[str, Any] | None) -> Decision: ...


class PricingStrategy(ABC):
    """How the accountant prices one kind of search.

    Class attributes (the facts the rest of the system reads, never a name):
        name: the ledger header's ``mode``.
        draws_trial_count: the study draws a secret number of trials K when its
            ledger starts (:func:`~raydp_synth.accountant.core.new_study_header`), and
            grants only plans dominated by the reference plan E_ref: random stopping.
        live_counts: the accountant may publish the study's counts (grants, refusals)
            and its epsilon while it runs. False (the default) fails closed: a count
            could tell a secret K.
        has_final_run: the search ends with one final run on all the data, granted
            apart (``final=True``; its ledger entry has ``phase`` ``"final"``).
        theorem: the published bound the statement names.
    """

    name: ClassVar[str]
    draws_trial_count: ClassVar[bool] = False
    live_counts: ClassVar[bool] = False
    has_final_run: ClassVar[bool] = False
    theorem: ClassVar[str] = ""

    def __init__(self, settings: StudySettings) -> None:
        self.settings = settings

    # -- the settings ------------------------------------------------------------

    @classmethod
    def check(cls, settings: StudySettings) -> dict[str, Any]:
        """Raise :class:`ConfigError` unless ``settings`` hold what this kind of
        search needs (called by ``StudySettings`` on construction, after the checks
        every study shares); return the normalised values of the options it reads.
        The default refuses the options of other kinds."""
        if settings.density_ratio != 1:
            raise ConfigError(
                "a density-ratio bound c > 1 (dp-hypo) is priced under random stopping only")
        if settings.tune_fraction is not None:
            raise ConfigError("a tuning fraction is priced under --strategy subsampled only")
        return {}

    @classmethod
    def search_epsilon(cls, settings: StudySettings) -> float:
        """What the search costs, fixed by its settings before any grant (random
        stopping: the whole search, priced up front).

        Raises:
            ConfigError: this kind of search is priced by its grants only.
        """
        raise ConfigError(f"a {cls.name} study is priced by its grants, not up front")

    # -- the state ---------------------------------------------------------------

    def take_grant(self, event: dpa.DpEvent, entry: Mapping[str, Any], *,
                   state: Any = None) -> None:
        """Take a durable grant into the pricing state (live, with the ``state`` its
        decision computed; on replay, ``state`` None).

        The default keeps no state beyond the core's (random stopping prices the
        search up front).
        """
        return None

    def final_runs(self) -> int:
        """Final runs granted (0 or 1; see :attr:`has_final_run`)."""
        return 0

    def drawing_closed(self) -> bool:
        """Whether the search may draw no more configurations, whatever K."""
        return False

    # -- decisions ---------------------------------------------------------------

    @abstractmethod
    def decide(self, budget: StudyBudget, trial_id: str, plan: dpa.DpEvent,
               event_json: dict[str, Any], attempt: str | None) -> Decision:
        """Grant or refuse a trial's plan (a new trial: retries and reruns are
        settled by the core), through ``budget.grant`` and ``budget.refusal``."""

    def fits(self, budget: StudyBudget, plan: dpa.DpEvent) -> bool:
        """Whether ``plan`` would be priced within the budget now (a question, not a
        grant: no trial count, no draw, no record)."""
        decision = self.decide(budget, "", plan, {}, None)
        return decision.granted

    def decide_final(self, budget: StudyBudget, trial_id: str, plan: dpa.DpEvent,
                     event_json: dict[str, Any], attempt: str | None) -> Decision:
        """A final run on all the data after the search; refused unless the kind of
        search has one."""
        return budget.refusal(
            trial_id, f"{REASON_INVALID}: a final run is priced in subsampled mode only",
            event_json)

    @abstractmethod
    def can_grant(self, budget: StudyBudget) -> bool:
        """Whether any further grant is possible (a given plan may still not fit)."""

    # -- the statement -----------------------------------------------------------

    @abstractmethod
    def spent_price(self, budget: StudyBudget) -> Price | None:
        """The study's epsilon so far by each accountant (None: nothing spent yet)."""

    @abstractmethod
    def statement_fields(self, budget: StudyBudget) -> dict[str, Any]:
        """What the study's statement says beyond the fields every statement has
        (never a secret: not K, not the number of trials run)."""

    def ledger_fields(self, budget: StudyBudget) -> dict[str, Any]:
        """The curator's view of the ledger beyond every statement's fields
        (``python -m raydp_synth.budget``; may name K: the ledger is curator-only)."""
        return {}

    @classmethod
    def ledger_lines(cls, statement: Mapping[str, Any]) -> list[str]:
        """Lines the curator's ledger listing prints after the statement."""
        return []

    @classmethod
    def search_summary(cls, statement: Mapping[str, Any]) -> str:
        """What a results table says the epsilon counts, e.g. ``"whole search
        (compose, 3 trials)"``, from a statement (or a release's ``pricing``, which
        may lack a field)."""
        return f"whole search ({cls.name})"
