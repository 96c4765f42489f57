"""A study's release: the best finished trial of the whole study (every session),
with the privacy statement of its accountant, and the curator's view of it.

``release/`` holds what may be published (raydp_synth.release.bundle); run.json,
score.json and the evaluation stay with the curator. The release is written last,
whole or not at all (:func:`~raydp_synth.release.write_release`), after run.json and
score.json: a study with ``release/privacy.json`` has every file of its release and
of the curator's view, whenever it was interrupted (and a resume never rewrites it,
:mod:`raydp_synth.tune.resume_checks`).
"""

from __future__ import annotations

import json
import logging
import math
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from raydp_synth.config import config_to_dict
from raydp_synth.errors import BudgetExhausted
from raydp_synth.evaluation.report import evaluate_run, format_table
from raydp_synth.release import TrainedGenerator, write_release
from raydp_synth.release.bundle import public_data_note, public_facts
from raydp_synth.train.driver import evaluation_settings
from raydp_synth.tune.strategies.registry import STRATEGIES
from raydp_synth.tune.trial import TRIAL_CHECKPOINT

if TYPE_CHECKING:
    from raydp_synth.tune.search_space import SearchSpace
    from raydp_synth.tune.strategies.base import StudyOptions

__all__ = ["Release", "default_verdict", "evaluate_release", "finished_trials",
           "hides_trial_count", "no_release_message", "re_evaluate", "release_best"]

_LOG = logging.getLogger(__name__)


def hides_trial_count(pricing: str) -> bool:
    """Whether a study priced by ``pricing`` (the ledger's mode) keeps its trial count
    secret: some strategy of that pricing does
    (:attr:`~raydp_synth.tune.strategies.base.SearchStrategy.hides_trial_count`)."""
    return any(s.hides_trial_count for s in STRATEGIES.values() if s.pricing == pricing)


def finished_trials(study_dir: Path) -> list[dict[str, Any]]:
    """Every trial of the study (all sessions) that finished with a score."""

    found = []
    for path in sorted(study_dir.glob(f"tune*/*/checkpoint_*/{TRIAL_CHECKPOINT}")):
        info = json.loads(path.read_text())
        found.append({"trial": info["trial_id"], "score": info["score"]["value"],
                      "checkpoint": path.parent})
    return found


def no_release_message(name: str, study_dir: Path, status: dict[str, Any]) -> str:
    """Why a study released nothing, stated as its ledger stands (``status``: the
    accountant's :meth:`~raydp_synth.accountant.actor.BudgetAccountant.status`, the
    ledger's grants and refusals replayed). Where the study's pricing hides the trial
    count (random stopping, subsampled tuning: :func:`hides_trial_count`) the counts
    stay out of the message (they would tell K, which only the ledger holds)."""
    granted, refused = status["trials_granted"], status["trials_refused"]
    budget = f"epsilon {status['spent_epsilon']:.4f} of {status['budget_epsilon']:g}"
    if hides_trial_count(status["mode"]):
        spent = f"the ledger holds its trials' grants, {budget} spent and not refunded"
    elif granted:
        spent = (f"the ledger holds {granted} grant{'s' if granted != 1 else ''} and "
                 f"{refused} refusal{'s' if refused != 1 else ''}, {budget} spent and not "
                 "refunded")
    else:
        spent = (f"the ledger holds no grant ({refused} refusal{'s' if refused != 1 else ''}): "
                 "nothing was spent")
    return (f"no trial of study {name} finished with a score (see {study_dir / 'tune'}); "
            f"{spent} (python -m raydp_synth.budget {study_dir})")


def default_verdict(request: StudyOptions, default: Any, released_config: dict[str, Any],
                    space: SearchSpace) -> str | None:
    """The study's last word when it released the method's default configuration
    (``default``, with the space's fixed values; its public seed aside), as the
    study's ``space`` runs it (a weights param by its ratios:
    :meth:`~raydp_synth.tune.search_space.SearchSpace.same_configuration`): the
    search found none that scored higher, so at this budget one run of the default,
    which spends the whole budget on it, is the alternative to weigh. None when the
    release is another configuration, or when every trial was the default by request
    (``--default-share 1``: restarts, whose release is the default by design).

    Privacy: a function of the released configuration (part of the release) and of
    public settings; it says nothing of the other trials.
    """
    if default is None or request.default_share == 1:
        return None

    def comparable(config: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in json.loads(json.dumps(config)).items() if k != "seed"}

    if not space.same_configuration(comparable(config_to_dict(default)),
                                    comparable(released_config)):
        return None
    return (f"the released configuration is {request.method}'s default: at this budget the "
            "search found none that scored higher, and one run of the default spends the whole "
            f"epsilon on it (python -m raydp_synth.train {request.method} --epsilon "
            f"{request.epsilon:g} --delta {request.delta:g} "
            f"--dataset {shlex.quote(str(request.dataset))})")


class Release(NamedTuple):
    """What :func:`release_best` released: the statement (``release/privacy.json`` as
    written: the reader's layout, :func:`~raydp_synth.release.bundle.reader_layout`),
    the released trial and its score, every finished trial of the study and its score."""

    statement: dict[str, Any]
    best_trial: str
    best_score: float
    trials: list[dict[str, Any]]


