"""Does the search pay for itself? Released CAS of each search strategy against one
default run at the same total epsilon, over several seeds.

One command runs every (method, epsilon, strategy, seed) cell that is not done yet,
keeps each run's small result files, and writes two tables: every run
(``python -m raydp_synth.report``) and one row per (method, epsilon, strategy) with
the mean and spread over seeds of the released generator's CAS and the wall time::

    python bench/search_strategies.py --dataset digits --methods dpaf,privimage-g \\
        --epsilons 1,10 --seeds 3 --trials 8 \\
        [--strategies run,compose,random-stopping,subsampled,dp-hypo,public] \\
        [--public-tuning digits:fraction=0.3] [--set dpaf:epochs=20] \\
        [--data-dir DIR] [--use-gpu [--gpus-per-trial 0.25 --max-concurrent 4]] \\
        [--no-eval | --evaluate-only] [--dry-run] \\
        [--update bench/results/strategies/NOTES.md --block strategies-digits]

Strategies (each at the same total ``--epsilon``, the whole search counted):

* ``run``: one default-configuration run (``raydp_synth.train``), no search.
* ``compose``: ``tune --strategy compose --trials N`` (TPE, the default first).
* ``random-stopping``: ``tune --strategy random-stopping --sampler random
  --default-share 0``, E[K] = N (Papernot & Steinke 2022): random draws only.
* ``subsampled``: ``tune --strategy subsampled --tune-fraction F --default-share 0``,
  random stopping on a secret Poisson subset, then one final run (Koskela &
  Kulkarni 2023).
* ``dp-hypo``: ``tune --strategy random-stopping --sampler dp-hypo --hypo-c C
  --default-share 0`` (Wang et al. 2023): a prior of random draws only.
* ``public``: ``tune --tune-on-public SPEC``: the search on declared-public data at
  no cost, then one private run (``bench/public_subset.py`` writes such a file).
* ``random-stopping-anchored``, ``subsampled-anchored``, ``dp-hypo-anchored``: the
  same with ``--default-share P`` (this script's ``--default-share``, default 0.5, the
  tune CLI's own default): each trial is the method's default configuration with
  probability P, else a random draw (dp-hypo: the default has weight P in the prior
  that its proposals stay within a factor C of).
* ``restarts``: random stopping with ``--default-share 1``: every trial is the default
  configuration, and the study releases the best of K restarts by their private
  scores (Papernot & Steinke's repeat-and-select with the default as the repeat).
* ``draw:I``: one ``train`` run at the whole ``--epsilon`` with the I-th public draw
  of the method's packaged search space (Optuna's random sampler, seed I, on the
  space fitted to the dataset's public facts; ``--config`` of a JSON file written
  under ``--out``). ``--ceiling N`` adds ``draw:0`` .. ``draw:N-1``, and the summary
  then has a ``ceiling`` row: per seed, the best released CAS of the default run and
  the N draws, chosen on the evaluation's CAS (the test split, without noise). That is
  no private search: it is the headroom, what a search of N+1 configurations could
  reach if choosing cost nothing, against which each private strategy is read.

A strategy may carry its own setting, ``NAME:VALUE``, to compare variants in one
table: the number of trials of ``compose:3`` / ``random-stopping:3`` /
``restarts:3`` (E[K]), the tuning fraction of ``subsampled:0.3``, the density-ratio
bound of ``dp-hypo:2`` or ``dp-hypo-anchored:1.25``, the default share of
``subsampled-anchored:0.25`` (label ``subsampled-anchored-p0.25``), the epochs of
``run:30`` (``--set epochs=30``: the default run at the search space's epochs). Its
cells are labelled ``compose-n3``, ``subsampled-q0.3``, ``dp-hypo-c2``, ``run-e30``.

``--no-eval`` trains every cell without its evaluation (on a GPU host, where the
CPU evaluation is slow, or to copy the runs elsewhere); ``--evaluate-only`` then runs
``python -m raydp_synth.evaluate`` on each stored cell that has no ``evaluation.json``
yet, trains nothing, and writes the tables. A cell's wall time is its training's
(``bench_wall.json``), with the evaluation only where it ran in the same command.

Beside the mean CAS the summary gives two figures of the released generators that a
collapsed generator cannot hide from (CAS can: one good image per class trains a fair
classifier): FID and IS under the evaluation's domain CNN (means over seeds), and, where
the cells' evaluations have them, recall and intra-class diversity in the same space.

A cell that fails (a strategy the installed CLI refuses, a crash) is reported and
skipped; the others go on. "Beats the run" in the summary means: the strategy's mean
CAS minus the run's is larger than the sum of the two sample standard deviations
over seeds (a difference the seed spread does not explain).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SMALL_FILES = ("run.json", "study.json", "release/privacy.json", "evaluation.json",
               "score.json", "timing.json", "bench_wall.json")

#: The evaluation's diversity figures; the summary shows recall and diversity where
#: a cell of the table has them (tables of older evaluations keep their columns).
DIVERSITY_FIGURES = ("precision_cnn", "recall_cnn", "diversity_cnn")
#: Where ``bench/diversity.py`` puts them for a cell evaluated before they existed.
DIVERSITY_FILE = "diversity.json"

#: The random-search selections' arguments; each runs with random draws only (the
#: strategy of that name) and with the default's atom (``-anchored``).
_RANDOM_STOPPING = ["--strategy", "random-stopping", "--sampler", "random",
                    "--trials", "{trials}"]
_SUBSAMPLED = ["--strategy", "subsampled", "--tune-fraction", "{fraction}",
               "--trials", "{trials}"]
_DP_HYPO = ["--strategy", "random-stopping", "--distribution", "geometric", "--sampler",
            "dp-hypo", "--hypo-c", "{hypo_c}", "--trials", "{trials}"]

#: strategy -> (module, arguments); {trials}, {fraction}, {hypo_c}, {public},
#: {default_share} filled in.
STRATEGIES: dict[str, tuple[str, list[str]]] = {
    "run": ("raydp_synth.train", []),
    "compose": ("raydp_synth.tune", ["--strategy", "compose", "--trials", "{trials}"]),
    "random-stopping": ("raydp_synth.tune", [*_RANDOM_STOPPING, "--default-share", "0"]),
    "subsampled": ("raydp_synth.tune", [*_SUBSAMPLED, "--default-share", "0"]),
    "dp-hypo": ("raydp_synth.tune", [*_DP_HYPO, "--default-share", "0"]),
    "dp-hypo-anchored": ("raydp_synth.tune", [*_DP_HYPO, "--default-share", "{default_share}"]),
    "public": ("raydp_synth.tune", ["--tune-on-public", "{public}", "--trials", "{trials}"]),
    "random-stopping-anchored": ("raydp_synth.tune", [
        *_RANDOM_STOPPING, "--default-share", "{default_share}"]),
    "subsampled-anchored": ("raydp_synth.tune", [
        *_SUBSAMPLED, "--default-share", "{default_share}"]),
    "restarts": ("raydp_synth.tune", [*_RANDOM_STOPPING, "--default-share", "1"]),
    "draw": ("raydp_synth.train", []),
}

#: The summary's row of the best of the default run and the draws, per seed.
CEILING = "ceiling"


#: strategy -> the placeholder that ``NAME:VALUE`` sets, and the label's prefix.
VARIANTS: dict[str, tuple[str, str]] = {
    "compose": ("trials", "n"), "random-stopping": ("trials", "n"), "restarts": ("trials", "n"),
    "subsampled": ("fraction", "q"), "dp-hypo": ("hypo_c", "c"), "run": ("epochs", "e"),
    "random-stopping-anchored": ("default_share", "p"),
    "subsampled-anchored": ("default_share", "p"), "dp-hypo-anchored": ("hypo_c", "c"),
    "draw": ("draw", "i"),
}


def parse_strategy(item: str) -> tuple[str, str | None]:
    """``"subsampled:0.3"`` -> ("subsampled", "0.3"); ``"run"`` -> ("run", None)."""
    name, _, value = item.partition(":")
    if name not in STRATEGIES:
        raise SystemExit(f"error: unknown strategy {name!r}; known: {', '.join(STRATEGIES)}")
    if value and name not in VARIANTS:
        raise SystemExit(f"error: strategy {name!r} takes no :VALUE")
    if name == "draw" and not value.isdigit():
        raise SystemExit(f"error: {item!r}: a draw is draw:I, I = 0, 1, ...")
    if value:
        try:
            float(value)
        except ValueError:
            raise SystemExit(f"error: {item!r}: the value after ':' must be a number") from None
    return name, value or None


def strategy_label(item: str) -> str:
    """The cell label of a strategy item: ``compose:3`` -> ``compose-n3``."""
    name, value = parse_strategy(item)
    return name if value is None else f"{name}-{VARIANTS[name][1]}{value}"


def draw_file(out: Path, method: str, dataset: str, index: int) -> Path:
    """Where the settings of ``method``'s draw ``index`` on ``dataset`` are written."""
    return out / "draws" / f"{method}-{dataset.split(':')[0]}-draw{index}.json"


