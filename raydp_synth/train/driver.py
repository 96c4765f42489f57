"""One DP training run: its request, its plan and its run directory (the loop on
Ray Train, the generator and the score are the single-run pipeline's,
:mod:`raydp_synth.train.pipeline`, which a study's trials run too).

Layout of the run directory (docs/architecture.md, section 6)::

    DIR/release/      what a curator may publish: generator.safetensors, generator.json,
                      samples.png, synthetic.parquet, privacy.json
    DIR/metrics.json  per-epoch privacy-safe metrics   } curator-only, inside
    DIR/run.json      the request, config and plan     } the trusted boundary
    DIR/score.json    the private selection score      }
    DIR/timing.json   the training's wall time         }
    DIR/evaluation.json, privacy_utility.png (unless --no-eval)
    DIR/ray/          Ray Train's checkpoints and logs }

The plan (training mechanisms and the selection score) is computed from public
quantities before any worker starts; the workers take their noise multipliers from
it, and the score's noise comes from the same plan.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from raydp_synth.config import config_to_dict
from raydp_synth.data import data_info, load_training_data, sensitive_records
from raydp_synth.data.public import check_content_overlap, effective_public, public_records
from raydp_synth.errors import ConfigError, Interrupted
from raydp_synth.evaluation.report import EvaluationSettings, evaluate_run, format_table
from raydp_synth.methods import get_method
from raydp_synth.paths import require_writable_folder
from raydp_synth.privacy.accounting import validate_budget, validate_delta
from raydp_synth.privacy.selection_score import SelectionScore
from raydp_synth.release import privacy_statement, write_release
from raydp_synth.release.bundle import public_facts
from raydp_synth.runtime.ray_session import ensure_ray
from raydp_synth.runtime.resources import check_gpus, largest_node_cpus, worker_cpu_share
from raydp_synth.train.pipeline import LoopPlacement, SingleRun, run_single
from raydp_synth.train.request import RequestCore

__all__ = ["RunResult", "TrainRequest", "evaluation_settings", "run_training"]

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class TrainRequest(RequestCore):
    """A validated request for one DP training run: the shared fields of
    :class:`~raydp_synth.train.request.RequestCore` (method, budget, dataset, public
    data, score, release, device), and:

    Attributes:
        out: the run directory (must not exist or be empty).
        workers: Ray Train workers (data-parallel).
        dp_seed: seed of the DP randomness (Poisson sampling, noise). None (the
            default) draws it from OS entropy; a given seed makes the run a
            reproducibility run, not a DP release (``privacy.json``: ``"dp_release":
            false`` and the reason; a reused seed replays batches and noise).
        non_private: a non-private reference run of the same model (no noise,
            epsilon = inf; the release says NOT PRIVATE). ``epsilon`` is ignored.
        curve_checkpoints: checkpoints the evaluation's curve covers (None: all).
    """

    out: Path
    workers: int = 1
    dp_seed: int | None = None
    non_private: bool = False
    curve_checkpoints: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        validate_budget(None if self.non_private else self.epsilon, self.delta)
        if self.workers < 1:
            raise ConfigError(f"--workers {self.workers} must be >= 1")
        require_writable_folder(self.out, "--out")
        if self.dp_seed is not None and self.dp_seed < 0:
            raise ConfigError("--dp-seed must be a whole number >= 0")
        if self.curve_checkpoints is not None and self.curve_checkpoints < 0:
            raise ConfigError(f"--curve-checkpoints {self.curve_checkpoints} must be >= 0")


@dataclass(frozen=True)
class RunResult:
    out: Path
    epsilon: float | None
    metrics: list[dict[str, float]]
    score: SelectionScore
    evaluation: dict[str, Any] | None


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out} already exists and is not empty; choose a new directory")


def _prepare_out(out: Path) -> None:
    _check_out(out)
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(out, 0o700)  # curator-only (docs/architecture.md, section 6)


@contextlib.contextmanager
def _owner_only_files() -> Iterator[None]:
    """Files and folders created inside are owner-only (docs/architecture.md, section 6)."""
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)


def run_training(request: TrainRequest) -> RunResult:
    """Plan, train on Ray Train workers, and write the run directory (owner-only)."""
    with _owner_only_files():
        return _run_training(request)


def evaluation_settings(*, use_gpu: bool, curve_checkpoints: int | None,
                        fid_weights: Path | None = None) -> Any:
    """The curator's evaluation after a run or study: on the GPU after a GPU run
    (when this process has one), with the requested number of curve checkpoints and
    Inception weights."""
    device = "cuda" if use_gpu and torch.cuda.is_available() else "cpu"
    return EvaluationSettings(curve_checkpoints=curve_checkpoints, device=device,
                              fid_weights=fid_weights)


def _run_training(request: TrainRequest) -> RunResult:
    request = request.with_absolute_paths()
    method = get_method(request.method)
    image_size = request.settings.get("image_size")
    try:
        size = int(image_size) if image_size not in (None, "", "auto") else None
    except (TypeError, ValueError):
        raise ConfigError(
            f"image_size={image_size!r} is not an integer; use e.g. --set image_size=32"
        ) from None
    declared = effective_public(method, request.dataset, request.public)
    splits, public = load_training_data(request.dataset, public=declared, image_size=size,
                                        seed=request.seed, check_overlap=True)
    train = splits.train
    data = data_info(train, public)
    validate_delta(request.delta, dataset_size=sensitive_records(splits))  # |D|, not n
    config = method.make_config({**request.settings, "seed": request.settings.get("seed", request.seed)}, data)
    score_split = splits.val
    if request.public_validation is not None:
        score_split = public_records(request.public_validation, like=train, seed=request.seed)
        check_content_overlap(score_split, splits,
                              what=f"--public-validation {request.public_validation}")
    score_share = 0.0 if score_split.public else request.score_share
    # What the files record: the canonical strings.
    public_text = None if declared is None else str(declared)
    validation_text = (None if request.public_validation is None
                       else str(request.public_validation))
    if request.non_private:
        plan = method.non_private_plan(config, delta=request.delta, data=data,
                                       score=not score_split.public)
    else:
        plan = method.plan(config, target_epsilon=request.epsilon, delta=request.delta, data=data,
                           score_share=score_share)
    _check_out(request.out.resolve())  # before starting Ray: cheap checks first
    total_cpus = ensure_ray()
    import ray

    check_gpus(use_gpu=request.use_gpu, gpus_per_trial=request.workers,
               cluster_gpus=ray.cluster_resources().get("GPU", 0))
    out = request.out.resolve()
    _prepare_out(out)
    # Bad input found while training (e.g. a worker that cannot read the data)
    # leaves nothing behind: the same command can be run again once it is fixed.
    try:
        _LOG.info(f"{method.name} on {request.dataset}: n={data.num_records}, "
                  f"{data.image_size}x{data.image_size}x{data.channels}, "
                  f"{data.num_classes} classes")
        for m in plan.mechanisms:
            _LOG.info(f"  {m.name}: sigma={m.noise_multiplier:.4g} q={m.sample_rate} "
                      f"steps={m.num_steps} sensitivity={m.sensitivity:.4g}")
        if plan.private:
            _LOG.info(f"  plan epsilon={plan.epsilon():.4f} at delta={plan.delta:g} "
                      f"(target {request.epsilon:g})")
        else:
            _LOG.info("  NON-PRIVATE reference run: no noise, epsilon = inf")
        (out / "run.json").write_text(json.dumps({
            "method": method.name, "dataset": str(request.dataset), "workers": request.workers,
            "use_gpu": request.use_gpu, "seed": request.seed, "public": public_text,
            "config": config_to_dict(config),
            "data_info": data.__dict__, "plan": plan.to_dict(), "non_private": request.non_private,
            "score": {"classifier": request.score_classifier,
                      "split": validation_text or "validation (private)"},
        }, indent=2))
        start = time.monotonic()
        run = SingleRun(
            method=method.name, config=config, data=data, plan=plan, dataset=request.dataset,
            data_seed=request.seed, public=declared, use_gpu=request.use_gpu,
            cpus_per_worker=worker_cpu_share(total_cpus=total_cpus, largest_node=largest_node_cpus(),
                                             workers=request.workers),
            compile_step=request.compile_step)
        # The DP seed is the OS's (secret, written nowhere) unless --dp-seed is given.
        result = run_single(run, LoopPlacement(storage=out / "ray", workers=request.workers),
                            class_names=splits.class_names, score_split=score_split,
                            score_classifier=request.score_classifier,
                            reproducibility_seed=request.dp_seed)
        generator, metrics, score = result.generator, result.metrics, result.score
        (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
        (out / "score.json").write_text(json.dumps(score.to_dict(), indent=2))
        scope = "one training run and its selection score (no hyperparameter search)"
        facts = public_facts(data, splits.class_names, public=public_text,
                             validation_records=None if score_split.public else len(score_split),
                             public_validation=validation_text)
        statement = privacy_statement(plan, scope=scope, dataset=str(request.dataset),
                                      public=public_text,
                                      facts=facts,
                                      reproducibility_seed=request.dp_seed is not None)
        write_release(out / "release", generator=generator, statement=statement,
                      num_synthetic=request.synthetic_samples, seed=request.seed)
    except KeyboardInterrupt:
        shutil.rmtree(out, ignore_errors=True)
        raise Interrupted(f"nothing released ({out} is removed); run the command again "
                          "to train anew") from None
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    epsilon = statement["epsilon"]
    train_s = time.monotonic() - start
    # From the start of training to the written release (Ray Train, score, release).
    (out / "timing.json").write_text(json.dumps({"train_s": round(train_s, 1)}, indent=2))
    print(f"[raydp_synth] trained in {train_s:.0f}s; release written to "
          f"{out / 'release'} ("
          + (f"epsilon={epsilon:.4f}, delta={plan.delta:g})" if plan.private else "NOT PRIVATE)"))
    print(f"[raydp_synth] selection score ({score.classifier} on synthetic, "
          f"{'noisy ' if score.private else ''}accuracy on {score.num_records} validation "
          f"records): {score.value:.4f}" + (f" +- {score.noise_std:.4f}" if score.private else ""))
    evaluation = None
    if request.evaluate:
        try:
            evaluation = evaluate_run(out, splits=splits, settings=evaluation_settings(
                use_gpu=request.use_gpu, curve_checkpoints=request.curve_checkpoints,
                fid_weights=request.fid_weights))
        except KeyboardInterrupt:
            raise Interrupted(f"the release in {out / 'release'} stands; rerun its evaluation "
                              f"with: python -m raydp_synth.evaluate {out}") from None
        print(format_table(evaluation))
    return RunResult(out=out, epsilon=epsilon, metrics=metrics, score=score, evaluation=evaluation)
