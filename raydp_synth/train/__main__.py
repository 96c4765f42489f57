"""``python -m raydp_synth.train METHOD ...``: one DP training run on Ray Train."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from raydp_synth.cli import (
    add_cluster_arguments,
    add_console_arguments,
    add_data_arguments,
    add_release_arguments,
    add_version_argument,
    configure_console_from,
    parse_settings,
    release_overrides,
    run_cli,
)
from raydp_synth.config_file import load_config_file, merge_settings
from raydp_synth.data.fetch import download_declared
from raydp_synth.data.public import public_with_data_dir, validation_with_data_dir
from raydp_synth.data.spec import declared_dataset
from raydp_synth.paths import default_output_folder
from raydp_synth.release.layout import REPRODUCIBILITY_LINE
from raydp_synth.runtime.local_cluster import run_with_cluster

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m raydp_synth.train",
        description="Train one differentially private image generator on Ray Train workers "
        "and write a run directory whose release/ folder may be published.",
    )
    parser.add_argument("method", help="registered method, e.g. dpaf")
    parser.add_argument("--epsilon", type=float, default=10.0, help="privacy budget epsilon (default 10)")
    parser.add_argument("--delta", type=float, default=1e-5, help="privacy budget delta, < 1/|D| for the |D| records of the "
                        "whole sensitive dataset, all splits (default 1e-5)")
    parser.add_argument("--workers", type=int, default=1, help="Ray Train workers (default 1)")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                        help="method setting, repeatable (e.g. --set mu=8 --set layer_split=C2-C1-x)")
    parser.add_argument("--config", type=Path, default=None, metavar="FILE",
                        help="method settings from a file: a release folder, a run or study "
                        "directory (its release/generator.json: the released config), or a "
                        "JSON/YAML mapping; --set wins over it, --seed is the run's own")
    parser.add_argument("--out", type=Path, default=None, help="run directory (default runs/METHOD-TIME; ~/raydp_synth_results/runs/METHOD-TIME under ray job submit)")
    parser.add_argument("--seed", type=int, default=0, help="split/initialisation/sampling seed")
    parser.add_argument("--dp-seed", type=int, default=None,
                        help="seed of the DP randomness, Poisson sampling and noise (default: OS "
                        "entropy). Set only to reproduce a run: the release is then marked "
                        "a reproducibility run, not a DP release (a reused seed replays "
                        "batches and noise)")
    parser.add_argument("--non-private", action="store_true",
                        help="a non-private reference run of the same model (no noise; "
                        "the release is marked NOT PRIVATE); --epsilon is ignored")
    parser.add_argument("--curve-checkpoints", type=int, default=None, metavar="N",
                        help="checkpoints the evaluation's privacy-utility curve covers, "
                        "evenly spread, the last included (default: all, about 10)")
    add_data_arguments(parser)
    add_release_arguments(parser)
    add_cluster_arguments(parser)
    add_console_arguments(parser)
    add_version_argument(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_console_from(args)
    # lazy: the driver loads torch and Ray; `--help` and argument errors stay instant
    from raydp_synth.train.driver import TrainRequest, run_training

    config_file = (load_config_file(args.config, method=args.method)
                   if args.config is not None else None)
    settings = merge_settings(config_file, parse_settings(args.settings))
    if config_file is not None and config_file.released:
        print(f"[raydp_synth] settings from the released config {config_file.path}: a new run "
              "on the data that chose it adds its own epsilon to that release's (composition)")
    stamp = time.strftime('%Y%m%d-%H%M%S')
    out = args.out or default_output_folder("runs") / f"{args.method}-{stamp}"
    # --dataset, --public and --public-validation parsed once, here; they travel typed.
    dataset = declared_dataset(args.dataset, num_classes=args.num_classes,
                               data_dir=args.data_dir)
    public = public_with_data_dir(args.public, dataset)
    public_validation = validation_with_data_dir(args.public_validation, dataset)
    if args.download:
        download_declared([dataset, public.dataset if public else None, public_validation])
    request = TrainRequest(
        method=args.method, epsilon=args.epsilon, delta=args.delta, out=out, dataset=dataset,
        settings=settings, workers=args.workers,
        use_gpu=args.use_gpu, seed=args.seed, dp_seed=args.dp_seed,
        public=public, public_validation=public_validation, non_private=args.non_private,
        evaluate=not args.no_eval, curve_checkpoints=args.curve_checkpoints,
        **release_overrides(args),
    )
    if request.dp_seed is not None:
        print(f"[raydp_synth] --dp-seed given: a {REPRODUCIBILITY_LINE}", flush=True)
    run_with_cluster(args.keep_cluster, lambda: run_training(request))
    if request.dp_seed is not None:
        print(f"[raydp_synth] this was a {REPRODUCIBILITY_LINE}; privacy.json says "
              '"dp_release": false: do not publish it as DP', flush=True)
    return 0


if __name__ == "__main__":
    run_cli(main)