def draw_settings(method: str, dataset: str, indices: list[int], *,
                  settings: Sequence[str] = ()) -> dict[int, dict[str, Any]]:
    """The settings of draw ``i`` for each ``i`` in ``indices``: Optuna's random
    sampler with seed ``i`` on ``method``'s packaged search space, fitted to the public
    facts of ``dataset``'s training split (as a study fits it), with the ``--set``
    keys ``settings`` fixed (not drawn). Public: nothing of the data but its facts."""
    import optuna

    from raydp_synth.data import data_info, load_training_data, parse_dataset_spec
    from raydp_synth.tune.search_space import load_search_space

    splits, _ = load_training_data(parse_dataset_spec(dataset), public=None)
    fixed = dict(item.split("=", 1) for item in settings)
    space = load_search_space(None, method, data_info(splits.train, None)).with_fixed(fixed)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    draws = {}
    for index in indices:
        trial = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=index)).ask()
        space.define_by_run(trial)
        drawn = space.settings_from_trial_config(trial.params)
        draws[index] = {k: v for k, v in drawn.items() if k not in fixed}
    return draws


def _method_settings(items: list[str]) -> dict[str, list[str]]:
    """``["dpaf:epochs=2", "dpaf:batch_size=64"]`` -> {"dpaf": ["epochs=2", ...]}."""
    found: dict[str, list[str]] = defaultdict(list)
    for item in items:
        method, _, setting = item.partition(":")
        if not setting or "=" not in setting:
            raise SystemExit(f"error: --set {item!r} must read METHOD:KEY=VALUE")
        found[method].append(setting)
    return found


