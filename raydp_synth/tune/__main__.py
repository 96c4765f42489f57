"""``python -m raydp_synth.tune METHOD ...``: a hyperparameter search under one budget.

Works as a plain local command (it starts a local Ray when none is reachable) and
under ``ray job submit -- python -m raydp_synth.tune dpaf ...`` on a cluster.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

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
from raydp_synth.data.public import (
    public_with_data_dir,
    validation_with_data_dir,
    whole_public_dataset,
)
from raydp_synth.data.spec import declared_dataset
from raydp_synth.errors import Interrupted
from raydp_synth.log import trial_epoch_lines
from raydp_synth.paths import default_output_folder
from raydp_synth.runtime.local_cluster import run_with_cluster
from raydp_synth.tune.defaults import (
    DEFAULT_TRIALS,
    DEFAULT_TUNE_FRACTION,
    DEFAULT_TUNE_SHARE,
    SAMPLERS,
    TRIAL_LOOPS,
)
from raydp_synth.tune.strategies import names as static_strategy_names

if TYPE_CHECKING:
    from raydp_synth.tune.study import StudyRequest

__all__ = ["build_parser", "main", "study_request"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m raydp_synth.tune",
        description="Search a DP image generator's hyperparameters with Ray Tune + Optuna, "
        "charging every trial and the selection to one privacy budget, and release the best "
        "trial's generator with the privacy statement of the whole search.",
    )
    parser.add_argument("method", help="registered method, e.g. dpaf")
    parser.add_argument("--epsilon", type=float, default=10.0,
                        help="total privacy budget of the whole search (default 10)")
    parser.add_argument("--delta", type=float, default=1e-5, help="total delta, < 1/|D| for the |D| records of the whole "
                        "sensitive dataset, all splits (default 1e-5)")
    parser.add_argument("--trials", type=int, default=DEFAULT_TRIALS,
                        help="compose: at most this many trials; random-stopping: their mean "
                        f"(default {DEFAULT_TRIALS}: measured better than 8, each trial gets "
                        "more of the budget; docs/benchmarks.md 4.3)")
    # --selection: the flag's former name, kept so that older commands run unchanged.
    parser.add_argument("--strategy", "--selection", dest="strategy", default="compose",
                        choices=static_strategy_names.STRATEGY_CHOICES,
                        help="the search strategy: how the search is priced (default compose; "
                        "see docs/privacy.md; --selection is its former name). "
                        "subsampled: random stopping on a secret Poisson subset of fraction "
                        "--tune-fraction, then one run on all the data with the extrapolated "
                        "best config (Koskela & Kulkarni 2023; docs/budget-pricing.md section 9)")
    parser.add_argument("--tune-fraction", type=float, default=DEFAULT_TUNE_FRACTION, metavar="Q",
                        help="subsampled: the Poisson fraction of the sensitive records the "
                        f"tuning trials run on, 0 < Q < 1 (default {DEFAULT_TUNE_FRACTION})")
    parser.add_argument("--tune-share", type=float, default=DEFAULT_TUNE_SHARE, metavar="S",
                        help="subsampled: the tuning phase's own epsilon as a fraction of "
                        f"--epsilon, 0 < S < 1 (default {DEFAULT_TUNE_SHARE}); the final run "
                        "gets what the composition leaves")
    parser.add_argument("--distribution", default="poisson",
                        help="random-stopping's trial-count law: poisson | geometric | "
                        "logarithmic | tnb:ETA (default poisson)")
    parser.add_argument("--sampler", default=None, choices=SAMPLERS,
                        help="Optuna sampler (default tpe; random for --strategy random-stopping; "
                        "dp-hypo: adaptive within --hypo-c of a fixed prior, random-stopping "
                        "with a tnb/geometric/logarithmic --distribution only, DP-HyPO pricing)")
    parser.add_argument("--hypo-c", type=float, default=1.0, metavar="C",
                        help="dp-hypo: every proposal's density stays within [1/C, C] times the "
                        "prior's (default 1: random search over the prior; C > 1 adapts and costs "
                        "(lambda/(lambda-1) + 1 + eta) * 2 ln C more RDP, DP-HyPO's Theorem 1, "
                        "docs/budget-pricing.md section 6.2b)")
    parser.add_argument("--default-share", type=float, default=None, metavar="P",
                        help="random-stopping or subsampled with --sampler random: each trial "
                        "is the method's default config with probability P, else a random "
                        "draw of the space; with --sampler dp-hypo: the default's weight in "
                        "the prior (one fixed prior: the pricing is unchanged; default 0.5; "
                        "0: random draws only; 1, random-stopping with --sampler random "
                        "only: the best of K restarts of the default config)")
    parser.add_argument("--search-space", type=Path, default=None,
                        help="YAML search space (default: the method's own, see "
                        "search_spaces/README.md)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="fix a method setting in every trial, repeatable (e.g. --set "
                        "epochs=20): it replaces the search space's value and is not searched")
    parser.add_argument("--config", type=Path, default=None, metavar="FILE",
                        help="fix the settings of a file in every trial, like --set: a release "
                        "folder, a run or study directory (its released config: every key "
                        "fixed, nothing left to search) or a JSON/YAML mapping; --set wins "
                        "over it, --seed is the study's own")
    parser.add_argument("--max-concurrent", type=int, default=1, help="trials at once (default 1)")
    parser.add_argument("--workers-per-trial", type=int, default=1,
                        help="Ray Train workers per trial (default 1)")
    parser.add_argument("--gpus-per-trial", type=float, default=None, metavar="F",
                        help="GPUs a trial's workers share, F/workers each: a fraction packs "
                        "1-worker trials onto one GPU (0.25 with --max-concurrent 4: four at "
                        "once); with several workers F must equal their count, one whole GPU "
                        "each (NCCL runs one rank per GPU). Ignored, with a note, where Ray "
                        "has no GPU. --use-gpu is one GPU per worker (docs/ray-cluster.md, "
                        "section 2)")
    parser.add_argument("--trial-loop", default="auto", choices=TRIAL_LOOPS,
                        help="where a trial runs its DP loop: auto (a 1-worker trial in its own "
                        "process, more workers on Ray Train; default) or ray-train (always on "
                        "Ray Train)")
    parser.add_argument("--storage", type=Path, default=None,
                        help="parent folder of study directories (default ./studies; under "
                        "ray job submit ~/raydp_synth_results/studies, and a relative one "
                        "is refused: the job runs in the cluster's working folder)")
    parser.add_argument("--name", default=None, help="study name (default METHOD-TIME)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the study --name, with the settings it was started "
                        "with (a finished study is left as it is)")
    parser.add_argument("--re-evaluate", action="store_true",
                        help="with --resume, of a finished study: rerun its evaluation only "
                        "(no grant, no training, the release untouched)")
    parser.add_argument("--seed", type=int, default=0,
                        help="public seed (split, initialisation; the sampler under compose: "
                        "random stopping's sampler seed is secret, from OS entropy)")
    parser.add_argument("--tune-on-public", default=None, metavar="DATASET",
                        help="search on DATASET, declared public (e.g. folder:DIR), at no "
                        "privacy cost, then train the best config once on --dataset with the "
                        "whole budget; the release's statement covers that run only "
                        "(--strategy compose; no --resume; docs/budget-pricing.md)")
    add_data_arguments(parser)
    add_release_arguments(parser)
    add_cluster_arguments(parser)
    add_console_arguments(parser)
    add_version_argument(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_console_from(args)
    # lazy: the study loads Ray Tune and the trainer, which parsing and --help never need
    from raydp_synth.tune.study import run_study

    request = study_request(args)
    try:
        with trial_epoch_lines():  # per-epoch lines: "trial epsilon", not the study's
            run_with_cluster(args.keep_cluster, lambda: run_study(request))
    except Interrupted as err:
        if err.resume_name is None:
            raise
        command = resume_command(list(sys.argv[1:] if argv is None else argv),
                                 err.resume_name, err.resume_storage)
        raise Interrupted(f"nothing released; resume with: {command}") from None
    return 0


def resume_command(argv: list[str], name: str, storage: Path | None) -> str:
    """The command that resumes study ``name``: this command's own arguments (every
    setting as the user gave it: a resumed study refuses changed ones) with ``--resume
    --name NAME``, and the study's ``--storage`` where the user gave none."""
    args = [a for a in argv if a != "--resume" and not a.startswith("--name=")]
    if "--name" in args:
        i = args.index("--name")
        del args[i:i + 2]
    if storage is not None and not any(a == "--storage" or a.startswith("--storage=")
                                       for a in args):
        args += ["--storage", str(storage)]
    return " ".join(shlex.quote(a) for a in ["python", "-m", "raydp_synth.tune", *args,
                                             "--resume", "--name", name])


