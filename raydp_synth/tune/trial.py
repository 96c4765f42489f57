"""One Tune trial: plan, get the plan granted, train on Ray Train, score, checkpoint.

The order is the privacy argument (docs/architecture.md, sections 2 and 3):

1. the configuration Tune proposes becomes a typed config and a calibrated plan,
   from public quantities (and the plans already granted);
2. the study's accountant grants or refuses the plan **before** any sensitive data
   is read; a refused trial ends at once (score -inf) and reads nothing;
3. the method's DP loop runs: a 1-worker trial runs it in its own process
   (:func:`~raydp_synth.train.pipeline.fit_in_process`: no second Ray Train worker
   group, placement group or process group; the trial holds the worker's CPUs and
   GPU, :func:`trial_resources`), a multi-worker trial as a ``TorchTrainer``; either
   way through the same worker body, whose reports carry only allow-listed metrics,
   forwarded to Tune (progress output, dashboard);
4. the private selection score (a mechanism of the granted plan) is released;
5. the generator, config and plan are checkpointed for the release.

A trial that crashes after its grant counts as spent (the ledger keeps the grant)
and is never rerun: Tune's ``max_failures=0``, and the accountant refuses a second
grant to a trial id that already has one from another attempt. A 1-worker trial
that crashes (or whose process is killed) mid-loop fails the same way: its Tune
trial errors and is not rerun.

Each trial writes ``trials/ID/timing.json`` (bench/trial_overhead.py reads it):
the trial's start and end (wall-clock ``started_at``, ``ended_at``) and the
seconds of the fixed phases around the DP loop (setup, grant, data, the loop's
start and end, score, checkpoint). So it gives the DP loop's wall time too (the
end less the start less the phases; no per-step time). That time grows with the
secret Poisson batch sizes (and, under random stopping, the trials' times show
their number), a timing side channel: the file is curator-only, in the owner-only
study directory, never reported to Tune, logged or part of a release
(docs/privacy.md, section 6).
"""

from __future__ import annotations

import json
import math
import os
import secrets
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from raydp_synth.accountant import get_accountant
from raydp_synth.data import load_training_data
from raydp_synth.data.public import public_records
from raydp_synth.errors import ConfigError
from raydp_synth.methods import get_method
from raydp_synth.privacy.events import event_from_json, event_to_json
from raydp_synth.train.pipeline import LoopPlacement, SingleRun, run_single
from raydp_synth.tune.extrapolation import subset_config, subset_data, subset_size
from raydp_synth.tune.strategies.roles import trial_plan
from raydp_synth.tune.study_settings import StudySettings

__all__ = ["TRIAL_CHECKPOINT", "TRIAL_METRICS", "TRIAL_TIMING", "in_process", "plan_or_refusal",
           "run_trial", "trial_resources", "trial_trainable"]

TRIAL_CHECKPOINT = "trial.json"
TRIAL_TIMING = "timing.json"
REFUSED_SCORE = -math.inf

#: The keys a trial reports to Tune itself (besides its workers' metrics, which the
#: method's allow-list holds). Safe because: ``score`` is the selection score, a
#: mechanism of the granted plan; ``granted``/``invalid``/``reason`` say whether the
#: accountant granted the plan or the config was refused (functions of public
#: configs and of the plans already granted); ``trial_epsilon`` is the plan's
#: epsilon (public arithmetic); ``epoch`` the last epoch run (public schedule).
TRIAL_METRICS = frozenset({"score", "granted", "invalid", "reason", "trial_epsilon", "epoch"})


def in_process(study: StudySettings) -> bool:
    """Whether the study's trials run their loop in their own process: 1-worker
    trials, unless ``--trial-loop ray-train`` (decided by the study's driver, which
    passes the answer to every trial: :func:`trial_trainable`)."""
    return study.workers == 1 and study.trial_loop != "ray-train"


