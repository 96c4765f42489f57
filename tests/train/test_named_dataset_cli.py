"""``--dataset mnist --data-dir D``: a run works offline on the four MNIST files in D, and
an empty D (or a --data-dir that names no named dataset) stops in one line, writing nothing."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from raydp_synth.cli import run_cli
from raydp_synth.train.__main__ import main
from tests.data.helpers import idx_bytes

TINY = ["--no-eval", "--set", "epochs=1", "--set", "classifier_epochs=0.2",
        "--set", "base_width=8", "--set", "image_size=16", "--set", "batch_size=64",
        "--synthetic-samples", "20"]


def _fails(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    return err


def _fake_mnist(root: Path, n_train: int = 300, n_test: int = 50) -> None:
    """The four MNIST files in their official format (gzipped IDX, 28x28), random pixels."""
    root.mkdir(parents=True)
    rng = np.random.default_rng(0)
    files = {
        "train-images-idx3-ubyte.gz": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte.gz": (np.arange(n_train) % 10).astype(np.uint8),
        "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte.gz": (np.arange(n_test) % 10).astype(np.uint8),
    }
    for name, array in files.items():
        (root / name).write_bytes(gzip.compress(idx_bytes(array)))


def test_an_empty_data_dir_is_one_line_and_nothing_is_written(capsys, tmp_path) -> None:
    data = tmp_path / "D"
    data.mkdir()
    err = _fails(["dpaf", "--dataset", "mnist", "--data-dir", str(data), "--epsilon", "10",
                  "--out", str(tmp_path / "R")], capsys)
    assert f"MNIST files not found in {data}" in err and "train-images-idx3-ubyte.gz" in err
    assert "--download" in err
    assert not (tmp_path / "R").exists() and list(data.iterdir()) == []


@pytest.mark.parametrize(("argv", "needle"), [
    (["--dataset", "idx:/x", "--data-dir", "/d"], "--data-dir is the folder of a named dataset"),
    (["--data-dir", "/d"], "not of digits"),
    (["--dataset", "mnist:/a", "--data-dir", "/b"], "give the folder once"),
    (["--dataset", "digits", "--download"], "--download fetches the named datasets"),
    (["--dataset", "mnist", "--num-classes", "5"], "'mnist' has 10 classes, not 5"),
])
def test_named_dataset_options_are_checked(argv, needle, capsys, tmp_path) -> None:
    err = _fails(["dpaf", *argv, "--out", str(tmp_path / "R")], capsys)
    assert needle in err
    assert not (tmp_path / "R").exists()


@pytest.mark.ray
@pytest.mark.slow
def test_mnist_from_a_data_dir_trains_offline(ray_local, tmp_path, monkeypatch) -> None:
    data = tmp_path / "D"
    _fake_mnist(data)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, ["dpaf", "--dataset", "mnist", "--data-dir", "D", "--epsilon", "10",
                       "--out", "R", *TINY])
    assert exit_info.value.code == 0
    run = json.loads((tmp_path / "R" / "run.json").read_text())
    assert run["dataset"] == f"mnist:{data}"  # the folder travels, absolute, in the spec
    assert run["data_info"]["num_classes"] == 10 and run["data_info"]["num_records"] < 300
    generator = json.loads((tmp_path / "R" / "release" / "generator.json").read_text())
    assert generator["class_names"] == [str(k) for k in range(10)]


def test_tune_takes_the_same_options(capsys, tmp_path) -> None:
    from raydp_synth.tune.__main__ import main as tune_main

    with pytest.raises(SystemExit) as exit_info:
        run_cli(tune_main, ["dpaf", "--dataset", "folder:/x", "--data-dir", str(tmp_path),
                            "--storage", str(tmp_path / "studies")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --data-dir is the folder of a named dataset") and "\n" not in err
    empty = tmp_path / "D"
    empty.mkdir()
    with pytest.raises(SystemExit):
        run_cli(tune_main, ["dpaf", "--dataset", "cifar10", "--data-dir", str(empty),
                            "--storage", str(tmp_path / "studies")])
    assert "CIFAR-10 files not found" in capsys.readouterr().err
    assert not (tmp_path / "studies").exists()
