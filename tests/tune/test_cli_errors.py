"""The tune CLI: bad input gets one clear line and exit code 2, before Ray starts."""

from __future__ import annotations

import pytest

from raydp_synth.cli import run_cli
from raydp_synth.tune.__main__ import main


@pytest.mark.parametrize(("argv", "needle"), [
    (["dpaf", "--epsilon", "0"], "epsilon 0"),
    (["dpaf", "--delta", "0.01"], "1/|D|"),
    # 1/|D| = 1/1797 < 6e-4 < 1/n: the whole sensitive dataset, not the training split.
    (["dpaf", "--delta", "0.0006"], "the |D|=1797 records of the sensitive dataset"),
    (["dpaf", "--trials", "0"], "--trials"),
    (["dpaf", "--strategy", "random-stopping", "--sampler", "tpe"], "--strategy compose"),
    (["dpaf", "--strategy", "random-stopping", "--distribution", "zipf"], "zipf"),
    (["dpaf", "--search-space", "/nonexistent/space.yaml"], "/nonexistent/space.yaml"),
    (["dpaf", "--name", "x", "--resume"], "--resume"),
    (["dpaf", "--score-share", "1"], "budget share 1"),
    (["nosuchmethod"], "registered methods"),
    (["dpaf", "--synthetic-samples", "0"], "synthetic samples 0"),
    (["dpaf", "--num-classes", "4"], "'digits' has 10 classes, not 4"),
    (["dpaf", "--dataset", "idx:/nonexistent/mnist:classes=10", "--num-classes", "3"],
     "class count 3 disagrees"),
    (["dpaf", "--fid-weights", "/nonexistent/inception.pth"], "/nonexistent/inception.pth"),
    (["dpaf", "--set", "no_such_setting=1"], "no_such_setting"),
    (["dpaf", "--set", "epochs=abc"], "epochs"),
    (["dpaf", "--set", "epochs"], "key=value"),
    (["dpaf", "--default-share", "0.5"], "already runs it first"),
    (["dpaf", "--strategy", "random-stopping", "--default-share", "1.5"], "[0, 1]"),
    (["dpaf", "--strategy", "subsampled", "--default-share", "1"], "selects nothing"),
    (["dpaf", "--strategy", "random-stopping", "--distribution", "geometric",
      "--sampler", "dp-hypo", "--default-share", "1"], "nothing to adapt"),
    (["dpwgan", "--epsilon", "1", "--strategy", "random-stopping", "--distribution",
      "geometric", "--sampler", "dp-hypo", "--hypo-c", "1.25", "--trials", "8"],
     "costs epsilon 1.35 at delta 1e-05 before any trial trains"),
])
def test_bad_study_input_is_one_clear_line(argv, needle, capsys, tmp_path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, [*argv, "--storage", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    assert needle in err
    assert not any(tmp_path.iterdir()), "a refused study wrote files"


def test_restarts_refuse_a_space_that_leaves_out_a_default(capsys, tmp_path_factory) -> None:
    """--default-share 1 promises restarts of the default: a user's space whose range
    excludes a default value (dpwgan's n_critic 1) would draw it at random in every
    restart, so the study is refused, with the fix, before anything is written."""
    space = tmp_path_factory.mktemp("space") / "dpwgan.yaml"
    space.write_text("method: dpwgan\nparams:\n  n_critic: {type: int, low: 2, high: 3}\n"
                     "  lr_d: {type: float, low: 3.0e-4, high: 3.0e-3, log: true}\n")
    storage = tmp_path_factory.mktemp("storage")
    argv = ["dpwgan", "--strategy", "random-stopping", "--sampler", "random",
            "--default-share", "1", "--search-space", str(space), "--storage", str(storage)]
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    assert "n_critic" in err and "lr_d" not in err and "--set n_critic=" in err
    assert not any(storage.iterdir()), "a refused study wrote files"


def test_an_existing_study_is_not_overwritten(capsys, tmp_path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "ledger.jsonl").write_text("{}\n")
    with pytest.raises(SystemExit):
        run_cli(main, ["dpaf", "--storage", str(tmp_path), "--name", "taken"])
    assert "--resume" in capsys.readouterr().err
    assert (tmp_path / "taken" / "ledger.jsonl").read_text() == "{}\n"


def test_storage_that_is_a_file_is_one_clear_line(capsys, tmp_path) -> None:
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, ["dpaf", "--storage", str(tmp_path / "file"), "--name", "x"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "is a file, not a folder" in err and "\n" not in err
    assert (tmp_path / "file").read_text() == "not a folder"
