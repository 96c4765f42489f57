"""What a study settles before Ray starts: public facts, the search space, the study
directory, and its strategy's reference plan (:meth:`SearchStrategy.prepare
<raydp_synth.tune.strategies.base.SearchStrategy.prepare>`).

Everything here reads public facts only (and, on ``--resume``, the curator-only
study.json); a refusal is one line, before anything is written.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from raydp_synth.config import config_to_dict
from raydp_synth.data import data_info, load_training_data, sensitive_records
from raydp_synth.data.public import check_content_overlap, effective_public, public_records
from raydp_synth.errors import ConfigError
from raydp_synth.methods import get_method
from raydp_synth.privacy.accounting import parse_distribution, validate_delta
from raydp_synth.tune.prepared_study import PreparedStudy
from raydp_synth.tune.resume_checks import check_finished, check_same_settings
from raydp_synth.tune.search_space import load_search_space
from raydp_synth.tune.search_space.anchored import check_restarts_point

if TYPE_CHECKING:
    from raydp_synth.tune.strategies.base import StudyOptions

_LOG = logging.getLogger(__name__)

__all__ = ["check_study_dir", "prepare"]


def prepare(request: StudyOptions) -> PreparedStudy:
    """Load the data's public facts and the search space, check the study directory
    and the public validation data, and let the strategy prepare its plans."""

    method = get_method(request.method)
    name = request.name or f"{method.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    study_dir = (request.storage / name).resolve()
    check_study_dir(request, study_dir)
    if request.resume:  # first: the study's own settings, and not a finished study
        check_same_settings(request, study_dir)
        check_finished(request, study_dir)
    shape = parse_distribution(request.distribution)
    declared = effective_public(method, request.dataset, request.public)
    splits, public = load_training_data(request.dataset, public=declared, seed=request.seed,
                                        check_overlap=True)
    if request.public_validation:  # loads, and is not a copy of the sensitive data
        check_content_overlap(
            public_records(request.public_validation, like=splits.train, seed=request.seed),
            splits, what=f"--public-validation {request.public_validation}")
    data = data_info(splits.train, public)
    validate_delta(request.delta, dataset_size=sensitive_records(splits))  # |D|, not n
    space = load_search_space(request.search_space, method.name, data).with_fixed(
        request.settings)
    score_share = 0.0 if request.public_validation else request.score_share
    default = method.make_config({**space.fixed, "seed": request.seed}, data)
    if request.restarts:
        check_restarts_point(space.params, space.default_point(config_to_dict(default)))
    prepared = request.search_strategy.prepare(request, PreparedStudy(
        name=name, study_dir=study_dir, method=method, data=data, public=declared,
        space=space, default=default, reference=None, score_share=score_share,
        num_val=len(splits.val)), splits=splits, shape=shape)
    for note in prepared.space.notes:
        _LOG.info(f"search space: {note}")
    return prepared


def check_study_dir(request: StudyOptions, study_dir: Path) -> None:
    """A new study needs an empty (or no) folder; ``--resume`` needs a study there,
    started with what its strategy needs kept
    (:meth:`~raydp_synth.tune.strategies.base.SearchStrategy.check_resumed`)."""
    blocking = next((p for p in (study_dir, *study_dir.parents) if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        raise ConfigError(f"--storage {request.storage}: {blocking} is a file, not a folder; "
                          "pass a folder for the study directories")
    if request.resume:
        if not (study_dir / "study.json").is_file():
            raise ConfigError(f"--resume: {study_dir} holds no study; check --storage and --name")
        request.search_strategy.check_resumed(request, study_dir)
    elif study_dir.exists() and any(study_dir.iterdir()):
        raise ConfigError(f"study {study_dir} already exists; pass --resume to continue it "
                          "or choose a new --name")
