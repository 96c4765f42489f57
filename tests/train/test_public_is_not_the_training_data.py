"""Every flag that declares data public refuses the training data, by name or as a
copy under another name (design invariant 16): exit 2, one line, nothing written,
Ray not started (``train`` and ``tune``; the conftest fails a test that starts Ray)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from raydp_synth.cli import run_cli
from raydp_synth.train.__main__ import main as train_main
from raydp_synth.tune.__main__ import main as tune_main
from tests.data.test_public_overlap import write_copies

TINY = Path(__file__).parents[1] / "tune" / "tiny_dpaf.yaml"
_CLIS = {"train": train_main, "tune": tune_main}


def _refused(cli: str, argv: list[str], out: Path, capsys) -> str:
    where = ["--out", str(out / "run")] if cli == "train" else ["--storage", str(out)]
    with pytest.raises(SystemExit) as exit_info:
        run_cli(_CLIS[cli], ["dpaf", *argv, *where])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir()), f"a refused {cli} wrote files"
    return err


@pytest.mark.parametrize("cli", ["train", "tune"])
def test_public_validation_naming_the_training_data_is_refused(cli, capsys, tmp_path) -> None:
    err = _refused(cli, ["--dataset", "digits", "--public-validation", "digits"],
                   tmp_path / "out", capsys)
    assert "--public-validation digits names the sensitive training dataset" in err


def test_the_refusal_comes_from_the_command_line_before_ray(tmp_path: Path) -> None:
    """``python -m raydp_synth.train`` as a user runs it: exit 2, one line, no run
    directory, and Ray never started in that process."""
    script = ("import sys\n"
              "from raydp_synth.cli import run_cli\n"
              "from raydp_synth.train.__main__ import main\n"
              "try:\n"
              "    run_cli(main, sys.argv[1:])\n"
              "finally:\n"
              "    ray = sys.modules.get('ray')\n"
              "    print('ray started' if ray is not None and ray.is_initialized() else 'no ray')\n")
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-c", script, "dpaf", "--dataset", "digits",
                           "--public-validation", "digits", "--out", str(out)],
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "names the sensitive training dataset" in lines[0]
    assert done.stdout.strip() == "no ray" and not out.exists()


@pytest.mark.parametrize(("cli", "flag"), [("train", "--public-validation"),
                                           ("tune", "--public-validation"),
                                           ("train", "--public"),
                                           ("tune", "--tune-on-public")])
def test_a_copy_of_the_training_data_under_another_name_is_refused(cli, flag, capsys, tmp_path
                                                                   ) -> None:
    training, copy = write_copies(tmp_path / "data")
    space = ["--search-space", str(TINY)] if cli == "tune" else []
    err = _refused(cli, ["--dataset", training, flag, copy, *space], tmp_path / "out", capsys)
    assert copy in err and "byte-identical to records of the sensitive dataset" in err


@pytest.mark.parametrize("cli", ["train", "tune"])
def test_the_digits_written_to_parquet_are_refused_as_public_validation(cli, capsys, tmp_path
                                                                         ) -> None:
    from raydp_synth.data import write_parquet
    from raydp_synth.data.digits import load_digits_raw

    raw = load_digits_raw()
    write_parquet(tmp_path / "mine.parquet", raw.images, raw.labels, raw.class_names)
    copy = f"parquet:{tmp_path / 'mine.parquet'}"
    err = _refused(cli, ["--dataset", "digits", "--public-validation", copy],
                   tmp_path / "out", capsys)
    assert "100% of its records are byte-identical" in err
