"""Carrying a configuration between a tuning subset and the full data.

Subsampled tuning (Koskela & Kulkarni, 2023, "Practical Differentially Private
Hyperparameter Tuning with Subsampling"; priced in
:mod:`raydp_synth.privacy.subsampled_tuning`) runs its trials on a Poisson subset X1
of expected size ``m = q n`` and trains the final model on all n records with the
best trial's configuration, extrapolated. The rule used here, per kind of
hyperparameter (docs/budget-pricing.md has the table):

* **Sensitive batch sizes scale with the data** (``B_sub = q B``): the per-record
  sampling rate ``B / n`` stays the same, so the number of DP steps
  ``epochs / (B / n)`` stays the same, and a trial's privacy plan on X1 is the full
  run's plan up to the noise that each one's budget buys. Each expected batch sum
  holds 1/q times more records in the final run while the noise on a sum depends
  only on sigma and the clip norm: the final run's averaged gradients are less noisy
  than the trial's, never noisier.
* **Epochs are kept** (expected passes over the data): with the rate kept, the same
  number of optimiser steps as the trial.
* **Noise and budget weights are kept**: the noise multiplier is not a configuration
  key here (each run's plan calibrates it to its own budget); what the trial chose is
  how a run's budget is split (``budget_split``, ``query_share``), a ratio.
* **Learning rates are kept**: every method trains with Adam, whose step size is set
  by the learning rate and not by the gradient's scale, over the same number of
  steps (rates kept). Scaling the learning rate with the batch (the linear-scaling
  heuristic of plain SGD) would apply to SGD, which no method here uses.
* **Clip norms are kept**: the distribution of per-record gradient norms does not
  depend on how many records there are.
* **Everything else is kept**: architectures, the GAN schedule (critic steps, G
  steps), losses and priors, everything on public data (its batch sizes and
  iteration counts: public data is not subsampled), seeds.

Each method declares the kind of each of its config fields beside the field (the
config class's ``KINDS``; :meth:`~raydp_synth.config.MethodConfig.hyperparameter_kinds`),
and the rule follows from the kind. A key with no kind is refused
(:class:`~raydp_synth.errors.ConfigError`): a new hyperparameter must be classified
before subsampled tuning carries it.

Trials must size their plans with the public subset size :func:`subset_size`, never
with ``len(X1)``: the realised size is data-dependent, and a rate computed from it
would not be the fixed rate that the trial's event prices.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from raydp_synth.config import HYPERPARAMETER_KINDS, SENSITIVE_BATCH, config_to_dict
from raydp_synth.errors import ConfigError
from raydp_synth.methods.registry import get_method, method_names

if TYPE_CHECKING:
    from raydp_synth.data.info import DataInfo

__all__ = [
    "subset_config",
    "subset_data",
    "Rule",
    "rule_of_kind",
    "rules",
    "subset_size",
    "to_full_data",
    "to_tuning_subset",
]


class Rule(enum.Enum):
    """How a hyperparameter moves from the tuning subset to the full data."""

    #: An expected batch of sensitive records: multiplied by n / m = 1 / q.
    SCALE_WITH_DATA = "scale with the data (keeps the sampling rate B/n)"
    #: Unchanged.
    KEEP = "keep"


def rule_of_kind(kind: str) -> Rule:
    """A sensitive batch scales with the data; every other kind is kept."""
    if kind not in HYPERPARAMETER_KINDS:
        raise ValueError(f"unknown hyperparameter kind {kind!r}")
    return Rule.SCALE_WITH_DATA if kind == SENSITIVE_BATCH else Rule.KEEP


def rules() -> dict[str, tuple[Rule, str]]:
    """Every configuration key of every registered method, with its rule and its kind
    (the kind is the row of the table in docs/budget-pricing.md). The kinds are the
    methods' own, declared beside each config field
    (:meth:`~raydp_synth.config.MethodConfig.hyperparameter_kinds`); a key two methods
    classify differently is an error here, not a silent choice."""
    out: dict[str, tuple[Rule, str]] = {}
    for name in method_names():
        for key, kind in get_method(name).config_class.hyperparameter_kinds().items():
            if key in out and out[key][1] != kind:
                raise ValueError(f"{name} calls {key!r} a {kind!r}; another method, a "
                                 f"{out[key][1]!r}: a key has one kind")
            out[key] = (rule_of_kind(kind), kind)
    return out


def _check_fraction(fraction: float) -> float:
    fraction = float(fraction)
    if not (math.isfinite(fraction) and 0 < fraction <= 1):
        raise ConfigError(f"the tuning fraction {fraction} must be in (0, 1], e.g. 0.1")
    return fraction


def subset_size(num_records: int, fraction: float) -> int:
    """The public size m of the tuning subset that trials size their plans with:
    ``round(fraction * num_records)`` (at least 1). The Poisson subset's realised
    size varies around it and is never used for a rate."""
    fraction = _check_fraction(fraction)
    if num_records < 1:
        raise ConfigError(f"the dataset has {num_records} records; subsampled tuning needs some")
    return max(1, round(fraction * num_records))


def _rule(key: str, table: Mapping[str, tuple[Rule, str]]) -> Rule:
    try:
        return table[key][0]
    except KeyError:
        raise ConfigError(
            f"no extrapolation rule for the hyperparameter {key!r}: give its config field a "
            "kind (the config class's KINDS) before tuning it on a subset"
        ) from None


def _scale(key: str, value: Any, factor: float) -> Any:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{key}={value!r} must be a number to scale with the data")
    scaled = value * factor
    return max(1, round(scaled)) if isinstance(value, int) else scaled


def to_tuning_subset(config: Mapping[str, Any], fraction: float) -> dict[str, Any]:
    """The configuration a trial on the tuning subset runs: ``config`` (drawn for the
    full data) with every :data:`Rule.SCALE_WITH_DATA` key multiplied by ``fraction``
    (integers rounded, at least 1); every other key unchanged.

    Raises:
        ConfigError: a fraction outside (0, 1], or a key with no rule.
    """
    fraction = _check_fraction(fraction)
    table = rules()
    return {
        key: _scale(key, value, fraction) if _rule(key, table) is Rule.SCALE_WITH_DATA else value
        for key, value in config.items()
    }


def to_full_data(config: Mapping[str, Any], fraction: float) -> dict[str, Any]:
    """The final run's configuration from a trial's (the inverse of
    :func:`to_tuning_subset`, exact up to the rounding of integers): every
    :data:`Rule.SCALE_WITH_DATA` key divided by ``fraction``.

    Raises:
        ConfigError: a fraction outside (0, 1], or a key with no rule.
    """
    fraction = _check_fraction(fraction)
    table = rules()
    return {
        key: _scale(key, value, 1 / fraction) if _rule(key, table) is Rule.SCALE_WITH_DATA
        else value
        for key, value in config.items()
    }


def subset_data(data: DataInfo, fraction: float) -> DataInfo:
    """The public facts a tuning trial plans with: m = round(q n) records."""
    return replace(data, num_records=subset_size(data.num_records, fraction))


def subset_config(method: Any, settings: Mapping[str, Any], data: DataInfo,
                  fraction: float) -> Any:
    """A tuning trial's typed config: the method's config of ``settings`` on the full
    data, with its sensitive batch sizes scaled to the subset (the kinds of its fields)."""
    full = method.make_config(dict(settings), data)
    return method.make_config(to_tuning_subset(config_to_dict(full), fraction),
                              subset_data(data, fraction))
