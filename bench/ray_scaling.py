"""Ray overhead and scaling of one DPAF trial with 1 and 2 workers, and study
throughput with max-concurrent 1 and 2, on digits.

* ``direct``: the same DPAF loop without Ray: in this process (1 worker), or in 2
  processes joined by ``torch.distributed`` (gloo) exactly as Ray Train joins its
  workers; plan, data, training, selection score.
* ``trial``: a 1-trial study with the same fixed config (Tune trial, accountant grant,
  Ray Train workers, score, checkpoint); the Tune trial's ``time_total_s``.
* samples/s: records the loop's sampler drew (epochs x N in expectation) per second of
  ``direct`` and of ``trial``.
* memory: peak resident set (``VmHWM``) of each Ray Train worker process, read from
  /proc every 0.2 s (Linux).
* throughput: a 4-trial study (fixed config) with --max-concurrent 1 and 2, trials
  per hour of wall time (Ray start-up and release included).

Each worker gets 1 torch thread (2 cores here: 2 workers fill the machine).

Usage: python bench/ray_scaling.py [--epochs 30] [--study-trials 4] [--use-gpu]
       [--out bench/results/ray_scaling.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import tempfile
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import yaml

EPSILON = 10.0


def _direct_worker(rank: int, world: int, epochs: float, port: int, out: str,
                   use_gpu: bool = False) -> None:
    from raydp_synth.config import config_to_dict
    from raydp_synth.data import DataInfo, load_dataset
    from raydp_synth.evaluation.selection import score_generator
    from raydp_synth.methods import get_method
    from raydp_synth.privacy.secret_rng import secret_integers
    from raydp_synth.privacy.selection_score import DEFAULT_SCORE_SHARE
    from raydp_synth.release import TrainedGenerator
    from raydp_synth.runtime.context import WorkerContext

    torch.set_num_threads(1)
    if world > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("nccl" if use_gpu else "gloo", rank=rank, world_size=world)
    start = time.perf_counter()
    splits = load_dataset("digits")
    train = splits.train
    data = DataInfo(num_records=len(train), image_size=16, channels=1, num_classes=10)
    method = get_method("dpaf")
    config = method.make_config({"epochs": epochs}, data)
    plan = method.plan(config, target_epsilon=EPSILON, delta=1e-5, data=data,
                       score_share=DEFAULT_SCORE_SHARE)
    states: list[dict] = []
    ctx = WorkerContext(
        config=config, plan=plan, data=data, train=train, rank=rank, world_size=world,
        device=torch.device("cuda", rank) if use_gpu else torch.device("cpu"),
        noise_generator=torch.Generator().manual_seed(1 + rank),
        report=lambda metrics, state: states.append(state) if state else None,
        log=lambda line: None, dp_seed=secrets.randbits(63),
    )
    method.train(ctx)
    if rank == 0:
        generator = TrainedGenerator.build(method="dpaf", config=config_to_dict(config),
                                           data_info=data.__dict__,
                                           class_names=splits.class_names,
                                           state_dict=states[-1]["generator"])
        score_generator(generator, splits.val, plan=plan,
                        noise_source=secret_integers(None))
        Path(out).write_text(json.dumps({"seconds": time.perf_counter() - start,
                                         "records": len(train)}))
    if world > 1:
        dist.destroy_process_group()


def _direct(epochs: float, workers: int, use_gpu: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "direct.json")
        if workers == 1:
            _direct_worker(0, 1, epochs, 0, out, use_gpu)
        else:
            port = 20000 + secrets.randbelow(20000)
            mp.spawn(_direct_worker, args=(workers, epochs, port, out, use_gpu), nprocs=workers)
        return json.loads(Path(out).read_text())


class _WorkerMemory:
    """Peak RSS of every process that runs a trial's loop while it runs: Ray Train
    workers, and Tune's trial actors (``ray::ImplicitFunc``), where a 1-worker trial
    runs its loop in process."""

    LOOP_PROCESSES = (b"RayTrainWorker", b"ImplicitFunc")

    def __init__(self) -> None:
        self.peaks: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> _WorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(0.2):
            for proc in Path("/proc").glob("[0-9]*"):
                try:
                    cmdline = (proc / "cmdline").read_bytes()
                    if not any(name in cmdline for name in self.LOOP_PROCESSES):
                        continue
                    status = (proc / "status").read_text()
                except OSError:  # the process ended
                    continue
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):  # the process's peak resident set, kB
                        peak = int(line.split()[1]) * 1024
                        self.peaks[int(proc.name)] = max(self.peaks.get(int(proc.name), 0), peak)


def _study(epochs: float, *, trials: int, workers: int, concurrent: int, use_gpu: bool) -> dict:
    from raydp_synth.tune.study import StudyRequest, run_study

    with tempfile.TemporaryDirectory() as tmp:
        space = Path(tmp) / "fixed.yaml"
        space.write_text(yaml.safe_dump({
            "method": "dpaf", "params": {"mu": {"type": "categorical", "choices": [1]}},
            "fixed": {"epochs": epochs},
        }))
        start = time.perf_counter()
        with _WorkerMemory() as memory:
            run_study(StudyRequest(method="dpaf", epsilon=EPSILON, delta=1e-5, trials=trials,
                                   search_space=space, storage=Path(tmp), name="bench",
                                   workers_per_trial=workers, max_concurrent=concurrent,
                                   use_gpu=use_gpu, evaluate=False))
        wall = time.perf_counter() - start
        trial_s = []
        for path in Path(tmp, "bench", "tune").glob("*/result.json"):
            lines = [json.loads(line) for line in path.read_text().splitlines() if line]
            trial_s.append(lines[-1]["time_total_s"])
        return {"wall_s": wall, "trial_s": sorted(trial_s),
                "worker_peak_rss_mib": sorted(round(v / 2**20) for v in memory.peaks.values())}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=float, default=30.0)
    parser.add_argument("--study-trials", type=int, default=4)
    parser.add_argument("--use-gpu", action="store_true", help="one GPU per worker")
    parser.add_argument("--out", type=Path, default=Path("bench/results/ray_scaling.json"))
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    rows = {}
    for workers in (1, 2):
        direct = _direct(args.epochs, workers, args.use_gpu)
        trial = _study(args.epochs, trials=1, workers=workers, concurrent=1,
                       use_gpu=args.use_gpu)
        drawn = args.epochs * direct["records"]  # records sampled, in expectation
        rows[f"{workers}_worker"] = {
            "direct_s": round(direct["seconds"], 2),
            "trial_s": round(trial["trial_s"][0], 2),
            "overhead_s": round(trial["trial_s"][0] - direct["seconds"], 2),
            "overhead_share_of_trial": round(1 - direct["seconds"] / trial["trial_s"][0], 3),
            "samples_per_s_direct": round(drawn / direct["seconds"], 1),
            "samples_per_s_trial": round(drawn / trial["trial_s"][0], 1),
            "worker_peak_rss_mib": trial["worker_peak_rss_mib"],
        }
    throughput = {}
    for concurrent in (1, 2):
        study = _study(args.epochs, trials=args.study_trials, workers=1, concurrent=concurrent,
                       use_gpu=args.use_gpu)
        throughput[f"max_concurrent_{concurrent}"] = {
            "wall_s": round(study["wall_s"], 1),
            "trials_per_hour": round(args.study_trials / study["wall_s"] * 3600, 1),
            "trial_s": [round(t, 1) for t in study["trial_s"]],
        }
    result = {
        "benchmark": "ray_scaling", "epochs": args.epochs, "study_trials": args.study_trials,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, 1 torch thread per worker"
                   + (f", {torch.cuda.get_device_name(0)}" if args.use_gpu else ""),
        "trial": rows, "study_throughput": throughput,
    }
    print(f"{'workers':<10}{'direct s':>10}{'trial s':>10}{'overhead':>10}{'samples/s':>11}"
          f"{'peak MiB/worker':>17}")
    for name, r in rows.items():
        print(f"{name:<10}{r['direct_s']:>10.1f}{r['trial_s']:>10.1f}"
              f"{100 * r['overhead_share_of_trial']:>9.0f}%{r['samples_per_s_trial']:>11.0f}"
              f"{max(r['worker_peak_rss_mib'] or [0]):>17}")
    for name, r in throughput.items():
        print(f"{name}: {r['trials_per_hour']:.0f} trials/hour ({r['wall_s']:.0f} s wall)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
