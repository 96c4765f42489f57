"""One DP training run as a Ray Train ``TorchTrainer``, and its run directory.

Layout of the run directory (design.md 8)::

    DIR/release/      what a curator may publish: generator.pt, generator.json,
                      samples.png, synthetic.parquet, privacy.json
    DIR/metrics.json  per-epoch privacy-safe metrics   } curator-only, inside
    DIR/run.json      the request, config and plan     } the trusted boundary
    DIR/ray/          Ray Train's checkpoints and logs }

The plan is computed (from public quantities) before any worker starts, and the
workers take their noise multipliers from it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from raydp_synth.data import load_dataset
from raydp_synth.errors import ConfigError
from raydp_synth.methods import DataInfo, get_method
from raydp_synth.methods.base import config_to_dict
from raydp_synth.privacy.accounting import validate_delta
from raydp_synth.release import privacy_statement, write_release
from raydp_synth.train.worker import CHECKPOINT_METRICS, CHECKPOINT_STATE, train_loop_per_worker

__all__ = ["RunResult", "TrainRequest", "run_training"]


@dataclass(frozen=True, kw_only=True)
class TrainRequest:
    """A validated request for one DP training run.

    Attributes:
        method: registered method name.
        epsilon, delta: the run's privacy budget.
        out: the run directory (must not exist or be empty).
        dataset: dataset spec (``digits``, ``idx:DIR``, ``folder:DIR``, ``parquet:URI``).
        settings: method config values (``--set key=value``).
        workers: Ray Train workers (data-parallel).
        use_gpu: one GPU per worker.
        seed: data split, initialisation and sampling seed.
        dp_seed: seed of the DP randomness (Poisson sampling, noise). None (the
            default) draws it from OS entropy; a given seed must stay secret.
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

    def __post_init__(self) -> None:
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ConfigError(f"--epsilon {self.epsilon} must be a finite number > 0")
        if not (math.isfinite(self.delta) and 0 < self.delta < 1):
            raise ConfigError(f"--delta {self.delta} must be in (0, 1)")
        if self.workers < 1:
            raise ConfigError(f"--workers {self.workers} must be >= 1")


@dataclass(frozen=True)
class RunResult:
    out: Path
    epsilon: float
    metrics: list[dict[str, float]]


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out} already exists and is not empty; choose a new directory")


def _prepare_out(out: Path) -> None:
    _check_out(out)
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(out, 0o700)  # curator-only (design.md 8)


@contextlib.contextmanager
def _owner_only_files() -> Iterator[None]:
    """Files and folders created inside are owner-only (design.md 8)."""
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)


def run_training(request: TrainRequest) -> RunResult:
    """Plan, train on Ray Train workers, and write the run directory (owner-only)."""
    with _owner_only_files():
        return _run_training(request)


