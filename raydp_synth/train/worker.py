"""The per-worker function of a Ray Train run: rebuild typed objects, run the method.

Configs cross the Ray boundary as plain dicts (the payload) and are converted to
typed objects once, here. Every metric goes through :class:`Reporter`, which
refuses keys that are not on the method's privacy-safe allow-list.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from raydp_synth.data import DataInfo, load_training_data
from raydp_synth.methods import get_method
from raydp_synth.privacy.plan import PrivacyPlan
from raydp_synth.privacy.records import derived_seed
from raydp_synth.runtime.context import WorkerContext

__all__ = ["CHECKPOINT_METRICS", "CHECKPOINT_STATE", "Reporter", "UnsafeMetricError", "train_loop_per_worker"]

CHECKPOINT_STATE = "state.pt"
CHECKPOINT_METRICS = "metrics.json"


class UnsafeMetricError(RuntimeError):
    """A method tried to report a key that is not on its privacy-safe allow-list."""


class Reporter:
    """Checks, records and forwards a worker's reports to Ray Train.

    Args:
        allowlist: the method's privacy-safe metric keys (docs/architecture.md,
            invariant 3).
        rank: this worker's rank; only rank 0 writes checkpoints.
    """

    def __init__(self, allowlist: frozenset[str], *, rank: int) -> None:
        self.allowlist = allowlist
        self.rank = rank
        self.history: list[dict[str, float]] = []

    def check(self, metrics: Mapping[str, float]) -> dict[str, float]:
        unsafe = sorted(set(metrics) - self.allowlist)
        if unsafe:
            raise UnsafeMetricError(
                f"metric(s) {unsafe} are not on the method's privacy-safe allow-list"
            )
        return {k: float(v) for k, v in metrics.items()}

    def __call__(self, metrics: Mapping[str, float], state: dict[str, Any] | None) -> None:
        import ray.train

        clean = self.check(metrics)
        self.history.append(clean)
        if state is None or self.rank != 0:
            ray.train.report(clean)
            return
        with tempfile.TemporaryDirectory() as tmp:
            torch.save(state, Path(tmp) / CHECKPOINT_STATE)
            (Path(tmp) / CHECKPOINT_METRICS).write_text(json.dumps(self.history))
            ray.train.report(clean, checkpoint=ray.train.Checkpoint.from_directory(tmp))


def train_loop_per_worker(payload: dict[str, Any]) -> None:
    """Ray Train entry point: runs ``payload["method"]``'s DP loop on this worker."""
    import ray
    import ray.train
    import ray.train.torch

    context = ray.train.get_context()
    rank, world_size = context.get_world_rank(), context.get_world_size()
    torch.set_num_threads(max(1, int(payload.get("threads_per_worker", 1))))
    method = get_method(payload["method"])
    data = DataInfo(**payload["data_info"])
    config = method.make_config(payload["config"], data)
    plan = PrivacyPlan.from_dict(payload["plan"])
    splits, public = load_training_data(payload["dataset"], public=payload.get("public"),
                                        image_size=data.image_size, seed=payload["data_seed"])
    if len(splits.train) != data.num_records or (len(public) if public else 0) != data.public_records:
        raise RuntimeError(
            f"the training split has {len(splits.train)} records but the plan was made "
            f"for {data.num_records}: the dataset changed after planning"
        )
    device = ray.train.torch.get_device() if payload["use_gpu"] else torch.device("cpu")
    # The secret DP seed travels through the object store, never in a config that
    # Ray or we write to disk.
    dp_seed = int(ray.get(payload["dp_seed_ref"]))
    reporter = Reporter(method.metric_allowlist, rank=rank)
    ctx = WorkerContext(
        config=config,
        plan=plan,
        data=data,
        train=splits.train,
        rank=rank,
        world_size=world_size,
        device=device,
        noise_generator=torch.Generator().manual_seed(derived_seed(dp_seed, "noise", rank)),
        report=reporter,
        log=(lambda line: print(line, flush=True)) if rank == 0 else (lambda line: None),
        dp_seed=dp_seed,
        public=public,
    )
    method.train(ctx)
