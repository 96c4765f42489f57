"""One run's single-run sequence, shared by a training run (``python -m
raydp_synth.train``, :mod:`raydp_synth.train.driver`) and a study's trial
(:mod:`raydp_synth.tune.trial`): fit the method's DP loop, build the generator,
release its selection score.

What comes before is the caller's, and so is what comes after: a training run
loads its data, plans and writes the release; a trial plans, gets its plan granted
by the study's accountant, loads the data and checkpoints its result for Tune.

The privacy argument (docs/architecture.md, sections 2 and 3): everything a
:class:`SingleRun` holds is public (the config, the plan computed from public
quantities, the dataset's spec and its public facts), and the plan is settled (in
a study: granted) before :func:`run_single` reads any sensitive record. The loop's
secret DP seed is drawn here, from OS entropy (256 bits), unless the user gave a
reproducibility seed (then the run is not a DP release); it reaches the workers as
an object-store reference (Ray Train) or stays in this process's memory, and is
written nowhere. The workers report only allow-listed metrics, and the score is a
mechanism of the plan (or free, on data declared public).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from raydp_synth.config import config_to_dict
from raydp_synth.data import DataInfo
from raydp_synth.data.dataset import ImageDataset
from raydp_synth.data.public import PublicDeclaration
from raydp_synth.data.spec import DatasetSpec
from raydp_synth.evaluation.selection import score_generator
from raydp_synth.log import ray_log_level, worker_env
from raydp_synth.privacy.plan import PrivacyPlan
from raydp_synth.privacy.secret_rng import fresh_secret
from raydp_synth.privacy.selection_score import SelectionScore, score_noise_source
from raydp_synth.release import TrainedGenerator
from raydp_synth.runtime.resources import scaling_config, threads_for, torch_backend
from raydp_synth.train.worker import (
    CHECKPOINT_METRICS,
    CHECKPOINT_STATE,
    run_worker_loop,
    train_loop_per_worker,
)

__all__ = [
    "WORKER_TIMING_FILE",
    "LocalCheckpoints",
    "LoopPlacement",
    "SingleRun",
    "SingleRunResult",
    "fit",
    "fit_in_process",
    "fit_on_ray_train",
    "no_retries",
    "run_single",
]

#: The file a Ray Train run's rank 0 writes its wall-clock stamps to (in the run's
#: storage folder), read and removed by :func:`fit_on_ray_train`.
WORKER_TIMING_FILE = ".worker_timing.json"


@dataclass(frozen=True, kw_only=True)
class SingleRun:
    """What one run trains: public quantities only (never the secret DP seed).

    Attributes:
        method: registered method name.
        config: the method's typed config.
        data: the public facts of the training split the plan was sized for (a
            subsampled tuning trial's: its subset's).
        plan: the run's privacy plan, settled (granted, in a study) before the run.
        dataset: the dataset spec the workers load.
        data_seed: the public seed of the split, initialisation and the score.
        public: the data declared public that the method uses without noise.
        use_gpu: the workers train on GPUs.
        cpus_per_worker: each worker's CPU share (its torch threads).
        compile_step: the loop's per-record gradients compiled.
    """

    method: str
    config: Any
    data: DataInfo
    plan: PrivacyPlan
    dataset: DatasetSpec
    data_seed: int
    public: PublicDeclaration | None = None
    use_gpu: bool = False
    cpus_per_worker: float = 1.0
    compile_step: bool = False

    def payload(self) -> dict[str, Any]:
        """What a worker gets (a dict at the Ray boundary): public quantities only (the
        dataset spec and the public declaration typed: frozen dataclasses, pickled)."""
        return {
            "method": self.method,
            "config": config_to_dict(self.config),
            "data_info": self.data.__dict__,
            "plan": self.plan.to_dict(),
            "dataset": self.dataset,
            "data_seed": self.data_seed,
            "public": self.public,
            "use_gpu": self.use_gpu,
            "threads_per_worker": threads_for(self.cpus_per_worker),
            "compile_backend": "inductor" if self.compile_step else None,
        }


@dataclass(frozen=True, kw_only=True)
class LoopPlacement:
    """Where a run's DP loop runs and where its checkpoints land.

    Attributes:
        storage, name: the checkpoints land under ``storage / name`` (Ray Train's
            layout, also in this process).
        workers: Ray Train workers (data-parallel).
        in_process: a 1-worker loop in this process (:func:`fit_in_process`) rather
            than on Ray Train; the process must hold the worker's resources.
        gpus_per_worker: with ``use_gpu``, each Ray Train worker's GPU share.
        callbacks: Ray Train callbacks (a trial's ``TuneReportCallback``).
        forward: where an in-process loop's checked reports go (a trial's
            ``tune.report``); None: nowhere.
    """

    storage: Path
    name: str = "train"
    workers: int = 1
    in_process: bool = False
    gpus_per_worker: float = 1.0
    callbacks: Sequence[Any] = field(default=())
    forward: Callable[[dict[str, float]], None] | None = None

    def __post_init__(self) -> None:
        if self.in_process and self.workers != 1:
            raise ValueError(f"an in-process loop runs one worker, not {self.workers}")


@dataclass(frozen=True)
class SingleRunResult:
    """What :func:`run_single` gives back.

    Attributes:
        generator: the trained generator (released state only).
        metrics: the workers' allow-listed per-epoch metrics.
        score: the released selection score.
    """

    generator: TrainedGenerator
    metrics: list[dict[str, float]]
    score: SelectionScore


def _read_checkpoint(ckpt: Path) -> tuple[dict[str, Any], list[dict[str, float]]]:
    state = torch.load(ckpt / CHECKPOINT_STATE, map_location="cpu")
    metrics = json.loads((ckpt / CHECKPOINT_METRICS).read_text())
    return state, metrics


def no_retries() -> Any:
    """Ray Train's ``FailureConfig`` of every DP run: no automatic retry of any kind.

    Privacy argument: a retried run executes its DP loop again under the same grant,
    and what its first attempt already let out (its reported epochs, a checkpoint, its
    collectives' timing) plus the second attempt's release is more than the plan the
    accountant priced. Ray Train 2.60 retries on two counters: ``max_failures`` (0
    here, as always) and ``max_preemption_failures``, a separate budget for a worker
    that died on a node drained for preemption (a spot reclaim, a Kubernetes pod
    deleted: Ray's own SIGTERM handler drains a node with the preemption reason), whose
    default is -1, *unlimited*. Both are 0: a run whose worker dies, for any reason,
    fails, and its grant stays charged (tests/train/test_no_retries.py drives Ray
    Train's own failure policy with this config; tests/faults/test_multinode.py drains
    a node for preemption mid-trial). Controller retries (``controller_failure_limit``)
    stay Ray's: only a worker group that failed to *start* is retried, before any DP
    step ran."""
    from ray.train import FailureConfig

    # mypy reads ray.train's v1 FailureConfig; Ray Train v2's, which runs, has it.
    return FailureConfig(max_failures=0, max_preemption_failures=0)  # type: ignore[call-arg]


def fit_on_ray_train(
    run: SingleRun,
    *,
    dp_seed: int,
    storage: Path,
    name: str,
    workers: int,
    gpus_per_worker: float = 1.0,
    callbacks: Sequence[Any] = (),
    stamps: dict[str, float] | None = None,
    train_subset: Any = None,
    source_records: int | None = None,
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
    from ray.train import LoggingConfig, RunConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    payload = run.payload()
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
        scaling_config=scaling_config(workers=workers, use_gpu=run.use_gpu,
                                      cpus_per_worker=run.cpus_per_worker,
                                      gpus_per_worker=gpus_per_worker),
        torch_config=TorchConfig(backend=torch_backend(run.use_gpu)),
        # (mypy reads ray.train's v1 RunConfig; Ray Train v2's, which runs, has these.)
        run_config=RunConfig(  # type: ignore[call-arg]
                             name=name, storage_path=str(storage), callbacks=list(callbacks),
                             failure_config=no_retries(),
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
    run: SingleRun,
    *,
    dp_seed: int,
    storage: Path,
    name: str,
    forward: Callable[[dict[str, float]], None] | None = None,
    stamps: dict[str, float] | None = None,
    train_subset: Any = None,
    source_records: int | None = None,
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
    payload = run.payload()
    folder = storage / name
    folder.mkdir(parents=True, exist_ok=True)
    sink = LocalCheckpoints(folder, forward)
    device = torch.device("cuda", 0) if run.use_gpu else torch.device("cpu")
    if train_subset is not None:
        payload["source_records"] = source_records
    run_worker_loop(payload, rank=0, world_size=1, device=device, dp_seed=dp_seed, sink=sink,
                    stamps=stamps, train_subset=train_subset)
    if sink.last is None:
        raise RuntimeError("training finished without a checkpoint")
    return _read_checkpoint(sink.last)


def fit(run: SingleRun, placement: LoopPlacement, *, dp_seed: int,
        stamps: dict[str, float] | None = None, train_subset: Any = None,
        source_records: int | None = None) -> tuple[dict[str, Any], list[dict[str, float]]]:
    """The run's DP loop where ``placement`` puts it (:func:`fit_in_process` or
    :func:`fit_on_ray_train`); the final checkpoint's state and the metrics."""
    if placement.in_process:
        return fit_in_process(run, dp_seed=dp_seed, storage=placement.storage,
                              name=placement.name, forward=placement.forward, stamps=stamps,
                              train_subset=train_subset, source_records=source_records)
    return fit_on_ray_train(run, dp_seed=dp_seed, storage=placement.storage, name=placement.name,
                            workers=placement.workers, gpus_per_worker=placement.gpus_per_worker,
                            callbacks=placement.callbacks, stamps=stamps,
                            train_subset=train_subset, source_records=source_records)


def run_single(
    run: SingleRun,
    placement: LoopPlacement,
    *,
    class_names: tuple[str, ...],
    score_split: ImageDataset,
    score_classifier: str,
    reproducibility_seed: int | None = None,
    divisor: int | None = None,
    stamps: dict[str, float] | None = None,
    train_subset: Any = None,
    source_records: int | None = None,
) -> SingleRunResult:
    """Fit the run's DP loop, build its generator and release its selection score.

    Args:
        run: what is trained (public); its plan must be settled (granted) already.
        placement: where the loop runs and its checkpoints land.
        class_names: the training data's declared classes (the generator's).
        score_split: the records the score is computed on (the validation split,
            its subset, or data declared public: a public split is scored without
            noise, at no cost).
        score_classifier: the classifier trained on synthetic data for the score.
        reproducibility_seed: the user's ``--dp-seed`` (a reproducibility run, not
            a DP release), else None: the DP seed and the score's noise come from
            the OS.
        divisor: the score's public record count where it is not the split's
            (subsampled tuning: ``round(q n_val)``).
        stamps: wall-clock stamps (``fit_start``, the workers', ``fit_end``,
            ``scored``) for a trial's curator-only timing file.
        train_subset, source_records: subsampled tuning's secret subset of the
            training split (in memory or the object store only) and the split's size.
    """
    # The run's secret seed of its DP randomness (256 bits from the OS): written nowhere.
    dp_seed = reproducibility_seed if reproducibility_seed is not None else fresh_secret()
    if stamps is not None:
        stamps["fit_start"] = time.time()
    state, metrics = fit(run, placement, dp_seed=dp_seed, stamps=stamps,
                         train_subset=train_subset, source_records=source_records)
    if stamps is not None:
        stamps["fit_end"] = time.time()
    generator = TrainedGenerator.build(
        method=run.method, config=config_to_dict(run.config), data_info=run.data.__dict__,
        class_names=class_names, state_dict=state["generator"],
    )
    score = score_generator(
        generator, score_split, plan=run.plan, classifier=score_classifier, seed=run.data_seed,
        # Discrete noise from the OS's generator (SystemRandom); a user's --dp-seed
        # (a reproducibility run, no DP release) gives a source derived from it.
        noise_source=score_noise_source(reproducibility_seed),
        divisor=divisor,
    )
    if stamps is not None:
        stamps["scored"] = time.time()
    return SingleRunResult(generator=generator, metrics=metrics, score=score)