def _run_training(request: TrainRequest) -> RunResult:
    method = get_method(request.method)
    image_size = request.settings.get("image_size")
    try:
        size = int(image_size) if image_size not in (None, "", "auto") else None
    except (TypeError, ValueError):
        raise ConfigError(
            f"image_size={image_size!r} is not an integer; use e.g. --set image_size=32"
        ) from None
    splits = load_dataset(request.dataset, image_size=size, seed=request.seed)
    train = splits.train
    data = DataInfo(
        num_records=len(train),
        image_size=train.image_shape[1],
        channels=train.image_shape[0],
        num_classes=train.num_classes,
    )
    validate_delta(request.delta, dataset_size=data.num_records)
    config = method.make_config({**request.settings, "seed": request.settings.get("seed", request.seed)}, data)
    plan = method.plan(config, epsilon=request.epsilon, delta=request.delta, data=data)
    _check_out(request.out.resolve())  # before starting Ray: cheap checks first
    from raydp_synth.train.ray_session import ensure_ray

    total_cpus = ensure_ray()
    import ray

    gpus = ray.cluster_resources().get("GPU", 0)
    if request.use_gpu and gpus < request.workers and not os.environ.get("RAY_ADDRESS"):
        # A local Ray cannot grow: without this check the run would wait forever.
        raise ConfigError(
            f"--use-gpu asks for {request.workers} GPU(s) but this machine's Ray has {gpus:g}; "
            "drop --use-gpu, use fewer --workers, or submit to a GPU cluster"
        )
    out = request.out.resolve()
    _prepare_out(out)
    print(f"[raydp_synth] {method.name} on {request.dataset}: n={data.num_records}, "
          f"{data.image_size}x{data.image_size}x{data.channels}, {data.num_classes} classes")
    for m in plan.mechanisms:
        print(f"[raydp_synth]   {m.name}: sigma={m.noise_multiplier:.4g} q={m.sample_rate} "
              f"steps={m.num_steps} sensitivity={m.sensitivity:.4g}")
    print(f"[raydp_synth]   plan epsilon={plan.epsilon():.4f} at delta={plan.delta:g} "
          f"(target {request.epsilon:g})")
    (out / "run.json").write_text(json.dumps({
        "method": method.name, "dataset": request.dataset, "workers": request.workers,
        "use_gpu": request.use_gpu, "seed": request.seed, "config": config_to_dict(config),
        "data_info": data.__dict__, "plan": plan.to_dict(),
    }, indent=2))

    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    cpus_per_worker = min(1.0, total_cpus / request.workers)
    payload = {
        "method": method.name,
        "config": config_to_dict(config),
        "data_info": data.__dict__,
        "plan": plan.to_dict(),
        "dataset": str(request.dataset),
        "data_seed": request.seed,
        "use_gpu": request.use_gpu,
        # A reference, not the value: the secret never enters a persisted config.
        "dp_seed_ref": ray.put(request.dp_seed if request.dp_seed is not None else secrets.randbits(63)),
        "threads_per_worker": max(1, int(cpus_per_worker)),
    }
    trainer = TorchTrainer(
        train_loop_per_worker,
        train_loop_config=payload,
        scaling_config=ScalingConfig(
            num_workers=request.workers,
            use_gpu=request.use_gpu,
            resources_per_worker={"CPU": cpus_per_worker, **({"GPU": 1} if request.use_gpu else {})},
        ),
        # No automatic retries: a retried run would release its mechanisms again,
        # beyond its plan (the tuner charges every attempt explicitly instead).
        run_config=RunConfig(name="train", storage_path=str(out / "ray"),
                             failure_config=FailureConfig(max_failures=0)),
    )
    start = time.monotonic()
    result = trainer.fit()
    if result.checkpoint is None:
        raise RuntimeError(f"training finished without a checkpoint: {result.error}")
    with result.checkpoint.as_directory() as ckpt:
        state = torch.load(Path(ckpt) / CHECKPOINT_STATE, map_location="cpu")
        metrics = json.loads((Path(ckpt) / CHECKPOINT_METRICS).read_text())
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    generator = method.build_generator(config, data)
    generator.load_state_dict(state["generator"])
    statement = privacy_statement(
        plan, scope="one training run (no hyperparameter search)", dataset=request.dataset
    )
    write_release(
        out / "release",
        generator=generator,
        latent_dim=config.latent_dim,
        num_classes=data.num_classes,
        class_names=splits.class_names,
        generator_config={"method": method.name, "config": config_to_dict(config),
                          "data_info": data.__dict__, "class_names": list(splits.class_names)},
        statement=statement,
        num_synthetic=data.num_records,
        seed=request.seed,
    )
    print(f"[raydp_synth] trained in {time.monotonic() - start:.0f}s; release written to "
          f"{out / 'release'} (epsilon={statement['epsilon']:.4f}, delta={plan.delta:g})")
    return RunResult(out=out, epsilon=statement["epsilon"], metrics=metrics)