def study_request(args: argparse.Namespace) -> StudyRequest:
    """The study that this CLI's parsed ``args`` ask for, validated (the request
    refuses, in one line, what cannot run); with ``--download``, the declared
    datasets are fetched first."""
    # lazy: the strategy table loads torch and the accountant, which --help never needs
    from raydp_synth.tune.strategies.registry import get_strategy

    # lazy: the study loads Ray Tune and the trainer, which parsing and --help never need
    from raydp_synth.tune.study import StudyRequest

    config_file = (load_config_file(args.config, method=args.method)
                   if args.config is not None else None)
    settings = merge_settings(config_file, parse_settings(args.set))
    # The dataset specs parsed once, here; the declarations travel in the typed spec
    # (``:classes=K``, the folder) to the trials.
    dataset = declared_dataset(args.dataset, num_classes=args.num_classes,
                               data_dir=args.data_dir)
    public = public_with_data_dir(args.public, dataset)
    public_validation = validation_with_data_dir(args.public_validation, dataset)
    tune_on_public = (None if args.tune_on_public is None else
                      whole_public_dataset(args.tune_on_public, flag="--tune-on-public"))
    if args.download:
        download_declared([dataset, public.dataset if public else None, public_validation,
                           tune_on_public])
    sampler = args.sampler or get_strategy(args.strategy).default_sampler
    request = StudyRequest(
        method=args.method, epsilon=args.epsilon, delta=args.delta, trials=args.trials,
        strategy=args.strategy, distribution=args.distribution, sampler=sampler,
        hypo_c=args.hypo_c, default_share=args.default_share,
        search_space=args.search_space, settings=settings,
        max_concurrent=args.max_concurrent,
        workers_per_trial=args.workers_per_trial, use_gpu=args.use_gpu,
        gpus_per_trial=args.gpus_per_trial, trial_loop=args.trial_loop, dataset=dataset,
        storage=args.storage or default_output_folder("studies"), name=args.name,
        resume=args.resume, seed=args.seed,
        public=public, public_validation=public_validation, evaluate=not args.no_eval,
        tune_on_public=tune_on_public, tune_fraction=args.tune_fraction,
        tune_share=args.tune_share, re_evaluate=args.re_evaluate,
        **release_overrides(args),
    )
    return request


if __name__ == "__main__":
    run_cli(main)
