"""The search strategies' names, with no import: what the tune CLI's parser offers
(``--strategy``'s choices) without loading the strategies, so that ``--help`` and an
argument error stay instant.

:mod:`~raydp_synth.tune.strategies.registry` checks its table against these names
when it loads, so the two cannot drift.
"""

from __future__ import annotations

__all__ = ["STRATEGY_CHOICES", "STRATEGY_NAMES"]

#: The strategies ``--strategy`` chooses, in the table's order.
STRATEGY_CHOICES = ("compose", "random-stopping", "subsampled")

#: Every strategy of the table, in its order: the choices, then the one another option
#: selects (``--tune-on-public``).
STRATEGY_NAMES = (*STRATEGY_CHOICES, "public-then-private")
