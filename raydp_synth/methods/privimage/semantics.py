"""PrivImage's semantic query and DP semantic distribution (Li et al. 2024, PrivImage
sections 3.2-3.3, Theorem 3.1, Algorithm 2).

* The **semantic query function** Q is a classifier trained on the declared public
  labelled data (its labels are the semantics; the paper: ResNet50 on ImageNet).
  Here: multinomial logistic regression on the public images (deterministic, the
  same on every rank), enough for the embedded default, whose public part carries
  the digit labels as semantics.
* **DP semantic distribution**: each sensitive image adds 1 to the bins of its
  top-k1 semantics, in the histogram of its own class (conditional generation) or
  in one global histogram. Each image contributes k1 ones to one histogram, so the
  L2 sensitivity of the whole release (all class histograms) is sqrt(k1), and the
  release is one Gaussian mechanism: counts + N(0, (z sqrt(k1))^2) per bin, z the
  plan's multiplier of the mechanism ``semantic_query`` (the one source of the
  noise; the paper's sigma_2 is z). No subsampling (q = 1), one release.
* **Selection** is post-processing of the noisy histogram: class c keeps its top-k2
  semantics (ties broken by the lower semantic index), and its pre-training set is
  every public image of those semantics, relabelled c (an image chosen by two
  classes appears once for each).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from raydp_synth.data import ImageDataset
from raydp_synth.privacy.noise import noisy_sum
from raydp_synth.runtime.resources import one_blas_thread

__all__ = ["SelectionCollapsed", "SemanticQuery", "collapsed_classes", "describe_selection",
           "release_semantic_distribution", "select_public", "semantic_histogram"]


class SelectionCollapsed(RuntimeError):
    """Several classes selected the same public semantics (``strict_selection``)."""


class SemanticQuery:
    """Q: public images -> semantic scores; trained on public data only.

    Args:
        public: the declared public records; their labels are the semantics.
        seed: public seed.
    """

    def __init__(self, public: ImageDataset, *, seed: int = 0) -> None:
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegression

        semantics = np.unique(public.labels)
        if len(semantics) < 2:
            raise ValueError("the semantic query needs public images of at least two semantics")
        self.model = LogisticRegression(max_iter=500, random_state=seed)
        with warnings.catch_warnings(), one_blas_thread():
            warnings.simplefilter("ignore", ConvergenceWarning)
            self.model.fit(public.images.reshape(len(public), -1), public.labels)
        self.semantics = self.model.classes_  # semantic index s -> public label value
        self.public_semantics = np.searchsorted(self.semantics, public.labels)

    @property
    def num_semantics(self) -> int:
        return len(self.semantics)

    def top_k(self, images: np.ndarray, k1: int) -> np.ndarray:
        """``int [N, min(k1, S)]``: each image's k1 most probable semantics (distinct)."""
        if len(images) == 0:
            return np.zeros((0, min(k1, self.num_semantics)), dtype=np.int64)
        with one_blas_thread():
            scores = self.model.predict_proba(np.asarray(images).reshape(len(images), -1))
        order = np.argsort(-scores, axis=1, kind="stable")
        return order[:, : min(k1, self.num_semantics)].astype(np.int64)


def semantic_histogram(top: np.ndarray, labels: np.ndarray, *, num_semantics: int,
                       num_classes: int, conditional: bool) -> torch.Tensor:
    """Counts ``[classes, semantics]`` (one row if unconditional) of the records'
    top-k1 semantics: the pre-noise sum of the query (sensitivity sqrt(k1))."""
    rows = num_classes if conditional else 1
    hist = np.zeros((rows, num_semantics), dtype=np.float64)
    if len(top):
        row = np.asarray(labels, dtype=np.int64) if conditional else np.zeros(len(top), np.int64)
        np.add.at(hist, (np.repeat(row, top.shape[1]), top.ravel()), 1.0)
    return torch.as_tensor(hist, dtype=torch.float32)


def release_semantic_distribution(local_hist: torch.Tensor, *, noise_multiplier: float,
                                  sensitivity: float, generator: torch.Generator | None
                                  ) -> torch.Tensor:
    """The DP release: the sum over workers of the local histograms plus
    N(0, (noise_multiplier * sensitivity)^2) per bin, added once (rank 0)."""
    flat = noisy_sum(local_hist.flatten(), noise_std=noise_multiplier * sensitivity,
                     generator=generator)
    return flat.view_as(local_hist)


def select_public(noisy: torch.Tensor, public: ImageDataset, public_semantics: np.ndarray, *,
                  k2: int, conditional: bool, num_classes: int) -> tuple[ImageDataset, np.ndarray]:
    """Post-processing: each class's top-k2 semantics and its relabelled public images.

    Returns:
        ``(pre-training set, chosen [rows, k2] semantic indices)``.
    """
    values = noisy.double().numpy()
    chosen = np.argsort(-values, axis=1, kind="stable")[:, : min(k2, values.shape[1])]
    images, labels = [], []
    for row, semantics in enumerate(chosen):
        idx = np.flatnonzero(np.isin(public_semantics, semantics))
        images.append(public.images[idx])
        # Conditional: relabelled with the class it was chosen for; unconditional:
        # one constant label (the networks see no label).
        labels.append(np.full(len(idx), row if conditional else 0, dtype=np.int64))
    selected = ImageDataset(images=np.concatenate(images), labels=np.concatenate(labels),
                            num_classes=num_classes, name=f"{public.name} (selected)", public=True)
    return selected, chosen


def collapsed_classes(chosen: np.ndarray) -> list[list[int]]:
    """Groups (two or more classes each) that selected the same set of semantics.

    A class-conditional pre-training set is only as good as the classes' distinct
    selections: classes that collapse onto the same public images pre-train the
    same thing (seen with a semantic query trained on upscaled 8x8 digits and
    applied to MNIST: all ten classes chose the images of one digit).
    """
    groups: dict[tuple[int, ...], list[int]] = {}
    for row, semantics in enumerate(np.asarray(chosen)):
        groups.setdefault(tuple(sorted(int(s) for s in semantics)), []).append(row)
    return [rows for rows in groups.values() if len(rows) > 1]


def describe_selection(noisy: torch.Tensor, semantics: np.ndarray, chosen: np.ndarray, *,
                       top: int = 3) -> list[str]:
    """One line per class: its chosen semantics and its largest noisy counts. The
    counts are the DP release itself (post-processing), safe to print."""
    values = noisy.double().numpy()
    lines = []
    for row, picked in enumerate(np.asarray(chosen)):
        order = np.argsort(-values[row], kind="stable")[:top]
        counts = ", ".join(f"{semantics[s]}: {values[row, s]:.1f}" for s in order)
        lines.append(f"class {row}: chose {[semantics[s].item() for s in picked]} "
                     f"(largest noisy counts {counts})")
    return lines
