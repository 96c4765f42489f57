"""A trial's privacy plan: the list of its noised mechanisms, as data.

The plan is computed from public quantities (dataset size, batch sizes, step
counts, the budget) before any sensitive data is read. Its event is what the
accountant prices; the training loop reads its noise multipliers from the same
object, so the noise that is used and the noise that is accounted have a single
source of truth.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import dp_accounting as dpa

from raydp_synth.errors import ConfigError
from raydp_synth.privacy import pricing as _pricing
from raydp_synth.privacy.events import (
    DiscreteGaussianDpEvent,
    event_to_json,
    subsampled_gaussian_event,
)

__all__ = ["SELECTION_SCORE", "Mechanism", "PrivacyPlan"]

#: Name of the private selection score's mechanism in a plan
#: (:mod:`~raydp_synth.privacy.selection_score`): the one discrete release.
SELECTION_SCORE = "selection_score"


@dataclass(frozen=True, kw_only=True)
class Mechanism:
    """One Gaussian mechanism released ``num_steps`` times.

    Attributes:
        name: what it releases (e.g. ``"dpagg"``); unique within a plan.
        noise_multiplier: noise standard deviation / L2 sensitivity (sigma). Zero
            only in a non-private reference run (:meth:`PrivacyPlan.without_noise`):
            the mechanism's event is then ``NonPrivateDpEvent`` and epsilon is inf.
        sample_rate: Poisson sampling rate q of each release, None for one-shot
            releases over a whole split.
        num_steps: number of releases.
        sensitivity: L2 sensitivity of one release under add/remove-one (the clip
            norm C for DP-SGD, sqrt(m)*p for DPAGG, 1 for a count).
        every: the loop's cadence: one release every ``every`` iterations of the
            loop that drives it (DPAF's conv2* releases once every mu DPAGG
            iterations); 1 for a mechanism that sets its own pace. Public schedule
            data: it does not enter the event, which prices ``num_steps`` releases
            however they are spaced. Plans written before the field read as 1.
    """

    name: str
    noise_multiplier: float
    sample_rate: float | None
    num_steps: int
    sensitivity: float
    every: int = 1

    def __post_init__(self) -> None:
        if not self.sensitivity > 0 or not math.isfinite(self.sensitivity):
            raise ConfigError(f"Expected sensitivity={self.sensitivity} > 0 for {self.name}.")
        if self.every < 1:
            raise ConfigError(f"Expected every={self.every} >= 1 for {self.name}.")
        self.event()  # validates the remaining fields

    @property
    def noise_std(self) -> float:
        """Standard deviation of the Gaussian noise added to each release's sum."""
        return self.noise_multiplier * self.sensitivity

    @property
    def private(self) -> bool:
        return self.noise_multiplier > 0

    @property
    def discrete(self) -> bool:
        """True for the selection score: an integer count released with discrete
        Gaussian noise N_Z(0, noise_std^2) (:mod:`~raydp_synth.privacy.discrete_gaussian`),
        priced as :class:`~raydp_synth.privacy.events.DiscreteGaussianDpEvent`."""
        return self.name == SELECTION_SCORE

    def event(self) -> dpa.DpEvent:
        if self.noise_multiplier == 0:
            return dpa.NonPrivateDpEvent() if self.num_steps > 0 else dpa.NoOpDpEvent()
        if self.discrete:
            if self.sample_rate is not None or self.sensitivity != 1:
                raise ConfigError(f"{self.name} is a discrete release of an integer count over "
                                  f"a whole split: sample_rate={self.sample_rate} must be None "
                                  f"and sensitivity={self.sensitivity} must be 1")
            validated = subsampled_gaussian_event(noise_multiplier=self.noise_multiplier,
                                                  sample_rate=None, num_steps=self.num_steps)
            if self.num_steps == 0:
                return validated  # NoOpDpEvent
            step = DiscreteGaussianDpEvent(noise_multiplier=self.noise_multiplier)
            return step if self.num_steps == 1 else dpa.SelfComposedDpEvent(step, self.num_steps)
        return subsampled_gaussian_event(
            noise_multiplier=self.noise_multiplier,
            sample_rate=self.sample_rate,
            num_steps=self.num_steps,
        )


@dataclass(frozen=True, kw_only=True)
class PrivacyPlan:
    """The composition of a trial's mechanisms.

    Attributes:
        mechanisms: every noised access to sensitive data the trial makes.
        delta: the delta at which the plan's epsilon is stated.
        target_epsilon: the epsilon the plan was calibrated to (an upper bound on
            :meth:`epsilon`, checked at construction).
    """

    mechanisms: tuple[Mechanism, ...]
    delta: float
    target_epsilon: float

    def __post_init__(self) -> None:
        names = [m.name for m in self.mechanisms]
        if len(set(names)) != len(names):
            raise ConfigError(f"mechanism names must be unique, got {names}")

    def mechanism(self, name: str) -> Mechanism:
        for m in self.mechanisms:
            if m.name == name:
                return m
        raise KeyError(name)

    @property
    def private(self) -> bool:
        """False for a non-private reference plan (some mechanism has no noise)."""
        return all(m.private for m in self.mechanisms)

    def event(self) -> dpa.DpEvent:
        return dpa.ComposedDpEvent([m.event() for m in self.mechanisms])

    def without(self, name: str) -> PrivacyPlan:
        """This plan less one mechanism (same noise for the others)."""
        self.mechanism(name)
        return replace(self, mechanisms=tuple(m for m in self.mechanisms if m.name != name))

    def without_noise(self) -> PrivacyPlan:
        """The same schedule with no noise at all: a non-private reference run
        (epsilon = inf), for measuring what privacy costs. Never a release."""
        return replace(
            self,
            mechanisms=tuple(replace(m, noise_multiplier=0.0) for m in self.mechanisms),
            target_epsilon=math.inf,
        )

    def price(self) -> _pricing.Price:
        """The plan's epsilon at ``delta`` by RDP and by PLD (:mod:`~raydp_synth.privacy.pricing`)."""
        return _pricing.price(self.event(), delta=self.delta)

    def epsilon(self) -> float:
        """The plan's stated epsilon at ``delta``: the smaller of dp-accounting's RDP
        and PLD epsilons (:mod:`~raydp_synth.privacy.pricing`)."""
        return self.price().epsilon

    def spent_epsilon(
        self, steps: Mapping[str, int], *, pricing: _pricing.Pricing | None = None
    ) -> float:
        """Epsilon of the releases made so far: ``steps[name]`` of each mechanism.

        ``pricing``: None for :data:`~raydp_synth.privacy.pricing.STATED` (the plan's own
        pricing; the whole plan's steps give :meth:`epsilon`), or the cheaper
        :data:`~raydp_synth.privacy.pricing.REPORT` for progress reports (also a valid
        upper bound, coarser: within about 0.1% of the stated value on DPAF's plans).
        """
        done = [replace(m, num_steps=steps.get(m.name, 0)) for m in self.mechanisms]
        events = [m.event() for m in done if m.num_steps > 0]
        if not events:
            return 0.0
        return _pricing.epsilon(dpa.ComposedDpEvent(events), delta=self.delta, pricing=pricing)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanisms": [asdict(m) for m in self.mechanisms],
            "delta": self.delta,
            "target_epsilon": self.target_epsilon,
            "event": event_to_json(self.event()),
            "private": self.private,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PrivacyPlan:
        return cls(
            mechanisms=tuple(Mechanism(**m) for m in data["mechanisms"]),
            delta=float(data["delta"]),
            target_epsilon=float(data["target_epsilon"]),
        )
