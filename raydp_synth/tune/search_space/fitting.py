"""Fitting a search space to the data: drop what cannot build a model, refuse what
cannot build any.

The space is checked against the dataset's public
:class:`~raydp_synth.methods.base.DataInfo` by building configs with the method
itself (``method.make_config``, then ``method.schedule``: shapes, sample rates, step
counts), so no method-specific rule lives here. Numeric params are held at ``low``
unless said otherwise.

1. Anchor: the first combination of categorical choices that gives a valid config;
   if none does, :class:`~raydp_synth.errors.ConfigError`.
2. Every categorical choice is tried in the anchor; a choice that does not fit is
   dropped with a note (:attr:`SearchSpace.notes
   <raydp_synth.tune.search_space.space.SearchSpace.notes>`), e.g. DPAF layer splits
   with more conv layers than the image size allows.
3. Every numeric param's ``high`` is tried in the anchor.
4. Every combination of the remaining choices (the first 512) is tried with the
   numeric params all at ``low`` and all at ``high``. Samplers draw each param
   independently, so choices that do not fit *together* are an error, not a note.
   Corners are a heuristic: a config rule coupling two numeric params in opposite
   directions can still refuse a sampled trial, at trial start.

Only public facts (the data's shape, class count and size, the space itself) enter
these checks, so what they drop and the notes they print reveal nothing private.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from raydp_synth.data import DataInfo
from raydp_synth.errors import ConfigError
from raydp_synth.methods.base import Method
from raydp_synth.tune.search_space.messages import one_line, show
from raydp_synth.tune.search_space.params import (
    CategoricalParam,
    NumericParam,
    Param,
    WeightsParam,
)

__all__ = ["MAX_COMBINATIONS", "fit_to_data"]

#: Combinations of choices tried at most. Each config probe costs ~0.4 ms (DPAF); this
#: bounds the load time to well under a second.
MAX_COMBINATIONS = 512
_MAX_REASONS = 3


def fit_to_data(
    where: str,
    method: Method,
    data: DataInfo,
    params: dict[str, Param],
    fixed: dict[str, Any],
) -> tuple[dict[str, Param], list[str]]:
    """Drop categorical choices that do not fit ``data``; refuse a space where nothing
    fits (the module docstring lists the four steps).

    Returns:
        The params with the choices that fit, and the notes of what was dropped.

    Raises:
        ConfigError: one line naming ``where`` and the key to change.
    """
    desc = (
        f"{data.image_size}x{data.image_size}x{data.channels} images, "
        f"{data.num_classes} classes, {data.num_records} records"
    )
    cats = [p for p in params.values() if isinstance(p, CategoricalParam)]
    nums: list[NumericParam] = [p for p in params.values() if not isinstance(p, CategoricalParam)]
    at_low = {**fixed, **{p.name: p.low_value for p in nums}}
    at_high = {**fixed, **{p.name: p.high_value for p in nums}}

    def probe(settings: Mapping[str, Any]) -> str | None:
        """None if ``settings`` give a valid config for ``data``, else the reason."""
        try:
            method.schedule(method.make_config(settings, data), data)
        except ConfigError as e:
            return one_line(str(e))
        return None

    # 1. the anchor
    total = math.prod(len(p.choices) for p in cats)
    failures: list[tuple[dict[str, Any], str]] = []
    anchor: dict[str, Any] | None = None
    for combo in itertools.islice(_combinations(cats), MAX_COMBINATIONS):
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
            what = ", ".join(show(c) for c, _ in dropped)
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
                f"{where}: params.{num.name}: high={show(num.high_value)} does not fit {desc}: "
                f"{reason}; lower high"
            )

    # 4. every remaining combination, numeric params at both corners
    kept_total = math.prod(len(p.choices) for p in kept_cats)
    for combo in itertools.islice(_combinations(kept_cats), MAX_COMBINATIONS):
        for corner, base in (("low", at_low), ("high", at_high)):
            if not nums and corner == "high":
                continue
            reason = probe({**base, **combo})
            if reason is not None:
                chosen = ", ".join(f"{k}={show(v)}" for k, v in combo.items())
                what = " and ".join(
                    part for part in (chosen, f"numeric params at their {corner}" if nums else "")
                    if part
                )
                raise ConfigError(
                    f"{where}: params: the combination {what} does not fit {desc}: {reason}; "
                    "params are sampled independently, so narrow the choices or ranges until "
                    "every combination fits"
                )
    if kept_total > MAX_COMBINATIONS:
        notes.append(
            f"checked the first {MAX_COMBINATIONS} of {kept_total} combinations of choices "
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
            by_choice.setdefault(show(combo[p.name]), reason)
        listed = "; ".join(f"{c}: {r}" for c, r in list(by_choice.items())[:_MAX_REASONS])
        more = f"; and {len(by_choice) - _MAX_REASONS} more" if len(by_choice) > _MAX_REASONS else ""
        return f"{where}: params.{p.name}: no choice fits {desc}{tried}: {listed}{more}"
    combo, reason = failures[0]
    chosen = ", ".join(f"{k}={show(v)}" for k, v in combo.items())
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

