"""The per-worker function of a Ray Train run: rebuild typed objects, run the method.

Configs cross the Ray boundary as plain dicts (the payload) and are converted to
typed objects once, here. Every metric goes through :class:`Reporter`, which
refuses keys that are not on the method's privacy-safe allow-list.

:func:`run_worker_loop` is the one body of a worker: Ray Train's
:func:`train_loop_per_worker` calls it on each worker, and a 1-worker Tune trial
calls it in its own process (:func:`raydp_synth.train.pipeline.fit_in_process`), with
the same payload, context, allow-list and checkpoint files; only where a report goes
(its *sink*) differs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from raydp_synth.data import DataInfo, load_training_data
from raydp_synth.log import configure_worker_console
from raydp_synth.methods import get_method
from raydp_synth.privacy.plan import PrivacyPlan
from raydp_synth.privacy.secret_rng import derive_secret, secret_generator
from raydp_synth.runtime.context import WorkerContext

__all__ = [
    "CHECKPOINT_METRICS",
    "CHECKPOINT_STATE",
    "ReportSink",
    "Reporter",
    "UnsafeMetricError",
    "ray_train_sink",
    "run_worker_loop",
    "train_loop_per_worker",
]

_LOG = logging.getLogger(__name__)

CHECKPOINT_STATE = "state.pt"
CHECKPOINT_METRICS = "metrics.json"

#: Where a checked report goes: ``sink(metrics, checkpoint_dir)``; ``checkpoint_dir``
#: (rank 0, or None) is a temporary folder with the checkpoint's files, which the
#: sink must copy before it returns.
ReportSink = Callable[[dict[str, float], "str | None"], None]


def ray_train_sink(metrics: dict[str, float], checkpoint_dir: str | None) -> None:
    """A Ray Train worker's sink: ``ray.train.report`` (persists the checkpoint)."""
    import ray.train

    checkpoint = ray.train.Checkpoint.from_directory(checkpoint_dir) if checkpoint_dir else None
    ray.train.report(metrics, checkpoint=checkpoint)


class UnsafeMetricError(RuntimeError):
    """A method tried to report a key that is not on its privacy-safe allow-list."""


class Reporter:
    """Checks, records and forwards a worker's reports to Ray Train.

    Args:
        allowlist: the method's privacy-safe metric keys (docs/architecture.md,
            invariant 3).
        rank: this worker's rank; only rank 0 writes checkpoints.
        sink: where checked reports go (default: Ray Train's ``report``).
    """

    def __init__(self, allowlist: frozenset[str], *, rank: int,
                 sink: ReportSink = ray_train_sink) -> None:
        self.allowlist = allowlist
        self.rank = rank
        self.history: list[dict[str, float]] = []
        self._sink = sink

    def check(self, metrics: Mapping[str, float]) -> dict[str, float]:
        unsafe = sorted(set(metrics) - self.allowlist)
        if unsafe:
            raise UnsafeMetricError(
                f"metric(s) {unsafe} are not on the method's privacy-safe allow-list"
            )
        return {k: float(v) for k, v in metrics.items()}

    def __call__(self, metrics: Mapping[str, float], state: dict[str, Any] | None) -> None:
        clean = self.check(metrics)
        self.history.append(clean)
        if state is None or self.rank != 0:
            self._sink(clean, None)
            return
        with tempfile.TemporaryDirectory() as tmp:
            torch.save(state, Path(tmp) / CHECKPOINT_STATE)
            (Path(tmp) / CHECKPOINT_METRICS).write_text(json.dumps(self.history))
            self._sink(clean, tmp)


def run_worker_loop(payload: Mapping[str, Any], *, rank: int, world_size: int,
                    device: torch.device, dp_seed: int, sink: ReportSink,
                    stamps: dict[str, float] | None = None,
                    train_subset: Any = None) -> Reporter:
    """One worker's body: rebuild the typed config and plan from ``payload``, read
    the training split, and run ``payload["method"]``'s DP loop with reports
    through an allow-list :class:`Reporter` into ``sink``.

    The caller has had the plan granted; the secret ``dp_seed`` comes as a value
    (never from the payload, which holds only public quantities). ``stamps``, if
    given, gets the wall times (``time.time()``) of ``loop_start`` and ``loop_end``
    (the DP loop's start and end: the phases around it are Ray's fixed overhead;
    see bench/trial_overhead.py). ``train_subset``: the indices of the training
    records this run may read (subsampled tuning's secret subset, as a value like
    ``dp_seed``, never in the payload); the payload's ``source_records`` is then the
    size of the split they index, and ``data_info`` the subset's public facts.
    """
    # The driver's verbosity, one handler: each progress line is printed once.
    configure_worker_console()
    torch.set_num_threads(max(1, int(payload.get("threads_per_worker", 1))))
    method = get_method(payload["method"])
    data = DataInfo(**payload["data_info"])
    config = method.make_config(payload["config"], data)
    plan = PrivacyPlan.from_dict(payload["plan"])
    splits, public = load_training_data(payload["dataset"], public=payload.get("public"),
                                        image_size=data.image_size, seed=payload["data_seed"])
    expected = data.num_records if train_subset is None else int(payload["source_records"])
    if len(splits.train) != expected or (len(public) if public else 0) != data.public_records:
        raise RuntimeError(
            f"the training split has {len(splits.train)} records but the plan was made "
            f"for {data.num_records}: the dataset changed after planning"
        )
    train = splits.train
    if train_subset is not None:
        train = train.records_at(train_subset)  # X1 of a subsampled tuning trial
    reporter = Reporter(method.metric_allowlist, rank=rank, sink=sink)
    ctx = WorkerContext(
        config=config,
        plan=plan,
        data=data,
        train=train,
        rank=rank,
        world_size=world_size,
        device=device,
        # On the loop's device: each release's noise is drawn there, not copied in.
        noise_generator=secret_generator(derive_secret(dp_seed, "noise", rank), device=device),
        report=reporter,
        log=_LOG.info if rank == 0 else (lambda line: None),
        dp_seed=dp_seed,
        public=public,
        compile_backend=payload.get("compile_backend"),
    )
    if stamps is not None:
        stamps["loop_start"] = time.time()
    method.train(ctx)
    if stamps is not None:
        stamps["loop_end"] = time.time()
    return reporter


def train_loop_per_worker(payload: dict[str, Any]) -> None:
    """Ray Train entry point: runs ``payload["method"]``'s DP loop on this worker.

    With ``payload["timing_file"]`` set, rank 0 writes its wall-clock stamps there
    (its start, the loop's start and end) for the driver's overhead split."""
    import ray
    import ray.train
    import ray.train.torch

    stamps = {"worker_start": time.time()}
    context = ray.train.get_context()
    rank, world_size = context.get_world_rank(), context.get_world_size()
    device = ray.train.torch.get_device() if payload["use_gpu"] else torch.device("cpu")
    # The secret DP seed travels through the object store, never in a config that
    # Ray or we write to disk.
    dp_seed = int(ray.get(payload["dp_seed_ref"]))
    subset_ref = payload.get("train_subset_ref")
    run_worker_loop(payload, rank=rank, world_size=world_size, device=device, dp_seed=dp_seed,
                    sink=ray_train_sink, stamps=stamps,
                    train_subset=None if subset_ref is None else ray.get(subset_ref))
    timing_file = payload.get("timing_file")
    if timing_file and rank == 0:
        stamps["worker_end"] = time.time()
        with contextlib.suppress(OSError):  # a node without the shared storage: no split
            Path(timing_file).write_text(json.dumps(stamps))
