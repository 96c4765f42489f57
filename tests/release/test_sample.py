"""``raydp-synth sample``: more synthetic data from a release, by post-processing
(reads the released generator only), through the release's Parquet writer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from raydp_synth.cli import run_cli
from raydp_synth.config import config_to_dict
from raydp_synth.data import DataInfo
from raydp_synth.data.parquet import load_parquet_raw
from raydp_synth.methods import get_method
from raydp_synth.release import TrainedGenerator, write_release
from raydp_synth.release.bundle import write_synthetic_parquet
from raydp_synth.sample import SAMPLE_METADATA_KEY, main

INFO = DataInfo(num_records=500, image_size=16, channels=1, num_classes=3)
NAMES = ("circle", "square", "triangle")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    method = get_method("dpaf")
    config = method.make_config({}, INFO)
    torch.manual_seed(1)
    generator = TrainedGenerator.build(method="dpaf", config=config_to_dict(config),
                                       data_info=INFO.__dict__, class_names=NAMES,
                                       state_dict=method.build_generator(config, INFO).state_dict())
    out = tmp_path_factory.mktemp("sample") / "run"
    write_release(out / "release", generator=generator, num_synthetic=6, seed=0,
                  statement={"epsilon": 1.5, "delta": 1e-5, "private": True,
                             "dataset": "shapes"})
    return out


def test_sample_writes_n_balanced_rows_with_their_seed(run_dir: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "more.parquet"
    assert main([str(run_dir / "release"), "-n", "7", "--out", str(out), "--seed", "3"]) == 0
    printed = capsys.readouterr().out
    assert "no privacy cost" in printed and "epsilon=1.5" in printed and "seed 3" in printed
    raw = load_parquet_raw(out)
    assert len(raw) == 7 and raw.class_names == NAMES
    assert raw.labels.tolist() == [0, 1, 2, 0, 1, 2, 0]
    metadata = pq.read_schema(out).metadata
    record = json.loads(metadata[SAMPLE_METADATA_KEY.encode()])
    assert record["seed"] == 3 and record["rows"] == 7 and record["method"] == "dpaf"
    assert record["epsilon"] == 1.5
    assert b"huggingface" in metadata  # the release's writer: Hugging Face layout
    # The same rows as the release's writer draws with that seed.
    again = tmp_path / "again.parquet"
    write_synthetic_parquet(again, TrainedGenerator.from_release(run_dir / "release"),
                            count=7, seed=3)
    assert np.array_equal(load_parquet_raw(again).images, raw.images)


def test_a_run_directory_names_its_release_and_the_default_seed_is_fresh(
        run_dir: Path, tmp_path: Path) -> None:
    seeds = []
    for name in ("a.parquet", "b.parquet"):
        assert main([str(run_dir), "-n", "3", "--out", str(tmp_path / name)]) == 0
        metadata = pq.read_schema(tmp_path / name).metadata
        seeds.append(json.loads(metadata[SAMPLE_METADATA_KEY.encode()])["seed"])
    assert seeds[0] != seeds[1]


@pytest.mark.parametrize(("args", "needle"), [
    (["-n", "0"], "number of synthetic samples 0"),
    (["-n", "2", "--out-is-a-txt"], "must name a .parquet file"),
    (["-n", "2", "--existing"], "exists; choose a new file or pass --overwrite"),
    (["-n", "2", "--not-a-release"], "holds no released generator"),
])
def test_user_errors_are_one_line_and_write_nothing(run_dir: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    args: list[str], needle: str) -> None:
    out = tmp_path / "x.parquet"
    release = str(run_dir)
    if "--out-is-a-txt" in args:
        out = tmp_path / "x.txt"
    if "--existing" in args:
        out.write_bytes(b"keep")
    if "--not-a-release" in args:
        release = str(tmp_path)
    argv = [release, *[a for a in args if not a.startswith("--") or a == "--out"],
            "--out", str(out)]
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and needle in err
    assert "Traceback" not in err
    if "--existing" in args:
        assert out.read_bytes() == b"keep"
    else:
        assert not out.exists()
    if "--existing" in args:
        assert main([release, "-n", "2", "--out", str(out), "--overwrite"]) == 0
        assert len(load_parquet_raw(out)) == 2


@pytest.mark.slow
def test_python_dash_m_form(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.parquet"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "raydp_synth.sample", str(run_dir), "-n", "4",
                           "--out", str(out), "--seed", "1"], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert len(load_parquet_raw(out)) == 4
