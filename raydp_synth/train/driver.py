"""One DP training run as a Ray Train ``TorchTrainer``, and its run directory.

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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from raydp_synth.config import config_to_dict
from raydp_synth.data import (
    DataInfo,
    data_info,
    load_training_data,
    parse_public_spec,
    sensitive_records,
)
from raydp_synth.data.public import (
    absolute_public_spec,
    check_content_overlap,
    check_public_validation,
    effective_public,
    public_records,
)
from raydp_synth.data.spec import absolute_spec
from raydp_synth.errors import ConfigError, Interrupted
from raydp_synth.evaluation.inception import resolve_weights
from raydp_synth.evaluation.report import EvaluationSettings, evaluate_run, format_table
from raydp_synth.evaluation.selection import (
    DEFAULT_SCORE_CLASSIFIER,
    score_generator,
    validate_score_settings,
)
from raydp_synth.log import ray_log_level, worker_env
from raydp_synth.methods import get_method
from raydp_synth.paths import require_writable_folder
from raydp_synth.privacy.accounting import validate_budget, validate_delta
from raydp_synth.privacy.plan import PrivacyPlan
from raydp_synth.privacy.secret_rng import fresh_secret
from raydp_synth.privacy.selection_score import (
    DEFAULT_SCORE_SHARE,
    SelectionScore,
    score_noise_source,
)
from raydp_synth.release import TrainedGenerator, privacy_statement, write_release
from raydp_synth.release.bundle import (
    DEFAULT_SYNTHETIC_SAMPLES,
    public_facts,
    validate_synthetic_samples,
)
from raydp_synth.runtime.ray_session import ensure_ray
from raydp_synth.runtime.resources import (
    check_gpus,
    largest_node_cpus,
    scaling_config,
    threads_for,
    torch_backend,
    worker_cpu_share,
)
from raydp_synth.train.worker import (
    CHECKPOINT_METRICS,
    CHECKPOINT_STATE,
    run_worker_loop,
    train_loop_per_worker,
)

__all__ = [
    "LocalCheckpoints",
    "RunResult",
    "TrainRequest",
    "fit_in_process",
    "fit_on_ray_train",
    "run_training",
]

_LOG = logging.getLogger(__name__)

#: The file a Ray Train run's rank 0 writes its wall-clock stamps to (in the run's
#: storage folder), read and removed by :func:`fit_on_ray_train`.
WORKER_TIMING_FILE = ".worker_timing.json"


@dataclass(frozen=True, kw_only=True)
class TrainRequest:
    """A validated request for one DP training run.

    Attributes:
        method: registered method name.
        epsilon, delta: the run's privacy budget.
        out: the run directory (must not exist or be empty).
        dataset: dataset spec (``digits``, ``mnist:DIR``, ``idx:DIR``, ``folder:DIR``, ...).
        settings: method config values (``--set key=value``).
        workers: Ray Train workers (data-parallel).
        use_gpu: one GPU per worker.
        seed: data split, initialisation and sampling seed.
        dp_seed: seed of the DP randomness (Poisson sampling, noise). None (the
            default) draws it from OS entropy; a given seed makes the run a
            reproducibility run, not a DP release (``privacy.json``: ``"dp_release":
            false`` and the reason; a reused seed replays batches and noise).
        score_share: fraction of the budget for the private selection score.
        score_classifier: classifier trained on synthetic data for the score.
        public: data declared public (``SPEC`` or ``SPEC:fraction=F``, see
            :mod:`raydp_synth.data.public`), handed to the method to use without
            noise; a fraction of the training dataset is taken out of it.
        public_validation: a dataset spec declared public: the score uses it at
            no privacy cost (no score mechanism in the plan).
        non_private: a non-private reference run of the same model (no noise,
            epsilon = inf; the release says NOT PRIVATE). ``epsilon`` is ignored.
        evaluate: run the curator's evaluation (CAS, FID, IS, curve) at the end,
            on the run's device.
        curve_checkpoints: checkpoints the evaluation's curve covers (None: all).
        fid_weights: the FID Inception-v3 weights of the evaluation (None: the
            torch hub cache's, if there).
        synthetic_samples: rows of the release's ``synthetic.parquet`` (the
            user's choice; never n).
        compile_step: the loop's per-record gradients compiled (``--compile-step``:
            :attr:`~raydp_synth.runtime.context.WorkerContext.compile_backend`).
    """

    method: str
    epsilon: float
    delta: float
    out: Path
    dataset: str = "digits"
    settings: Mapping[str, Any] = field(default_factory=dict)
    workers: int = 1
    use_gpu: bool = False
    seed: int = 0
    dp_seed: int | None = None
    score_share: float = DEFAULT_SCORE_SHARE
    score_classifier: str = DEFAULT_SCORE_CLASSIFIER
    public: str | None = None
    public_validation: str | None = None
    non_private: bool = False
    evaluate: bool = True
    synthetic_samples: int = DEFAULT_SYNTHETIC_SAMPLES
    curve_checkpoints: int | None = None
    fid_weights: Path | None = None
    compile_step: bool = False

    def __post_init__(self) -> None:
        validate_score_settings(self.score_share, self.score_classifier)
        validate_synthetic_samples(self.synthetic_samples)
        validate_budget(None if self.non_private else self.epsilon, self.delta)
        if self.workers < 1:
            raise ConfigError(f"--workers {self.workers} must be >= 1")
        require_writable_folder(self.out, "--out")
        if self.dp_seed is not None and self.dp_seed < 0:
            raise ConfigError("--dp-seed must be a whole number >= 0")
        if self.curve_checkpoints is not None and self.curve_checkpoints < 0:
            raise ConfigError(f"--curve-checkpoints {self.curve_checkpoints} must be >= 0")
        check_public_validation(self.public_validation, dataset=self.dataset)
        if self.public is not None:
            parse_public_spec(self.public)
        if self.fid_weights is not None:
            resolve_weights(self.fid_weights)


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


def _payload(*, method: str, config: Any, data: DataInfo, plan: PrivacyPlan, dataset: str,
             data_seed: int, public: str | None, use_gpu: bool,
             cpus_per_worker: float, compile_step: bool = False) -> dict[str, Any]:
    """What a worker gets: public quantities only (never the secret ``dp_seed``)."""
    return {
        "method": method,
        "config": config_to_dict(config),
        "data_info": data.__dict__,
        "plan": plan.to_dict(),
        "dataset": dataset,
        "data_seed": data_seed,
        "public": public,
        "use_gpu": use_gpu,
        "threads_per_worker": threads_for(cpus_per_worker),
        "compile_backend": "inductor" if compile_step else None,
    }


def _read_checkpoint(ckpt: Path) -> tuple[dict[str, Any], list[dict[str, float]]]:
    state = torch.load(ckpt / CHECKPOINT_STATE, map_location="cpu")
    metrics = json.loads((ckpt / CHECKPOINT_METRICS).read_text())
    return state, metrics


def fit_on_ray_train(
    *,
    method: str,
    config: Any,
    data: DataInfo,
    plan: PrivacyPlan,
    dataset: str,
    data_seed: int,
    dp_seed: int,
    public: str | None = None,
    workers: int,
    use_gpu: bool,
    cpus_per_worker: float,
    gpus_per_worker: float = 1.0,
    storage: Path,
    name: str,
    callbacks: Sequence[Any] = (),
    stamps: dict[str, float] | None = None,
    train_subset: Any = None,
    source_records: int | None = None,
    compile_step: bool = False,
) -> tuple[dict[str, Any], list[dict[str, float]]]:
    """Run a method's DP loop as a Ray Train ``TorchTrainer``; return the final
    checkpoint's state and the metrics history.

    The plan must already be granted (the caller's job). The secret ``dp_seed``
    reaches the workers through the object store, never in a persisted config; so
    does ``train_subset`` (subsampled tuning's secret indices into the training
    split of ``source_records`` records: the loop reads only those).
    ``stamps``, if given, gets rank 0's wall-clock stamps (``worker_start``,
    ``loop_start``, ``loop_end``, ``worker_end``) when the run's storage is shared
    with rank 0's node.
    With ``use_gpu`` each worker asks for ``gpus_per_worker`` GPUs (a fraction packs
    1-worker trials onto one GPU: :func:`~raydp_synth.runtime.resources.worker_gpu_share`).
    """
    import ray
    from ray.train import FailureConfig, LoggingConfig, RunConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    payload = _payload(method=method, config=config, data=data, plan=plan, dataset=dataset,
                       data_seed=data_seed, public=public, use_gpu=use_gpu,
                       cpus_per_worker=cpus_per_worker, compile_step=compile_step)
    # A reference, not the value: the secret never enters a persisted config.
    payload["dp_seed_ref"] = ray.put(dp_seed)
    if train_subset is not None:  # subsampled tuning's secret subset: also a reference
        payload["train_subset_ref"] = ray.put(train_subset)
        payload["source_records"] = source_records
    timing_file = storage / WORKER_TIMING_FILE
    if stamps is not None:
        storage.mkdir(parents=True, exist_ok=True)
        payload["timing_file"] = str(timing_file)
    trainer = TorchTrainer(
        train_loop_per_worker,
        train_loop_config=payload,
        scaling_config=scaling_config(workers=workers, use_gpu=use_gpu,
                                      cpus_per_worker=cpus_per_worker,
                                      gpus_per_worker=gpus_per_worker),
        torch_config=TorchConfig(backend=torch_backend(use_gpu)),
        # No automatic retries: a retried run would release its mechanisms again,
        # beyond its plan (the tuner charges every attempt explicitly instead).
        # (mypy reads ray.train's v1 RunConfig; Ray Train v2's, which runs, has these.)
        run_config=RunConfig(  # type: ignore[call-arg]
                             name=name, storage_path=str(storage), callbacks=list(callbacks),
                             failure_config=FailureConfig(max_failures=0),
                             # Ray Train's INFO lines ("Reporting training result ...")
                             # only with --verbose; the workers get our verbosity.
                             logging_config=LoggingConfig(log_level=ray_log_level()),
                             worker_runtime_env={"env_vars": worker_env()}),
    )
    # Ray Train installs a SIGINT handler of its own in fit() (a graceful abort of the
    # run, then sys.exit(0) on the third) and never restores it: a Ctrl-C during fit
    # would let the run go on to its release, and one during the evaluation after it
    # hung on the dead controller. The command's handler stays (cli.run_cli: the
    # first Ctrl-C raises KeyboardInterrupt, a second exits at once).
    if hasattr(trainer, "_register_sigint_handler"):
        trainer._register_sigint_handler = lambda controller: None
    result = trainer.fit()
    if stamps is not None and timing_file.is_file():
        stamps.update(json.loads(timing_file.read_text()))
        timing_file.unlink()
    if result.checkpoint is None:
        raise RuntimeError(f"training finished without a checkpoint: {result.error}")
    with result.checkpoint.as_directory() as ckpt:
        return _read_checkpoint(Path(ckpt))


class LocalCheckpoints:
    """The report sink of a loop run in this process: each checkpoint is copied to
    ``folder/checkpoint_NNNNNN`` (the files Ray Train would persist: ``state.pt``,
    ``metrics.json``), then the checked metrics go to ``forward`` (e.g. ``tune.report``).

    Args:
        folder: the run's folder (``STORAGE/NAME``, as Ray Train names it).
        forward: where the metrics go after the checkpoint is written (None: nowhere).
    """

    def __init__(self, folder: Path,
                 forward: Callable[[dict[str, float]], None] | None = None) -> None:
        self.folder = folder
        self.forward = forward
        self.last: Path | None = None
        self._count = 0

    def __call__(self, metrics: dict[str, float], checkpoint_dir: str | None) -> None:
        if checkpoint_dir is not None:
            target = self.folder / f"checkpoint_{self._count:06d}"
            shutil.copytree(checkpoint_dir, target)
            self._count += 1
            self.last = target
        if self.forward is not None:
            self.forward(metrics)


def fit_in_process(
    *,
    method: str,
    config: Any,
    data: DataInfo,
    plan: PrivacyPlan,
    dataset: str,
    data_seed: int,
    dp_seed: int,
    public: str | None = None,
    use_gpu: bool,
    cpus_per_worker: float,
    storage: Path,
    name: str,
    forward: Callable[[dict[str, float]], None] | None = None,
    stamps: dict[str, float] | None = None,
    train_subset: Any = None,
    source_records: int | None = None,
    compile_step: bool = False,
) -> tuple[dict[str, Any], list[dict[str, float]]]:
    """Run a method's DP loop as a single worker **in this process** (a 1-worker
    Tune trial: no second Ray Train worker group, placement group or process
    group); return the final checkpoint's state and the metrics history, as
    :func:`fit_on_ray_train` does.

    The same worker body (:func:`~raydp_synth.train.worker.run_worker_loop`: payload,
    context, allow-list reporter) writes the same checkpoint files under
    ``storage/name``; every checked report then goes to ``forward``. The plan must
    already be granted (the caller's job); the secret ``dp_seed`` stays in memory.
    The caller's process must hold the worker's resources (its CPUs, and a GPU with
    ``use_gpu``: CUDA device 0 of the process).
    """
    payload = _payload(method=method, config=config, data=data, plan=plan, dataset=dataset,
                       data_seed=data_seed, public=public, use_gpu=use_gpu,
                       cpus_per_worker=cpus_per_worker, compile_step=compile_step)
    folder = storage / name
    folder.mkdir(parents=True, exist_ok=True)
    sink = LocalCheckpoints(folder, forward)
    device = torch.device("cuda", 0) if use_gpu else torch.device("cpu")
    if train_subset is not None:
        payload["source_records"] = source_records
    run_worker_loop(payload, rank=0, world_size=1, device=device, dp_seed=dp_seed, sink=sink,
                    stamps=stamps, train_subset=train_subset)
    if sink.last is None:
        raise RuntimeError("training finished without a checkpoint")
    return _read_checkpoint(sink.last)


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


def with_absolute_paths(request: Any) -> Any:
    """A train or study request whose local dataset paths (``--dataset``, ``--public``,
    ``--public-validation``) are absolute: Ray workers do not run in the user's
    working directory, so a relative path would name nothing there."""
    validation = request.public_validation
    return replace(request, dataset=absolute_spec(str(request.dataset)),
                   public=absolute_public_spec(request.public),
                   public_validation=absolute_spec(validation) if validation else None)


def _run_training(request: TrainRequest) -> RunResult:
    request = with_absolute_paths(request)
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
            "method": method.name, "dataset": request.dataset, "workers": request.workers,
            "use_gpu": request.use_gpu, "seed": request.seed, "public": declared,
            "config": config_to_dict(config),
            "data_info": data.__dict__, "plan": plan.to_dict(), "non_private": request.non_private,
            "score": {"classifier": request.score_classifier,
                      "split": request.public_validation or "validation (private)"},
        }, indent=2))
        # The run's secret seed of its DP randomness (256 bits from the OS): never
        # written anywhere.
        dp_seed = request.dp_seed if request.dp_seed is not None else fresh_secret()

        start = time.monotonic()
        state, metrics = fit_on_ray_train(
            method=method.name, config=config, data=data, plan=plan, dataset=str(request.dataset),
            data_seed=request.seed, dp_seed=dp_seed, public=declared, workers=request.workers,
            use_gpu=request.use_gpu,
            cpus_per_worker=worker_cpu_share(total_cpus=total_cpus, largest_node=largest_node_cpus(),
                                             workers=request.workers),
            storage=out / "ray", name="train", compile_step=request.compile_step,
        )
        (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
        generator = TrainedGenerator.build(
            method=method.name, config=config_to_dict(config), data_info=data.__dict__,
            class_names=splits.class_names, state_dict=state["generator"],
        )
        score = score_generator(
            generator, score_split, plan=plan, classifier=request.score_classifier, seed=request.seed,
            # Discrete noise from the OS's generator (SystemRandom); a user's --dp-seed
            # (a reproducibility run, no DP release) gives a source derived from it.
            noise_source=score_noise_source(request.dp_seed),
        )
        (out / "score.json").write_text(json.dumps(score.to_dict(), indent=2))
        scope = "one training run and its selection score (no hyperparameter search)"
        facts = public_facts(data, splits.class_names, public=declared,
                             validation_records=None if score_split.public else len(score_split),
                             public_validation=request.public_validation)
        statement = privacy_statement(plan, scope=scope, dataset=request.dataset, public=declared,
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
