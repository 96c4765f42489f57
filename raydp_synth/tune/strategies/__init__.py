"""Search strategies: how a study searches and prices its search, one plug-in each.

A strategy is one module here with a :class:`~raydp_synth.tune.strategies.base.SearchStrategy`
subclass, and one line in :data:`~raydp_synth.tune.strategies.registry.STRATEGIES`
(its pricing is the accountant's table's line: :mod:`raydp_synth.accountant.strategies`).

* :mod:`.compose`: at most N trials, each priced by composition (any sampler).
* :mod:`.random_stopping`: the best of a secret random number K of i.i.d. trials
  (Papernot & Steinke 2022; DP-HyPO's bound with ``--sampler dp-hypo``).
* :mod:`.subsampled`: random stopping on a secret Poisson subset, then one final run
  (Koskela & Kulkarni 2023, variant 1).
* :mod:`.public_then_private`: a search on data declared public, then one private
  run (``--tune-on-public``).

This package imports nothing at load: import :mod:`.registry` for the table.
"""
