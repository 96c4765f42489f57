"""Loading a search space: the user's YAML file, or the method's packaged default,
validated (:mod:`~raydp_synth.tune.search_space.schema`) and fitted to the data
(:mod:`~raydp_synth.tune.search_space.fitting`)."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from raydp_synth.data import DataInfo
from raydp_synth.errors import ConfigError
from raydp_synth.methods.base import Method
from raydp_synth.methods.registry import get_method
from raydp_synth.tune.search_space.fitting import fit_to_data
from raydp_synth.tune.search_space.messages import one_line
from raydp_synth.tune.search_space.schema import validate_spec
from raydp_synth.tune.search_space.space import SearchSpace

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = ["load_search_space", "parse_search_space"]


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
            missing or not YAML, any schema error
            (:mod:`~raydp_synth.tune.search_space.schema`), or a space with no config
            that fits ``data``.
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
        raise ConfigError(f"{source}: cannot read the search space: {one_line(str(e))}") from None
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
    params, fixed = validate_spec(raw, method, where)
    params, notes = fit_to_data(where, method, data, params, fixed)
    return SearchSpace(
        method=method.name,
        params=params,
        fixed=fixed,
        notes=tuple(notes),
        path=Path(source) if isinstance(source, Path) else None,
    )


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
    return one_line(place + problem)

