"""The pricing table: a static table of ledger modes -> pricing strategies.

Adding a kind of search to the accountant is one module with a
:class:`~raydp_synth.accountant.strategies.base.PricingStrategy` subclass and one line
in :data:`PRICING` (the tune layer's table, :mod:`raydp_synth.tune.strategies`, has
the other line).
"""

from __future__ import annotations

from raydp_synth.accountant.strategies.base import PricingStrategy, StudySettings
from raydp_synth.accountant.strategies.compose import ComposePricing
from raydp_synth.accountant.strategies.dp_hypo import DpHypoPricing
from raydp_synth.accountant.strategies.random_stopping import RandomStoppingPricing
from raydp_synth.accountant.strategies.subsampled import SubsampledPricing
from raydp_synth.errors import ConfigError

__all__ = ["PRICING", "pricing_class", "pricing_for", "pricing_modes"]

#: Every kind of search the accountant prices, by the ledger header's ``mode``.
PRICING: dict[str, type[PricingStrategy]] = {
    "compose": ComposePricing,
    "random-stopping": RandomStoppingPricing,
    "subsampled": SubsampledPricing,
}


def pricing_modes() -> tuple[str, ...]:
    """The modes a ledger may name, in table order."""
    return tuple(PRICING)


def pricing_class(mode: str) -> type[PricingStrategy]:
    """The pricing strategy of ``mode``.

    Raises:
        ConfigError: no such mode (the message lists the table's).
    """
    if not isinstance(mode, str) or mode not in PRICING:
        raise ConfigError(f"the pricing mode {mode!r} must be one of {', '.join(PRICING)}")
    return PRICING[mode]


def pricing_for(settings: StudySettings) -> type[PricingStrategy]:
    """The pricing strategy of a study's settings: its mode's, and DP-HyPO's bound
    where a random-stopping study's sampler keeps a density ratio c > 1."""
    cls = pricing_class(settings.mode)
    if cls is RandomStoppingPricing and settings.density_ratio != 1:
        return DpHypoPricing
    return cls