def command_for(args: argparse.Namespace, *, method: str, epsilon: str, strategy: str,
                seed: int, run_dir: Path, settings: list[str]) -> list[str]:
    """The command line of one cell."""
    name, value = parse_strategy(strategy)
    module, extra = STRATEGIES[name]
    fill = {"trials": str(args.trials), "fraction": str(args.tune_fraction),
            "hypo_c": str(args.hypo_c), "public": args.public_tuning or "",
            "default_share": str(args.default_share)}
    if value is not None and name != "run":
        fill[VARIANTS[name][0]] = value
    command = [sys.executable, "-m", module, method, "--dataset", args.dataset,
               "--epsilon", epsilon, "--delta", str(args.delta), "--seed", str(seed)]
    command += [part.format(**fill) for part in extra]
    if module == "raydp_synth.train":
        command += ["--out", str(run_dir)]
    else:
        command += ["--storage", str(run_dir.parent), "--name", run_dir.name]
    if args.data_dir:
        command += ["--data-dir", args.data_dir]
    if args.public:
        command += ["--public", args.public]
    for setting in settings:
        command += ["--set", setting]
    if name == "run" and value is not None:
        command += ["--set", f"epochs={value}"]
    if name == "draw":
        command += ["--config", str(draw_file(args.out, method, args.dataset, int(value)))]
    search = module == "raydp_synth.tune"
    if search and args.gpus_per_trial is not None:
        # tune's --gpus-per-trial F is the trial's GPU request; --use-gpu (one whole GPU
        # per worker) would contradict a fraction, so a search cell takes F alone.
        command += ["--gpus-per-trial", str(args.gpus_per_trial)]
    elif args.use_gpu:
        command.append("--use-gpu")
    if search and args.max_concurrent is not None:
        command += ["--max-concurrent", str(args.max_concurrent)]
    if args.no_eval:
        command.append("--no-eval")
    return command


def evaluate_command(args: argparse.Namespace, run_dir: Path) -> list[str]:
    """The command that evaluates a cell trained with ``--no-eval`` (a run's or a
    study's directory: both hold ``run.json`` and ``release/``). With ``--data-dir``
    the dataset is named again, so cells trained on another host (another data path in
    their ``run.json``) are evaluated on this one's copy."""
    command = [sys.executable, "-m", "raydp_synth.evaluate", str(run_dir)]
    if args.data_dir and ":" not in args.dataset:
        command += ["--dataset", f"{args.dataset}:{args.data_dir}"]
    return command


