"""Bad input: one clear line on stderr, exit code 2, nothing lost."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from raydp_synth.cli import run_cli
from raydp_synth.train.__main__ import main


def _fails(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    return err


@pytest.mark.parametrize(("argv", "needle"), [
    (["dpaf", "--epsilon", "0"], "epsilon 0"),
    (["dpaf", "--epsilon", "-3"], "epsilon -3"),
    (["dpaf", "--delta", "0.001"], "1/|D|"),
    # 1/|D| = 1/1797 < 6e-4 < 1/n (n: the training split): delta is held to |D|.
    (["dpaf", "--delta", "0.0006"], "the |D|=1797 records of the sensitive dataset"),
    (["dpaf", "--delta", "1.5"], "delta 1.5"),
    (["nosuchmethod"], "registered methods: dpaf"),
    (["dpaf", "--set", "mu"], "key=value"),
    (["dpaf", "--set", "colour=blue"], "unknown setting"),
    (["dpaf", "--set", "layer_split=C2-C2-C1"], "at most 3"),
    (["dpaf", "--set", "batch_size=99999"], "batch_size"),
    (["dpaf", "--workers", "0"], "--workers"),
    (["dpaf", "--dp-seed", "-1"], "--dp-seed must be a whole number >= 0"),
    (["dpaf", "--set", "image_size=abc"], "image_size"),
    (["dpaf", "--set", "image_size=20"], "power of two"),
    (["dpaf", "--set", "image_size=8", "--set", "layer_split=C2-C1-x"], "at most 2"),
    (["dpaf", "--dataset", "webdataset:foo"], "digits"),
    (["dpaf", "--score-share", "1.5"], "budget share 1.5"),
    (["dpaf", "--score-share", "0"], "budget share 0"),
    (["dpaf", "--public-validation", "idx:/nonexistent/dir"], "/nonexistent/dir"),
    (["dpgan", "--public", "digits"], "fraction"),
    (["dpgan", "--public", "digits:fraction=1.5"], "between 0 and 1"),
    (["dpgan", "--set", "warm_start_iters=100"], "declare public data"),
    (["dpgan", "--set", "groups=5"], "declare public data"),
    (["dpgan", "--set", "adaptive_clip=true"], "declare public data"),
    (["dpaf", "--synthetic-samples", "0"], "synthetic samples 0"),
    (["dpaf", "--curve-checkpoints", "-1"], "--curve-checkpoints"),
    (["dpaf", "--num-classes", "5"], "'digits' has 10 classes, not 5"),
    (["dpaf", "--num-classes", "0"], "class count 0"),
    (["dpaf", "--fid-weights", "/nonexistent/inception.pth"], "/nonexistent/inception.pth"),
])
def test_user_errors(argv: list[str], needle: str, capsys, tmp_path: Path) -> None:
    err = _fails([*argv, "--out", str(tmp_path / "run")], capsys)
    assert needle in err
    assert not (tmp_path / "run").exists()  # nothing was created


def test_missing_dataset_directory(capsys, tmp_path: Path) -> None:
    err = _fails(["dpaf", "--dataset", f"idx:{tmp_path / 'nope'}", "--out", str(tmp_path / "r")], capsys)
    assert str(tmp_path / "nope") in err


def test_corrupt_idx_file(capsys, tmp_path: Path) -> None:
    data = tmp_path / "mnist"
    data.mkdir()
    (data / "train-images-idx3-ubyte.gz").write_bytes(b"not gzip at all")
    with gzip.open(data / "train-labels-idx1-ubyte.gz", "wb") as f:
        f.write(b"\x00\x00\x08\x01\x00\x00\x00\x00")
    err = _fails(["dpaf", "--dataset", f"idx:{data}", "--out", str(tmp_path / "r")], capsys)
    assert "train-images-idx3-ubyte.gz" in err


def test_empty_image_folder(capsys, tmp_path: Path) -> None:
    (tmp_path / "imgs" / "cat").mkdir(parents=True)
    err = _fails(["dpaf", "--dataset", f"folder:{tmp_path / 'imgs'}", "--out", str(tmp_path / "r")], capsys)
    assert "none of the 1 class folders contains an image" in err


@pytest.mark.slow
def test_existing_run_directory_is_not_touched(capsys, tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    err = _fails(["dpaf", "--out", str(out)], capsys)
    assert "already exists" in err
    assert (out / "precious.txt").read_text() == "keep me"


@pytest.mark.slow
def test_no_traceback_from_the_real_entry_point(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "raydp_synth.train", "dpaf", "--epsilon", "0", "--out", str(tmp_path / "r")],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: the privacy budget's epsilon 0")
    assert "Traceback" not in proc.stderr


@pytest.mark.ray
def test_use_gpu_without_gpus_is_refused(ray_local, capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    err = _fails(["dpaf", "--use-gpu", "--set", "epochs=1", "--out", str(tmp_path / "run")], capsys)
    assert "asks for 1 GPU" in err and "train on CPUs" in err
    assert not (tmp_path / "run").exists()


def _idx_dir(root: Path, labels: list[int]) -> Path:
    import numpy as np

    from tests.data.helpers import write_idx

    root.mkdir()
    images = np.random.default_rng(0).integers(0, 256, (len(labels), 8, 8), dtype=np.uint8)
    write_idx(root / "train-images-idx3-ubyte", images)
    write_idx(root / "train-labels-idx1-ubyte", np.array(labels, dtype=np.uint8))
    return root


def test_idx_without_a_declared_class_count(capsys, tmp_path: Path) -> None:
    data = _idx_dir(tmp_path / "mnist", [0, 1, 2] * 20)
    err = _fails(["dpaf", "--dataset", f"idx:{data}", "--out", str(tmp_path / "r")], capsys)
    assert "classes=10" in err and str(data) in err
    assert not (tmp_path / "r").exists()


def test_label_outside_the_declared_classes(capsys, tmp_path: Path) -> None:
    data = _idx_dir(tmp_path / "mnist", [0, 1, 2] * 20)
    err = _fails(["dpaf", "--dataset", f"idx:{data}", "--num-classes", "2",
                  "--out", str(tmp_path / "r")], capsys)
    assert "label 2 lies outside the 2 declared classes" in err


def test_parquet_without_class_metadata(capsys, tmp_path: Path) -> None:
    import io

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(buffer, format="PNG")
    pq.write_table(pa.table({"image": [buffer.getvalue()] * 4, "label": [0, 1, 0, 1]}),
                   tmp_path / "plain.parquet")
    err = _fails(["dpaf", "--dataset", f"parquet:{tmp_path / 'plain.parquet'}",
                  "--out", str(tmp_path / "r")], capsys)
    assert "declares no class names" in err and "classes=K" in err


def test_num_classes_that_disagrees_with_the_class_folders(capsys, tmp_path: Path) -> None:
    import numpy as np

    from tests.data.helpers import write_png

    for name in ("a", "b"):
        write_png(tmp_path / "imgs" / name / "1.png", np.zeros((8, 8), np.uint8))
    err = _fails(["dpaf", "--dataset", f"folder:{tmp_path / 'imgs'}", "--num-classes", "3",
                  "--out", str(tmp_path / "r")], capsys)
    assert "declares 2 classes" in err and "3 were declared" in err
