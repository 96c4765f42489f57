"""The study's budget accountant: one privacy budget for the whole search.

* :mod:`~raydp_synth.accountant.ledger`: the durable, append-only ledger.
* :mod:`~raydp_synth.accountant.actor`: the named, detached Ray actor that grants or
  refuses each trial's plan and states the guarantee of the whole study.
"""

from __future__ import annotations

from raydp_synth.accountant.actor import (
    LEDGER_NAME,
    NAMESPACE,
    BudgetAccountant,
    StudySettings,
    actor_name,
    check_ledger,
    get_accountant,
    get_or_create_accountant,
)
from raydp_synth.accountant.ledger import Ledger

__all__ = [
    "LEDGER_NAME",
    "NAMESPACE",
    "BudgetAccountant",
    "Ledger",
    "StudySettings",
    "actor_name",
    "check_ledger",
    "get_accountant",
    "get_or_create_accountant",
]
