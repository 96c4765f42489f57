"""Evaluate a run directory: ``evaluation.json`` and ``privacy_utility.png``.

Inputs: the run's ``release/`` generator, its checkpoints under ``ray/``, the
real **test** split (and a dataset declared public, if given). The sensitive
training and validation splits are never read here: the only access to them is
through the mechanisms of the run's plan (training, and the selection score that
the driver releases). The outputs are curator-only (beside ``release/``, never in
it): they read real test data without noise.

Figures (see :mod:`~raydp_synth.evaluation.metrics` for the choices), under
names that say their feature space:

* of the released generator: CAS with the three classifiers (``cas_<classifier>``),
  the domain-CNN FID and IS (``fid_cnn``, ``is_cnn``), its precision, recall and
  intra-class diversity (``precision_cnn``, ``recall_cnn``, ``diversity_cnn``:
  :func:`diversity_figures`), and, when the FID
  Inception-v3 weights are on this machine (:mod:`~raydp_synth.evaluation.inception`),
  the field's ``fid_inception``, ``is_inception``, ``precision`` and ``recall``; the
  ``inception`` block of ``evaluation.json`` records the weights file, its sha256
  and the sample counts, or ``available: false`` and why;
* along training, at each checkpoint, CAS (logistic regression), ``fid_cnn`` and
  ``is_cnn`` against the epsilon the training had spent so far (the
  privacy-utility curve).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from raydp_synth.data import DatasetSplits, ImageDataset, load_dataset
from raydp_synth.data.public import load_public_records
from raydp_synth.data.spec import DatasetSpec
from raydp_synth.errors import ConfigError
from raydp_synth.evaluation.classifiers import (
    CLASSIFIER_KINDS,
    CLASSIFIER_STEPS,
    DEFAULT_CLASSIFIERS,
    CNNClassifier,
    fit_classifier,
)
from raydp_synth.evaluation.inception import (
    InceptionFeatures,
    inception_figures,
    missing_weights_note,
    resolve_weights,
)
from raydp_synth.evaluation.metrics import (
    frechet_distance,
    inception_score,
    intra_class_diversity,
    precision_recall,
)
from raydp_synth.log import phase_progress, progress
from raydp_synth.methods import get_method
from raydp_synth.release.generator import TrainedGenerator

__all__ = [
    "EVALUATION_FILE",
    "PLOT_FILE",
    "EvaluationSettings",
    "default_settings",
    "diversity_figures",
    "evaluate_generator",
    "evaluate_run",
    "format_table",
    "plot_privacy_utility",
    "privacy_utility_figure",
    "run_checkpoints",
    "spread_checkpoints",
]

_LOG = logging.getLogger(__name__)

EVALUATION_FILE = "evaluation.json"
PLOT_FILE = "privacy_utility.png"
#: In the release, only with a public reference network: the domain-CNN IS against epsilon.
PUBLIC_CURVE_PLOT = "is_cnn_curve.png"
PUBLIC_CURVE_JSON = "is_cnn_curve.json"


@dataclass(frozen=True, kw_only=True)
class EvaluationSettings:
    """How much synthetic data and compute an evaluation spends.

    Attributes:
        num_synthetic: synthetic images (labels balanced) for the final figures
            (None: the run's method's ``evaluation_samples``).
        curve_synthetic: synthetic images per checkpoint of the curve (None: idem).
        classifiers: CAS classifiers of the final figures.
        curve_classifier: the CAS classifier of the curve.
        seed: public seed of latents and classifier training.
        feature_steps: training steps of the domain-CNN FID/IS network.
        curve_checkpoints: checkpoints the privacy-utility curve evaluates, evenly
            spread and always including the last (None: every checkpoint).
        device: where sampling and the networks run (``"cuda"`` after a GPU run).
        fid_weights: the FID Inception-v3 weights file (None: the torch hub cache's,
            if there; without weights the Inception figures are skipped).
        inception_samples: synthetic images of the Inception figures (None:
            ``num_synthetic``; the field uses 10,000), against as many real test
            images at most (the whole test split when it is smaller, else a seeded
            random subset). Inception-v3 at 299x299 costs about 6 GFLOPs an image:
            seconds on a GPU, about an hour per 10,000 images on a few CPU cores.
    """

    num_synthetic: int | None = None
    curve_synthetic: int | None = None
    classifiers: tuple[str, ...] = DEFAULT_CLASSIFIERS
    curve_classifier: str = "logreg"
    seed: int = 0
    feature_steps: int = 400
    curve_checkpoints: int | None = None
    device: str = "cpu"
    fid_weights: Path | None = None
    inception_samples: int | None = None

    def __post_init__(self) -> None:
        if self.curve_checkpoints is not None and self.curve_checkpoints < 0:
            raise ConfigError(f"the curve's checkpoint count {self.curve_checkpoints} must be >= 0")
        for kind in (*self.classifiers, self.curve_classifier):
            if kind not in CLASSIFIER_KINDS:
                raise ConfigError(f"unknown classifier {kind!r}; choose from {CLASSIFIER_KINDS}")
        if any(n is not None and n < 20 for n in (self.num_synthetic, self.curve_synthetic,
                                                  self.inception_samples)):
            raise ConfigError("evaluate at least 20 synthetic images")
        if self.fid_weights is not None:
            resolve_weights(self.fid_weights)


#: The k of the improved precision/recall (Kynkaanniemi et al. 2019's choice).
PRECISION_RECALL_K = 3

#: The share of the test split held out of the domain CNN's training when it trains on
#: the test split (no public reference): its accuracy and the real images' IS are
#: measured there, on images it never saw.
HELD_OUT_SHARE = 0.2


def held_out_split(test: ImageDataset, *, share: float = HELD_OUT_SHARE,
                   seed: int = 0) -> tuple[ImageDataset, ImageDataset]:
    """(training part, held-out part) of ``test``: in each class, a seeded
    ``round(share x count)`` of its images (at least one of a class with two or more)
    are held out. The curator's evaluation reads the test split only; both parts are
    test images."""
    rng = np.random.default_rng(seed)
    held = []
    for label in np.unique(test.labels):
        members = np.flatnonzero(test.labels == label)
        count = min(len(members) - 1, max(1, round(share * len(members))))
        if count > 0:
            held.append(rng.choice(members, count, replace=False))
    held_out = np.sort(np.concatenate(held)) if held else np.zeros(0, dtype=np.int64)
    keep = np.setdiff1d(np.arange(len(test)), held_out)
    return test.records_at(keep), test.records_at(held_out)


def feature_network(reference: ImageDataset, *, seed: int, steps: int,
                    device: str = "cpu") -> CNNClassifier:
    """The domain-CNN FID/IS network, trained on ``reference`` (public data or the
    test split)."""
    with phase_progress(steps, f"domain CNN ({len(reference)} images)") as bar:
        model = fit_classifier("cnn", reference.images, reference.labels,
                               num_classes=reference.num_classes, seed=seed, cnn_steps=steps,
                               device=device, on_step=bar.update)
    if not isinstance(model, CNNClassifier):
        raise TypeError(f"fit_classifier('cnn') returned a {type(model).__name__}")
    return model


def evaluate_generator(
    generator: TrainedGenerator,
    test: ImageDataset,
    features: CNNClassifier,
    *,
    classifiers: tuple[str, ...],
    num_synthetic: int,
    seed: int,
    device: str = "cpu",
    diversity: bool = False,
) -> dict[str, float]:
    """CAS (per classifier) and the domain-CNN FID and IS of one generator against
    the test split; with ``diversity``, also :func:`diversity_figures`."""
    images, labels = generator.balanced(num_synthetic, seed=seed)
    out: dict[str, float] = {}
    for kind in classifiers:
        steps = CLASSIFIER_STEPS.get(kind)
        with phase_progress(steps or 1, f"CAS {kind} on {len(images)} synthetic images") as bar:
            model = fit_classifier(kind, images, labels, num_classes=test.num_classes,
                                   seed=seed, device=device,
                                   on_step=bar.update if steps else None)
            if not steps:
                bar.update()
        out[f"cas_{kind}"] = float((model.predict(test.images) == test.labels).mean())
    synthetic_features = features.features(images)
    real_features = features.features(test.images)
    out["fid_cnn"] = frechet_distance(synthetic_features, real_features)
    out["is_cnn"] = inception_score(features.probabilities(images))
    if diversity:
        out.update(diversity_figures(real_features, test.labels, synthetic_features, labels,
                                     seed=seed))
    return out


def diversity_figures(real: np.ndarray, real_labels: np.ndarray, synthetic: np.ndarray,
                      synthetic_labels: np.ndarray, *, seed: int) -> dict[str, float]:
    """Beside CAS, the figures a generator that draws every class's samples alike
    cannot pass, in the domain CNN's feature space: ``precision_cnn`` and
    ``recall_cnn`` (:func:`~raydp_synth.evaluation.metrics.precision_recall`, on as
    many synthetic as real points, a seeded subset of the larger side: the k-NN radii
    shrink with a set's size, so unequal sets would bias the two against each other)
    and ``diversity_cnn``
    (:func:`~raydp_synth.evaluation.metrics.intra_class_diversity`). A figure the
    test split is too small for (precision and recall need more than k = 3 points a
    side; diversity a class with two real and two synthetic points) is left out, not
    failed: the other figures of the evaluation still stand."""
    rng = np.random.default_rng(seed)
    count = min(len(real), len(synthetic))

    def subset(points: np.ndarray) -> np.ndarray:
        if len(points) == count:
            return points
        return points[np.sort(rng.choice(len(points), count, replace=False))]

    out: dict[str, float] = {}
    if count > PRECISION_RECALL_K:
        out["precision_cnn"], out["recall_cnn"] = precision_recall(
            subset(real), subset(synthetic), k=PRECISION_RECALL_K)

    def classes_with_two(labels: np.ndarray) -> set[Any]:
        values, counts = np.unique(labels, return_counts=True)
        return set(values[counts >= 2].tolist())

    if classes_with_two(real_labels) & classes_with_two(synthetic_labels):
        out["diversity_cnn"] = intra_class_diversity(real, real_labels, synthetic,
                                                     synthetic_labels, seed=seed)
    return out


def run_checkpoints(root: Path) -> list[tuple[dict[str, float], Path]]:
    """(last reported metrics, checkpoint dir) of each checkpoint under ``root`` (a
    run's ``ray/`` folder, or a study's released trial), in training order."""
    found = []
    for metrics_path in root.glob("**/checkpoint_*/metrics.json"):
        history = json.loads(metrics_path.read_text())
        if history and (metrics_path.parent / "state.pt").is_file():
            found.append((history[-1], metrics_path.parent))
    return sorted(found, key=lambda item: (item[0].get("phase", 0), item[0].get("step", 0)))


def spread_checkpoints(items: list[Any], count: int | None) -> list[Any]:
    """``count`` of ``items`` evenly spread, the last always among them (None: all)."""
    if count is None or count >= len(items):
        return list(items)
    if count <= 0:
        return []
    last = len(items) - 1
    picks = sorted({round(last - i * last / count) for i in range(count)})
    return [items[i] for i in picks]


def default_settings(method: str, **overrides: Any) -> EvaluationSettings:
    """The evaluation settings of ``method``'s runs: its sample counts
    (``Method.evaluation_samples``), then ``overrides`` (None values ignored)."""
    final, curve = get_method(method).evaluation_samples
    values: dict[str, Any] = {"num_synthetic": final, "curve_synthetic": curve}
    values.update({k: v for k, v in overrides.items() if v is not None})
    return EvaluationSettings(**values)


def evaluate_run(
    run_dir: Path,
    *,
    splits: DatasetSplits | None = None,
    dataset: str | None = None,
    public_reference: DatasetSpec | None = None,
    settings: EvaluationSettings | None = None,
) -> dict[str, Any]:
    """Evaluate ``run_dir`` and write ``evaluation.json`` and the plot into it.

    Args:
        splits: the run's dataset splits, if already loaded (only ``test`` is read).
        dataset: spec of the run's dataset if it moved (default: run.json's).
        public_reference: a dataset declared public to train the domain-CNN FID/IS
            network on (default: the test split).
        settings: sizes, seeds, and the Inception weights.

    Returns:
        The dict written to ``evaluation.json``.
    """
    run_dir = Path(run_dir)
    run_file = run_dir / "run.json"
    if not run_file.is_file():
        raise ConfigError(f"{run_dir} is not a run directory (no run.json); "
                          "pass the output directory of a training run")
    run = json.loads(run_file.read_text())
    settings = default_settings(run["method"], **asdict(settings or EvaluationSettings()))
    if settings.num_synthetic is None or settings.curve_synthetic is None:
        raise RuntimeError("default_settings must resolve the synthetic sample counts")
    generator = TrainedGenerator.from_release(run_dir / "release")
    size = generator.data.image_size
    if splits is None:
        # A dataset that declares no class set is declared like the generator's.
        splits = load_dataset(dataset or run["dataset"], image_size=size,
                              seed=int(run.get("seed", 0)),
                              default_classes=generator.data.num_classes)
    test = splits.test
    if test.image_shape != (generator.data.channels, size, size):
        raise ConfigError(f"the dataset's images are {test.image_shape}, the generator's "
                          f"{(generator.data.channels, size, size)}; evaluate on the run's dataset")
    if test.num_classes != generator.data.num_classes:
        raise ConfigError(f"the dataset declares {test.num_classes} classes, the generator "
                          f"{generator.data.num_classes}; evaluate on the run's dataset")
    if public_reference is not None:
        reference = load_public_records(public_reference, like=test,
                                        what=f"the public reference data {public_reference}")
        reference_name = f"{public_reference} (public)"
        unseen, unseen_name = test, "the test split"
    else:
        # Trained on the test split less a held-out part, measured on that part: an
        # accuracy of the images it trained on would say nothing (1.0 on a small set).
        reference, unseen = held_out_split(test, seed=settings.seed)
        reference_name = "test split"
        unseen_name = (f"{len(unseen)} test images held out of its training "
                       f"({HELD_OUT_SHARE:.0%} of each class)")
    device = settings.device
    weights = resolve_weights(settings.fid_weights)
    # Loaded before any figure is computed: a bad weights file stops here.
    inception = InceptionFeatures(weights, device=device) if weights is not None else None
    generator = generator.on(device)
    checkpoints = spread_checkpoints(run_checkpoints(run_dir / run.get("checkpoints", "ray")),
                                     settings.curve_checkpoints)
    # Steps of the progress bar: the feature network, the final figures, the
    # Inception figures, one per checkpoint of the curve.
    steps = 2 + (inception is not None) + len(checkpoints)
    _LOG.info(f"evaluating {run_dir.name}: {len(settings.classifiers)} CAS classifiers on "
              f"{settings.num_synthetic} synthetic images, a {len(checkpoints)}-checkpoint "
              f"curve on {device}")
    with progress(steps, "evaluation") as bar:
        started = iter(range(1, steps + 1))

        def step(what: str) -> None:
            # On a terminal the bar names the step; in a log (no bar), one line each.
            bar.set_postfix_str(what)
            _LOG.log(logging.INFO if bar.disable else logging.DEBUG,
                     f"evaluation {next(started)}/{steps}: {what}")

        step(f"domain CNN on the {reference_name} ({settings.feature_steps} steps)")
        features = feature_network(reference, seed=settings.seed, steps=settings.feature_steps,
                                   device=device)
        bar.update()
        step(f"final figures ({', '.join(settings.classifiers)}, FID, IS, precision, recall, "
             "diversity)")
        final = evaluate_generator(generator, test, features, classifiers=settings.classifiers,
                                   num_synthetic=settings.num_synthetic, seed=settings.seed,
                                   device=device, diversity=True)
        bar.update()
        if inception is None:
            inception_record: dict[str, Any] = {"available": False,
                                                "reason": missing_weights_note()}
        else:
            count = settings.inception_samples or settings.num_synthetic
            step(f"Inception figures ({count} images)")
            synthetic, _ = generator.balanced(count, seed=settings.seed)
            real = test.images
            if len(real) > count:
                pick = np.random.default_rng(settings.seed).choice(len(real), count,
                                                                   replace=False)
                real = real[np.sort(pick)]
            figures, record = inception_figures(synthetic, real, inception)
            final.update(figures)
            inception_record = {"available": True, **record}
            bar.update()
        curve = []
        released_state = {k: v.detach().cpu()
                          for k, v in generator.module.state_dict().items()}
        for index, (metrics, ckpt) in enumerate(checkpoints, 1):
            step(f"curve checkpoint {index}/{len(checkpoints)}")
            state = torch.load(ckpt / "state.pt", map_location="cpu")
            point = evaluate_generator(generator.with_state(state["generator"]), test, features,
                                       classifiers=(settings.curve_classifier,),
                                       num_synthetic=settings.curve_synthetic,
                                       seed=settings.seed, device=device)
            curve.append({"epoch": metrics.get("epoch"), "step": metrics.get("step"),
                          "epsilon_spent": metrics.get("epsilon_spent"), **point,
                          "released": _same_weights(state["generator"], released_state)})
            bar.update()
    _mark_released_once(curve)
    privacy = json.loads((run_dir / "release" / "privacy.json").read_text())
    score_file = run_dir / "score.json"
    result: dict[str, Any] = {
        "run": str(run_dir),
        "method": run["method"],
        "dataset": run["dataset"],
        "epsilon": privacy.get("epsilon"),
        "delta": privacy.get("delta"),
        "private": privacy.get("private", True),
        "num_classes": test.num_classes,
        "selection_score": json.loads(score_file.read_text()) if score_file.is_file() else None,
        "final": final,
        "reference": {
            "feature_network_trained_on": reference_name,
            "feature_network_training_records": len(reference),
            # Measured on images it did not train on (held out, or the test split of a
            # network trained on public data).
            "feature_network_accuracy": float(
                (features.predict(unseen.images) == unseen.labels).mean()),
            "feature_network_accuracy_on": unseen_name,
            "is_cnn_real_test": inception_score(features.probabilities(unseen.images)),
            "test_records": len(test),
        },
        "inception": inception_record,
        "curve": curve,
        "settings": {"num_synthetic": settings.num_synthetic,
                     "curve_synthetic": settings.curve_synthetic,
                     "classifiers": list(settings.classifiers),
                     "curve_classifier": settings.curve_classifier, "seed": settings.seed,
                     "curve_checkpoints": settings.curve_checkpoints, "device": device,
                     "inception_samples": settings.inception_samples},
    }
    (run_dir / EVALUATION_FILE).write_text(json.dumps(result, indent=2))
    plot_privacy_utility(result, run_dir / PLOT_FILE)
    if public_reference is not None:
        write_public_curve(result, run_dir / "release")
    return result


def _same_weights(state: dict[str, torch.Tensor], released: dict[str, torch.Tensor]) -> bool:
    """Whether a checkpoint's generator weights are the released generator's."""
    return state.keys() == released.keys() and all(
        torch.equal(state[k].detach().cpu(), released[k]) for k in released)


def _mark_released_once(curve: list[dict[str, Any]]) -> None:
    """The curve's point of the released generator: the last checkpoint whose
    weights are the release's (``released: true``), none if no checkpoint is."""
    found = [i for i, point in enumerate(curve) if point["released"]]
    for i in found[:-1]:
        curve[i]["released"] = False