def trial_resources(study: StudySettings, *, loop_in_process: bool,
                    driver_cpus: float) -> dict[str, float]:
    """What a Tune trial asks Ray for: ``driver_cpus`` when its loop runs on Ray Train
    workers (which ask for their own CPUs and GPUs), else also the one worker's CPUs
    and, with ``use_gpu``, its GPU share (``--gpus-per-trial``: a fraction packs
    1-worker trials onto one GPU; Ray places them). Rounded down to Ray's 1e-4
    resource unit, so that the concurrent trials' shares never add up to more than
    the cluster holds. A GPU share is therefore asked for once per worker, by
    whichever process runs that worker's loop."""
    if not loop_in_process:
        return {"CPU": driver_cpus}
    cpus = math.floor((driver_cpus + study.cpus_per_worker) * 1e4) / 1e4
    return {"CPU": cpus, **({"GPU": study.gpus_per_worker} if study.use_gpu else {})}


def trial_trainable(study: StudySettings, *, driver_cpus: float,
                    tuning_subset: Any = None) -> Any:
    """The study's Tune trainable: :func:`run_trial` with ``study`` and the driver's
    choice of where the loop runs (:func:`in_process`), with the resources that
    choice needs (:func:`trial_resources`). ``tuning_subset``: subsampled tuning's
    secret subset (:class:`~raydp_synth.tune.subsampled_search.TuningSubset`), which
    ``tune.with_parameters`` keeps in Ray's object store (never in a trial config)."""
    from ray import tune

    loop_in_process = in_process(study)
    extra = {} if tuning_subset is None else {"tuning_subset": tuning_subset}
    return tune.with_resources(
        tune.with_parameters(run_trial, study=study, loop_in_process=loop_in_process, **extra),
        trial_resources(study, loop_in_process=loop_in_process, driver_cpus=driver_cpus))


#: The timing file's phases: (name, first stamp, last stamp), in order; the DP loop
#: (``loop_start`` to ``loop_end``) is no phase of its own, but follows from the
#: file's ``started_at``, ``ended_at`` and the phases (curator-only: see above).
_PHASES = (
    ("setup", "start", "planned"), ("grant", "planned", "granted"),
    ("data", "granted", "data_loaded"), ("workers_start", "fit_start", "worker_start"),
    ("loop_setup", "worker_start", "loop_start"), ("loop_setup", "fit_start", "loop_start"),
    ("worker_end", "loop_end", "worker_end"), ("teardown", "worker_end", "fit_end"),
    ("teardown", "loop_end", "fit_end"), ("score", "fit_end", "scored"),
    ("checkpoint", "scored", "reported"),
)


def _write_timing(path: Path, stamps: dict[str, float], *, loop: str, workers: int) -> None:
    """The overhead phases of one trial (seconds) into ``path``, curator-only."""
    phases: dict[str, float] = {}
    for name, first, last in _PHASES:
        if name not in phases and first in stamps and last in stamps:
            phases[name] = round(stamps[last] - stamps[first], 3)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"loop": loop, "workers": workers, "process": os.getpid(),
                                "started_at": stamps["start"],
                                "ended_at": stamps["reported"], "overhead_s": phases}, indent=2))


def _report_final(metrics: dict[str, Any], checkpoint_dir: str | None = None) -> None:
    from ray import tune

    unsafe = sorted(set(metrics) - TRIAL_METRICS)
    if unsafe:
        raise RuntimeError(f"trial metric(s) {unsafe} are not on TRIAL_METRICS")
    checkpoint = tune.Checkpoint.from_directory(checkpoint_dir) if checkpoint_dir else None
    tune.report(metrics, checkpoint=checkpoint)


def trial_plan_of(study: StudySettings, method: Any, config: Any,
                  granted_events: list[dict[str, Any]], data: Any = None) -> Any:
    """The trial's plan (:func:`~raydp_synth.tune.strategies.roles.trial_plan`), or the
    driver's identical one (:class:`~raydp_synth.tune.study_settings.PlannedTrial`)
    when its inputs are this trial's. ``granted_events``: the ledger's grants so far
    (compose); ``data``: a subsampled tuning trial's subset facts."""
    planned = study.planned
    if (planned is not None and study.role.plans_against_grants
            and (data is None or data == study.data)
            and planned.inputs == study.plan_inputs() and planned.config == config
            and list(planned.granted) == granted_events):
        return planned.plan
    granted = [event_from_json(e) for e in granted_events]
    return trial_plan(method, config, study.data, role=study.role, epsilon=study.epsilon,
                      delta=study.delta, trials=study.trials, score_share=study.score_share,
                      granted=granted, reference_event=study.reference_event,
                      tuning_rdp=study.tuning_rdp, trial_data=data)


