"""``--keep-cluster`` of train and tune, without Ray: a command that stops before it
needs Ray starts no cluster and prints no cluster line (the Ray side:
tests/runtime/test_local_cluster.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from raydp_synth.cli import run_cli
from raydp_synth.runtime.local_cluster import keep_requested
from raydp_synth.train.__main__ import main as train_main
from raydp_synth.tune.__main__ import main as tune_main


@pytest.mark.parametrize("main", [train_main, tune_main], ids=["train", "tune"])
def test_a_user_error_with_keep_cluster_starts_nothing(main: Callable[[list[str] | None], int],
                                                       capsys, tmp_path) -> None:
    out = ["--out", str(tmp_path / "run")] if main is train_main else [
        "--storage", str(tmp_path / "studies")]
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, ["dpaf", "--epsilon", "0", "--keep-cluster", *out])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("error: ") and "epsilon 0" in captured.err
    assert "stays up" not in captured.out + captured.err
    assert not keep_requested()
    assert not any(tmp_path.iterdir())
