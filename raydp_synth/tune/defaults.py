"""A study's option defaults and choices, with no heavy import: the tune CLI's parser
shows them (``--help`` and an argument error stay instant, before torch, Ray or the
accountant load), and the request and the trials use the same values.
"""

from __future__ import annotations

__all__ = ["DEFAULT_SHARE", "DEFAULT_TRIALS", "DEFAULT_TUNE_FRACTION", "DEFAULT_TUNE_SHARE",
           "SAMPLERS", "TRIAL_LOOPS"]

#: ``--trials`` unless set. Measured (bench/results/strategies/NOTES.md, 4.3): compose with 3 trials
#: released better generators than with 8 on every seed (DPAF, digits, epsilon 10:
#: 0.80 against 0.72, in half the time), because each trial's plan gets more of the
#: budget (epsilon ~5 instead of ~3 of 10).
DEFAULT_TRIALS = 3

#: ``--default-share`` unless set: half the trials of a random-stopping or subsampled
#: search are the method's default config. Measured (bench/results/strategies/NOTES.md, 4.3): random
#: draws of the spaces are mostly poor, and without the atom subsampled DPAF released
#: CAS 0.13 (digits) and 0.29 (MNIST) against 0.48 and 0.73 with it.
DEFAULT_SHARE = 0.5

#: ``--tune-fraction``'s default q.
DEFAULT_TUNE_FRACTION = 0.1
#: ``--tune-share``'s default: the tuning phase's own epsilon as a fraction of the total.
#: Section 9.3 of docs/budget-pricing.md: at share 0.1-0.2 the final run carries
#: 9-24% more noise than one untuned run (2-14% against one priced by RDP alone, as
#: the variant-1 total is); a larger share buys less noisy trials.
DEFAULT_TUNE_SHARE = 0.2

#: The Optuna samplers (``--sampler``): ``tpe`` adaptive, ``random`` non-adaptive,
#: ``dp-hypo`` adaptive within a density ratio of a fixed prior.
SAMPLERS = ("tpe", "random", "dp-hypo")

#: Where a trial runs its DP loop (``--trial-loop``): ``auto``, in the trial's own
#: process for 1-worker trials and on Ray Train for more; ``ray-train``, on Ray Train
#: always (for comparisons, bench/trial_overhead.py, and as an escape hatch).
TRIAL_LOOPS = ("auto", "ray-train")
