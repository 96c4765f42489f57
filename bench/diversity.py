"""Diversity figures of runs evaluated before the evaluation computed them.

``python -m raydp_synth.evaluate`` now writes, beside CAS, FID and IS, the released
generator's ``precision_cnn``, ``recall_cnn`` and ``diversity_cnn``
(:func:`raydp_synth.evaluation.report.diversity_figures`: improved precision and
recall, and the intra-class diversity, in the domain CNN's feature space). For a
bench cell whose ``evaluation.json`` is older, this script computes the same three
figures the way the evaluation does, and nothing else (no CAS classifier, no curve):
the same held-out split of the test set, the same domain CNN (seed and steps of the
evaluation's settings), the same ``generator.balanced`` samples. It writes them to
``diversity.json`` in the cell's results folder, with the FID it recomputed beside the
evaluation's: equal FIDs say the network and the samples were reproduced. Then it
prints one Markdown row a cell: CAS, FID, IS and the three figures.

    python bench/diversity.py bench/results/headroom bench/results/adaptive-capacity \\
        [--runs bench/runs/headroom-mnist --runs bench/runs/headroom ...] [--only dpwgan-mnist]
    python bench/diversity.py --real mnist:DIR [--image-size 32 --num-synthetic 10000]

Each results cell names its run directory (``evaluation.json``'s ``run``); where that
moved, the first ``--runs`` folder holding a directory of the cell's name is used (the
run's ``release/`` is what is read). Cells that already have ``diversity.json``, or an
evaluation with the figures, are skipped. Reads the test split only, as the
evaluation does: the figures are the curator's, never released.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from search_strategies import DIVERSITY_FIGURES as FIGURES  # bench/, beside this script
from search_strategies import DIVERSITY_FILE, _mean_cas, _released_final

from raydp_synth.data import load_dataset
from raydp_synth.evaluation.report import (
    default_settings,
    evaluate_generator,
    feature_network,
    held_out_split,
)
from raydp_synth.release.generator import TrainedGenerator


def run_directory(cell: Path, evaluation: dict, runs: list[Path]) -> Path | None:
    """The run directory a results cell was copied from, or None if it is gone."""
    named = Path(evaluation["run"])
    if (named / "release").is_dir():
        return named
    return next((root / cell.name for root in runs if (root / cell.name / "release").is_dir()),
                None)


def backfill(cell: Path, run_dir: Path, evaluation: dict) -> dict:
    """The cell's diversity figures, computed as its evaluation would have."""
    run = json.loads((run_dir / "run.json").read_text())
    recorded = evaluation["settings"]
    settings = default_settings(run["method"], num_synthetic=recorded["num_synthetic"],
                                seed=recorded["seed"])
    generator = TrainedGenerator.from_release(run_dir / "release")
    splits = load_dataset(evaluation["dataset"], image_size=generator.data.image_size,
                          seed=int(run.get("seed", 0)),
                          default_classes=generator.data.num_classes)
    reference, _ = held_out_split(splits.test, seed=settings.seed)
    if len(reference) != evaluation["reference"]["feature_network_training_records"]:
        raise RuntimeError(f"{cell.name}: the domain CNN's training set differs from the "
                           "evaluation's; its figures would not be comparable")
    started = time.perf_counter()
    features = feature_network(reference, seed=settings.seed, steps=settings.feature_steps)
    figures = evaluate_generator(generator, splits.test, features, classifiers=(),
                                 num_synthetic=settings.num_synthetic or 0, seed=settings.seed,
                                 diversity=True)
    return {**{name: figures[name] for name in FIGURES},
            "fid_cnn_recomputed": figures["fid_cnn"],
            "fid_cnn_evaluation": evaluation["final"]["fid_cnn"],
            "num_synthetic": settings.num_synthetic, "test_records": len(splits.test),
            "seconds": time.perf_counter() - started, "run": str(run_dir)}


