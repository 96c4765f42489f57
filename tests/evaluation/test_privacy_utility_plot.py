"""privacy_utility.png: the released generator appears once in each panel, the CAS
panel has a labelled chance line (1/K)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from raydp_synth.evaluation.report import (
    _mark_released_once,
    _same_weights,
    plot_privacy_utility,
    privacy_utility_figure,
)


def _result(released: list[bool], *, final: dict[str, float] | None = None) -> dict[str, Any]:
    curve = [{"epoch": i + 1, "step": 10 * (i + 1), "epsilon_spent": 1.0 + i,
              "cas_logreg": 0.2 + 0.1 * i, "fid_cnn": 50.0 - i, "is_cnn": 2.0 + i,
              "released": r} for i, r in enumerate(released)]
    return {"method": "dpaf", "dataset": "digits", "epsilon": 3.2, "private": True,
            "num_classes": 10, "curve": curve,
            "final": final if final is not None else
            {"cas_logreg": 0.55, "cas_mlp": 0.6, "fid_cnn": 40.0, "is_cnn": 4.5},
            "reference": {"is_cnn_real_test": 8.0}}


def _legend(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def _stars(ax) -> list[tuple[float, float]]:
    return [(float(line.get_xdata()[0]), float(line.get_ydata()[0])) for line in ax.get_lines()
            if line.get_marker() == "*"]


def test_the_released_checkpoint_is_one_star_at_its_final_figure() -> None:
    figure = privacy_utility_figure(_result([False, False, True]))
    cas, fid, inception = figure.axes
    for ax, value in ((cas, 0.55), (fid, 40.0), (inception, 4.5)):
        assert _legend(ax).count("released generator") == 1
        assert _stars(ax) == [(3.0, value)]  # at its checkpoint's epsilon, the final figure
        assert not any(line.get_ydata()[0] == value and line.get_linestyle() == ":"
                       for line in ax.get_lines())  # no second, horizontal "released"
    assert "chance (1/10 = 0.1)" in _legend(cas)
    (chance,) = [line for line in cas.get_lines() if line.get_linestyle() == "--"]
    assert list(chance.get_ydata()) == [0.1, 0.1]
    assert all("chance" not in text for ax in (fid, inception) for text in _legend(ax))
    assert "real test images" in _legend(inception)
    assert figure._suptitle.get_text() == "dpaf on digits: epsilon=3.2"


def test_without_a_released_checkpoint_the_release_is_one_line() -> None:
    figure = privacy_utility_figure(_result([False, False]))
    for ax in figure.axes:
        assert _legend(ax).count("released generator") == 1 and _stars(ax) == []


def test_the_plot_file_is_written(tmp_path) -> None:
    plot_privacy_utility(_result([True]), tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_only_the_last_checkpoint_with_the_released_weights_is_the_release() -> None:
    a, b = {"w": torch.ones(2)}, {"w": torch.zeros(2)}
    assert _same_weights({"w": torch.ones(2)}, a) and not _same_weights(b, a)
    assert not _same_weights({"v": torch.ones(2)}, a)
    curve = [{"released": True}, {"released": False}, {"released": True}]
    _mark_released_once(curve)
    assert [p["released"] for p in curve] == [False, False, True]


@pytest.mark.parametrize("released", [[], [True]])
def test_short_curves_draw(released: list[bool]) -> None:
    figure = privacy_utility_figure(_result(released))
    assert all(_legend(ax).count("released generator") == 1 for ax in figure.axes)
