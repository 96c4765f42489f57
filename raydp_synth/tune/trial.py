"""One Tune trial: plan, get the plan granted, train on Ray Train, score, checkpoint.

The order is the privacy argument (docs/architecture.md, sections 2 and 3):

1. the configuration Tune proposes becomes a typed config and a calibrated plan,
   from public quantities (and the plans already granted);
2. the study's accountant grants or refuses the plan **before** any sensitive data
   is read; a refused trial ends at once (score -inf) and reads nothing;
3. the method's DP loop runs as a ``TorchTrainer``; workers report only
   allow-listed metrics, forwarded to Tune (progress output, dashboard);
4. the private selection score (a mechanism of the granted plan) is released;
5. the generator, config and plan are checkpointed for the release.

A trial that crashes after its grant counts as spent (the ledger keeps the grant)
and is never rerun: Tune's ``max_failures=0``, and the accountant refuses a second
grant to a trial id that already has one from another attempt.
"""

from __future__ import annotations

import json
import math
import secrets
import tempfile
from pathlib import Path
from typing import Any

import torch

from raydp_synth.errors import ConfigError
from raydp_synth.tune.study_settings import StudySettings

__all__ = ["TRIAL_CHECKPOINT", "TRIAL_METRICS", "run_trial"]

TRIAL_CHECKPOINT = "trial.json"
REFUSED_SCORE = -math.inf

#: The keys a trial reports to Tune itself (besides its workers' metrics, which the
#: method's allow-list holds). Safe because: ``score`` is the selection score, a
#: mechanism of the granted plan; ``granted``/``invalid``/``reason`` say whether the
#: accountant granted the plan or the config was refused (functions of public
#: configs and of the plans already granted); ``trial_epsilon`` is the plan's
#: epsilon (public arithmetic); ``epoch`` the last epoch run (public schedule).
TRIAL_METRICS = frozenset({"score", "granted", "invalid", "reason", "trial_epsilon", "epoch"})


def _report_final(metrics: dict[str, Any], checkpoint_dir: str | None = None) -> None:
    from ray import tune

    unsafe = sorted(set(metrics) - TRIAL_METRICS)
    if unsafe:
        raise RuntimeError(f"trial metric(s) {unsafe} are not on TRIAL_METRICS")
    checkpoint = tune.Checkpoint.from_directory(checkpoint_dir) if checkpoint_dir else None
    tune.report(metrics, checkpoint=checkpoint)


def _plan(study: StudySettings, method: Any, config: Any, accountant: Any) -> Any:
    import ray

    from raydp_synth.privacy.events import event_from_json
    from raydp_synth.tune.planning import plan_dominated_by, plan_for_compose

    if study.selection == "compose":
        granted = [event_from_json(e) for e in ray.get(accountant.granted_events.remote())]
        return plan_for_compose(
            method, config, study.data, target_epsilon=study.epsilon, delta=study.delta,
            granted=granted, remaining_trials=study.trials - len(granted),
            score_share=study.score_share,
        )
    assert study.reference_event is not None  # random stopping's (StudySettings checks)
    return plan_dominated_by(method, config, study.data, reference_event=study.reference_event,
                             delta=study.delta, score_share=study.score_share)


def run_trial(config: dict[str, Any], study: StudySettings) -> None:
    """Ray Tune function trainable (``tune.with_parameters(run_trial, study=...)``):
    ``config`` is what Tune sampled for this trial, ``study`` what every trial shares."""
    import ray
    from ray import tune
    from ray.tune.integration.ray_train import TuneReportCallback

    from raydp_synth.accountant import get_accountant
    from raydp_synth.config import config_to_dict
    from raydp_synth.data import load_training_data
    from raydp_synth.evaluation.selection import score_generator
    from raydp_synth.methods import get_method
    from raydp_synth.privacy.events import event_to_json
    from raydp_synth.privacy.records import derived_seed
    from raydp_synth.release import TrainedGenerator
    from raydp_synth.train.driver import fit_on_ray_train

    trial_id = tune.get_context().get_trial_id()
    method = get_method(study.method)
    data = study.data
    try:
        config = method.make_config({**study.space.settings_from_trial_config(config),
                                     "seed": study.seed}, data)
    except ConfigError as err:  # an invalid combination: nothing charged, nothing read
        _report_final({"score": REFUSED_SCORE, "granted": 0, "invalid": 1, "reason": str(err)})
        return
    accountant = get_accountant(study.study_name)
    plan = _plan(study, method, config, accountant)
    # A fresh nonce per attempt: a retried *call* gets its grant back, a rerun
    # trial (same id, new attempt) is refused.
    grant = ray.get(accountant.request.remote(trial_id, event_to_json(plan.event()),
                                              attempt=secrets.token_hex(8)))
    if not grant["granted"]:
        _report_final({"score": REFUSED_SCORE, "granted": 0, "reason": grant["reason"]})
        return

    dp_seed = secrets.randbits(63)  # this trial's secret DP randomness, written nowhere
    splits, _ = load_training_data(study.dataset, public=study.public,
                                   image_size=data.image_size, seed=study.seed)
    if len(splits.train) != data.num_records:
        raise RuntimeError("the dataset changed after the study was planned")
    trial_dir = study.study_dir / "trials" / trial_id
    state, metrics = fit_on_ray_train(
        method=method.name, config=config, data=data, plan=plan, dataset=study.dataset,
        data_seed=study.seed, dp_seed=dp_seed, public=study.public, workers=study.workers,
        use_gpu=study.use_gpu, cpus_per_worker=study.cpus_per_worker,
        gpus_per_worker=study.gpus_per_worker,
        storage=trial_dir, name="train", callbacks=[TuneReportCallback()],
    )
    generator = TrainedGenerator.build(
        method=method.name, config=config_to_dict(config), data_info=data.__dict__,
        class_names=splits.class_names, state_dict=state["generator"],
    )
    split = splits.val
    if study.public_validation:
        from raydp_synth.data.public import public_records

        split = public_records(study.public_validation, like=splits.train, seed=study.seed)
    score = score_generator(
        generator, split, plan=plan, classifier=study.score_classifier, seed=study.seed,
        noise_generator=torch.Generator().manual_seed(derived_seed(dp_seed, "selection_score")),
    )
    with tempfile.TemporaryDirectory() as tmp:
        torch.save(generator.module.state_dict(), Path(tmp) / "generator.pt")
        (Path(tmp) / TRIAL_CHECKPOINT).write_text(json.dumps({
            "trial_id": trial_id, "generator": generator.descriptor(), "plan": plan.to_dict(),
            "score": score.to_dict(),
        }))
        last = metrics[-1] if metrics else {}
        _report_final({"score": score.value, "granted": 1,
                       "trial_epsilon": plan.epsilon(), "epoch": last.get("epoch", 0)}, tmp)
