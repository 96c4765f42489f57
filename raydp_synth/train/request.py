"""What a training run's request and a study's request share: the method, the
budget, the dataset and the data declared public, the selection score, the
release and the device (:class:`RequestCore`).

:class:`~raydp_synth.train.driver.TrainRequest` and
:class:`~raydp_synth.tune.study.StudyRequest` extend it with what is their own (a
run's output folder and reproducibility seed; a study's strategy, trials and
storage). The shared fields are validated here, once, at the edge; a refusal is one
line naming the flag and its value. The dataset specs and the public declaration are
parsed here too, once (a caller may give them as text): the request carries them
typed (:class:`~raydp_synth.data.spec.DatasetSpec`,
:class:`~raydp_synth.data.public.PublicDeclaration`) to its trials and workers, and
files record their canonical strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Self

from raydp_synth.data.public import PublicDeclaration, check_public_validation, parse_public_spec
from raydp_synth.data.spec import DatasetSpec, parse_dataset_spec
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
        dataset: the dataset spec (``digits``, ``mnist:DIR``, ``idx:DIR``,
            ``folder:DIR``, ...); given as text, it is parsed once, here.
        settings: method settings (``--set key=value``); a study fixes them in
            every trial.
        use_gpu: one GPU per worker.
        seed: the public seed (data split, initialisation, the score's classifier).
        score_share: fraction of the budget for the private selection score.
        score_classifier: classifier trained on synthetic data for the score.
        public: data declared public (``SPEC`` or ``SPEC:fraction=F``, see
            :mod:`raydp_synth.data.public`), handed to the method to use without
            noise; not covered by the guarantee. Given as text, it is parsed once,
            here.
        public_validation: a dataset spec declared public: the score uses it at no
            privacy cost (no score mechanism in the plan). Given as text, it is
            parsed once, here.
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
    dataset: DatasetSpec = DatasetSpec(kind="digits")
    settings: Mapping[str, Any] = field(default_factory=dict)
    use_gpu: bool = False
    seed: int = 0
    score_share: float = DEFAULT_SCORE_SHARE
    score_classifier: str = DEFAULT_SCORE_CLASSIFIER
    public: PublicDeclaration | None = None
    public_validation: DatasetSpec | None = None
    evaluate: bool = True
    synthetic_samples: int = DEFAULT_SYNTHETIC_SAMPLES
    fid_weights: Path | None = None
    compile_step: bool = False

    def __post_init__(self) -> None:
        """Parse the dataset specs and the public declaration given as text (the
        fields hold the typed values from here on), and validate the shared fields
        (the budget is each request's own: a non-private run has no epsilon).

        Raises:
            ConfigError, DataError: one line naming the flag and its value.
        """
        if isinstance(self.dataset, str):
            object.__setattr__(self, "dataset", parse_dataset_spec(self.dataset))
        if isinstance(self.public, str):
            object.__setattr__(self, "public", parse_public_spec(self.public))
        if isinstance(self.public_validation, str):
            object.__setattr__(self, "public_validation",
                               parse_dataset_spec(self.public_validation))
        validate_score_settings(self.score_share, self.score_classifier)
        validate_synthetic_samples(self.synthetic_samples)
        if self.fid_weights is not None:
            resolve_weights(self.fid_weights)
        if self.public_validation is not None:
            check_public_validation(self.public_validation, dataset=self.dataset)

    def with_absolute_paths(self) -> Self:
        """This request with its local dataset paths (``--dataset``, ``--public``,
        ``--public-validation``) absolute: Ray workers do not run in the user's
        working directory, so a relative path would name nothing there."""
        validation = self.public_validation
        return replace(self, dataset=self.dataset.absolute(),
                       public=self.public.absolute() if self.public is not None else None,
                       public_validation=validation.absolute() if validation is not None else None)