def _released_index(curve: list[dict[str, Any]]) -> int | None:
    return next((i for i, point in enumerate(curve) if point.get("released")), None)


def _draw_with_release(ax: Any, xs: list[Any], ys: list[float], *, released_at: int | None,
                       released_value: float | None) -> None:
    """The checkpoints' curve with the released generator drawn once: a star at its
    checkpoint (its final figure, from more samples, in place of the checkpoint's)
    when a checkpoint holds its weights, else a line at its figure."""
    ys = list(ys)
    if released_at is not None and released_value is not None:
        ys[released_at] = released_value
    others = [i for i in range(len(xs)) if i != released_at]
    ax.plot(xs, ys, marker="o", markevery=others, label="checkpoints")
    if released_at is not None:
        ax.plot([xs[released_at]], [ys[released_at]], marker="*", markersize=13, ls="",
                color="C3", label="released generator")
    elif released_value is not None:
        ax.axhline(released_value, color="C3", ls=":", label="released generator")


def write_public_curve(result: dict[str, Any], release_dir: Path) -> None:
    """The privacy-utility curve a curator may publish (Schwabedal et al. 2020: the
    inception score against epsilon along training): each point is the domain-CNN IS
    (``is_cnn``) of synthetic samples of a checkpoint (post-processing of the DP
    training) under a network trained on *public* data only. CAS and FID read the
    test split and stay curator-only."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    points = [{"epsilon_spent": p["epsilon_spent"], "epoch": p["epoch"],
               "is_cnn": p["is_cnn"]} for p in result["curve"]]
    (release_dir / PUBLIC_CURVE_JSON).write_text(json.dumps({
        "metric": "is_cnn: inception score of synthetic samples under the domain CNN",
        "feature_network_trained_on": result["reference"]["feature_network_trained_on"],
        "points": points, "released": result["final"]["is_cnn"]}, indent=2))
    fig, ax = plt.subplots(figsize=(4.5, 3.4))
    private = result.get("private", True)
    _draw_with_release(ax, [p["epsilon_spent"] if private else p["epoch"] for p in points],
                       [p["is_cnn"] for p in points], released_at=_released_index(result["curve"]),
                       released_value=result["final"]["is_cnn"])
    ax.set_xlabel("epsilon spent" if private else "epoch (NOT PRIVATE)")
    ax.set_ylabel("inception score (domain CNN)")
    ax.set_title(f"{result['method']}: IS vs privacy", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(release_dir / PUBLIC_CURVE_PLOT, dpi=100)
    plt.close(fig)


def privacy_utility_figure(result: dict[str, Any]) -> Any:
    """The figure of ``privacy_utility.png`` (a matplotlib ``Figure``, not drawn
    through pyplot): CAS and the domain-CNN FID and IS at each checkpoint against
    the epsilon spent so far, the released generator shown once in each panel
    (:func:`_draw_with_release`), chance accuracy (1/K) in the CAS panel, and real
    test images' IS in the IS panel."""
    from matplotlib.figure import Figure

    curve = result["curve"]
    cas_key = next((k for k in (curve[0] if curve else {}) if k.startswith("cas_")), "cas_logreg")
    panels = [(cas_key, "CAS (" + cas_key[4:] + ")"),
              ("fid_cnn", "FID, domain CNN (lower is better)"),
              ("is_cnn", "inception score, domain CNN")]
    fig = Figure(figsize=(12, 3.6))
    axes = fig.subplots(1, 3)
    private = result.get("private", True)
    xs = [p["epsilon_spent"] if private else p["epoch"] for p in curve]
    released_at = _released_index(curve)
    num_classes = result.get("num_classes")
    for ax, (key, title) in zip(axes, panels, strict=True):
        final = result["final"].get(key)
        if released_at is not None and final is None:
            final = curve[released_at].get(key)
        _draw_with_release(ax, xs, [p[key] for p in curve], released_at=released_at,
                           released_value=final)
        if key == cas_key and num_classes:
            ax.axhline(1 / num_classes, color="grey", ls="--",
                       label=f"chance (1/{num_classes} = {1 / num_classes:.2g})")
        if key == "is_cnn":
            ax.axhline(result["reference"]["is_cnn_real_test"], color="green", ls="--",
                       label="real test images")
        ax.set_title(title)
        ax.set_xlabel("epsilon spent" if private else "epoch (NOT PRIVATE)")
        ax.legend(fontsize=7)
    eps = result.get("epsilon")
    fig.suptitle(f"{result['method']} on {result['dataset']}: "
                 + (f"epsilon={eps:.3g}" if private and eps is not None else "non-private reference"))
    fig.tight_layout()
    return fig