def keep_small_files(run_dir: Path, results: Path) -> None:
    """Copy a cell's result files (not its checkpoints or samples) under ``results``."""
    for name in SMALL_FILES:
        source = run_dir / name
        if source.is_file():
            target = results / run_dir.name / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def _released_final(directory: Path) -> dict[str, float] | None:
    """The released generator's figures in its evaluation (``final``: CAS per
    classifier, ``fid_cnn``, ``is_cnn``, and in newer evaluations ``precision_cnn``,
    ``recall_cnn``, ``diversity_cnn``; for an older one, those of the cell's
    ``diversity.json`` if ``bench/diversity.py`` wrote one), or None before its
    evaluation."""
    path = directory / "evaluation.json"
    if not path.is_file():
        return None
    final = dict(json.loads(path.read_text()).get("final") or {})
    backfilled = directory / DIVERSITY_FILE
    if backfilled.is_file():
        record = json.loads(backfilled.read_text())
        final.update({k: record[k] for k in DIVERSITY_FIGURES if k not in final and k in record})
    return {k: float(v) for k, v in final.items() if isinstance(v, (int, float))}


def _mean_cas(final: dict[str, float]) -> float | None:
    """Mean CAS over the evaluation's classifiers."""
    values = [v for k, v in final.items() if k.startswith("cas_")]
    return statistics.fmean(values) if values else None


def _mean_figure(finals: list[dict[str, float]], key: str, digits: int) -> str:
    """Mean of ``key`` over the seeds' ``finals`` (``-`` where none has it)."""
    values = [final[key] for final in finals if key in final]
    return f"{statistics.fmean(values):.{digits}f}" if values else "-"


def _ceilings(by_seed: dict[tuple[str, str, str], dict[int, float]]
              ) -> dict[tuple[str, str, int], float]:
    """Per (method, epsilon, seed) with at least one draw: the best CAS of the default
    run and the draws (the :data:`CEILING` row)."""
    best: dict[tuple[str, str, int], float] = {}
    drawn = {key[:2] for key in by_seed if key[2].startswith("draw-")}
    for (method, epsilon, strategy), values in by_seed.items():
        if (method, epsilon) in drawn and (strategy == "run" or strategy.startswith("draw-")):
            for seed, cas in values.items():
                key = (method, epsilon, seed)
                best[key] = max(cas, best.get(key, -math.inf))
    return best


