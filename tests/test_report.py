"""``python -m raydp_synth.report``: one table across run and study directories.

The privacy files come from the writers (``privacy_statement``; the ledger through
the accountant's core, as the actor appends it); ``evaluation.json`` holds the
``final``/``settings`` sections that ``evaluate_run`` writes, under the old and the
new names of the domain-CNN figures. The end-to-end run and study tests
(tests/train/test_end_to_end.py, tests/tune/test_study.py) read real directories.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from raydp_synth.cli import run_cli
from raydp_synth.errors import ConfigError
from raydp_synth.privacy.events import event_from_json
from raydp_synth.privacy.plan import Mechanism, PrivacyPlan
from raydp_synth.privacy.pricing import epsilon as stated_epsilon
from raydp_synth.release import privacy_statement
from raydp_synth.report import (
    BEGIN_MARKER,
    END_MARKER,
    main,
    read_row,
    to_csv,
    to_markdown,
    update_block,
)
from tests.accountant.test_core import Study, _compose, _plan, _random_stopping


@pytest.fixture(scope="module")
def plans() -> tuple[PrivacyPlan, PrivacyPlan]:
    """A private plan (DP-SGD and the selection score) and its non-private twin."""
    plan = PrivacyPlan(mechanisms=(
        Mechanism(name="dp_sgd", noise_multiplier=1.5, sample_rate=0.05, num_steps=200,
                  sensitivity=1.0),
        Mechanism(name="selection_score", noise_multiplier=4.0, sample_rate=None, num_steps=1,
                  sensitivity=1.0),
    ), delta=1e-5, target_epsilon=10.0)
    return plan, plan.without_noise()


def _run(path: Path, plan, *, final: dict | None, public: str | None = None,
         timing: float | None = None, num_synthetic: int = 10_000) -> Path:
    """A run directory: run.json, release/privacy.json, evaluation.json, timing.json."""
    (path / "release").mkdir(parents=True)
    (path / "run.json").write_text(json.dumps({
        "method": "dpaf", "dataset": "digits", "seed": 0, "public": public,
        "non_private": not plan.private}))
    statement = privacy_statement(plan, scope="one training run", dataset="digits",
                                  public=public)
    (path / "release" / "privacy.json").write_text(json.dumps(statement))
    if final is not None:
        (path / "evaluation.json").write_text(json.dumps({
            "method": "dpaf", "epsilon": statement["epsilon"], "final": final,
            "settings": {"num_synthetic": num_synthetic, "classifiers": ["logreg"]}}))
    if timing is not None:
        (path / "timing.json").write_text(json.dumps({"train_s": timing}))
    return path


OLD_NAMES = {"cas_logreg": 0.81, "cas_mlp": 0.79, "cas_cnn": 0.84, "fid": 509.3,
             "inception_score": 9.51}
NEW_NAMES = {"cas_logreg": 0.7, "cas_resnet9": 0.9, "fid_cnn": 140.0, "is_cnn": 8.4,
             "fid_inception": 12.5, "is_inception": 2.25, "precision": 0.61, "recall": 0.42}


def test_a_run_row_takes_the_statement_and_the_evaluation(tmp_path, plans) -> None:
    plan, _ = plans
    row = read_row(_run(tmp_path / "r1", plan, final=OLD_NAMES, timing=61.5))
    assert row.kind == "run" and row.method == "dpaf" and row.dataset == "digits"
    assert row.epsilon == pytest.approx(plan.epsilon(), rel=1e-12) and row.delta == 1e-5
    assert row.cas == {"logreg": 0.81, "mlp": 0.79, "cnn": 0.84}
    assert row.figures == {"fid_cnn": 509.3, "is_cnn": 9.51}  # the old names, renamed
    assert row.num_synthetic == 10_000 and row.train_s == 61.5


def test_new_names_and_inception_figures_are_read(tmp_path, plans) -> None:
    row = read_row(_run(tmp_path / "r2", plans[0], final=NEW_NAMES, num_synthetic=60_000))
    assert row.cas == {"logreg": 0.7, "resnet9": 0.9}
    assert row.figures == {"fid_cnn": 140.0, "is_cnn": 8.4, "fid_inception": 12.5,
                           "is_inception": 2.25, "precision": 0.61, "recall": 0.42}


def test_missing_figures_stay_blank_never_invented(tmp_path, plans) -> None:
    plan, non_private = plans
    rows = [read_row(_run(tmp_path / "old", plan, final=OLD_NAMES)),
            read_row(_run(tmp_path / "new", plan, final=NEW_NAMES)),
            read_row(_run(tmp_path / "none", plan, final=None, public="digits:fraction=0.3")),
            read_row(_run(tmp_path / "np", non_private, final=OLD_NAMES))]
    lines = to_markdown(rows).splitlines()
    header = [h.strip() for h in lines[0].strip("|").split("|")]
    assert header[:8] == ["run", "method", "what", "dataset", "public data", "epsilon",
                          "epsilon counts", "delta"]
    assert [h for h in header if h.startswith("CAS")] == [
        "CAS logreg", "CAS mlp", "CAS cnn", "CAS resnet9"]
    assert "train s" not in header  # no row recorded it
    cells = [dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True))
             for line in lines[2:]]
    assert cells[0]["CAS resnet9"] == "—" and cells[0]["FID (Inception)"] == "—"
    assert cells[0]["FID (CNN)"] == "509" and cells[0]["IS (CNN)"] == "9.51"
    assert cells[1]["CAS mlp"] == "—" and cells[1]["recall"] == "0.420"
    assert cells[1]["FID (Inception)"] == "12.50"
    assert {cells[2][h] for h in header if h.startswith(("CAS", "FID", "IS"))} == {"—"}
    assert cells[2]["public data"] == "digits:fraction=0.3" and cells[0]["public data"] == "none"
    assert cells[3]["what"] == "non-private run" and cells[3]["epsilon"] == "inf"
    assert cells[0]["epsilon"] == f"{plan.epsilon():.2f}"
    table = list(csv.DictReader(io.StringIO(to_csv(rows))))
    assert table[2]["cas_logreg"] == table[2]["fid_cnn"] == table[2]["train_s"] == ""
    assert float(table[0]["epsilon"]) == plan.epsilon() and math.isinf(float(table[3]["epsilon"]))
    assert float(table[1]["fid_inception"]) == 12.5 and table[0]["directory"].endswith("old")


def test_a_compose_study_states_the_total_its_ledger_charged(tmp_path, plans) -> None:
    study_dir = tmp_path / "study"
    study = Study(study_dir, _compose(6.0, trials=3))
    for trial in ("t0", "t1", "t2"):
        assert study.request(trial, _plan(2.0, 0.05, 100)).granted
    released = _run(study_dir, plans[0], final=OLD_NAMES)
    # The study's statement (tune.study's release): the accountant's, whole search.
    statement = study.budget.statement()
    (released / "release" / "privacy.json").write_text(json.dumps({
        "epsilon": statement["epsilon"], "delta": statement["delta"], "private": True,
        "pricing": statement}))
    (released / "study.json").write_text(json.dumps({"request": {
        "method": "dpaf", "selection": "compose", "trials": 3, "dataset": "digits"}}))
    row = read_row(study_dir)
    assert row.kind == "study"
    assert row.epsilon == pytest.approx(study.budget.spent_epsilon(), rel=1e-12)
    one_trial = stated_epsilon(event_from_json(_plan(2.0, 0.05, 100)), delta=1e-5)
    assert row.epsilon > 1.2 * one_trial  # the search, not the released trial alone
    assert row.counts == "whole search (compose, 3 trials)"
    assert row.cas["logreg"] == 0.81
    (study_dir / "ledger.jsonl").unlink()  # stored results keep no ledger: the statement
    assert read_row(study_dir).epsilon == pytest.approx(statement["epsilon"], rel=1e-12)
    assert read_row(study_dir).counts == "whole search (compose, 3 trials)"


def test_a_random_stopping_study_never_shows_its_trial_count(tmp_path) -> None:
    study_dir = tmp_path / "rs"
    settings = _random_stopping(_plan(1.0, 0.02, 200), trials=2, distribution="geometric")
    study = Study(study_dir, settings, trial_count=7)
    for i in range(7):
        assert study.request(f"t{i}", _plan(1.2, 0.02, 150), draw=True).granted
    (study_dir / "study.json").write_text(json.dumps({"request": {
        "method": "dpaf", "selection": "random-stopping", "trials": 2,
        "distribution": "geometric", "dataset": "digits"}}))
    row = read_row(study_dir)  # before any release: the ledger alone
    assert row.epsilon == pytest.approx(study.budget.spent_epsilon(), rel=1e-12)
    assert "mean 2 trials" in row.counts and "nothing released yet" in row.counts
    (record,) = csv.DictReader(io.StringIO(to_csv([row])))
    shown = [v for k, v in record.items() if k not in ("directory", "epsilon")]
    assert not any("7" in v for v in shown), shown  # K = 7 appears nowhere


def test_update_rewrites_only_the_marked_block(tmp_path, plans) -> None:
    run = _run(tmp_path / "r", plans[0], final=OLD_NAMES)
    doc = tmp_path / "doc.md"
    doc.write_text(f"# Title\n\nbefore\n{BEGIN_MARKER}\n| stale |\n{END_MARKER}\nafter\n")
    assert main([str(run), "--update", str(doc), "--csv", str(tmp_path / "t.csv")]) == 0
    text = doc.read_text()
    assert text.startswith("# Title\n\nbefore\n" + BEGIN_MARKER + "\n| run | method |")
    assert text.endswith(f"|\n{END_MARKER}\nafter\n") and "stale" not in text
    assert main([str(run), "--update", str(doc)]) == 0
    assert doc.read_text() == text  # regenerating changes nothing
    assert (tmp_path / "t.csv").read_text() == to_csv([read_row(run)])


@pytest.mark.parametrize("text", ["no markers\n", f"{END_MARKER}\n{BEGIN_MARKER}\n",
                                  f"{BEGIN_MARKER}\n{BEGIN_MARKER}\n{END_MARKER}\n"])
def test_update_needs_one_pair_of_markers(text) -> None:
    with pytest.raises(ConfigError, match="exactly one"):
        update_block(text, "| t |\n")


def test_a_directory_that_is_neither_is_one_line_and_exit_2(tmp_path, plans, capsys) -> None:
    run = _run(tmp_path / "r", plans[0], final=OLD_NAMES)
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, [str(run), str(tmp_path / "r" / "release")])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("error: ") and "neither a run directory" in err and "\n" not in err
    assert captured.out == ""


def test_the_benchmarks_utility_table_is_the_reports_of_the_stored_runs() -> None:
    """bench/results/utility/NOTES.md's generated table matches bench/results/utility/
    (regenerate it with the command the notes give after adding or changing a run there)."""
    root = Path(__file__).resolve().parents[1]
    runs = sorted(p for p in (root / "bench" / "results" / "utility").iterdir() if p.is_dir())
    doc = (root / "bench" / "results" / "utility" / "NOTES.md").read_text()
    assert runs and update_block(doc, to_markdown([read_row(r) for r in runs])) == doc


def test_a_named_block_is_replaced_and_the_others_are_left_alone() -> None:
    text = ("a\n<!-- report:begin -->\nold\n<!-- report:end -->\nb\n"
            "<!-- report:begin mnist -->\nold mnist\n<!-- report:end mnist -->\nc\n")
    updated = update_block(text, "| new |\n", block="mnist")
    assert updated == text.replace("old mnist", "| new |")
    assert update_block(text, "| x |\n") == text.replace("\nold\n", "\n| x |\n")
    with pytest.raises(ConfigError, match="report:begin cifar10"):
        update_block(text, "| x |\n", block="cifar10")


def test_the_benchmarks_mnist_table_is_the_reports_of_the_stored_mnist_runs() -> None:
    """bench/results/utility/NOTES.md's MNIST table matches bench/results/mnist/ (the
    command that regenerates it is in the notes)."""
    root = Path(__file__).resolve().parents[1]
    stored = root / "bench" / "results" / "mnist"
    runs = sorted(p for p in stored.iterdir() if p.is_dir())
    doc = (root / "bench" / "results" / "utility" / "NOTES.md").read_text()
    table = to_markdown([read_row(r) for r in runs])
    assert update_block(doc, table, block="mnist") == doc
