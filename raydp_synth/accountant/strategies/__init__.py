"""How the accountant prices each kind of search: one
:class:`~raydp_synth.accountant.strategies.base.PricingStrategy` per ledger mode, in a
static table (:mod:`~raydp_synth.accountant.strategies.registry`)."""

from raydp_synth.accountant.strategies.base import PricingStrategy
from raydp_synth.accountant.strategies.registry import (
    PRICING,
    pricing_class,
    pricing_for,
    pricing_modes,
)

__all__ = ["PRICING", "PricingStrategy", "pricing_class", "pricing_for", "pricing_modes"]
