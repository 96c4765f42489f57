"""bench/search_strategies.py: its strategy variants and command lines, and that
the generated strategy tables of bench/results/strategies/NOTES.md are the summaries of
the stored runs (bench/results/strategies*/)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location(
        "search_strategies", ROOT / "bench" / "search_strategies.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("search_strategies", module)
    spec.loader.exec_module(module)
    return module


bench = _bench()


def _args(**overrides) -> argparse.Namespace:
    base = dict(trials=8, tune_fraction=0.1, hypo_c=2.0, public_tuning="parquet:P",
                default_share=0.5, dataset="digits", delta=1e-5, data_dir=None, public=None,
                use_gpu=False, gpus_per_trial=None, max_concurrent=None, no_eval=False,
                out=Path("bench/runs/strategies"))
    return argparse.Namespace(**{**base, **overrides})


@pytest.mark.parametrize(("item", "label", "needle"), [
    ("run", "run", None),
    ("run:30", "run-e30", ["--set", "epochs=30"]),
    ("compose:3", "compose-n3", ["--trials", "3"]),
    ("random-stopping:4", "random-stopping-n4", ["--trials", "4"]),
    ("subsampled:0.3", "subsampled-q0.3", ["--tune-fraction", "0.3"]),
    ("dp-hypo:1.25", "dp-hypo-c1.25", ["--hypo-c", "1.25", "--trials", "8", "--default-share", "0"]),
    ("dp-hypo-anchored:1.25", "dp-hypo-anchored-c1.25",
     ["--hypo-c", "1.25", "--trials", "8", "--default-share", "0.5"]),
    ("public", "public", ["--tune-on-public", "parquet:P"]),
    ("subsampled-anchored", "subsampled-anchored",
     ["--trials", "8", "--default-share", "0.5"]),
    ("random-stopping-anchored:0.25", "random-stopping-anchored-p0.25",
     ["--sampler", "random", "--trials", "8", "--default-share", "0.25"]),
    ("restarts:4", "restarts-n4",
     ["--strategy", "random-stopping", "--sampler", "random", "--trials", "4",
      "--default-share", "1"]),
])
def test_a_variant_sets_its_own_option_and_label(item, label, needle, tmp_path) -> None:
    assert bench.strategy_label(item) == label
    command = bench.command_for(_args(), method="dpaf", epsilon="10", strategy=item, seed=0,
                                run_dir=tmp_path / "cell", settings=[])
    if needle is not None:
        joined = " ".join(command)
        assert " ".join(needle) in joined
    if item.startswith("dp-hypo"):
        assert "--distribution geometric" in " ".join(command)  # DP-HyPO needs a TNB law


def test_packing_and_no_eval_reach_the_cells_that_take_them(tmp_path) -> None:
    args = _args(use_gpu=True, gpus_per_trial=0.25, max_concurrent=4, no_eval=True)
    study = bench.command_for(args, method="dpaf", epsilon="10", strategy="compose", seed=0,
                              run_dir=tmp_path / "cell", settings=[])
    run = bench.command_for(args, method="dpaf", epsilon="10", strategy="run", seed=0,
                            run_dir=tmp_path / "cell", settings=[])
    assert " ".join(study).endswith("--gpus-per-trial 0.25 --max-concurrent 4 --no-eval")
    assert "--max-concurrent" not in run and "--gpus-per-trial" not in run  # train has neither
    assert run[-2:] == ["--use-gpu", "--no-eval"]
    # The search cell's GPU request is one that tune itself accepts (--use-gpu with a
    # fraction is refused there): its own parser and the check its request runs.
    from raydp_synth.runtime.resources import worker_gpu_share
    from raydp_synth.tune.__main__ import build_parser

    parsed = build_parser().parse_args(study[study.index("raydp_synth.tune") + 1:])
    assert worker_gpu_share(gpus_per_trial=parsed.gpus_per_trial, use_gpu=parsed.use_gpu,
                            workers=parsed.workers_per_trial) == 0.25
    assert parsed.max_concurrent == 4 and parsed.no_eval
    assert bench.evaluate_command(args, tmp_path / "cell")[1:] == [
        "-m", "raydp_synth.evaluate", str(tmp_path / "cell")]
    elsewhere = _args(dataset="mnist", data_dir="/data/mnist")  # trained on another host
    assert bench.evaluate_command(elsewhere, tmp_path / "cell")[-2:] == [
        "--dataset", "mnist:/data/mnist"]


@pytest.mark.parametrize("item", [name for name, (module, _) in bench.STRATEGIES.items()
                                  if module == "raydp_synth.tune"])
def test_every_search_cell_is_a_study_that_tune_accepts(item, tmp_path) -> None:
    """Each strategy's command, through tune's own parser and the request it builds
    (which applies the request's refusals; the study directory and budget checks
    come later, in run_study)."""
    from raydp_synth.tune.__main__ import build_parser, study_request

    command = bench.command_for(_args(), method="dpwgan", epsilon="10", strategy=item, seed=0,
                                run_dir=tmp_path / "cell", settings=[])
    request = study_request(build_parser().parse_args(
        command[command.index("raydp_synth.tune") + 1:]))
    if item == "restarts":
        assert (request.strategy, request.sampler, request.default_share) == (
            "random-stopping", "random", 1.0)


def test_a_committed_result_is_kept_without_its_run_directory(tmp_path, monkeypatch) -> None:
    """A fresh clone has bench/results/ (committed) but no bench/runs/ (ignored): the
    documented commands must keep the committed cells, not train and overwrite them."""
    results = tmp_path / "results" / "dpwgan-digits-eps1-run-s0"
    results.mkdir(parents=True)
    (results / "evaluation.json").write_text('{"final": {"cas_logreg": 0.5}}')

    def no_training(*args, **kwargs):
        raise AssertionError(f"a kept cell was run: {args}")

    monkeypatch.setattr(bench.subprocess, "run", no_training)
    monkeypatch.setattr(sys, "argv", [
        "search_strategies.py", "--methods", "dpwgan", "--epsilons", "1", "--seeds", "1",
        "--strategies", "run", "--out", str(tmp_path / "runs"),
        "--results", str(tmp_path / "results")])
    assert bench.main() == 0
    assert not (tmp_path / "runs").exists()
    assert (results / "evaluation.json").read_text() == '{"final": {"cas_logreg": 0.5}}'


def test_only_seeds_runs_those_seeds_alone(tmp_path, monkeypatch, capsys) -> None:
    """--only-seeds 2 of --seeds 3: one process a seed, so seeds can run side by side."""
    argv = ["search_strategies.py", "--methods", "dpwgan", "--epsilons", "1", "--seeds", "3",
            "--strategies", "run", "--out", str(tmp_path / "runs"),
            "--results", str(tmp_path / "results"), "--dry-run"]
    monkeypatch.setattr(sys, "argv", argv + ["--only-seeds", "2"])
    assert bench.main() == 0
    printed = capsys.readouterr().out
    assert "dpwgan-digits-eps1-run-s2" in printed
    assert "-s0" not in printed and "-s1" not in printed
    for bad in ["3", "x", ""]:
        monkeypatch.setattr(sys, "argv", argv + ["--only-seeds", bad])
        with pytest.raises(SystemExit):
            bench.main()


@pytest.mark.parametrize("item", ["nope", "public:3", "compose:x", "draw", "draw:0.5"])
def test_bad_strategies_are_refused(item) -> None:
    with pytest.raises(SystemExit):
        bench.parse_strategy(item)


def test_a_draw_is_a_run_of_a_public_draw_of_the_search_space(tmp_path) -> None:
    """draw:I trains the method's packaged space's I-th random draw at the whole
    epsilon: a fixed, valid configuration, the same for every seed and every call."""
    from raydp_synth.data import data_info, load_training_data, parse_dataset_spec
    from raydp_synth.methods import get_method

    draws = bench.draw_settings("dpaf", "digits", [0, 1], settings=["epochs=2"])
    assert draws == bench.draw_settings("dpaf", "digits", [0, 1], settings=["epochs=2"])
    assert draws[0] != draws[1] and "epochs" not in draws[0]  # --set keys are not drawn
    splits, _ = load_training_data(parse_dataset_spec("digits"), public=None)
    for drawn in draws.values():
        get_method("dpaf").make_config({**drawn, "seed": 0}, data_info(splits.train, None))
    assert bench.strategy_label("draw:3") == "draw-i3"
    command = bench.command_for(_args(out=tmp_path), method="dpaf", epsilon="10",
                                strategy="draw:3", seed=1, run_dir=tmp_path / "cell", settings=[])
    assert command[1:3] == ["-m", "raydp_synth.train"]
    at = command.index("--config")
    assert command[at + 1] == str(tmp_path / "draws" / "dpaf-digits-draw3.json")


def test_the_ceiling_row_is_the_best_of_the_run_and_the_draws_per_seed(tmp_path) -> None:
    cas = {("run", 0): 0.50, ("run", 1): 0.60, ("draw-i0", 0): 0.55, ("draw-i0", 1): 0.40,
           ("draw-i1", 0): 0.45, ("compose", 0): 0.90}
    cells = []
    for (strategy, seed), value in cas.items():
        name = f"dpaf-digits-eps1-{strategy}-s{seed}"
        (tmp_path / name).mkdir()
        (tmp_path / name / "evaluation.json").write_text(
            json.dumps({"final": {"cas_cnn": value, "cas_logreg": value}}))
        cells.append((name, "dpaf", "1", strategy, seed))
    table = bench.summarise(tmp_path, cells)
    row = next(line for line in table.splitlines() if "| ceiling |" in line)
    # seed 0: max(0.50, 0.55, 0.45) = 0.55; seed 1: max(0.60, 0.40) = 0.60; compose is no draw
    assert "| 2 | 0.575 |" in row and "+0.025 ± 0.035" in row


_ROW = re.compile(r"^\| (?P<method>[\w-]+) \| (?P<epsilon>[\d.]+) \| (?P<strategy>[\w.-]+) \| "
                  r"(?P<seeds>\d+) \|")


def _blocks(doc: str) -> dict[str, str]:
    return dict(re.findall(r"<!-- report:begin (strategies-[\w-]+) -->\n(.*?)<!-- report:end \1 -->",
                           doc, flags=re.S))


def _stored_seeds(results: Path, label: str) -> list[int]:
    """The seeds of ``label``'s stored cells, in order: a seed whose study released
    nothing (dpwgan, digits, epsilon 1, DP-HyPO: seed 1) has no cell, and the row counts
    the seeds that have one."""
    cell = re.compile(re.escape(label) + r"-s(\d+)")
    return sorted(int(m.group(1)) for p in results.iterdir()
                  if (m := cell.fullmatch(p.name)) is not None)


def test_the_docs_strategy_tables_are_the_summaries_of_the_stored_runs() -> None:
    """Each generated block names its dataset (strategies-METHOD-DATASET-epsE or
    strategies-DATASET-...; a ``-h100`` suffix: the GPU's results folder); its rows
    give the cells (the first ``seeds`` stored seeds of each); summarise() over the
    stored result files must give the block back
    (regenerate with the command in section 4.3 and --update
    bench/results/strategies/NOTES.md --block NAME)."""
    doc = (ROOT / "bench" / "results" / "strategies" / "NOTES.md").read_text()
    blocks = _blocks(doc)
    assert blocks, "bench/results/strategies/NOTES.md has no generated strategy table"
    for name, table in blocks.items():
        dataset = "mnist" if "mnist" in name else "digits"
        results = ROOT / "bench" / "results" / ("strategies-mnist" if dataset == "mnist"
                                                else "strategies-recentred")
        if name.endswith("-h100"):  # the cells trained on the lent GPU (section 4.3)
            results = results.with_name(results.name + "-h100")
        cells = []
        for line in table.splitlines():
            row = _ROW.match(line)
            if row is None:
                continue
            label = f"{row['method']}-{dataset}-eps{row['epsilon']}-{row['strategy']}"
            cells += [(f"{label}-s{seed}", row["method"], row["epsilon"], row["strategy"], seed)
                      for seed in _stored_seeds(results, label)[:int(row["seeds"])]]
        assert cells, name
        assert bench.summarise(results, cells) == table, name


def test_the_summary_shows_recall_and_diversity_where_cells_have_them(tmp_path) -> None:
    """A newer evaluation's figures, or an older one's backfilled ``diversity.json``
    (bench/diversity.py), give the table recall and diversity columns; tables of
    older cells keep their columns."""
    cells = []
    for seed, (final, backfilled) in enumerate([
            ({"cas_logreg": 0.5, "recall_cnn": 0.2, "diversity_cnn": 0.4}, None),
            ({"cas_logreg": 0.7}, {"recall_cnn": 0.4, "diversity_cnn": 0.8})]):
        name = f"dpwgan-mnist-eps1-run-s{seed}"
        (tmp_path / name).mkdir()
        (tmp_path / name / "evaluation.json").write_text(json.dumps({"final": final}))
        if backfilled:
            (tmp_path / name / "diversity.json").write_text(json.dumps(backfilled))
        cells.append((name, "dpwgan", "1", "run", seed))
    header, _, row = bench.summarise(tmp_path, cells).splitlines()
    assert "| IS (CNN) | recall (CNN) | diversity (CNN) | wall s" in header
    assert "| - | 0.300 | 0.60 |" in row  # IS, then the means over the two seeds
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "evaluation.json").write_text(json.dumps({"final": {"cas_logreg": 0.5}}))
    older = bench.summarise(tmp_path, [("old", "dpwgan", "1", "run", 0)])
    assert "recall" not in older
