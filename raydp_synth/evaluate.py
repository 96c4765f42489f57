"""``python -m raydp_synth.evaluate RUN_DIR``: the curator's evaluation of a run.

Prints CAS (three classifiers), FID and IS of the run's released generator, and
writes ``evaluation.json`` and ``privacy_utility.png`` into the run directory
(curator-only: they read the real test split without noise).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from raydp_synth.cli import run_cli

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m raydp_synth.evaluate",
        description="Evaluate a training run: CAS, FID, IS and the privacy-utility curve.",
    )
    parser.add_argument("run_dir", type=Path, help="the --out directory of a training run")
    parser.add_argument("--dataset", default=None,
                        help="the run's dataset spec, if it moved (default: from run.json)")
    parser.add_argument("--public-reference", default=None, metavar="DATASET",
                        help="a dataset declared public to train the FID/IS network on "
                        "(default: the test split)")
    parser.add_argument("--num-synthetic", type=int, default=None,
                        help="synthetic images for the final figures (default 10000; "
                        "privimage-d 2000: 50-step DDIM sampling is slow on CPU)")
    parser.add_argument("--curve-synthetic", type=int, default=None,
                        help="synthetic images per checkpoint of the curve (default 2000; "
                        "privimage-d 500)")
    parser.add_argument("--seed", type=int, default=0, help="public seed of the evaluation")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import json

    from raydp_synth.errors import ConfigError
    from raydp_synth.evaluation.report import default_settings, evaluate_run, format_table

    run_file = args.run_dir / "run.json"
    if not run_file.is_file():
        raise ConfigError(f"{args.run_dir} is not a run directory (no run.json); "
                          "pass the --out directory of a training run")
    settings = default_settings(json.loads(run_file.read_text())["method"],
                                num_synthetic=args.num_synthetic,
                                curve_synthetic=args.curve_synthetic, seed=args.seed)
    result = evaluate_run(args.run_dir, dataset=args.dataset,
                          public_reference=args.public_reference, settings=settings)
    print(format_table(result))
    return 0


if __name__ == "__main__":
    run_cli(main)
