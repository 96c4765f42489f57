"""The study's budget accountant: one privacy budget for the whole search.

* :mod:`~raydp_synth.accountant.ledger`: the durable, append-only ledger.
* :mod:`~raydp_synth.accountant.core`: the Ray-free core: a study's budget rebuilt
  from its ledger, grants and refusals, the statement of the whole study.
* :mod:`~raydp_synth.accountant.actor`: the named, detached Ray actor that holds the
  core, writes the ledger and publishes the gauges.

Every epsilon comes from :mod:`raydp_synth.privacy.accounting`. The actor's names are
imported on first use, so that the core and the ledger can be used without Ray.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from raydp_synth.accountant.core import (
    LEDGER_NAME,
    StudyBudget,
    StudySettings,
    check_ledger,
)
from raydp_synth.accountant.ledger import Ledger

if TYPE_CHECKING:
    from raydp_synth.accountant.actor import (
        NAMESPACE,
        BudgetAccountant,
        actor_name,
        get_accountant,
        get_or_create_accountant,
    )

__all__ = [
    "LEDGER_NAME",
    "NAMESPACE",
    "BudgetAccountant",
    "Ledger",
    "StudyBudget",
    "StudySettings",
    "actor_name",
    "check_ledger",
    "get_accountant",
    "get_or_create_accountant",
]

_ACTOR_NAMES = frozenset(
    {"NAMESPACE", "BudgetAccountant", "actor_name", "get_accountant", "get_or_create_accountant"}
)


def __getattr__(name: str) -> Any:
    if name in _ACTOR_NAMES:
        return getattr(importlib.import_module("raydp_synth.accountant.actor"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
