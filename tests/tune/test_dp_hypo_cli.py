"""``--sampler dp-hypo`` / ``--hypo-c``: refused with one clear line, before Ray starts,
unless under random stopping with a truncated negative binomial trial count."""

from __future__ import annotations

import pytest

from raydp_synth.cli import run_cli
from raydp_synth.errors import ConfigError
from raydp_synth.tune.__main__ import build_parser, main
from raydp_synth.tune.study import StudyRequest

RS = ["--strategy", "random-stopping", "--distribution", "geometric", "--sampler", "dp-hypo"]


@pytest.mark.parametrize(("argv", "needle"), [
    (["dpaf", "--sampler", "dp-hypo"], "add --strategy random-stopping"),
    (["dpaf", *RS, "--hypo-c", "0.5"], "--hypo-c 0.5 must be"),
    (["dpaf", *RS, "--hypo-c", "inf"], "--hypo-c inf must be"),
    (["dpaf", "--strategy", "random-stopping", "--sampler", "dp-hypo"], "truncated negative"),
])
def test_bad_dp_hypo_input_is_one_clear_line(argv, needle, capsys, tmp_path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, [*argv, "--storage", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and needle in err
    assert not any(tmp_path.iterdir())


def test_dp_hypo_request_is_accepted_under_random_stopping() -> None:
    args = build_parser().parse_args(["dpaf", *RS, "--hypo-c", "3"])
    assert args.sampler == "dp-hypo" and args.hypo_c == 3.0
    request = StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, strategy="random-stopping",
                           distribution="geometric", sampler="dp-hypo", hypo_c=3.0)
    assert request.density_ratio == 3.0
    plain = StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, strategy="random-stopping",
                         distribution="geometric", sampler="random", hypo_c=3.0)
    assert plain.density_ratio == 1.0  # c only prices dp-hypo
    with pytest.raises(ConfigError, match="--sampler random or dp-hypo"):
        StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, strategy="random-stopping",
                     sampler="tpe")