def release_best(request: StudyOptions, study_dir: Path, accountant: Any,
                 name: str, extra: dict[str, Any] | None = None, default: Any = None,
                 space: SearchSpace | None = None) -> Release:
    """Release the study's best finished trial; ``extra`` (a strategy's
    ``statement`` and ``run`` fields, e.g. ``--tune-on-public``'s scope) overrides
    the defaults of privacy.json and run.json; ``default``: the method's default
    config of the study, and ``space`` its search space (:func:`default_verdict` says
    so when the default is the release)."""
    import ray
    import torch

    _LOG.info(f"releasing the best trial of study {name} to {study_dir / 'release'}")
    trials = finished_trials(study_dir)
    scored = [t for t in trials if math.isfinite(t["score"])]
    best = max(scored, key=lambda t: t["score"]) if scored else None
    statement = ray.get(accountant.statement.remote())
    strategy = request.search_strategy
    if strategy.releases_after_all_draws and ray.get(accountant.status.remote())["can_grant"]:
        # The theorem covers the best of exactly K trials, not of fewer.
        raise BudgetExhausted(
            f"study {name} stopped before its random number of trials was reached (see the "
            f"trial errors in {study_dir / 'tune'}); nothing is released. Fix the cause and "
            "continue it with --resume"
        )
    if best is None:
        raise BudgetExhausted(no_release_message(name, study_dir,
                                                 ray.get(accountant.status.remote())))
    score, ckpt = best["score"], best["checkpoint"]
    info = json.loads((ckpt / TRIAL_CHECKPOINT).read_text())
    state = torch.load(ckpt / "generator.pt", map_location="cpu")
    generator = TrainedGenerator.build(**info["generator"], state_dict=state)
    full = {
        "epsilon": statement["epsilon"],
        "delta": statement["delta"],
        "private": True,
        "scope": "the whole hyperparameter search (every trial, its selection score, and the "
                 "choice of the best trial), priced by the study's accountant from its ledger",
        "pricing": statement,
        "accountant": statement["accountant"],
        "dataset": str(request.dataset),
        "released_trial_plan": info["plan"],
    }
    declared = json.loads((study_dir / "study.json").read_text()).get("public")
    if declared is not None:
        full["public_data"] = public_data_note(declared)
    score_info = info["score"]
    validation = request.public_validation or request.tune_on_public
    full["public_facts"] = public_facts(
        generator.data, generator.class_names, public=declared,
        validation_records=score_info.get("num_records") if score_info.get("private") else None,
        public_validation=None if score_info.get("private") or validation is None else
        str(validation))
    full.update((extra or {}).get("statement", {}))
    trial_id = info["trial_id"]
    (study_dir / "run.json").write_text(json.dumps({
        "method": request.method, "dataset": str(request.dataset), "seed": request.seed,
        # What each seed drove in the released trial: the data splits (and the
        # evaluation's, which reads "seed") and the initialisation (a restart's own).
        "data_seed": info.get("data_seed", request.seed),
        "init_seed": info["generator"]["config"].get("seed"),
        "study": name, "released_trial": trial_id, "checkpoints": f"trials/{trial_id}",
        **(extra or {}).get("run", {}),
    }, indent=2))
    (study_dir / "score.json").write_text(json.dumps(info["score"], indent=2))
    # Last, whole or not at all: the study's release (its privacy.json) exists only
    # with the curator's files above.
    write_release(study_dir / "release", generator=generator, statement=full,
                  num_synthetic=request.synthetic_samples, seed=request.seed)
    written = json.loads((study_dir / "release" / "privacy.json").read_text())
    # The budget gauges' one move under every mode but compose (accountant/gauges.py).
    ray.get(accountant.publish_release.remote())
    scope = strategy.release_scope
    kind = "private" if info["score"].get("private", True) else "public"
    print(f"[raydp_synth] released trial {trial_id} ({kind} score {score:.4f}) to "
          f"{study_dir / 'release'}; {scope} is ({statement['epsilon']:.4f}, "
          f"{statement['delta']:g})-DP ({statement['mode']})")
    verdict = (None if space is None else
               default_verdict(request, default, info["generator"]["config"], space))
    if verdict is not None:
        print(f"[raydp_synth] {verdict}")
    if request.evaluate:
        evaluate_release(request, study_dir)
    return Release(statement=written, best_trial=trial_id, best_score=score,
                   trials=[{"trial": t["trial"], "score": t["score"]} for t in trials])


def evaluate_release(request: StudyOptions, study_dir: Path) -> None:
    """The curator's evaluation of the study's release (``evaluation.json``, the
    figure; it reads the test split without noise and releases nothing), printed."""
    print(format_table(evaluate_run(study_dir, settings=evaluation_settings(
        use_gpu=request.gpus_per_worker() > 0, curve_checkpoints=None,
        fid_weights=request.fid_weights))))


def re_evaluate(request: StudyOptions, study_dir: Path) -> Release:
    """``--resume --re-evaluate`` of a finished study: its evaluation only, rerun.

    No Ray, no grant, no training: the release (and its generator) is read, never
    written, and the ledger is not opened. The evaluation is post-processing of the
    released generator by the curator, who holds the test split anyway; it changes
    nothing that the study's statement covers."""
    statement = json.loads((study_dir / "release" / "privacy.json").read_text())
    run = json.loads((study_dir / "run.json").read_text())
    score = json.loads((study_dir / "score.json").read_text())
    trials = finished_trials(study_dir)
    _LOG.info(f"study {study_dir.name} is finished; rerunning the evaluation of its release "
              f"{study_dir / 'release'}")
    evaluate_release(request, study_dir)
    return Release(statement=statement, best_trial=run["released_trial"],
                   best_score=score["value"],
                   trials=[{"trial": t["trial"], "score": t["score"]} for t in trials])
