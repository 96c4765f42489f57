"""The search space format, and its validation against the method's config class.

A search space is a YAML file for one method::

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

Every error is one line naming the file and the key (``FILE: params.mu: ...``).
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from raydp_synth.errors import ConfigError
from raydp_synth.methods.base import Method
from raydp_synth.tune.search_space.messages import kind_of
from raydp_synth.tune.search_space.params import (
    CategoricalParam,
    FloatParam,
    IntParam,
    Param,
    WeightsParam,
)

__all__ = ["PARAM_TYPES", "RESERVED", "TOP_LEVEL_KEYS", "validate_spec"]

#: Config fields that a search space may neither sample nor fix, and why.
RESERVED: dict[str, str] = {
    "image_size": "it is set by the dataset",
    "seed": "the study sets it",
}

#: The keys of a search space file, and those it must have.
TOP_LEVEL_KEYS = ("method", "params", "fixed")
_REQUIRED_TOP_LEVEL = ("method", "params")

#: Param type -> (required, optional) fields of its spec.
PARAM_TYPES: dict[str, tuple[set[str], set[str]]] = {
    "int": ({"low", "high"}, {"log", "step"}),
    "float": ({"low", "high"}, {"log", "step"}),
    "categorical": ({"choices"}, set()),
    "weights": ({"names", "low", "high"}, {"log"}),
}


def validate_spec(
    raw: Any, method: Method, where: str
) -> tuple[dict[str, Param], dict[str, Any]]:
    """The params and the fixed settings of a search space given as a (YAML-loaded)
    mapping, checked against ``method``'s config class (not yet against any data).

    Args:
        raw: the loaded YAML document.
        method: the method the study tunes (the file's ``method`` must name it).
        where: the file's name, the start of every error message.

    Raises:
        ConfigError: one line naming ``where`` and the key at fault.
    """
    _check_top_level(raw, method, where)
    config_class = method.config_class
    hints = typing.get_type_hints(config_class)
    settable = [f.name for f in fields(config_class) if f.name not in RESERVED]
    valid = f"valid keys: {', '.join(sorted(settable))}"

    fixed_raw = raw.get("fixed")
    fixed_raw = {} if fixed_raw is None else fixed_raw
    if not isinstance(fixed_raw, Mapping):
        raise ConfigError(f"{where}: fixed: expected a mapping of settings, got {kind_of(fixed_raw)}")
    fixed: dict[str, Any] = {}
    for key, value in fixed_raw.items():
        _check_key(where, "fixed", key, hints, config_class, valid)
        fixed[key] = value

    params_raw = raw["params"]
    if not isinstance(params_raw, Mapping) or not params_raw:
        raise ConfigError(
            f"{where}: params: expected a non-empty mapping of params to sample, "
            f"got {kind_of(params_raw) if params_raw else 'nothing'}"
        )
    params: dict[str, Param] = {}
    for key, spec in params_raw.items():
        _check_key(where, "params", key, hints, config_class, valid)
        if key in fixed:
            raise ConfigError(
                f"{where}: params.{key}: also in fixed; a setting is either sampled or fixed"
            )
        params[key] = _parse_param(where, key, spec, hints[key])
    return params, fixed


def _check_top_level(raw: Any, method: Method, where: str) -> None:
    """A mapping of the top-level keys, for ``method``."""
    if raw is None:
        raise ConfigError(f"{where}: is empty; expected a mapping with keys {', '.join(TOP_LEVEL_KEYS)}")
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"{where}: expected a mapping with keys {', '.join(TOP_LEVEL_KEYS)}, "
            f"got {kind_of(raw)}"
        )
    unknown = [str(k) for k in raw if k not in TOP_LEVEL_KEYS]
    if unknown:
        raise ConfigError(
            f"{where}: unknown top-level key(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(TOP_LEVEL_KEYS)}"
        )
    missing = [k for k in _REQUIRED_TOP_LEVEL if k not in raw]
    if missing:
        raise ConfigError(f"{where}: missing top-level key(s) {', '.join(missing)}")
    if raw["method"] != method.name:
        raise ConfigError(
            f"{where}: method: the file is for {raw['method']!r}, but the study tunes "
            f"{method.name!r}"
        )


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
            f"got {kind_of(spec)}"
        )
    if "type" not in spec:
        raise ConfigError(f"{at}: missing 'type' (one of {', '.join(PARAM_TYPES)})")
    kind = spec["type"]
    if kind not in PARAM_TYPES:
        raise ConfigError(f"{at}: unknown type {kind!r}; types: {', '.join(PARAM_TYPES)}")
    required, optional = PARAM_TYPES[kind]
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
        raise ConfigError(f"{at}: choices must be a list, got {kind_of(choices)}")
    if not choices:
        raise ConfigError(f"{at}: choices is empty; list at least one value")
    for c in choices:
        if c is not None and not isinstance(c, (str, int, float, bool)):
            raise ConfigError(
                f"{at}: choice {c!r} is {kind_of(c)}; choices must be scalars "
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

