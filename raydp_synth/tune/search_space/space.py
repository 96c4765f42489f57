"""A search space fitted to a dataset: what Ray Tune's Optuna searcher samples, and
how a trial turns its flat config back into the method's settings."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from raydp_synth.errors import ConfigError
from raydp_synth.tune.search_space.params import Param
from raydp_synth.tune.search_space.samplers import is_adaptive, make_sampler

__all__ = ["SearchSpace"]


@dataclass(frozen=True, kw_only=True)
class SearchSpace:
    """A validated search space of one method, fitted to one dataset.

    Build it with :func:`load_search_space` (or :func:`parse_search_space`). Plain data
    (picklable: Ray Tune ships the searcher, and so :meth:`define_by_run`, around);
    do not mutate ``params`` or ``fixed``.

    Attributes:
        method: the method's registry name.
        params: the sampled params by config field, in the order of the file.
        fixed: constant settings of every trial (config fields; YAML lists stay lists,
            the method's ``make_config`` coerces them).
        notes: what fitting the space to the data changed (dropped choices), one line
            each, for the CLI to print.
        path: the file it was read from (None if built from a mapping).
    """

    method: str
    params: dict[str, Param]
    fixed: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    path: Path | None = None

    make_sampler = staticmethod(make_sampler)
    is_adaptive = staticmethod(is_adaptive)

    @property
    def trial_keys(self) -> tuple[str, ...]:
        """The keys that :meth:`define_by_run` suggests (the sampled part of a trial config)."""
        return tuple(k for p in self.params.values() for k in p.trial_keys)

    def define_by_run(self, trial: optuna.Trial) -> dict[str, Any]:
        """Suggest every param on ``trial``; return the constants (``fixed``).

        Ray Tune's ``OptunaSearch(space=space.define_by_run, ...)`` records each
        ``trial.suggest_*(name, ...)`` value under ``name`` and merges the returned
        dict on top, so the trial's config is flat: one key per int/float/categorical
        param, one ``"<param>.<weight name>"`` key per weight, and the ``fixed`` keys.
        Does no computation beyond the suggestions (Ray warns past 1 s).
        """
        for param in self.params.values():
            param.suggest(trial)
        return copy.deepcopy(self.fixed)

    def default_point(self, defaults: Mapping[str, Any]) -> dict[str, Any]:
        """A trial config of this space (its sampled keys) holding ``defaults``, a
        method config's values by field: for Optuna to run first (``enqueue_trial``).

        A param whose default lies outside its range is left out (the sampler draws
        it); an empty dict means no default fits.
        """
        point: dict[str, Any] = {}
        for name, param in self.params.items():
            if name in defaults:
                point.update(param.point(defaults[name]))
        return point

    def same_configuration(self, config: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
        """Whether two method configs (values by field, as JSON holds them) are one
        configuration of this space: each param's value as the space holds it
        (:meth:`default_point`'s; a weights param's by its ratios, which are all the
        plan uses), every other field alike. Floats agree within a relative 1e-9
        (a weights param rescales them).
        """
        def alike(a: Any, b: Any) -> bool:
            numbers = (float, int)
            if (isinstance(a, numbers) and isinstance(b, numbers)
                    and not isinstance(a, bool) and not isinstance(b, bool)):
                return math.isclose(a, b, rel_tol=1e-9)
            if isinstance(a, list | tuple) and isinstance(b, list | tuple):
                return len(a) == len(b) and all(alike(x, y) for x, y in zip(a, b, strict=True))
            return bool(a == b)

        def split(values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
            rest = {k: v for k, v in values.items() if k not in self.params}
            return self.default_point(values), rest

        (point, rest), (other_point, other_rest) = split(config), split(other)
        return all(set(a) == set(b) and all(alike(a[k], b[k]) for k in a)
                   for a, b in ((point, other_point), (rest, other_rest)))

    def with_fixed(self, settings: Mapping[str, Any]) -> SearchSpace:
        """This space with ``settings`` fixed in every trial (the tune CLI's ``--set``):
        each key becomes a constant, and a param of the same name is no longer sampled.

        The values are validated where every config is: by the method's ``make_config``.
        """
        if not settings:
            return self
        params = {name: p for name, p in self.params.items() if name not in settings}
        notes = tuple(f"{name} fixed to {settings[name]!r} by --set (not searched)"
                      for name in self.params if name in settings)
        return SearchSpace(method=self.method, params=params,
                           fixed={**copy.deepcopy(self.fixed), **settings},
                           notes=self.notes + notes, path=self.path)

    def settings_from_trial_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The method's settings (for ``method.make_config``) from a trial's flat config.

        Takes ``fixed`` and each param's value(s), reassembling weights into tuples;
        other keys of ``config`` (added by the caller's ``param_space``) are ignored.
        Also accepts ``optuna.Trial.params`` (the sampled part alone).

        Raises:
            ConfigError: a sampled key is missing (the config did not come from this
                space's :meth:`define_by_run`).
        """
        settings = copy.deepcopy(self.fixed)
        for name, param in self.params.items():
            try:
                settings[name] = param.value_from(config)
            except KeyError as missing:
                raise ConfigError(
                    f"trial config lacks {missing.args[0]!r} of param {name!r}; it was not "
                    f"sampled from this {self.method} search space (keys: "
                    f"{', '.join(self.trial_keys)})"
                ) from None
        return settings
