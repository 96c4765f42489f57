"""A run on data declared with 10 classes, one of which has no record, succeeds.

The class set is a public fact of the guarantee (docs/privacy.md, "What the
guarantee assumes public"): it is declared, never read off the labels present, so
an empty class must neither change the architecture nor abort the run. The data are
the digits without any 3, in a Parquet file that declares no classes, with
``--num-classes 10`` on the real CLI (which declares no image size or channels
either: the spec does, ``:size=8:channels=1``). The run is given ``--dp-seed``, so
it is also the CLI-to-privacy.json test of the reproducibility mark.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from raydp_synth.cli import run_cli
from raydp_synth.data import load_dataset
from raydp_synth.data.digits import load_digits_raw
from raydp_synth.data.parquet import load_parquet_raw
from raydp_synth.evaluation.report import EvaluationSettings, evaluate_run
from raydp_synth.train.__main__ import main

pytestmark = [pytest.mark.ray, pytest.mark.slow]

EMPTY = 3


def _png(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image[0]).save(buffer, format="PNG")
    return buffer.getvalue()


def _digits_without_threes(path: Path) -> Path:
    raw = load_digits_raw()
    keep = raw.labels != EMPTY
    table = pa.table({  # no class metadata: the declaration comes from --num-classes
        "image": pa.array([_png(image) for image in raw.images[keep]], pa.binary()),
        "label": pa.array(raw.labels[keep], pa.int64()),
    })
    pq.write_table(table, path)
    return path


@pytest.fixture(scope="module")
def run_dir(ray_local, tmp_path_factory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("empty-class")
    dataset = f"parquet:{_digits_without_threes(root / 'no-threes.parquet')}:size=8:channels=1"
    out = root / "run"
    stdout = io.StringIO()
    with pytest.raises(SystemExit) as exit_info, contextlib.redirect_stdout(stdout):
        run_cli(main, ["dpaf", "--dataset", dataset, "--num-classes", "10", "--epsilon", "4",
                       "--synthetic-samples", "123", "--no-eval", "--out", str(out),
                       "--set", "epochs=1", "--set", "classifier_epochs=0.2",
                       "--set", "base_width=8", "--dp-seed", "20261130"])
    assert exit_info.value.code == 0
    (out.parent / "stdout.txt").write_text(stdout.getvalue())
    return out, dataset


def test_a_chosen_dp_seed_marks_the_release_not_a_dp_release(run_dir) -> None:
    """--dp-seed on the CLI reaches the request and the release: privacy.json says
    ``"dp_release": false`` with the reason, and the CLI says so at start and end."""
    out, _ = run_dir
    statement = json.loads((out / "release" / "privacy.json").read_text())
    assert statement["dp_release"] is False
    assert statement["reason"].startswith("reproducibility run, not a DP release")
    lines = (out.parent / "stdout.txt").read_text().splitlines()
    marked = [i for i, line in enumerate(lines) if "not a DP release" in line]
    assert marked and marked[0] == 0 and marked[-1] == len(lines) - 1, lines


def test_the_declared_empty_class_is_a_class_of_the_run(run_dir) -> None:
    out, dataset = run_dir
    run = json.loads((out / "run.json").read_text())
    assert run["dataset"] == f"{dataset}:classes=10"
    assert run["data_info"]["num_classes"] == 10
    splits = load_dataset(run["dataset"], seed=0)
    assert EMPTY not in splits.train.labels and len(splits.train) == run["data_info"]["num_records"]


def test_the_release_covers_every_declared_class(run_dir) -> None:
    out, _ = run_dir
    synthetic = load_parquet_raw(out / "release" / "synthetic.parquet")
    assert len(synthetic) == 123  # --synthetic-samples, not n
    assert synthetic.class_names == tuple(str(k) for k in range(10))
    assert np.bincount(synthetic.labels, minlength=10).min() >= 12  # the empty class too


def test_the_statement_lists_the_declared_class_set_and_n(run_dir) -> None:
    out, _ = run_dir
    run = json.loads((out / "run.json").read_text())
    statement = json.loads((out / "release" / "privacy.json").read_text())
    facts = statement["public_facts"]
    assert facts["num_records"] == run["data_info"]["num_records"]
    assert facts["classes"] == {"count": 10, "names": [str(k) for k in range(10)]}
    assert (facts["image_size"], facts["channels"]) == (16, 1)
    assert facts["public_data"] is None
    assert facts["score_validation"]["records"] == json.loads(
        (out / "score.json").read_text())["num_records"]
    assert set(statement["neighbouring_relation"]) == {"relation", "note"}
    assert 0 < statement["epsilon"] <= 4.0


def test_the_evaluation_runs_with_the_empty_class(run_dir) -> None:
    out, _ = run_dir
    result = evaluate_run(out, settings=EvaluationSettings(
        num_synthetic=200, curve_synthetic=40, classifiers=("logreg",), feature_steps=20))
    assert 0.0 <= result["final"]["cas_logreg"] <= 1.0
    assert result["curve"], "no checkpoint was evaluated"