def plot_privacy_utility(result: dict[str, Any], path: Path) -> None:
    """Write :func:`privacy_utility_figure` to ``path`` (PNG)."""
    privacy_utility_figure(result).savefig(path, dpi=100)


def format_table(result: dict[str, Any]) -> str:
    """The human-readable summary printed by the CLIs."""
    eps = result.get("epsilon")
    header = (f"evaluation of {result['run']} ({result['method']}, "
              + (f"epsilon={eps:.4g}" if result.get("private", True) and eps is not None
                 else "NOT PRIVATE") + ")")
    rows = [(k, v) for k, v in result["final"].items()]
    ref = result["reference"]
    rows += [("is_cnn of real test images", ref["is_cnn_real_test"]),
             ("domain CNN accuracy (unseen images)", ref["feature_network_accuracy"])]
    inception = result.get("inception", {})
    if inception.get("available"):
        rows.append(("is_inception of real test images", inception["is_real_test"]))
    score = result.get("selection_score")
    if score:
        rows.append(("selection score" + (" (noisy)" if score["private"] else ""), score["value"]))
    width = max(len(k) for k, _ in rows)
    lines = [header] + [f"  {k:<{width}}  {v:.4f}" for k, v in rows]
    if "feature_network_accuracy_on" in ref:
        lines.append(f"  domain CNN: trained on the {ref['feature_network_trained_on']}; its "
                     f"accuracy and the real images' is_cnn on {ref['feature_network_accuracy_on']}")
    if inception.get("available"):
        lines.append(f"  Inception figures: {inception['synthetic_samples']} synthetic vs "
                     f"{inception['real_samples']} test images, weights {inception['weights']}")
    elif inception:
        lines.append(f"  note: {inception['reason']}")
    if result["curve"]:
        lines.append(f"  privacy-utility curve: {len(result['curve'])} checkpoints -> {PLOT_FILE}")
    return "\n".join(lines)

