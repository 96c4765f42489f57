"""The tuning system: one hyperparameter search of a method under one privacy budget.

Search spaces (each method's default in its package, :mod:`raydp_synth.tune.search_space`)
say what a study may try; Ray Tune with Optuna runs the trials; the budget
accountant charges every trial to the study's total budget (docs/architecture.md,
section 2; docs/budget-pricing.md, section 6).
"""
