"""Search spaces: what a study of one method may try (design.md 2).

A search space is a YAML file for one method (each method's default is package data
of the method's own package, :meth:`~raydp_synth.methods.base.Method.search_space_file`)::

    method: dpaf
    params:                     # sampled by Optuna; keys are fields of the method's config
      mu:           {type: int, low: 1, high: 8, log: true}
      lr_d:         {type: float, low: 1.0e-4, high: 3.0e-3, log: true}
      n_critic:     {type: categorical, choices: [1, 2]}
      layer_split:  {type: categorical, choices: [C1-C1-x, C2-C1-x, C2-C2-x]}
      budget_split: {type: weights, names: [classifier, conv2, dpagg], low: 0.05, high: 1.0}
    fixed:                      # the same in every trial (also fields of the config)
      epochs: 30

Param types:

* ``int``: ``low``, ``high`` (both inclusive), optional ``log`` (bool) or ``step``
  (int >= 1; ``high - low`` a multiple of it);
* ``float``: ``low``, ``high``, optional ``log`` or ``step`` (> 0);
* ``categorical``: ``choices``, a non-empty list of distinct scalars (str, int, float,
  bool, null);
* ``weights``: ``names`` (two or more identifiers), ``low``, ``high`` (``0 < low``),
  optional ``log``: one float per name, handed to the config as a tuple in the order
  of ``names``. Weights are *relative*: the plan normalises them ((1, 1, 2) is the
  split (0.25, 0.25, 0.5)), so a split has many representations, which is harmless
  for the samplers.

A range must hold more than one value: a constant belongs in ``fixed``.
``image_size`` (set by the data) and ``seed`` (set by the study) can be neither
searched nor fixed. PyYAML reads ``1e-4`` (no dot) as a string: float bounds accept
such strings too.

Fitting the space to the data. The space is checked against the dataset's public
:class:`~raydp_synth.methods.base.DataInfo` by building configs with the method
itself (``method.make_config``, then ``method.schedule``: shapes, sample rates, step
counts), so no method-specific rule lives here. Numeric params are held at ``low``
unless said otherwise.

1. Anchor: the first combination of categorical choices that gives a valid config;
   if none does, :class:`~raydp_synth.errors.ConfigError`.
2. Every categorical choice is tried in the anchor; a choice that does not fit is
   dropped with a note (:attr:`SearchSpace.notes`), e.g. DPAF layer splits with more
   conv layers than the image size allows.
3. Every numeric param's ``high`` is tried in the anchor.
4. Every combination of the remaining choices (the first 512) is tried with the
   numeric params all at ``low`` and all at ``high``. Samplers draw each param
   independently, so choices that do not fit *together* are an error, not a note.
   Corners are a heuristic: a config rule coupling two numeric params in opposite
   directions can still refuse a sampled trial, at trial start.

Ray Tune's ``OptunaSearch`` samples a space through :meth:`SearchSpace.define_by_run`;
the trial turns the flat config Tune hands it into the method's settings with
:meth:`SearchSpace.settings_from_trial_config`.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
import yaml

from raydp_synth.errors import ConfigError
from raydp_synth.methods.base import DataInfo, Method
from raydp_synth.methods.registry import get_method

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = [
    "SAMPLER_KINDS",
    "CategoricalParam",
    "FloatParam",
    "IntParam",
    "Param",
    "SearchSpace",
    "WeightsParam",
    "is_adaptive",
    "load_search_space",
    "make_sampler",
    "parse_search_space",
]

SAMPLER_KINDS = ("tpe", "random")

#: Config fields that a search space may neither sample nor fix, and why.
RESERVED: dict[str, str] = {
    "image_size": "it is set by the dataset",
    "seed": "the study sets it",
}

_TOP_LEVEL = ("method", "params", "fixed")
_REQUIRED_TOP_LEVEL = ("method", "params")
# Each config probe costs ~0.4 ms (DPAF); this bounds the load time to well under a second.
_MAX_COMBINATIONS = 512
_MAX_REASONS = 3


# --------------------------------------------------------------------------- params


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
_NumericParam = IntParam | FloatParam | WeightsParam

_FIELDS: dict[str, tuple[set[str], set[str]]] = {  # type -> (required, optional) fields
    "int": ({"low", "high"}, {"log", "step"}),
    "float": ({"low", "high"}, {"log", "step"}),
    "categorical": ({"choices"}, set()),
    "weights": ({"names", "low", "high"}, {"log"}),
}


# --------------------------------------------------------------------- the space


def make_sampler(
    kind: str, seed: int | Sequence[int], *, n_startup_trials: int | None = None
) -> optuna.samplers.BaseSampler:
    """The Optuna sampler of a study: ``"tpe"`` (adaptive) or ``"random"``.

    Args:
        kind: one of :data:`SAMPLER_KINDS`.
        seed: the sampler's seed (a seeded sampler draws the same sequence of trials):
            an int below 2**32 or a list of such words (NumPy's ``RandomState`` seeds).
            Public under compose; random stopping needs a secret one, drawn from OS
            entropy and written nowhere (:func:`raydp_synth.tune.study.optuna_search`
            builds the study's sampler and states why).
        n_startup_trials: TPE only: random trials before TPE starts modelling (Optuna's
            default is 10, so a study of 10 trials or fewer is a random search).

    Raises:
        ConfigError: unknown kind.
    """
    if kind == "tpe":
        if n_startup_trials is None:
            return optuna.samplers.TPESampler(seed=seed)
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_startup_trials)
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise ConfigError(f"unknown sampler {kind!r}; choose one of {', '.join(SAMPLER_KINDS)}")


def is_adaptive(kind: str) -> bool:
    """Whether the sampler's next trial depends on earlier results.

    Random-stopping accounting (accounting.md) needs a non-adaptive sampler
    (i.i.d. trials): ``random`` is not adaptive, ``tpe`` is.

    Raises:
        ConfigError: unknown kind.
    """
    if kind not in SAMPLER_KINDS:
        raise ConfigError(f"unknown sampler {kind!r}; choose one of {', '.join(SAMPLER_KINDS)}")
    return kind == "tpe"


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


# ----------------------------------------------------------------------- loading


def load_search_space(
    path: str | Path | None, method_name: str, data: DataInfo
) -> SearchSpace:
    """Read, validate and fit to ``data`` the search space of ``method_name``.

    Args:
        path: a YAML file, or None for the method's packaged default
            (:meth:`~raydp_synth.methods.base.Method.search_space_file`).
        method_name: the registered method the study tunes.
        data: public facts of the training split (image size, channels, classes, n).

    Returns:
        The space, with the choices that do not fit ``data`` dropped (see ``notes``).

    Raises:
        ConfigError: one line naming the file and the key: unknown method, file
            missing or not YAML, any schema error (see the module docstring), or a
            space with no config that fits ``data``.
    """
    method = get_method(method_name)
    if path is None:
        file: Path | Traversable = method.search_space_file()
        if not file.is_file():
            raise ConfigError(
                f"no packaged search space for method {method_name!r} (looked for {file}); "
                "pass a YAML file"
            )
    else:
        file = Path(path)
        if not file.exists():
            raise ConfigError(f"search space file {file} not found")
        if not file.is_file():
            raise ConfigError(f"search space {file} is not a file")
    source = Path(str(file))
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{source}: cannot read the search space: {_one_line(str(e))}") from None
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: not valid YAML: {_yaml_problem(e)}") from None
    return parse_search_space(raw, method=method, data=data, source=source)


def parse_search_space(
    raw: Any, *, method: Method, data: DataInfo, source: str | Path = "<search space>"
) -> SearchSpace:
    """Validate a search space given as a (YAML-loaded) mapping, and fit it to ``data``.

    ``source`` names the file in error messages. Raises like :func:`load_search_space`.
    """
    where = str(source)
    if raw is None:
        raise ConfigError(f"{where}: is empty; expected a mapping with keys {', '.join(_TOP_LEVEL)}")
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"{where}: expected a mapping with keys {', '.join(_TOP_LEVEL)}, "
            f"got {_kind(raw)}"
        )
    unknown = [str(k) for k in raw if k not in _TOP_LEVEL]
    if unknown:
        raise ConfigError(
            f"{where}: unknown top-level key(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(_TOP_LEVEL)}"
        )
    missing = [k for k in _REQUIRED_TOP_LEVEL if k not in raw]
    if missing:
        raise ConfigError(f"{where}: missing top-level key(s) {', '.join(missing)}")
    if raw["method"] != method.name:
        raise ConfigError(
            f"{where}: method: the file is for {raw['method']!r}, but the study tunes "
            f"{method.name!r}"
        )

    config_class = method.config_class
    hints = typing.get_type_hints(config_class)
    settable = [f.name for f in fields(config_class) if f.name not in RESERVED]
    valid = f"valid keys: {', '.join(sorted(settable))}"

    fixed_raw = raw.get("fixed")
    fixed_raw = {} if fixed_raw is None else fixed_raw
    if not isinstance(fixed_raw, Mapping):
        raise ConfigError(f"{where}: fixed: expected a mapping of settings, got {_kind(fixed_raw)}")
    fixed: dict[str, Any] = {}
    for key, value in fixed_raw.items():
        _check_key(where, "fixed", key, hints, config_class, valid)
        fixed[key] = value

    params_raw = raw["params"]
    if not isinstance(params_raw, Mapping) or not params_raw:
        raise ConfigError(
            f"{where}: params: expected a non-empty mapping of params to sample, "
            f"got {_kind(params_raw) if params_raw else 'nothing'}"
        )
    params: dict[str, Param] = {}
    for key, spec in params_raw.items():
        _check_key(where, "params", key, hints, config_class, valid)
        if key in fixed:
            raise ConfigError(
                f"{where}: params.{key}: also in fixed; a setting is either sampled or fixed"
            )
        params[key] = _parse_param(where, key, spec, hints[key])

    params, notes = _fit_to_data(where, method, data, params, fixed)
    return SearchSpace(
        method=method.name,
        params=params,
        fixed=fixed,
        notes=tuple(notes),
        path=Path(source) if isinstance(source, Path) else None,
    )


# ------------------------------------------------------------------- validation


def _check_key(
    where: str, section: str, key: Any, hints: Mapping[str, Any], config_class: type, valid: str
) -> None:
    if not isinstance(key, str):
        raise ConfigError(f"{where}: {section}: key {key!r} is not a string; {valid}")
    if key in RESERVED:
        verb = "searched" if section == "params" else "fixed"
        raise ConfigError(f"{where}: {section}.{key}: cannot be {verb}: {RESERVED[key]}")
    if key not in hints:
        raise ConfigError(
            f"{where}: {section}.{key}: not a setting of {config_class.__name__}; {valid}"
        )


def _parse_param(where: str, name: str, spec: Any, annotation: Any) -> Param:
    at = f"{where}: params.{name}"
    if not isinstance(spec, Mapping):
        raise ConfigError(
            f"{at}: expected a mapping such as {{type: float, low: 0.1, high: 1.0}}, "
            f"got {_kind(spec)}"
        )
    if "type" not in spec:
        raise ConfigError(f"{at}: missing 'type' (one of {', '.join(_FIELDS)})")
    kind = spec["type"]
    if kind not in _FIELDS:
        raise ConfigError(f"{at}: unknown type {kind!r}; types: {', '.join(_FIELDS)}")
    required, optional = _FIELDS[kind]
    given = set(spec) - {"type"}
    allowed = f"fields of type {kind}: {', '.join(sorted(required))}" + (
        f" (optional: {', '.join(sorted(optional))})" if optional else ""
    )
    if required - given:
        raise ConfigError(f"{at}: missing field(s) {', '.join(sorted(required - given))}; {allowed}")
    if given - required - optional:
        extra = sorted(str(k) for k in given - required - optional)
        raise ConfigError(f"{at}: unknown field(s) {', '.join(extra)}; {allowed}")

    accepted = _accepted_types(annotation)
    if kind == "categorical":
        return _parse_categorical(at, name, spec["choices"])
    if kind == "weights":
        if tuple not in accepted:
            raise ConfigError(
                f"{at}: type weights needs a tuple setting; {name} is {_type_name(annotation)}"
            )
        return _parse_weights(at, name, spec)
    if kind == "int" and not accepted & {int, float}:
        raise ConfigError(f"{at}: type int needs a numeric setting; {name} is {_type_name(annotation)}")
    if kind == "float" and float not in accepted:
        hint = "; use type: int" if int in accepted else ""
        raise ConfigError(
            f"{at}: type float needs a float setting; {name} is {_type_name(annotation)}{hint}"
        )

    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise ConfigError(f"{at}: log={log!r} must be true or false")
    if kind == "int":
        low, high = _int(at, "low", spec["low"]), _int(at, "high", spec["high"])
        step = _int(at, "step", spec.get("step", 1))
        if step < 1:
            raise ConfigError(f"{at}: step={step} must be >= 1")
        _check_range(at, name, low, high, log)
        if log and step != 1:
            raise ConfigError(f"{at}: log: true cannot be combined with step={step}")
        if (high - low) % step:
            raise ConfigError(f"{at}: high - low = {high - low} must be a multiple of step={step}")
        return IntParam(name=name, low=low, high=high, step=step, log=log)

    lo, hi = _float(at, "low", spec["low"]), _float(at, "high", spec["high"])
    step_f = None if spec.get("step") is None else _float(at, "step", spec["step"])
    _check_range(at, name, lo, hi, log)
    if step_f is not None:
        if step_f <= 0:
            raise ConfigError(f"{at}: step={step_f:g} must be > 0")
        if log:
            raise ConfigError(f"{at}: log: true cannot be combined with step={step_f:g}")
        intervals = (hi - lo) / step_f
        if not math.isclose(intervals, round(intervals), rel_tol=1e-9, abs_tol=1e-9):
            raise ConfigError(
                f"{at}: high - low = {hi - lo:g} must be a multiple of step={step_f:g}"
            )
    return FloatParam(name=name, low=lo, high=hi, step=step_f, log=log)


def _parse_categorical(at: str, name: str, choices: Any) -> CategoricalParam:
    if not isinstance(choices, list):
        raise ConfigError(f"{at}: choices must be a list, got {_kind(choices)}")
    if not choices:
        raise ConfigError(f"{at}: choices is empty; list at least one value")
    for c in choices:
        if c is not None and not isinstance(c, (str, int, float, bool)):
            raise ConfigError(
                f"{at}: choice {c!r} is {_kind(c)}; choices must be scalars "
                "(str, int, float, bool or null)"
            )
    seen: list[Any] = []
    for c in choices:
        if any(c == s and type(c) is type(s) for s in seen):
            raise ConfigError(f"{at}: choice {c!r} is listed twice")
        seen.append(c)
    return CategoricalParam(name=name, choices=tuple(choices))


def _parse_weights(at: str, name: str, spec: Mapping[str, Any]) -> WeightsParam:
    names = spec["names"]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{at}: names must be a list of strings, got {names!r}")
    if len(names) < 2:
        raise ConfigError(
            f"{at}: weights need at least 2 names (one per share of the split), got {len(names)}"
        )
    bad = [n for n in names if not n.isidentifier()]
    if bad:
        raise ConfigError(f"{at}: weight name(s) {', '.join(map(repr, bad))} must be identifiers")
    if len(set(names)) != len(names):
        raise ConfigError(f"{at}: names {names} repeat a name")
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise ConfigError(f"{at}: log={log!r} must be true or false")
    low, high = _float(at, "low", spec["low"]), _float(at, "high", spec["high"])
    if low <= 0:
        raise ConfigError(f"{at}: low={low:g} must be > 0 (weights are relative shares)")
    _check_range(at, name, low, high, log)
    return WeightsParam(name=name, names=tuple(names), low=low, high=high, log=log)


def _check_range(at: str, name: str, low: float, high: float, log: bool) -> None:
    if low > high:
        raise ConfigError(f"{at}: empty range: low={low:g} > high={high:g}")
    if low == high:
        raise ConfigError(
            f"{at}: low == high == {low:g} leaves nothing to search; "
            f"put `{name}: {low:g}` in fixed"
        )
    if log and low <= 0:
        raise ConfigError(f"{at}: log: true needs low > 0, got low={low:g}")


def _int(at: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{at}: {key}={value!r} must be an integer")
    return value


def _float(at: str, key: str, value: Any) -> float:
    if isinstance(value, str):  # PyYAML 1.1 reads 1e-4 (no dot) as a string
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{at}: {key}={value!r} must be a finite number")
    return float(value)


def _accepted_types(annotation: Any) -> set[Any]:
    """Base types a config field accepts (``int | None`` -> {int, NoneType})."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_accepted_types(a) for a in typing.get_args(annotation)))
    if origin is not None:
        return {origin}
    return {annotation}


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation)


# ------------------------------------------------------------------ fit to data


def _fit_to_data(
    where: str,
    method: Method,
    data: DataInfo,
    params: dict[str, Param],
    fixed: dict[str, Any],
) -> tuple[dict[str, Param], list[str]]:
    """Drop categorical choices that do not fit ``data``; refuse a space where nothing
    fits (see the module docstring for the four steps)."""
    desc = (
        f"{data.image_size}x{data.image_size}x{data.channels} images, "
        f"{data.num_classes} classes, {data.num_records} records"
    )
    cats = [p for p in params.values() if isinstance(p, CategoricalParam)]
    nums: list[_NumericParam] = [p for p in params.values() if not isinstance(p, CategoricalParam)]
    at_low = {**fixed, **{p.name: p.low_value for p in nums}}
    at_high = {**fixed, **{p.name: p.high_value for p in nums}}

    def probe(settings: Mapping[str, Any]) -> str | None:
        """None if ``settings`` give a valid config for ``data``, else the reason."""
        try:
            method.schedule(method.make_config(settings, data), data)
        except ConfigError as e:
            return _one_line(str(e))
        return None

    # 1. the anchor
    total = math.prod(len(p.choices) for p in cats)
    failures: list[tuple[dict[str, Any], str]] = []
    anchor: dict[str, Any] | None = None
    for combo in itertools.islice(_combinations(cats), _MAX_COMBINATIONS):
        reason = probe({**at_low, **combo})
        if reason is None:
            anchor = combo
            break
        failures.append((combo, reason))
    if anchor is None:
        raise ConfigError(_no_fit_message(where, desc, cats, fixed, params, failures, total))

    # 2. each choice in the anchor
    notes: list[str] = []
    kept_cats: list[CategoricalParam] = []
    for p in cats:
        kept: list[Any] = []
        dropped: list[tuple[Any, str]] = []
        for choice in p.choices:
            in_anchor = choice is anchor[p.name]
            reason = None if in_anchor else probe({**at_low, **anchor, p.name: choice})
            if reason is None:
                kept.append(choice)
            else:
                dropped.append((choice, reason))
        if dropped:
            what = ", ".join(_show(c) for c, _ in dropped)
            notes.append(
                f"params.{p.name}: dropped {what}: they do not fit {desc} "
                f"(e.g. {dropped[0][1]})"
                if len(dropped) > 1
                else f"params.{p.name}: dropped {what}: it does not fit {desc} ({dropped[0][1]})"
            )
        kept_cats.append(CategoricalParam(name=p.name, choices=tuple(kept)))
        if len(kept) == 1 and len(p.choices) > 1:
            notes.append(f"params.{p.name}: only {kept[0]!r} fits {desc}; it is not searched")
    fitted: dict[str, Param] = dict(params)
    fitted.update({p.name: p for p in kept_cats})

    # 3. each numeric param's high in the anchor
    for num in nums:
        reason = probe({**at_low, **anchor, num.name: num.high_value})
        if reason is not None:
            raise ConfigError(
                f"{where}: params.{num.name}: high={_show(num.high_value)} does not fit {desc}: "
                f"{reason}; lower high"
            )

    # 4. every remaining combination, numeric params at both corners
    kept_total = math.prod(len(p.choices) for p in kept_cats)
    for combo in itertools.islice(_combinations(kept_cats), _MAX_COMBINATIONS):
        for corner, base in (("low", at_low), ("high", at_high)):
            if not nums and corner == "high":
                continue
            reason = probe({**base, **combo})
            if reason is not None:
                chosen = ", ".join(f"{k}={_show(v)}" for k, v in combo.items())
                what = " and ".join(
                    part for part in (chosen, f"numeric params at their {corner}" if nums else "")
                    if part
                )
                raise ConfigError(
                    f"{where}: params: the combination {what} does not fit {desc}: {reason}; "
                    "params are sampled independently, so narrow the choices or ranges until "
                    "every combination fits"
                )
    if kept_total > _MAX_COMBINATIONS:
        notes.append(
            f"checked the first {_MAX_COMBINATIONS} of {kept_total} combinations of choices "
            "against the data; a sampled trial may still be refused at its start"
        )
    return fitted, notes


def _combinations(cats: Sequence[CategoricalParam]) -> Iterator[dict[str, Any]]:
    names = [p.name for p in cats]
    for values in itertools.product(*(p.choices for p in cats)):
        yield dict(zip(names, values, strict=True))


def _no_fit_message(
    where: str,
    desc: str,
    cats: Sequence[CategoricalParam],
    fixed: Mapping[str, Any],
    params: Mapping[str, Param],
    failures: Sequence[tuple[dict[str, Any], str]],
    total: int,
) -> str:
    reasons = list(dict.fromkeys(reason for _, reason in failures))
    tried = f" (tried the first {len(failures)} of {total} combinations)" if len(failures) < total else ""
    if len(reasons) == 1 and (len(failures) > 1 or not cats):
        # The same failure whatever the choices: the culprit is a fixed value or a range.
        blame = _blame(reasons[0], params, fixed)
        return (
            f"{where}: {blame}: the search space does not fit {desc} (every param at its "
            f"first choice or low){tried}: {reasons[0]}{_weights_hint(blame, params)}"
        )
    blamed = {_blame(reason, params, fixed) for reason in reasons}
    culprits = [p for p in cats if {f"params.{p.name}"} == blamed]
    if len(cats) == 1 or culprits:
        # Every failure names one categorical param: list why each of its choices fails.
        p = culprits[0] if culprits else cats[0]
        by_choice: dict[str, str] = {}
        for combo, reason in failures:
            by_choice.setdefault(_show(combo[p.name]), reason)
        listed = "; ".join(f"{c}: {r}" for c, r in list(by_choice.items())[:_MAX_REASONS])
        more = f"; and {len(by_choice) - _MAX_REASONS} more" if len(by_choice) > _MAX_REASONS else ""
        return f"{where}: params.{p.name}: no choice fits {desc}{tried}: {listed}{more}"
    combo, reason = failures[0]
    chosen = ", ".join(f"{k}={_show(v)}" for k, v in combo.items())
    names = ", ".join(f"params.{p.name}" for p in cats)
    return (
        f"{where}: no combination of the choices of {names} fits {desc}{tried}; "
        f"e.g. {chosen}: {reason}"
    )


def _weights_hint(blame: str, params: Mapping[str, Param]) -> str:
    param = params.get(blame.removeprefix("params."))
    if isinstance(param, WeightsParam):
        return f" (the space gives {len(param.names)} weights: {', '.join(param.names)})"
    return ""


def _blame(reason: str, params: Mapping[str, Param], fixed: Mapping[str, Any]) -> str:
    """The key a config error names (house style: ``name=value``), if it is in the space."""
    for section, keys in (("params", params), ("fixed", fixed)):
        for key in keys:
            if re.search(rf"(?<![\w.]){re.escape(key)}=", reason):
                return f"{section}.{key}"
    return "fixed/params"


# ----------------------------------------------------------------------- helpers


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key repeated in one mapping (PyYAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if isinstance(key, typing.Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _yaml_problem(e: yaml.YAMLError) -> str:
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or str(e)
    place = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return _one_line(place + problem)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return "(" + ", ".join(_show(v) for v in value) + ")"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
