"""``--strategy`` names the search strategy; ``--selection``, its former name, still
works, and ``study.json`` keeps the strategy under its persisted key ``"selection"``."""

from __future__ import annotations

from pathlib import Path

import pytest

from raydp_synth.tune.__main__ import build_parser, study_request
from raydp_synth.tune.study import request_json


@pytest.mark.parametrize("flag", ["--strategy", "--selection"])
def test_either_flag_chooses_the_strategy(flag: str, tmp_path: Path) -> None:
    args = build_parser().parse_args(["dpaf", flag, "random-stopping",
                                      "--storage", str(tmp_path)])
    request = study_request(args)
    assert request.strategy == "random-stopping"
    assert request.search_strategy.name == "random-stopping"


def test_study_json_keeps_the_persisted_key(tmp_path: Path) -> None:
    request = study_request(build_parser().parse_args(["dpaf", "--storage", str(tmp_path)]))
    recorded = request_json(request)
    assert recorded["selection"] == "compose" and "strategy" not in recorded
