"""DpEvents as data: build them from mechanism parameters and (de)serialise them.

A trial's privacy plan is a ``dp_accounting.DpEvent`` computed from public
quantities only (sample rates, step counts, noise multipliers). Events travel as
JSON (in ``privacy.json``, checkpoints and, later, the accountant's ledger); the
accountant recomputes every cost from the event itself, never from an epsilon
number that a trial sends.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import dp_accounting as dpa
from dp_accounting import dp_event

from raydp_synth.errors import ConfigError

__all__ = [
    "DiscreteGaussianDpEvent",
    "contains_discrete_gaussian",
    "event_from_json",
    "event_to_json",
    "subsampled_gaussian_event",
]


class DiscreteGaussianDpEvent(dp_event.GaussianDpEvent):
    """One release of an integer query of sensitivity 1 plus discrete Gaussian noise
    N_Z(0, sigma^2), sigma = ``noise_multiplier`` (the selection score:
    :mod:`~raydp_synth.privacy.discrete_gaussian`).

    A subclass of ``GaussianDpEvent`` on purpose, for RDP: the discrete Gaussian is
    (1/(2 sigma^2))-zCDP (Canonne, Kamath & Steinke 2020, Theorem 4), i.e. at most the
    continuous Gaussian's RDP at every order, so ``RdpAccountant`` (and
    ``RepeatAndSelectDpEvent`` over it) prices it correctly as a Gaussian. Not for
    PLD: its (epsilon, delta) profile is above the continuous Gaussian's at some
    epsilons, and ``PLDAccountant`` would price it as the continuous one.
    :mod:`~raydp_synth.privacy.pricing` builds its PLD from dp-accounting's
    discrete-Gaussian privacy loss instead, and never hands it to ``PLDAccountant``
    (docs/budget-pricing.md, section 5).

    The parent's attrs methods serve it unchanged (its own field, ``noise_multiplier``);
    equality compares classes, so it never equals a ``GaussianDpEvent``.
    """

    __slots__ = ()


def contains_discrete_gaussian(event: dpa.DpEvent) -> bool:
    """Whether ``event`` has a :class:`DiscreteGaussianDpEvent` anywhere in its tree."""
    if isinstance(event, DiscreteGaussianDpEvent):
        return True
    for field in attrs.fields(type(event)):
        value = getattr(event, field.name)
        values = value if isinstance(value, (list, tuple)) else [value]
        if any(isinstance(v, dpa.DpEvent) and contains_discrete_gaussian(v) for v in values):
            return True
    return False


def subsampled_gaussian_event(
    *, noise_multiplier: float, sample_rate: float | None, num_steps: int
) -> dpa.DpEvent:
    """The event of ``num_steps`` releases of a (Poisson-subsampled) Gaussian sum.

    Args:
        noise_multiplier: noise standard deviation divided by the L2 sensitivity.
        sample_rate: Poisson sampling rate q of each release, or None for a release
            over the whole dataset (no subsampling).
        num_steps: number of releases, composed adaptively.
    """
    if not noise_multiplier > 0 or not math.isfinite(noise_multiplier):
        raise ConfigError(f"Expected noise_multiplier={noise_multiplier} > 0.")
    if sample_rate is not None and not 0 < sample_rate <= 1:
        raise ConfigError(f"Expected 0 < sample_rate={sample_rate} <= 1.")
    if num_steps < 0:
        raise ConfigError(f"Expected num_steps={num_steps} >= 0.")
    event: dpa.DpEvent = dpa.GaussianDpEvent(noise_multiplier)
    if sample_rate is not None and sample_rate < 1:
        event = dpa.PoissonSampledDpEvent(sample_rate, event)
    if num_steps == 0:
        return dpa.NoOpDpEvent()
    return event if num_steps == 1 else dpa.SelfComposedDpEvent(event, num_steps)


_EVENT_TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        dp_event.NoOpDpEvent,
        dp_event.NonPrivateDpEvent,
        dp_event.GaussianDpEvent,
        DiscreteGaussianDpEvent,
        dp_event.LaplaceDpEvent,
        dp_event.PoissonSampledDpEvent,
        dp_event.SampledWithoutReplacementDpEvent,
        dp_event.SampledWithReplacementDpEvent,
        dp_event.SelfComposedDpEvent,
        dp_event.ComposedDpEvent,
        dp_event.RepeatAndSelectDpEvent,
    )
}


def event_to_json(event: dpa.DpEvent) -> dict[str, Any]:
    """Serialise an event tree to plain JSON types (``{"type": ..., fields...}``)."""
    name = type(event).__name__
    if name not in _EVENT_TYPES:
        raise ConfigError(f"cannot serialise DpEvent of type {name}")
    out: dict[str, Any] = {"type": name}
    for field in event.__attrs_attrs__:  # dp_accounting events are attrs classes
        value = getattr(event, field.name)
        if isinstance(value, dpa.DpEvent):
            out[field.name] = event_to_json(value)
        elif isinstance(value, (list, tuple)):
            out[field.name] = [event_to_json(v) for v in value]
        else:
            out[field.name] = value
    return out


def event_from_json(data: dict[str, Any]) -> dpa.DpEvent:
    """Inverse of :func:`event_to_json`; rejects unknown event types."""
    if not isinstance(data, dict) or data.get("type") not in _EVENT_TYPES:
        raise ConfigError(f"not a serialised DpEvent: {str(data)[:120]}")
    cls = _EVENT_TYPES[data["type"]]
    kwargs: dict[str, Any] = {}
    for field in attrs.fields(cls):
        value = data[field.name]
        if isinstance(value, dict) and "type" in value:
            value = event_from_json(value)
        elif isinstance(value, list):
            value = [event_from_json(v) for v in value]
        kwargs[field.name] = value
    return cls(**kwargs)
