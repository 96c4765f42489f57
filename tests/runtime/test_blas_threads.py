"""scikit-learn's fits in the evaluation and PrivImage's semantic query run on one
BLAS thread (runtime/resources.one_blas_thread)."""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_info

from raydp_synth.evaluation.classifiers import fit_classifier
from raydp_synth.runtime.resources import one_blas_thread


def _blas_threads() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


def test_one_blas_thread_inside_and_the_old_count_after() -> None:
    before = _blas_threads()
    with one_blas_thread():
        assert _blas_threads() == {1}
    assert _blas_threads() == before


def test_the_logistic_regression_fits_and_predicts_on_one_blas_thread(monkeypatch) -> None:
    """The classifier's own fit and predict see one BLAS thread (read inside them)."""
    from sklearn.linear_model import LogisticRegression

    seen: list[set[int]] = []
    fit, predict = LogisticRegression.fit, LogisticRegression.predict

    def watched_fit(self, *args, **kwargs):
        seen.append(_blas_threads())
        return fit(self, *args, **kwargs)

    def watched_predict(self, *args, **kwargs):
        seen.append(_blas_threads())
        return predict(self, *args, **kwargs)

    monkeypatch.setattr(LogisticRegression, "fit", watched_fit)
    monkeypatch.setattr(LogisticRegression, "predict", watched_predict)
    rng = np.random.default_rng(0)
    images = rng.random((60, 1, 8, 8), dtype=np.float32)
    labels = np.arange(60) % 3
    model = fit_classifier("logreg", images, labels, num_classes=3, seed=0)
    assert model.predict(images).shape == (60,)
    assert seen == [{1}, {1}]
