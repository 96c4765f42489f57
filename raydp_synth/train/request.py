"""What a training run's request and a study's request share: the method, the
budget, the dataset and the data declared public, the selection score, the
release and the device (:class:`RequestCore`).

:class:`~raydp_synth.train.driver.TrainRequest` and
:class:`~raydp_synth.tune.study.StudyRequest` extend it with what is their own (a
run's output folder and reproducibility seed; a study's strategy, trials and
storage). The shared fields are validated here, once, at the edge; a refusal is one
line naming the flag and its value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Self

from raydp_synth.data import parse_public_spec
from raydp_synth.data.public import absolute_public_spec, check_public_validation
from raydp_synth.data.spec import absolute_spec
from raydp_synth.evaluation.inception import resolve_weights
from raydp_synth.evaluation.selection import DEFAULT_SCORE_CLASSIFIER, validate_score_settings
from raydp_synth.privacy.selection_score import DEFAULT_SCORE_SHARE
from raydp_synth.release.bundle import DEFAULT_SYNTHETIC_SAMPLES, validate_synthetic_samples

__all__ = ["RequestCore"]


@dataclass(frozen=True, kw_only=True)
class RequestCore:
    """The fields a training run's and a study's request share.

    Attributes:
        method: registered method name.
        epsilon, delta: the privacy budget (a run's; the whole search's).
        dataset: dataset spec (``digits``, ``mnist:DIR``, ``idx:DIR``, ``folder:DIR``, ...).
        settings: method settings (``--set key=value``); a study fixes them in
            every trial.
        use_gpu: one GPU per worker.
        seed: the public seed (data split, initialisation, the score's classifier).
        score_share: fraction of the budget for the private selection score.
        score_classifier: classifier trained on synthetic data for the score.
        public: data declared public (``SPEC`` or ``SPEC:fraction=F``, see
            :mod:`raydp_synth.data.public`), handed to the method to use without
            noise; not covered by the guarantee.
        public_validation: a dataset spec declared public: the score uses it at no
            privacy cost (no score mechanism in the plan).
        evaluate: run the curator's evaluation (CAS, FID, IS, curve) at the end.
        synthetic_samples: rows of the release's ``synthetic.parquet`` (the user's
            choice; never n).
        fid_weights: the FID Inception-v3 weights of the evaluation (None: the
            torch hub cache's, if there).
        compile_step: the loop's per-record gradients compiled (``--compile-step``).
    """

    method: str
    epsilon: float
    delta: float
    dataset: str = "digits"
    settings: Mapping[str, Any] = field(default_factory=dict)
    use_gpu: bool = False
    seed: int = 0
    score_share: float = DEFAULT_SCORE_SHARE
    score_classifier: str = DEFAULT_SCORE_CLASSIFIER
    public: str | None = None
    public_validation: str | None = None
    evaluate: bool = True
    synthetic_samples: int = DEFAULT_SYNTHETIC_SAMPLES
    fid_weights: Path | None = None
    compile_step: bool = False

    def __post_init__(self) -> None:
        """Validate the shared fields (the budget is each request's own: a
        non-private run has no epsilon).

        Raises:
            ConfigError, DataError: one line naming the flag and its value.
        """
        validate_score_settings(self.score_share, self.score_classifier)
        validate_synthetic_samples(self.synthetic_samples)
        if self.fid_weights is not None:
            resolve_weights(self.fid_weights)
        if self.public is not None:
            parse_public_spec(self.public)
        if self.public_validation is not None:
            check_public_validation(self.public_validation, dataset=self.dataset)

    def with_absolute_paths(self) -> Self:
        """This request with its local dataset paths (``--dataset``, ``--public``,
        ``--public-validation``) absolute: Ray workers do not run in the user's
        working directory, so a relative path would name nothing there."""
        validation = self.public_validation
        return replace(self, dataset=absolute_spec(str(self.dataset)),
                       public=absolute_public_spec(self.public),
                       public_validation=absolute_spec(validation) if validation else None)