def summarise(results: Path, cells: list[tuple[str, str, str, str, int]]) -> str:
    """The per-(method, epsilon, strategy) table over seeds, and the goal's check."""
    groups: dict[tuple[str, str, str], list[tuple[float, float | None]]] = defaultdict(list)
    by_seed: dict[tuple[str, str, str], dict[int, float]] = defaultdict(dict)
    finals: dict[tuple[str, str, str], list[dict[str, float]]] = defaultdict(list)
    for name, method, epsilon, strategy, seed in cells:
        directory = results / name
        final = _released_final(directory)
        cas = None if final is None else _mean_cas(final)
        if final is None or cas is None:
            continue
        finals[(method, epsilon, strategy)].append(final)
        wall = None
        if (directory / "bench_wall.json").is_file():
            wall = json.loads((directory / "bench_wall.json").read_text()).get("seconds")
        groups[(method, epsilon, strategy)].append((cas, wall))
        by_seed[(method, epsilon, strategy)][seed] = cas
    for (method, epsilon, seed), best in _ceilings(by_seed).items():
        groups[(method, epsilon, CEILING)].append((best, None))
        by_seed[(method, epsilon, CEILING)][seed] = best

    def paired(key: tuple[str, str, str]) -> str:
        """Mean and spread over shared seeds of (strategy - run): a seed fixes the
        data splits and the public draws (initial weights, latent draws) of both, so
        those effects cancel; the DP randomness (sampling, noise) is each run's own
        secret draw from OS entropy and does not."""
        run = by_seed.get((key[0], key[1], "run"), {})
        diffs = [cas - run[seed] for seed, cas in by_seed[key].items() if seed in run]
        if key[2] == "run" or not diffs:
            return "-"
        spread = f" ± {statistics.stdev(diffs):.3f}" if len(diffs) > 1 else ""
        return f"{statistics.fmean(diffs):+.3f}{spread}"

    def stats(key: tuple[str, str, str]) -> tuple[float, float, int] | None:
        values = [c for c, _ in groups.get(key, [])]
        if not values:
            return None
        spread = statistics.stdev(values) if len(values) > 1 else math.nan
        return statistics.fmean(values), spread, len(values)

    with_diversity = any("recall_cnn" in final for group in finals.values() for final in group)
    extra = " recall (CNN) | diversity (CNN) |" if with_diversity else ""
    lines = ["| method | epsilon | strategy | seeds | mean CAS | std | FID (CNN) | IS (CNN) |"
             f"{extra} wall s (mean) | beats the run | paired diff vs run |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"
             f"{' --- | --- |' if with_diversity else ''} --- | --- | --- |"]
    for key in sorted(groups):
        method, epsilon, strategy = key
        mean, spread, count = stats(key)  # type: ignore[misc]
        walls = [w for _, w in groups[key] if w is not None]
        verdict = "-"
        run = stats((method, epsilon, "run"))
        if strategy != "run" and run is not None:
            margin = (0 if math.isnan(spread) else spread) + (0 if math.isnan(run[1]) else run[1])
            verdict = "yes" if mean - run[0] > margin and count > 1 and run[2] > 1 else "no"
        # Beside CAS, two figures a collapsed generator cannot hide from (means over
        # the seeds' released generators; the ceiling row picks per seed, so none).
        diversity = (f"{_mean_figure(finals[key], 'fid_cnn', 0)} | "
                     f"{_mean_figure(finals[key], 'is_cnn', 2)}")
        if with_diversity:
            diversity += (f" | {_mean_figure(finals[key], 'recall_cnn', 3)} | "
                          f"{_mean_figure(finals[key], 'diversity_cnn', 2)}")
        lines.append(f"| {method} | {epsilon} | {strategy} | {count} | {mean:.3f} | "
                     f"{'-' if math.isnan(spread) else f'{spread:.3f}'} | {diversity} | "
                     f"{f'{statistics.fmean(walls):.0f}' if walls else '-'} | {verdict} | "
                     f"{paired(key)} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--public", default=None,
                        help="data declared public for the methods that use it (--public)")
    parser.add_argument("--methods", default="dpaf,privimage-g")
    parser.add_argument("--epsilons", default="1,10")
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--only-seeds", default=None, metavar="LIST",
                        help="of the --seeds, run (or evaluate) only these (e.g. 2 or 0,2): "
                             "one process a seed, to run seeds side by side on a machine "
                             "with the cores for it (each run's Ray cluster takes every "
                             "core: two side by side on 2 cores trained dpwgan on MNIST in "
                             "1,506 s against 349 s alone, not twice as long)")
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--ceiling", type=int, default=0, metavar="N",
                        help="add the strategies draw:0..draw:N-1 and the summary's "
                             "ceiling row (the best of the default run and the N draws)")
    parser.add_argument("--tune-fraction", type=float, default=0.1)
    parser.add_argument("--hypo-c", type=float, default=2.0)
    parser.add_argument("--default-share", type=float, default=0.5,
                        help="the *-anchored strategies' --default-share (default 0.5)")
    parser.add_argument("--public-tuning", default=None,
                        help="the public data the 'public' strategy searches on")
    parser.add_argument("--set", action="append", default=[], metavar="METHOD:KEY=VALUE",
                        help="a setting for every cell of METHOD (e.g. dpaf:epochs=20)")
    parser.add_argument("--use-gpu", action="store_true")
    parser.add_argument("--gpus-per-trial", type=float, default=None,
                        help="tune's --gpus-per-trial for the search cells")
    parser.add_argument("--max-concurrent", type=int, default=None,
                        help="tune's --max-concurrent for the search cells")
    evaluation = parser.add_mutually_exclusive_group()
    evaluation.add_argument("--no-eval", action="store_true",
                            help="train each cell, skip its evaluation")
    evaluation.add_argument("--evaluate-only", action="store_true",
                            help="evaluate the stored cells that lack it; train nothing")
    parser.add_argument("--out", type=Path, default=Path("bench/runs/strategies"))
    parser.add_argument("--results", type=Path, default=Path("bench/results/strategies"))
    parser.add_argument("--update", type=Path, default=None,
                        help="replace the generated summary block of this Markdown file")
    parser.add_argument("--block", default=None, help="with --update: the block's name")
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = parser.parse_args()

    strategies = args.strategies.split(",")
    strategies += [f"draw:{i}" for i in range(args.ceiling)
                   if f"draw:{i}" not in strategies]
    for item in strategies:
        parse_strategy(item)
    if "public" in strategies and not args.public_tuning:
        raise SystemExit("error: the 'public' strategy needs --public-tuning SPEC")
    settings = _method_settings(args.set)
    seeds = list(range(args.seeds))
    if args.only_seeds is not None:
        try:
            only = sorted({int(item) for item in args.only_seeds.split(",")})
        except ValueError:
            raise SystemExit(f"error: --only-seeds {args.only_seeds!r}: give seeds, e.g. 0,2") from None
        if not only or not set(only) <= set(seeds):
            raise SystemExit(f"error: --only-seeds {args.only_seeds!r}: each must be in "
                             f"0..{args.seeds - 1} (--seeds {args.seeds})")
        seeds = only
    dataset_name = args.dataset.split(":")[0]
    draws = sorted(int(item.partition(":")[2]) for item in strategies
                   if item.startswith("draw:"))
    if draws and not args.evaluate_only:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        dataset = args.dataset if not args.data_dir else f"{args.dataset}:{args.data_dir}"
        for method in args.methods.split(","):
            for index, drawn in draw_settings(method, dataset, draws,
                                              settings=settings.get(method, [])).items():
                path = draw_file(args.out, method, args.dataset, index)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(drawn, indent=1, sort_keys=True) + "\n")
                print(f"[bench] draw {index} of {method}: {json.dumps(drawn, sort_keys=True)}")
    cells = []
    failed = []
    for method in args.methods.split(","):
        for epsilon in args.epsilons.split(","):
            for strategy in strategies:
                label = strategy_label(strategy)
                for seed in seeds:
                    name = f"{method}-{dataset_name}-eps{epsilon}-{label}-s{seed}"
                    cells.append((name, method, epsilon, label, seed))
                    run_dir = args.out / name
                    command = command_for(args, method=method, epsilon=epsilon,
                                          strategy=strategy, seed=seed, run_dir=run_dir,
                                          settings=settings.get(method, []))
                    if not args.evaluate_only:
                        print("[bench] " + " ".join(command), flush=True)
                    if args.dry_run:
                        continue
                    if (run_dir / "evaluation.json").is_file():
                        print(f"[bench] {name}: done already, kept", flush=True)
                        keep_small_files(run_dir, args.results)
                        continue
                    if (not run_dir.exists()
                            and (args.results / name / "evaluation.json").is_file()):
                        # A fresh clone has the committed results but no run directories.
                        print(f"[bench] {name}: result committed already, kept", flush=True)
                        continue
                    if args.evaluate_only:
                        if not (run_dir / "bench_wall.json").is_file():
                            print(f"[bench] {name}: not trained, skipped", flush=True)
                            continue
                        evaluate = evaluate_command(args, run_dir)
                        print("[bench] " + " ".join(evaluate), flush=True)
                        if subprocess.run(evaluate, check=False).returncode:
                            print(f"[bench] {name}: evaluation failed; going on", flush=True)
                            failed.append(name)
                        keep_small_files(run_dir, args.results)
                        continue
                    if args.no_eval and (run_dir / "bench_wall.json").is_file():
                        print(f"[bench] {name}: trained already, kept", flush=True)
                        keep_small_files(run_dir, args.results)
                        continue
                    if run_dir.exists():
                        shutil.rmtree(run_dir)
                    run_dir.parent.mkdir(parents=True, exist_ok=True)
                    start = time.perf_counter()
                    done = subprocess.run(command, check=False)
                    seconds = time.perf_counter() - start
                    if done.returncode != 0:
                        print(f"[bench] {name}: failed (exit {done.returncode}); going on",
                              flush=True)
                        failed.append(name)
                        continue
                    (run_dir / "bench_wall.json").write_text(json.dumps({"seconds": seconds}))
                    keep_small_files(run_dir, args.results)
    if args.dry_run:
        return 0
    summary = summarise(args.results, cells)
    print(summary, end="")
    if args.update is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from raydp_synth.report import update_block

        args.update.write_text(update_block(args.update.read_text(), summary,
                                            source=str(args.update), block=args.block))
        print(f"[bench] updated {args.update}")
    if failed:
        print(f"[bench] failed cells: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