def plan_or_refusal(study: StudySettings, method: Any, config: Any,
                    granted_events: list[dict[str, Any]],
                    data: Any = None) -> tuple[Any, str | None]:
    """The trial's plan (:func:`trial_plan_of`) and None; or, for a trial held to E_ref
    (random stopping, subsampled tuning), None and why no plan of ``config`` is
    dominated by E_ref (the calibration's ConfigError: e.g. no noise up to its limit
    is enough, docs/budget-pricing.md section 6.2). The reason is a function of the
    public config and E_ref. Elsewhere (compose, a final run) the error stands: there
    a plan that does not fit depends on the budget left, not on the config alone.
    """
    try:
        return trial_plan_of(study, method, config, granted_events, data), None
    except ConfigError as err:
        if not study.held_to_reference:
            raise
        return None, f"no privacy plan of this configuration is dominated by E_ref: {err}"


def run_trial(config: dict[str, Any], study: StudySettings, loop_in_process: bool = False,
              tuning_subset: Any = None) -> None:
    """Ray Tune function trainable (:func:`trial_trainable`): ``config`` is what Tune
    sampled for this trial, ``study`` what every trial shares; ``loop_in_process``
    runs a 1-worker loop in this process (whose resources must cover it).

    Subsampled tuning's trials (their role ``on_subset``) get ``tuning_subset``: their
    config is scaled to the subset and planned for its public size m, they train on
    the subset's training records only and score on its validation records (private
    score divided by the public ``round(q n_val)``)."""
    stamps = {"start": time.time()}
    import ray
    from dp_accounting import dp_event
    from ray import tune
    from ray.tune.integration.ray_train import TuneReportCallback

    trial_id = tune.get_context().get_trial_id()
    method = get_method(study.method)
    data = study.data
    role = study.role  # what this trial does differently under the study's strategy
    on_subset = role.on_subset
    if on_subset and (tuning_subset is None or study.tune_fraction is None):
        raise RuntimeError("a subsampled tuning trial without its tuning subset")
    invalid: str | None = None  # why this config cannot run (public: config, E_ref, grants)
    try:
        settings = {**study.space.settings_from_trial_config(config),
                    "seed": study.trial_seed()}
        if on_subset:
            assert study.tune_fraction is not None
            config = subset_config(method, settings, data, study.tune_fraction)
            data = subset_data(data, study.tune_fraction)
        else:
            config = method.make_config(settings, data)
    except ConfigError as err:  # an invalid combination
        invalid = str(err)
    on_public = not role.asks_grant
    # A search on public data asks no grant: ``study.dataset`` is the data declared
    # public (raydp_synth.tune.public_search), nothing here can read the sensitive data.
    accountant = None if on_public else get_accountant(study.study_name)
    plan = None
    if invalid is None:
        granted_events: list[dict[str, Any]] = []
        if accountant is not None and role.plans_against_grants:  # grants so far
            granted_events = ray.get(accountant.granted_events.remote())
        plan, invalid = plan_or_refusal(study, method, config, granted_events, data)
    if invalid is not None:  # nothing read, nothing trained
        if accountant is not None and study.held_to_reference:
            # One of random stopping's K runs, which outputs nothing (score -inf):
            # the accountant grants it a no-op plan (zero RDP, dominated by E_ref),
            # so K counts it, as the theorem's i.i.d. runs of "draw a config, then
            # train it or output nothing". Drawing on instead would run the prior
            # (or DP-HyPO's proposal) restricted to the configs that can run.
            grant = ray.get(accountant.request.remote(
                trial_id, event_to_json(dp_event.NoOpDpEvent()), attempt=secrets.token_hex(8)))
            if not grant["granted"]:  # e.g. K reached meanwhile: refused like any trial
                _report_final({"score": REFUSED_SCORE, "granted": 0, "reason": grant["reason"]})
                return
            _report_final({"score": REFUSED_SCORE, "granted": 1, "invalid": 1, "reason": invalid})
            return
        _report_final({"score": REFUSED_SCORE, "granted": 0, "invalid": 1, "reason": invalid})
        return
    assert plan is not None
    stamps["planned"] = time.time()
    if accountant is not None:
        # A fresh nonce per attempt: a retried *call* gets its grant back, a rerun
        # trial (same id, new attempt) is refused.
        grant = ray.get(accountant.request.remote(trial_id, event_to_json(plan.event()),
                                                  attempt=secrets.token_hex(8),
                                                  final=role.granted_as_final))
        if not grant["granted"]:
            _report_final({"score": REFUSED_SCORE, "granted": 0, "reason": grant["reason"]})
            return

    stamps["granted"] = time.time()
    splits, _ = load_training_data(study.dataset, public=study.public,
                                   image_size=data.image_size, seed=study.seed)
    if len(splits.train) != study.data.num_records:
        raise RuntimeError("the dataset changed after the study was planned")
    split = splits.val
    divisor = None
    if on_subset and not study.public_validation:
        split = tuning_subset.select(splits.val, tuning_subset.val, tuning_subset.num_val)
        divisor = subset_size(tuning_subset.num_val, tuning_subset.fraction)
    if on_public:  # the held-out split of data declared public: no noise, no cost
        split = replace(split, public=True)
    elif study.public_validation:
        split = public_records(study.public_validation, like=splits.train, seed=study.seed)
    stamps["data_loaded"] = time.time()
    trial_dir = study.study_dir / "trials" / trial_id
    run = SingleRun(method=method.name, config=config, data=data, plan=plan,
                    dataset=study.dataset, data_seed=study.seed, public=study.public,
                    use_gpu=study.use_gpu, cpus_per_worker=study.cpus_per_worker,
                    compile_step=study.compile_step)
    in_process_loop = loop_in_process and study.workers == 1
    # In process, the worker's allow-list Reporter checked every metric; Tune gets
    # them as Ray Train's TuneReportCallback would forward them.
    placement = (LoopPlacement(storage=trial_dir, in_process=True, forward=tune.report)
                 if in_process_loop else
                 LoopPlacement(storage=trial_dir, workers=study.workers,
                               gpus_per_worker=study.gpus_per_worker,
                               callbacks=[TuneReportCallback()]))
    subset: dict[str, Any] = {}
    if on_subset:  # the secret indices, in memory / the object store only
        subset = {"train_subset": tuning_subset.train, "source_records": tuning_subset.num_train}
    # The trial's secret DP seed is drawn by the pipeline (OS entropy, written nowhere);
    # the score's noise comes from the OS too (no reproducibility seed in a study).
    result = run_single(run, placement, class_names=splits.class_names, score_split=split,
                        score_classifier=study.score_classifier, reproducibility_seed=None,
                        divisor=divisor, stamps=stamps, **subset)
    generator, metrics, score = result.generator, result.metrics, result.score
    with tempfile.TemporaryDirectory() as tmp:
        torch.save(generator.module.state_dict(), Path(tmp) / "generator.pt")
        (Path(tmp) / TRIAL_CHECKPOINT).write_text(json.dumps({
            "trial_id": trial_id, "generator": generator.descriptor(), "plan": plan.to_dict(),
            "score": score.to_dict(), "data_seed": run.data_seed,
        }))
        last = metrics[-1] if metrics else {}
        _report_final({"score": score.value, "granted": int(not on_public),
                       "trial_epsilon": plan.epsilon(), "epoch": last.get("epoch", 0)}, tmp)
    stamps["reported"] = time.time()
    _write_timing(trial_dir / TRIAL_TIMING, stamps, workers=study.workers,
                  loop="in_process" if in_process_loop else "ray_train")