class RealSample:
    """Real training images in a generator's place (``balanced`` as
    :meth:`~raydp_synth.release.generator.TrainedGenerator.balanced` answers): the
    figures a perfect generator would score against the test split, under the same
    network, the reading's reference. The training split is the curator's own data;
    this row, like the others, never leaves the curator."""

    def __init__(self, images, labels) -> None:
        self.images, self.labels = images, labels

    def balanced(self, count: int, *, seed: int):
        pick = np.random.default_rng(seed).choice(len(self.images), min(count, len(self.images)),
                                                  replace=False)
        return self.images[np.sort(pick)], self.labels[np.sort(pick)]


def real_reference(dataset: str, *, image_size: int, num_synthetic: int, seed: int = 0) -> dict:
    """The figures of real training images against the test split (:class:`RealSample`)."""
    splits = load_dataset(dataset, image_size=image_size, seed=seed)
    reference, _ = held_out_split(splits.test, seed=seed)
    features = feature_network(reference, seed=seed, steps=default_settings("dpaf").feature_steps)
    return evaluate_generator(RealSample(splits.train.images, splits.train.labels),  # type: ignore[arg-type]
                              splits.test, features, classifiers=(), num_synthetic=num_synthetic,
                              seed=seed, diversity=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="*", type=Path, help="bench results folders")
    parser.add_argument("--runs", action="append", type=Path, default=[],
                        help="where the runs are, if they moved (repeatable)")
    parser.add_argument("--only", default="", help="only cells whose name contains this")
    parser.add_argument("--real", default=None, metavar="DATASET",
                        help="instead: the figures of DATASET's real training images (at "
                             "--image-size, --num-synthetic of them) against its test split")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--num-synthetic", type=int, default=10_000)
    args = parser.parse_args()
    if args.real:
        figures = real_reference(args.real, image_size=args.image_size,
                                 num_synthetic=args.num_synthetic)
        print(json.dumps({"dataset": args.real, **figures}, indent=2))
        return 0
    cells = [cell for folder in args.results
             for cell in sorted(p.parent for p in folder.glob("*/evaluation.json"))
             if args.only in cell.name]
    missing = []
    for cell in cells:
        if (cell / DIVERSITY_FILE).is_file():
            continue
        evaluation = json.loads((cell / "evaluation.json").read_text())
        if all(name in evaluation["final"] for name in FIGURES):
            continue
        run_dir = run_directory(cell, evaluation, args.runs)
        if run_dir is None:
            missing.append(cell.name)
            continue
        record = backfill(cell, run_dir, evaluation)
        (cell / DIVERSITY_FILE).write_text(json.dumps(record, indent=2) + "\n")
        print(f"{cell}: precision {record['precision_cnn']:.3f} recall "
              f"{record['recall_cnn']:.3f} diversity {record['diversity_cnn']:.3f} "
              f"(FID {record['fid_cnn_recomputed']:.1f}, evaluation's "
              f"{record['fid_cnn_evaluation']:.1f}; {record['seconds']:.0f} s)", flush=True)
    if missing:
        print(f"no run directory for {len(missing)} cells: {', '.join(missing)}", file=sys.stderr)
    print(table(cells))
    return 0


def figures_of(cell: Path) -> dict[str, float]:
    """A cell's mean CAS beside its evaluation's figures, the diversity figures its
    evaluation or its backfilled ``diversity.json`` holds (the strategy summary's
    reading of a cell, ``_released_final``)."""
    final = _released_final(cell) or {}
    return {**final, "cas": _mean_cas(final) or float("nan")}


def table(cells: list[Path]) -> str:
    """One Markdown row a cell: CAS (mean of its classifiers), FID, IS, precision,
    recall and intra-class diversity ("-" where not computed)."""
    lines = ["| cell | CAS | FID (CNN) | IS (CNN) | precision | recall | diversity |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for cell in cells:
        f = figures_of(cell)
        rest = " | ".join(f"{f[k]:.3f}" if k in f else "-" for k in FIGURES)
        lines.append(f"| {cell.parent.name}/{cell.name} | {f['cas']:.3f} | {f['fid_cnn']:.0f} | "
                     f"{f['is_cnn']:.2f} | {rest} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
