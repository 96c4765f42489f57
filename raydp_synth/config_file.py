"""``--config FILE``: a method configuration read from a file, e.g. to train a
released (or a study's best) configuration again without retyping ``--set`` keys.

FILE is any of:

* a release folder, or a run or study directory holding ``release/``: its
  ``generator.json`` (the released generator's method and full config; a study
  releases its best trial's);
* a ``generator.json``-shaped JSON file (``{"method": ..., "config": {...}}``);
* a JSON or YAML mapping of settings (``{"mu": 8, "epochs": 20}``), as ``--set``
  takes them.

The config's ``seed`` is not taken: the seed is the run's ``--seed``. Explicit
``--set KEY=VALUE`` options win over the file.

Privacy: a released configuration is public (it is in ``generator.json``), so
reading it costs nothing; but it was chosen on the data of the run or study that
released it. Training it again on the same data is a new mechanism on that data:
the new run's ``privacy.json`` states the new run only, and the data's total cost
is the composition of both statements (at most the sum of their epsilons and of
their deltas).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from raydp_synth.errors import ConfigError
from raydp_synth.release.layout import GENERATOR_CONFIG

__all__ = ["NOT_FROM_FILE", "ConfigFile", "load_config_file", "merge_settings"]

#: Config keys a file does not set: the run's own options.
NOT_FROM_FILE = frozenset({"seed"})


@dataclass(frozen=True)
class ConfigFile:
    """A loaded ``--config`` file.

    Attributes:
        path: the file read (a folder resolves to its ``release/generator.json``).
        method: the method the file names (None: a plain mapping names none).
        settings: its settings, without :data:`NOT_FROM_FILE`.
        released: whether it is a release's ``generator.json``.
    """

    path: Path
    method: str | None
    settings: dict[str, Any]
    released: bool


def _file_of(path: Path) -> Path:
    if path.is_dir():
        for candidate in (path / GENERATOR_CONFIG, path / "release" / GENERATOR_CONFIG):
            if candidate.is_file():
                return candidate
        raise ConfigError(f"--config {path}: no {GENERATOR_CONFIG} in it or in its release/; "
                          "pass a release folder, a run or study directory, or a JSON/YAML "
                          "file of settings")
    if not path.is_file():
        raise ConfigError(f"--config {path} does not exist; pass a release folder, a run or "
                          "study directory, or a JSON/YAML file of settings")
    return path


def load_config_file(path: Path, *, method: str) -> ConfigFile:
    """Read ``path`` (see the module docstring) for ``method``.

    Raises:
        ConfigError: unreadable, not a mapping, or a release of another method.
    """
    file = _file_of(Path(path).expanduser())
    try:
        text = file.read_text()
        data = json.loads(text) if file.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(f"--config {file} cannot be read as JSON or YAML ({detail})") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"--config {file} does not hold a mapping of settings")
    released = isinstance(data.get("config"), Mapping) and "method" in data
    named = str(data["method"]) if released or isinstance(data.get("method"), str) else None
    values = dict(data["config"]) if released else {k: v for k, v in data.items() if k != "method"}
    if named is not None and named != method:
        raise ConfigError(f"--config {file} is a {named} configuration, not {method}'s; pass "
                          f"{named} as the method or another file")
    bad = [k for k in values if not isinstance(k, str)]
    if bad:
        raise ConfigError(f"--config {file}: setting names must be strings, not {bad[0]!r}")
    settings = {k: v for k, v in values.items() if k not in NOT_FROM_FILE}
    return ConfigFile(path=file, method=named, settings=settings, released=released)


def merge_settings(file: ConfigFile | None, explicit: Mapping[str, Any]) -> dict[str, Any]:
    """The run's settings: the file's, then the explicit ``--set`` ones (which win)."""
    return {**(file.settings if file is not None else {}), **explicit}
