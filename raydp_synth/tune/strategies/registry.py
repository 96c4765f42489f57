"""The search-strategy table: a static table of strategy names -> strategies.

Adding a strategy is one module under ``raydp_synth/tune/strategies/`` and one line
in :data:`STRATEGIES` and its name in :mod:`~raydp_synth.tune.strategies.names` (the
CLI's parser reads the names from there without loading the strategies; this module
checks the two agree when it loads), and, for a new kind of pricing, one module and
one line in the accountant's table, :mod:`raydp_synth.accountant.strategies.registry`;
tests/tune/test_strategy_contract.py runs over every line.
"""

from __future__ import annotations

from raydp_synth.errors import ConfigError
from raydp_synth.tune.strategies.base import SearchStrategy, StudyOptions
from raydp_synth.tune.strategies.compose import Compose
from raydp_synth.tune.strategies.names import STRATEGY_CHOICES, STRATEGY_NAMES
from raydp_synth.tune.strategies.public_then_private import PublicThenPrivate
from raydp_synth.tune.strategies.random_stopping import RandomStopping
from raydp_synth.tune.strategies.subsampled import Subsampled

__all__ = ["STRATEGIES", "get_strategy", "requested_strategy", "strategy_names"]

#: Every search strategy, by name (``--strategy NAME``, or the flag its ``selects``
#: names).
STRATEGIES: dict[str, SearchStrategy] = {
    "compose": Compose(),
    "random-stopping": RandomStopping(),
    "subsampled": Subsampled(),
    "public-then-private": PublicThenPrivate(),
}


def strategy_names() -> tuple[str, ...]:
    """The strategies ``--strategy`` chooses (the CLI's choices), in table order."""
    return tuple(name for name, strategy in STRATEGIES.items()
                 if strategy.selects == "strategy")


def _check_static_names() -> None:
    """The table's names are :mod:`~raydp_synth.tune.strategies.names`'s, in its order
    (what the CLI's parser offers without loading this module).

    Raises:
        RuntimeError: a strategy added, removed or renamed in one place only.
    """
    if tuple(STRATEGIES) != STRATEGY_NAMES or strategy_names() != STRATEGY_CHOICES:
        raise RuntimeError(
            f"the strategy table {tuple(STRATEGIES)} (--strategy: {strategy_names()}) "
            f"disagrees with raydp_synth/tune/strategies/names.py ({STRATEGY_NAMES}, "
            f"--strategy: {STRATEGY_CHOICES}); name each strategy in both")


_check_static_names()


def get_strategy(name: str) -> SearchStrategy:
    """The strategy called ``name`` that ``--strategy`` chooses.

    Raises:
        ConfigError: no such strategy (the message lists the choices).
    """
    strategy = STRATEGIES.get(name) if isinstance(name, str) else None
    if strategy is None or strategy.selects != "strategy":
        raise ConfigError(f"--strategy {name!r} must be one of {', '.join(strategy_names())}")
    return strategy


def requested_strategy(request: StudyOptions) -> SearchStrategy:
    """The strategy a request runs: the one that a set option other than
    ``--strategy`` selects (``--tune-on-public``), else its ``--strategy``'s."""
    for strategy in STRATEGIES.values():
        if strategy.selects != "strategy" and getattr(request, strategy.selects) is not None:
            return strategy
    return get_strategy(request.strategy)

