"""What leaves a worker is checked against the method's privacy-safe allow-list."""

from __future__ import annotations

import pytest

from raydp_synth.methods import get_method
from raydp_synth.train.worker import Reporter, UnsafeMetricError


def test_allowed_metrics_pass_and_are_floats() -> None:
    reporter = Reporter(get_method("dpaf").metric_allowlist, rank=0)
    assert reporter.check({"epoch": 3, "g_loss": 0.5}) == {"epoch": 3.0, "g_loss": 0.5}


@pytest.mark.parametrize("key", ["d_loss_real", "classifier_loss", "train_accuracy", "grad_norm"])
def test_unsafe_metric_is_refused(key: str) -> None:
    reporter = Reporter(get_method("dpaf").metric_allowlist, rank=0)
    with pytest.raises(UnsafeMetricError, match=key):
        reporter.check({"epoch": 1, key: 0.1})
