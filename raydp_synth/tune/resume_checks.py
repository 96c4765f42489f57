"""What ``--resume`` checks before anything runs: the study is resumed with the
settings it was started with, and a finished study is left as it is.

A study's ``study.json`` records the request it was started with
(:func:`request_json`). A resume continues that search on the
same ledger, so every setting that decides what the trials are, how they are priced
or what is released must be the recorded one: a resume with another method would
otherwise train and release another method's generator under the statement of the
study's ledger, and relabel the study. Only how the trials run (resources, where the
loop runs, whether the per-record gradients are compiled), where the study lives and
the curator's evaluation may change (:data:`MAY_CHANGE_ON_RESUME`). The accountant
checks its own pricing settings against the ledger header as well (after Ray
starts); these checks come first and are one line each, before Ray starts and
before anything is written.

A finished study (its ``release/privacy.json`` exists: the release is written whole
or not at all, :func:`raydp_synth.release.write_release`) has nothing left to
search; a resume says so and changes nothing, unless ``--re-evaluate`` asks to rerun
the curator's evaluation of its release (no grant, no training, the release
untouched: :func:`raydp_synth.tune.study_release.re_evaluate`). The release is never
rewritten by a resume.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import shlex
from pathlib import Path
from typing import Any

from raydp_synth.data.public import PublicDeclaration
from raydp_synth.data.spec import DatasetSpec
from raydp_synth.errors import ConfigError

__all__ = ["MAY_CHANGE_ON_RESUME", "PERSISTED_KEYS", "check_finished",
           "check_re_evaluate_request", "check_same_settings", "is_finished", "request_json"]

#: Request fields ``study.json`` records under another (earlier) name: the strategy's
#: name keeps its key ``"selection"``, so that older studies and tools read it as before.
PERSISTED_KEYS = {"strategy": "selection"}

#: The request's fields that a resume may change: how and where the trials run, where
#: the study lives, and the curator's evaluation. Nothing here changes what a trial
#: trains, how it is priced or what is released.
MAY_CHANGE_ON_RESUME = frozenset({
    "resume", "re_evaluate", "name", "storage",
    "max_concurrent", "workers_per_trial", "use_gpu", "gpus_per_trial", "trial_loop",
    "compile_step", "evaluate", "fid_weights",
})


def request_json(request: Any) -> dict[str, Any]:
    """The request (a :class:`~raydp_synth.tune.study.StudyRequest`) as ``study.json``
    records it (paths, dataset specs and public declarations as their strings, fields
    under their :data:`PERSISTED_KEYS`), which a ``--resume`` is checked against
    (:func:`check_same_settings`, and the strategy's
    :meth:`~raydp_synth.tune.strategies.base.SearchStrategy.check_resumed`)."""
    return {PERSISTED_KEYS.get(field.name, field.name): _persisted(getattr(request, field.name))
            for field in dataclasses.fields(request)}


def _persisted(value: Any) -> Any:
    """A request field's value as ``study.json`` records it: a path, a dataset spec or
    a public declaration as its (canonical) string, anything else a copy."""
    if isinstance(value, (Path, DatasetSpec, PublicDeclaration)):
        return str(value)
    return copy.deepcopy(value)


def _as_recorded(value: Any) -> Any:
    """``value`` as study.json records it (paths as strings, tuples as lists)."""
    return json.loads(json.dumps(value, default=str))


def _flag(key: str) -> str:
    """The command-line option of study.json's key ``key``."""
    key = next((field for field, persisted in PERSISTED_KEYS.items() if persisted == key), key)
    if key == "method":
        return "METHOD"
    if key == "settings":
        return "--set/--config"
    return "--" + key.replace("_", "-")


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return shlex.quote(value) if value else "''"
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def check_same_settings(request: Any, study_dir: Path) -> None:
    """On ``--resume``: refuse, in one line, any setting that differs from the one
    ``study_dir``'s study.json recorded (but :data:`MAY_CHANGE_ON_RESUME`). A field
    that the record or the request lacks (a study started by another version) is not
    compared.

    Raises:
        ConfigError: naming the option, the study's value and the requested one.
    """
    recorded = json.loads((study_dir / "study.json").read_text()).get("request", {})
    asked = _as_recorded(request_json(request))
    for key, theirs in recorded.items():
        if key in MAY_CHANGE_ON_RESUME or key not in asked:
            continue
        if asked[key] != theirs:
            flag = _flag(key)
            raise ConfigError(
                f"--resume: study {study_dir.name} was started with {flag} {_shown(theirs)}, "
                f"not {_shown(asked[key])}; resume it with the same {flag}, or start a new "
                "study under a new --name")


def check_re_evaluate_request(request: Any) -> None:
    """``--re-evaluate`` reruns a finished study's evaluation: it needs ``--resume``
    (the study to evaluate) and the evaluation (not ``--no-eval``).

    Raises:
        ConfigError: one line naming what to add or drop.
    """
    if not getattr(request, "re_evaluate", False):
        return
    if not request.resume:
        raise ConfigError("--re-evaluate reruns a finished study's evaluation: add --resume "
                          "--name NAME (the study's)")
    if not request.evaluate:
        raise ConfigError("--re-evaluate reruns the evaluation that --no-eval skips: drop one")


def is_finished(study_dir: Path) -> bool:
    """Whether the study in ``study_dir`` has released (its privacy.json is the last
    file of the release, which is written whole or not at all)."""
    return (study_dir / "release" / "privacy.json").is_file()


def check_finished(request: Any, study_dir: Path) -> None:
    """On ``--resume``: a finished study is refused unless ``--re-evaluate`` reruns its
    evaluation; ``--re-evaluate`` of an unfinished one is refused too (its resume
    evaluates its release once it has one).

    Raises:
        ConfigError: one line saying what the study is and what to run.
    """
    re_evaluate = bool(getattr(request, "re_evaluate", False))
    finished = is_finished(study_dir)
    if finished and not re_evaluate:
        raise ConfigError(f"study {study_dir.name} is finished; its release is "
                          f"{study_dir / 'release'}; pass --re-evaluate to rerun its "
                          "evaluation")
    if re_evaluate and not finished:
        raise ConfigError(f"--re-evaluate: study {study_dir.name} has no release yet; "
                          "resume it without --re-evaluate (its evaluation runs once it "
                          "releases)")
