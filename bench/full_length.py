"""Full-length runs: every method's default configuration at its own epochs (no
shortening) on a field dataset, several runs packed onto one GPU, each evaluated.

One command gives the table issue 43 asks for (train time, evaluation time, CAS, the
GPU's busy share) and the utility table at full length::

    python bench/full_length.py --dataset mnist --data-dir ~/data/mnist --use-gpu \\
        --methods dpaf,dpwgan,dpgan,privimage-g,privimage-d --epsilons 1,10 --seeds 0 \\
        --parallel 4 --public mnist:fraction=0.02 [--compile-step]

Each run is ``python -m raydp_synth.train METHOD --dataset D --epsilon E --seed S`` with
the method's defaults, then ``python -m raydp_synth.evaluate RUN`` (on the GPU with
``--use-gpu``). Up to ``--parallel`` runs go at once, each its own process and local
Ray instance; their CPU threads are split so that the runs together use no more
threads than the host has cores. ``nvidia-smi`` is sampled every 0.5 s over the whole
batch (the GPU's busy share, its peak memory). The small files of each run go under
``--results`` (``python -m raydp_synth.report`` reads them); a summary JSON
(``--summary``) holds each run's train and evaluation seconds (the train time is the
loop's own, ``timing.json``; the command's wall time includes Ray's start) and CAS.

PrivImage needs data declared public (``--public``, given to the PrivImage methods
only). Without ``--use-gpu`` it runs on the CPU, where full length takes hours.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from field_utility import keep_small_files  # noqa: E402

PUBLIC_METHODS = ("privimage-g", "privimage-d")


def sample_gpu(stop: threading.Event, samples: list[tuple[float, float]]) -> None:
    """(utilisation %, memory MiB) of GPU 0 every 0.5 s until ``stop``."""
    query = ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used",
             "--format=csv,noheader,nounits", "-i", "0"]
    while not stop.wait(0.5):
        try:
            line = subprocess.run(query, capture_output=True, text=True, timeout=5).stdout
            util, mem = (float(x) for x in line.strip().split(","))
            samples.append((util, mem))
        except (OSError, ValueError, subprocess.SubprocessError):
            return


def run_one(method: str, eps: str, seed: int, args: argparse.Namespace, threads: int
            ) -> dict[str, Any]:
    name = f"{method}-{args.dataset.split(':')[0]}-eps{eps}-s{seed}"
    run_dir = args.out / name
    if run_dir.exists():
        shutil.rmtree(run_dir)
    train = [sys.executable, "-m", "raydp_synth.train", method, "--dataset", args.dataset,
             "--epsilon", eps, "--seed", str(seed), "--out", str(run_dir), "--no-eval", "-q"]
    if args.data_dir:
        train += ["--data-dir", args.data_dir]
    if args.use_gpu:
        train.append("--use-gpu")
    if args.compile_step:
        train.append("--compile-step")
    if method in PUBLIC_METHODS and args.public:
        train += ["--public", args.public]
    evaluate = [sys.executable, "-m", "raydp_synth.evaluate", str(run_dir),
                "--device", "cuda" if args.use_gpu else "cpu"]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    row: dict[str, Any] = {"run": name, "method": method, "epsilon": float(eps), "seed": seed}
    for key, command in (("train_wall_s", train), ("eval_wall_s", evaluate)):
        print("[bench] " + " ".join(command), flush=True)
        start = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        row[key] = round(time.perf_counter() - start, 1)
        if done.returncode != 0:
            row["error"] = (done.stderr or done.stdout).strip().splitlines()[-1:]
            print(f"[bench] {name}: {' '.join(command[2:4])} failed: {row['error']}", flush=True)
            return row
    timing = run_dir / "timing.json"
    row["train_s"] = json.loads(timing.read_text())["train_s"] if timing.is_file() else None
    final = json.loads((run_dir / "evaluation.json").read_text()).get("final", {})
    row["cas"] = {key[4:]: value for key, value in final.items() if key.startswith("cas_")}
    keep_small_files(run_dir, args.results)
    print(f"[bench] {name}: train {row['train_s']} s, evaluation {row['eval_wall_s']} s, "
          f"CAS {row['cas']}", flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="mnist")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--methods", default="dpaf,dpwgan,dpgan,privimage-g,privimage-d")
    parser.add_argument("--epsilons", default="1,10")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--public", default=None, help="the PrivImage methods' public data")
    parser.add_argument("--use-gpu", action="store_true")
    parser.add_argument("--compile-step", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("bench/runs/full-length"))
    parser.add_argument("--results", type=Path, default=Path("bench/results/full-length"))
    parser.add_argument("--summary", type=Path, default=None)
    args = parser.parse_args()

    jobs = [(m, e, int(s)) for m in args.methods.split(",") for e in args.epsilons.split(",")
            for s in args.seeds.split(",")]
    threads = max(1, (os.cpu_count() or 1) // max(1, args.parallel))
    samples: list[tuple[float, float]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample_gpu, args=(stop, samples), daemon=True)
    if args.use_gpu:
        sampler.start()
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        rows = list(pool.map(lambda job: run_one(*job, args, threads), jobs))
    wall = time.perf_counter() - start
    stop.set()
    summary = {
        "command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d"),
        "host": platform.node(), "cpus": os.cpu_count(), "parallel": args.parallel,
        "gpu": (subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                               capture_output=True, text=True).stdout.strip()
                if args.use_gpu else None),
        "wall_s": round(wall, 1),
        "gpu_busy_mean_pct": (round(sum(u for u, _ in samples) / len(samples), 1)
                              if samples else None),
        "gpu_memory_peak_mib": max((m for _, m in samples), default=None),
        "runs": rows,
    }
    out = args.summary or args.results / "summary.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2))
    print("| run | train s | evaluation s | CAS (CNN) | CAS (logreg) |\n|---|---:|---:|---:|---:|")
    for row in rows:
        cas = row.get("cas") or {}
        print(f"| {row['run']} | {row.get('train_s')} | {row.get('eval_wall_s')} | "
              f"{cas.get('cnn')} | {cas.get('logreg')} |")
    print(f"[bench] {len(rows)} runs in {wall:.0f} s on {summary['gpu'] or 'the CPU'}; GPU busy "
          f"{summary['gpu_busy_mean_pct']}% on average; summary in {out}")
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
