"""Utility of default runs on the field's datasets (MNIST, Fashion-MNIST, ...).

One command trains each method at each epsilon on a named dataset, evaluates every
run (CAS, domain-CNN FID/IS, and the Inception FID/IS/precision/recall when the
Inception weights are available), and writes the results table::

    python bench/field_utility.py --dataset mnist --data-dir ~/data/mnist \\
        --methods dpaf,dpwgan --epsilons 1,10 --out bench/runs/mnist \\
        [--epochs dpaf=5,dpwgan=1] [--fid-weights pt_inception-2015-12-05-6726825d.pth] \\
        [--use-gpu]

Each run is ``python -m raydp_synth.train METHOD --dataset D --epsilon E`` with the
method's defaults (``--epochs`` shortens training for a CPU run; the table then
says so), then ``python -m raydp_synth.evaluate``. The small result files of each
run (``run.json``, ``release/privacy.json``, ``evaluation.json``) are copied under
``--results`` so that ``python -m raydp_synth.report`` can regenerate the table in
bench/results/utility/NOTES.md (section 4.2) from the repository alone.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

SMALL_FILES = ("run.json", "release/privacy.json", "evaluation.json", "score.json")


def _pairs(text: str | None) -> dict[str, str]:
    """``a=1,b=2`` -> {"a": "1", "b": "2"}."""
    if not text:
        return {}
    return dict(item.split("=", 1) for item in text.split(","))


def keep_small_files(run_dir: Path, results: Path) -> None:
    """Copy a run's result files (not its checkpoints or samples) to ``results``."""
    for name in SMALL_FILES:
        source = run_dir / name
        if source.is_file():
            target = results / run_dir.name / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="mnist")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--methods", default="dpaf,dpwgan")
    parser.add_argument("--epsilons", default="1,10")
    parser.add_argument("--epochs", default=None, metavar="METHOD=E,...",
                        help="shorter training than the method's default (CPU runs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("bench/runs"))
    parser.add_argument("--results", type=Path, default=Path("bench/results"))
    parser.add_argument("--fid-weights", default=None)
    parser.add_argument("--use-gpu", action="store_true")
    args = parser.parse_args()

    epochs = _pairs(args.epochs)
    python = sys.executable
    dataset_name = args.dataset.split(":")[0]
    for method in args.methods.split(","):
        for eps in args.epsilons.split(","):
            name = f"{method}-{dataset_name}-eps{eps}"
            run_dir = args.out / name
            if (run_dir / "evaluation.json").is_file():
                print(f"[bench] {name}: done already, kept", flush=True)
                keep_small_files(run_dir, args.results)
                continue
            if run_dir.exists():
                shutil.rmtree(run_dir)
            train = [python, "-m", "raydp_synth.train", method, "--dataset", args.dataset,
                     "--epsilon", eps, "--seed", str(args.seed), "--out", str(run_dir),
                     "--no-eval"]
            if args.data_dir:
                train += ["--data-dir", args.data_dir]
            if method in epochs:
                train += ["--set", f"epochs={epochs[method]}"]
            if args.use_gpu:
                train.append("--use-gpu")
            evaluate = [python, "-m", "raydp_synth.evaluate", str(run_dir)]
            if args.fid_weights:
                evaluate += ["--fid-weights", args.fid_weights]
            for command in (train, evaluate):
                print("[bench] " + " ".join(command), flush=True)
                start = time.perf_counter()
                subprocess.run(command, check=True)
                print(f"[bench] {command[2]} took {time.perf_counter() - start:.0f} s", flush=True)
            keep_small_files(run_dir, args.results)
    report = [python, "-m", "raydp_synth.report", *sorted(map(str, args.results.glob("*")))]
    print("[bench] " + " ".join(report), flush=True)
    return subprocess.run(report, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
