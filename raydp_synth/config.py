"""Typed configuration: user values (``--set``, YAML, search spaces) into frozen
dataclasses, validated at the edge.

A method's config is a frozen dataclass; :func:`config_from_mapping` coerces
strings to the field types and rejects unknown keys, the dataclass'
``__post_init__`` checks ranges with :func:`require_positive` and
:func:`require_betas`, and :func:`config_to_dict` gives the JSON form that run
directories and checkpoints store.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar

from raydp_synth.errors import ConfigError

__all__ = [
    "HYPERPARAMETER_KINDS",
    "SENSITIVE_BATCH",
    "MethodConfig",
    "config_from_mapping",
    "config_to_dict",
    "require_betas",
    "require_positive",
]


#: A hyperparameter's kind: what it is to the privacy plan, which decides how it moves
#: between a tuning subset and the full data (``raydp_synth.tune.extrapolation``:
#: a sensitive batch scales with the data, every other kind is kept).
SENSITIVE_BATCH = "sensitive batch"
EPOCHS = "epochs"
BUDGET_WEIGHTS = "noise / budget weights"
LEARNING_RATE = "learning rate"
CLIP_NORM = "clip norm"
SCHEDULE = "schedule"
ARCHITECTURE = "architecture"
PUBLIC_DATA = "public data"
HYPERPARAMETER_KINDS = (SENSITIVE_BATCH, EPOCHS, BUDGET_WEIGHTS, LEARNING_RATE, CLIP_NORM,
                        SCHEDULE, ARCHITECTURE, PUBLIC_DATA)


@dataclasses.dataclass(frozen=True, kw_only=True)
class MethodConfig:
    """The fields every method's config has; a method's config class derives from it.

    Attributes:
        image_size: side of the (square) images the networks are built for; defaults
            to the data's (:meth:`~raydp_synth.methods.base.Method.make_config`).
        seed: public seed of initialisation and synthetic draws. Poisson sampling,
            per-record draws and noise use the run's secret seed, never this one.
    """

    #: The kind of each field this class adds (one of :data:`HYPERPARAMETER_KINDS`); a
    #: config's kinds are its classes' together (:meth:`hyperparameter_kinds`). A field
    #: without a kind is refused by the tests and by subsampled tuning.
    KINDS: ClassVar[Mapping[str, str]] = {"image_size": ARCHITECTURE, "seed": PUBLIC_DATA}

    image_size: int
    seed: int = 0

    @classmethod
    def hyperparameter_kinds(cls) -> dict[str, str]:
        """Every field's kind, from the ``KINDS`` of this class and its bases (a
        subclass may redeclare a field's kind)."""
        kinds: dict[str, str] = {}
        for klass in reversed(cls.__mro__):
            kinds.update(vars(klass).get("KINDS", {}))
        return kinds


def _coerce(name: str, value: Any, annotation: Any) -> Any:
    """Convert a user value (often a string from ``--set``) to the field's type."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if type(None) in args:
                return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(name, value, arg)
            except ConfigError:
                continue
        raise ConfigError(f"{name}={value!r} is not a valid {annotation}")
    try:
        if origin is tuple:
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(_coerce(name, v, args[0]) for v in items)
        if annotation is bool:
            if isinstance(value, str):
                if value.lower() in ("true", "1", "yes"):
                    return True
                if value.lower() in ("false", "0", "no"):
                    return False
                raise ValueError
            return bool(value)
        if annotation is int:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(float(value)) if isinstance(value, str) and "." in value else int(value)
        if annotation is float:
            return float(value)
        if annotation is str:
            return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={value!r} is not a valid {getattr(annotation, '__name__', annotation)}") from None
    return value


def config_from_mapping(cls: type, values: Mapping[str, Any], **extra: Any) -> Any:
    """Build the frozen config dataclass ``cls`` from user values.

    Unknown keys are rejected with the list of valid ones; values are coerced to
    the field types; ``cls.__post_init__`` validates ranges.
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(
            f"unknown setting(s) {', '.join(unknown)} for {cls.__name__}; "
            f"valid keys: {', '.join(sorted(fields))}"
        )
    kwargs = {k: _coerce(k, v, hints[k]) for k, v in values.items()}
    kwargs.update(extra)
    return cls(**kwargs)


def require_betas(config: Any) -> None:
    """Adam's ``beta1`` and ``beta2`` in [0, 1)."""
    for name in ("beta1", "beta2"):
        if not 0 <= getattr(config, name) < 1:
            raise ConfigError(f"Expected 0 <= {name}={getattr(config, name)} < 1.")


def require_positive(config: Any, *, integers: tuple[str, ...] = (),
                     floats: tuple[str, ...] = ()) -> None:
    """A config's range checks: ``integers`` >= 1, ``floats`` finite and > 0."""
    for name in integers:
        if getattr(config, name) < 1:
            raise ConfigError(f"Expected {name}={getattr(config, name)} >= 1.")
    for name in floats:
        value = getattr(config, name)
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(f"Expected {name}={value} > 0.")


def config_to_dict(config: Any) -> dict[str, Any]:
    """Plain JSON-able dict of a config dataclass (tuples become lists)."""
    return {
        k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config).items()
    }
