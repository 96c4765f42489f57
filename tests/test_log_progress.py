"""Progress within a long phase (log.phase_progress): a line at each quarter where no
bar is drawn, with an honest time left; the classifiers count their steps into it."""

from __future__ import annotations

import re

import numpy as np

from raydp_synth.evaluation.classifiers import fit_classifier
from raydp_synth.log import Verbosity, configure_console, phase_progress


def test_a_log_gets_a_line_at_each_quarter_with_the_time_left(capsys) -> None:
    configure_console(Verbosity.DEFAULT)
    with phase_progress(8, "domain CNN (40 images)") as bar:
        for _ in range(8):
            bar.update()
    lines = [line for line in capsys.readouterr().out.splitlines() if "domain CNN" in line]
    assert [re.search(r"(\d+)/8 steps", line).group(1) for line in lines] == ["2", "4", "6", "8"]
    assert all("s left" in line for line in lines[:-1]) and "left" not in lines[-1]


def test_quiet_prints_nothing(capsys) -> None:
    configure_console(Verbosity.QUIET)
    try:
        with phase_progress(4, "CAS cnn") as bar:
            for _ in range(4):
                bar.update()
    finally:
        configure_console(Verbosity.DEFAULT)
    assert "CAS cnn" not in capsys.readouterr().out


def test_the_cnn_counts_each_optimiser_step() -> None:
    rng = np.random.default_rng(0)
    images = rng.random((30, 1, 8, 8), dtype=np.float32)
    steps: list[int] = []
    fit_classifier("cnn", images, np.arange(30) % 3, num_classes=3, seed=0, cnn_steps=7,
                   on_step=lambda: steps.append(1))
    assert len(steps) == 7
