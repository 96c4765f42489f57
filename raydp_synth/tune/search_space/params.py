"""The params of a search space: one Optuna distribution per config field.

Each param suggests its value(s) on an Optuna trial (:meth:`suggest`), reads them
back from the flat trial config Ray Tune hands a trial (:meth:`value_from`), and
places a given value (the method's default) in its range (:meth:`point`). A numeric
param also knows its extremes (``low_value``, ``high_value``), which fitting a space
to the data tries (:mod:`raydp_synth.tune.search_space.fitting`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna

__all__ = ["CategoricalParam", "FloatParam", "IntParam", "NumericParam", "Param", "WeightsParam"]


class _OneKey:
    """A param sampled under one trial-config key, its own name."""

    name: str

    @property
    def trial_keys(self) -> tuple[str, ...]:
        return (self.name,)

    def value_from(self, config: Mapping[str, Any]) -> Any:
        return config[self.name]


class _Range(_OneKey):
    """A numeric param whose extremes are its bounds."""

    low: Any
    high: Any

    @property
    def low_value(self) -> Any:
        return self.low

    @property
    def high_value(self) -> Any:
        return self.high


@dataclass(frozen=True, kw_only=True)
class IntParam(_Range):
    """An integer in ``[low, high]`` (inclusive), on a log scale or a ``step`` grid.

    Attributes:
        name: the config field (and the key in the trial config).
        low, high: inclusive bounds, ``low < high``.
        step: grid spacing; ``high - low`` is a multiple of it.
        log: sample on a log scale (needs ``low > 0``; not with ``step > 1``).
    """

    name: str
    low: int
    high: int
    step: int = 1
    log: bool = False

    def suggest(self, trial: optuna.Trial) -> None:
        trial.suggest_int(self.name, self.low, self.high, step=self.step, log=self.log)

    def point(self, value: Any) -> dict[str, Any]:
        """``value`` under this param's key, or nothing if the range lacks it."""
        inside = (isinstance(value, int) and not isinstance(value, bool)
                  and self.low <= value <= self.high and (value - self.low) % self.step == 0)
        return {self.name: value} if inside else {}


@dataclass(frozen=True, kw_only=True)
class FloatParam(_Range):
    """A float in ``[low, high]``, on a log scale or a ``step`` grid.

    Attributes:
        name: the config field (and the key in the trial config).
        low, high: bounds, ``low < high``.
        step: grid spacing (None: continuous); ``high - low`` is a multiple of it.
        log: sample on a log scale (needs ``low > 0``; not with ``step``).
    """

    name: str
    low: float
    high: float
    step: float | None = None
    log: bool = False

    def suggest(self, trial: optuna.Trial) -> None:
        trial.suggest_float(self.name, self.low, self.high, step=self.step, log=self.log)

    def point(self, value: Any) -> dict[str, Any]:
        """``value`` under this param's key, or nothing if the range lacks it."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return {}
        inside = self.low <= value <= self.high and (
            self.step is None or math.isclose((value - self.low) / self.step,
                                              round((value - self.low) / self.step)))
        return {self.name: float(value)} if inside else {}


@dataclass(frozen=True, kw_only=True)
class CategoricalParam(_OneKey):
    """One of ``choices`` (after fitting to the data: only the choices that fit).

    Attributes:
        name: the config field (and the key in the trial config).
        choices: distinct scalars, in the order of the file.
    """

    name: str
    choices: tuple[Any, ...]

    def suggest(self, trial: optuna.Trial) -> None:
        trial.suggest_categorical(self.name, list(self.choices))

    def point(self, value: Any) -> dict[str, Any]:
        """``value`` under this param's key, or nothing if it is not a choice."""
        return {self.name: value} if value in self.choices else {}


@dataclass(frozen=True, kw_only=True)
class WeightsParam:
    """Relative weights, one float per name, assembled into a tuple (a budget split).

    Each weight is sampled as its own float, under the trial-config key
    ``"<name>.<weight name>"`` (e.g. ``budget_split.conv2``: a dot never occurs in a
    config field, and Ray Tune only unflattens on ``/``). The plan normalises the
    tuple, so only the ratios matter.

    Attributes:
        name: the config field (a tuple of floats).
        names: one name per entry of the tuple, in order.
        low, high: bounds of every weight, ``0 < low < high``.
        log: sample each weight on a log scale.
    """

    name: str
    names: tuple[str, ...]
    low: float
    high: float
    log: bool = False

    @property
    def trial_keys(self) -> tuple[str, ...]:
        return tuple(f"{self.name}.{n}" for n in self.names)

    def suggest(self, trial: optuna.Trial) -> None:
        for key in self.trial_keys:
            trial.suggest_float(key, self.low, self.high, log=self.log)

    def value_from(self, config: Mapping[str, Any]) -> tuple[float, ...]:
        return tuple(float(config[key]) for key in self.trial_keys)

    def point(self, value: Any) -> dict[str, Any]:
        """``value`` (relative weights) rescaled so that its largest weight is
        ``high``, under this param's keys; nothing if its ratios do not fit."""
        try:
            weights = [float(w) for w in value]
        except (TypeError, ValueError):
            return {}
        if len(weights) != len(self.names) or not all(w > 0 for w in weights):
            return {}
        scaled = [w * self.high / max(weights) for w in weights]
        if min(scaled) < self.low:
            return {}
        return dict(zip(self.trial_keys, scaled, strict=True))

    @property
    def low_value(self) -> tuple[float, ...]:
        return (self.low,) * len(self.names)

    @property
    def high_value(self) -> tuple[float, ...]:
        return (self.high,) * len(self.names)


Param = IntParam | FloatParam | CategoricalParam | WeightsParam
NumericParam = IntParam | FloatParam | WeightsParam
