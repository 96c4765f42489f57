"""Local dataset paths are resolved where the user typed them, and a run whose
worker fails on its data leaves no run directory behind.

Ray workers do not run in the user's working directory: a relative ``--dataset``
or ``--public`` path passed the driver's checks and then failed in the worker.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from raydp_synth.cli import run_cli
from raydp_synth.data.digits import load_digits_raw
from raydp_synth.data.public import parse_public_spec
from raydp_synth.data.spec import parse_dataset_spec
from raydp_synth.train.__main__ import main

TINY = ["--no-eval", "--epsilon", "4", "--set", "epochs=1", "--set", "classifier_epochs=0.2",
        "--set", "base_width=8", "--synthetic-samples", "20"]


def test_local_locations_become_absolute_and_uris_stay(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    here = str(tmp_path)
    assert absolute_spec("idx:mnist") == f"idx:{here}/mnist"
    assert absolute_spec("folder:./faces:classes=2") == f"folder:{here}/faces:classes=2"
    assert absolute_spec("parquet:data/x.parquet") == f"parquet:{here}/data/x.parquet"
    assert absolute_spec("parquet:s3://bucket/x.parquet") == "parquet:s3://bucket/x.parquet"
    assert absolute_spec("digits") == "digits"
    assert absolute_spec(f"idx:{here}/m") == f"idx:{here}/m"
    assert absolute_public("idx:mnist:fraction=0.02") == f"idx:{here}/mnist:fraction=0.02"
    assert absolute_public("digits:fraction=0.3") == "digits:fraction=0.3"


def absolute_spec(text: str) -> str:
    """``text`` parsed, made absolute, as its canonical string."""
    return str(parse_dataset_spec(text).absolute())


def absolute_public(text: str) -> str:
    """The public declaration ``text`` parsed, made absolute, as its canonical string."""
    return str(parse_public_spec(text).absolute())


def _png(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image[0]).save(buffer, format="PNG")
    return buffer.getvalue()


def _digits_parquet(path: Path, keep: slice = slice(None)) -> None:
    raw = load_digits_raw()
    pq.write_table(pa.table({
        "image": pa.array([_png(image) for image in raw.images[keep]], pa.binary()),
        "label": pa.array(raw.labels[keep], pa.int64()),
    }), path)


def _digits_folder(root: Path, count: int, *, invert: bool = False) -> None:
    """The first ``count`` digits as an image folder; ``invert``: their negatives,
    public data that shares no record with the digits (a copy of the training data is
    refused as public data, invariant 16)."""
    raw = load_digits_raw()
    for k in range(10):
        (root / str(k)).mkdir(parents=True)
    for i in range(count):
        image = 255 - raw.images[i][0] if invert else raw.images[i][0]
        Image.fromarray(image).save(root / str(raw.labels[i]) / f"{i}.png")


# extended: the three-trial study of tests/tune/test_study.py gives its dataset and
# public data as relative paths too, and runs in CI.
@pytest.mark.extended
@pytest.mark.ray
@pytest.mark.slow
def test_relative_dataset_and_public_paths_work_in_the_workers(ray_local, tmp_path, monkeypatch
                                                               ) -> None:
    (tmp_path / "data").mkdir()
    _digits_parquet(tmp_path / "data" / "digits.parquet")
    _digits_folder(tmp_path / "public", 120, invert=True)  # not the training records
    monkeypatch.chdir(tmp_path)
    # The digits' own facts, declared (undeclared, Parquet loads as the default 32x32 RGB,
    # and the run takes longer for nothing this test checks).
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, ["dpaf", "--dataset", "parquet:data/digits.parquet:size=8:channels=1",
                       "--num-classes", "10", "--public", "folder:public", "--out", "run", *TINY])
    assert exit_info.value.code == 0
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["dataset"] == (
        f"parquet:{tmp_path}/data/digits.parquet:size=8:channels=1:classes=10")
    assert run["public"] == f"folder:{tmp_path}/public"
    statement = json.loads((tmp_path / "run" / "release" / "privacy.json").read_text())
    assert "dp_release" not in statement  # no --dp-seed: no reproducibility mark


@pytest.mark.ray
@pytest.mark.slow
def test_a_run_whose_worker_fails_on_its_data_leaves_no_out(ray_local, tmp_path) -> None:
    """The data change between the driver's planning and the worker's read (the
    worker refuses data its plan was not made for): the run fails and --out is gone,
    so the same command can be run again."""
    data = tmp_path / "digits.parquet"
    _digits_parquet(data)
    out = tmp_path / "run"

    def shrink_once_planned() -> None:
        deadline = time.monotonic() + 120
        while not (out / "run.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        _digits_parquet(tmp_path / "smaller.parquet", slice(0, 500))
        os.replace(tmp_path / "smaller.parquet", data)

    swapper = threading.Thread(target=shrink_once_planned, daemon=True)
    swapper.start()
    with pytest.raises(BaseException):  # noqa: B017 - the worker's error, whatever Ray wraps it in
        run_cli(main, ["dpaf", "--dataset", f"parquet:{data}", "--num-classes", "10",
                       "--out", str(out), *TINY])
    swapper.join()
    assert not out.exists()
