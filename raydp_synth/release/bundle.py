"""Writing ``release/``: generator weights (safetensors) and config, samples.png,
synthetic.parquet and privacy.json.

The published files explain themselves: ``samples.png`` labels each row with its
class name and carries a caption (method, dataset, epsilon and delta, also in the
PNG's text chunks); ``privacy.json`` names the method, the software versions and
the creation time (:func:`release_provenance`); ``synthetic.parquet`` is laid out
as Hugging Face ``datasets`` writes an image dataset
(:func:`~raydp_synth.data.parquet.write_parquet`).

Everything here is computed from the trained generator (a DP release, by
post-processing) and from public quantities: the plan and the class names.

Every ``privacy.json`` lists the facts the guarantee treats as public
(:func:`public_facts`: n, the class set, the image size and channels, the declared
public data, the validation split size the score divides by) and names the
neighbouring relation (:data:`NEIGHBOURING_RELATION`): add or remove one record
with those facts held fixed as inputs of the mechanism, which, n being published,
is the zero-out relation. docs/privacy.md, "What the guarantee assumes public".
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from PIL import Image

from raydp_synth import __version__
from raydp_synth.data import write_parquet
from raydp_synth.data.public import PUBLIC_OVERLAP_NOTE
from raydp_synth.errors import ConfigError
from raydp_synth.privacy.plan import PrivacyPlan
from raydp_synth.release.generator import TrainedGenerator, save_weights
from raydp_synth.release.layout import (
    GENERATOR_CONFIG,
    GENERATOR_WEIGHTS,
    REPRODUCIBILITY_LINE,
    REPRODUCIBILITY_RUN,
    SAMPLES_FILE,
    SYNTHETIC_FILE,
)

if TYPE_CHECKING:
    from raydp_synth.data import DataInfo

__all__ = [
    "DEFAULT_SYNTHETIC_SAMPLES",
    "NEIGHBOURING_RELATION",
    "REPRODUCIBILITY_LINE",
    "REPRODUCIBILITY_RUN",
    "RECORDED_DISTRIBUTIONS",
    "SAMPLES_FILE",
    "SYNTHETIC_FILE",
    "privacy_statement",
    "public_data_note",
    "reader_layout",
    "public_facts",
    "release_provenance",
    "sample_caption",
    "sample_figure",
    "sample_grid",
    "software_versions",
    "validate_synthetic_samples",
    "write_release",
    "write_sample_figure",
    "write_synthetic_parquet",
]

#: The distributions whose versions ``privacy.json`` records.
RECORDED_DISTRIBUTIONS = ("raydp_synth", "torch", "opacus", "dp-accounting")
#: Rows of ``synthetic.parquet`` unless the user chooses (``--synthetic-samples``):
#: a fixed number, not n (the size of a release is the user's choice, not a
#: function of the data).
DEFAULT_SYNTHETIC_SAMPLES = 10_000

#: The neighbouring relation of every raydp_synth guarantee.
NEIGHBOURING_RELATION: dict[str, str] = {
    "relation": "add or remove one record (an image and its label), with the public facts "
                "(public_facts) held fixed as inputs of the mechanism",
    "note": "n is published (the plan's sample rates q = B/n and step counts), so a "
            "neighbouring dataset keeps n: one record is replaced by a null record that "
            "contributes nothing to any mechanism (the zero-out relation). For the "
            "Poisson-subsampled and one-shot Gaussian mechanisms of a plan, dp-accounting's "
            "RdpAccountant gives the same epsilon for that relation (its REPLACE_SPECIAL) as "
            "for adding or removing one record, the relation it prices with; replacing a record by a null "
            "record gives these mechanisms the output distribution of removing it, so the "
            "add-or-remove-one PLDAccountant's bound (both directions) covers it too",
}


def _to_uint8(images: torch.Tensor) -> np.ndarray:
    return ((images.clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8).cpu().numpy()


def sample_grid(images: np.ndarray, *, rows: int, scale: int = 2, pad: int = 2) -> Image.Image:
    """A PNG-ready grid of uint8 images [rows*cols, C, H, W], row-major, unlabelled
    (``samples.png`` is :func:`sample_figure`)."""
    c = images.shape[1]
    grid = _grid_array(images, rows=rows, pad=pad)
    img = Image.fromarray(grid[:, :, 0] if c == 1 else grid, mode="L" if c == 1 else "RGB")
    return img.resize((img.width * scale, img.height * scale), Image.Resampling.NEAREST)


def _grid_array(images: np.ndarray, *, rows: int, pad: int) -> np.ndarray:
    n, c, h, w = images.shape
    cols = n // rows
    grid = np.full((rows * (h + pad) + pad, cols * (w + pad) + pad, c), 255, dtype=np.uint8)
    for i in range(rows * cols):
        r, k = divmod(i, cols)
        y, x = pad + r * (h + pad), pad + k * (w + pad)
        grid[y : y + h, x : x + w] = images[i].transpose(1, 2, 0)
    return grid


def sample_caption(statement: dict[str, Any], method: str) -> str:
    """The caption of ``samples.png``: method, dataset, and the guarantee's epsilon
    and delta (what privacy.json states), or NOT PRIVATE."""
    dataset = statement.get("dataset", "?")
    epsilon, delta = statement.get("epsilon"), statement.get("delta")
    if not statement.get("private", True):
        return f"{method} on {dataset}: NOT PRIVATE (non-private reference, do not publish)"
    if statement.get("dp_release") is False:
        return f"{method} on {dataset}: reproducibility run, NOT A DP RELEASE (see privacy.json)"
    if epsilon is None or delta is None:
        return f"{method} on {dataset}: no epsilon stated; see privacy.json"
    scope = (" for the whole search" if str(statement.get("scope", "")).startswith("the whole")
             else "")
    return (f"{method} on {dataset}: (epsilon={epsilon:.3g}, delta={delta:.3g})-DP{scope}; "
            "see privacy.json")


def sample_figure(images: np.ndarray, class_names: Sequence[str], *, caption: str,
                  pad: int = 2, scale: int = 2, dpi: int = 100) -> Any:
    """A labelled sample grid (a matplotlib ``Figure``, not drawn through pyplot):
    uint8 images [K*cols, C, H, W] row-major, one row per class, each row's label
    its class name, the caption below.

    Raises:
        ValueError: the images do not fill one row per class.
    """
    from matplotlib.figure import Figure

    rows = len(class_names)
    if rows == 0 or len(images) == 0 or len(images) % rows:
        raise ValueError(f"{len(images)} images do not make one row for each of "
                         f"{rows} classes")
    _, c, h, w = images.shape
    cols = len(images) // rows
    grid = _grid_array(images, rows=rows, pad=pad)
    fig = Figure(figsize=(grid.shape[1] * scale / dpi, grid.shape[0] * scale / dpi), dpi=dpi)
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    if c == 1:
        ax.imshow(grid[:, :, 0], cmap="gray", vmin=0, vmax=255, interpolation="nearest")
    else:
        ax.imshow(grid, interpolation="nearest")
    ax.set_yticks([pad + r * (h + pad) + (h - 1) / 2 for r in range(rows)],
                  labels=list(class_names), fontsize=8)
    ax.set_xticks([])
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title(f"synthetic samples: {cols} per class, one row per class", fontsize=8)
    ax.set_xlabel(caption, fontsize=8)
    return fig


def write_sample_figure(path: Path, figure: Any, *, caption: str,
                        class_names: Sequence[str]) -> None:
    """Save ``figure`` as PNG with the caption and class names also in its text
    chunks (``Description``, ``Classes``), for readers that do not look."""
    figure.savefig(path, format="png", bbox_inches="tight", pad_inches=0.1,
                   metadata={"Title": "raydp_synth synthetic samples", "Description": caption,
                             "Classes": json.dumps(list(class_names)),
                             "Software": "raydp_synth"})


def software_versions() -> dict[str, str | None]:
    """Installed versions of :data:`RECORDED_DISTRIBUTIONS` (None: not installed as a
    distribution)."""
    versions: dict[str, str | None] = {}
    for name in RECORDED_DISTRIBUTIONS:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    if versions["raydp_synth"] is None:
        versions["raydp_synth"] = __version__
    return versions


def release_provenance(method: str, *, now: datetime | None = None) -> dict[str, Any]:
    """What ``privacy.json`` records of how the release was made: the method, the
    software versions (:func:`software_versions`) and the creation time (UTC, ISO
    8601). Public: none of it depends on the data."""
    created = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return {"method": method, "software": software_versions(),
            "created": created.isoformat(timespec="seconds").replace("+00:00", "Z")}


def write_synthetic_parquet(path: str | Path, generator: TrainedGenerator, *, count: int,
                            seed: int, metadata: dict[str, str] | None = None) -> None:
    """``count`` synthetic images from ``generator``, labels cycling over its declared
    classes (balanced), latents from the public ``seed``, written as Parquet in the
    Hugging Face image layout (:func:`~raydp_synth.data.parquet.write_parquet`).

    Post-processing of the (DP) generator: reads no data and costs no privacy
    budget. The release's ``synthetic.parquet`` and ``python -m raydp_synth.sample``
    both write through here.

    Raises:
        ConfigError: ``count`` is not a whole number >= 1.
    """
    validate_synthetic_samples(count)
    images, labels = generator.balanced(count, seed=seed)
    write_parquet(path, _to_uint8(torch.as_tensor(images)), labels, list(generator.class_names),
                  metadata=metadata)


def validate_synthetic_samples(count: int) -> None:
    """The number of rows of ``synthetic.parquet``: at least one.

    Raises:
        ConfigError: naming the setting and its value.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ConfigError(f"the number of synthetic samples {count} must be a whole number >= 1, "
                          f"e.g. {DEFAULT_SYNTHETIC_SAMPLES}")


def public_facts(
    data: DataInfo,
    class_names: tuple[str, ...] | list[str],
    *,
    public: str | None = None,
    validation_records: int | None = None,
    public_validation: str | None = None,
) -> dict[str, Any]:
    """What the guarantee treats as public: fixed inputs of the mechanism, which
    neighbouring datasets share and which the release may reveal.

    ``declared`` names the facts that are declarations (the class set, the image
    size, the channels), not read off the records.

    Args:
        data: the public facts of the training split the plan was made for.
        class_names: the declared class set (never the labels present).
        public: the ``--public`` declaration, or None.
        validation_records: the size of the private validation split that the
            selection score's noisy count is divided by (public arithmetic); None
            when the score is not a private release or the caller does not know it.
        public_validation: the dataset declared public that the score used instead.
    """
    facts: dict[str, Any] = {
        "num_records": data.num_records,
        "classes": {"count": data.num_classes, "names": list(class_names)},
        "image_size": data.image_size,
        "channels": data.channels,
        # Declarations (the dataset's format, the spec's :classes=/:size=/:channels=,
        # --num-classes, --set image_size), never read off the records.
        "declared": ["classes", "image_size", "channels"],
        "public_data": ({"declared": public, "records": data.public_records}
                        if public is not None else None),
    }
    if public is not None or public_validation is not None:
        facts["public_data_overlap"] = PUBLIC_OVERLAP_NOTE
    if public_validation is not None:
        facts["score_validation"] = {"declared_public": public_validation}
    elif validation_records is not None:
        facts["score_validation"] = {"records": validation_records}
    facts["note"] = (
        "held fixed between neighbouring datasets and not hidden by the guarantee: n "
        "through q = B/n (sample rates, step counts), the class set (declared, never read "
        "off the labels; it fixes the architecture; a class may have no record), the image "
        "size and channels (declared by the dataset's format or the dataset spec, never read "
        "off the records: a record of another size or mode is converted to them), the data "
        "declared public, and the validation split size the selection score divides by"
    )
    return facts


def privacy_statement(
    plan: PrivacyPlan,
    *,
    scope: str,
    dataset: str,
    public: str | None = None,
    facts: dict[str, Any] | None = None,
    reproducibility_seed: bool = False,
) -> dict[str, Any]:
    """The JSON privacy statement of a plan, epsilon computed by dp-accounting.

    A non-private reference plan (no noise) gets ``epsilon: null`` and
    ``private: false``: it is a measurement of what privacy costs, not a release.
    ``public`` names the data the curator declared public (``--public``): it was
    used without noise and the guarantee does not cover it. ``facts``:
    :func:`public_facts` of the run (:func:`write_release` fills them in from the
    generator when absent). ``reproducibility_seed``: the user fixed the DP
    randomness (``--dp-seed``); the statement then opens with ``"dp_release":
    false`` and the ``reason`` (:data:`REPRODUCIBILITY_RUN`): the epsilon is what
    the plan would give with fresh secret randomness, not a guarantee of this
    release. Without it the statement has neither key.
    """
    price = plan.price() if plan.private else None
    statement: dict[str, Any] = {}
    if reproducibility_seed:
        statement.update({"dp_release": False, "reason": REPRODUCIBILITY_RUN})
    statement |= {
        "epsilon": price.epsilon if price is not None else None,
        "delta": plan.delta,
        "target_epsilon": plan.target_epsilon if plan.private else None,
        "private": plan.private,
        "accountant": price.accountant if price is not None else None,
        "pricing": price.to_dict() if price is not None else None,
        "neighbouring_relation": dict(NEIGHBOURING_RELATION),
        "dataset": dataset,
        "scope": scope,
        "plan": plan.to_dict(),
    }
    if facts is not None:
        statement["public_facts"] = facts
    if public is not None:
        statement["public_data"] = public_data_note(public)
    if not plan.private:
        statement["warning"] = ("NOT PRIVATE: a non-private reference run (no noise); "
                                "do not publish this generator")
        statement["plan"]["target_epsilon"] = None
    return statement


#: The order of ``privacy.json``'s keys: the statement a reader needs first, the
#: details (the plan, the study's own statement, provenance) below. Keys not listed
#: (a study's extra fields) come before ``details``.
READER_ORDER = ("summary", "dp_release", "reason", "warning", "epsilon", "delta", "private",
                "scope", "method", "dataset", "accounting", "neighbouring_relation",
                "public_facts", "public_data")
#: What ``privacy.json`` keeps under ``details``.
DETAILS = ("plan", "released_trial_plan", "study", "software", "created")


def summary_line(statement: dict[str, Any]) -> str:
    """The statement in one sentence, the first line of ``privacy.json``."""
    what = f"{statement.get('method', 'the generator')} on {statement.get('dataset')}"
    eps, delta = statement.get("epsilon"), statement.get("delta")
    bound = (f"({eps:.4g}, {delta:g})-DP" if isinstance(eps, (int, float)) else
             "no epsilon stated")
    line = (f"{bound} for {statement.get('scope')}: {what}; neighbouring datasets differ by "
            "one record added or removed, the public facts held fixed")
    if not statement.get("private", True):
        line = f"NOT PRIVATE: {what} is a non-private reference run; do not publish it"
    if statement.get("dp_release") is False:
        line = f"NOT A DP RELEASE (its DP randomness was fixed by a seed); {line}"
    return line


def reader_layout(statement: dict[str, Any]) -> dict[str, Any]:
    """``privacy.json`` as a reader takes it: a one-sentence ``summary``, then epsilon,
    delta, scope and the rest of the statement, the accounting once (``accounting``:
    the accountant that states the epsilon, the rule, both accountants' epsilons),
    the relation once, and the ``details`` below (the plan, a study's own statement,
    the software and the time). docs/privacy-json.schema.json is its schema.

    ``statement``: :func:`privacy_statement`'s (a run's) or a study's (its accountant's
    statement under ``pricing``), with :func:`release_provenance` merged in. A layout
    already made is returned unchanged."""
    if "accounting" in statement and "summary" in statement:
        return dict(statement)
    rest = dict(statement)
    pricing = dict(rest.pop("pricing", None) or {})
    accountant = rest.pop("accountant", None)
    accounting: dict[str, Any] = {}
    study: dict[str, Any] | None = None
    if "mode" in pricing:  # a study: the accountant's statement of the whole search
        study = pricing
        accounting = dict(study.pop("pricing", None) or {})
        for key in ("epsilon", "delta", "accountant", "dp_accounting"):
            study.pop(key, None)
        accounting["budget_epsilon"] = study.pop("budget_epsilon", None)
    else:
        accounting = pricing
    accounting.pop("epsilon", None)  # the statement's own
    accounting = {"accountant": accounting.pop("accountant", accountant), **accounting}
    if "target_epsilon" in rest:
        accounting["target_epsilon"] = rest.pop("target_epsilon")
    if rest.get("private") is False:
        accounting = {"accountant": None}
    rest["accounting"] = accounting
    if study is not None:
        rest["study"] = study
    rest["summary"] = summary_line(rest)
    details = {key: rest.pop(key) for key in DETAILS if key in rest}
    ordered = {key: rest.pop(key) for key in READER_ORDER if key in rest}
    return {**ordered, **rest, "details": details}


def public_data_note(public: str) -> dict[str, str]:
    """What a statement says of the data declared public."""
    return {
        "declared": public,
        "note": ("declared public by the curator and used without noise; the guarantee covers "
                 "the other records only (a fraction of the training dataset was taken out of "
                 "the training split)" if ":fraction=" in public else
                 "declared public by the curator and used without noise; it is not covered "
                 "by the guarantee"),
    }


def write_release(
    release_dir: Path,
    *,
    generator: TrainedGenerator,
    statement: dict[str, Any],
    num_synthetic: int,
    seed: int,
    samples_per_class: int = 10,
) -> None:
    """Write the bundle into ``release_dir`` (created if missing).

    ``privacy.json`` always names :data:`NEIGHBOURING_RELATION`, the method, the
    software versions and the creation time (:func:`release_provenance`), and lists
    the public facts: the statement's own ``public_facts``, else those the generator
    was built for (n, the class set, the image size and channels) and the
    statement's ``public_data`` declaration.

    Args:
        generator: the trained generator (a DP release) and its public config.
        statement: :func:`privacy_statement` of the run or study.
        num_synthetic: size of ``synthetic.parquet`` (labels balanced): the
            user's choice (``--synthetic-samples``), never n.
        seed: public seed of the latents.
    """
    validate_synthetic_samples(num_synthetic)
    statement = {**statement, "neighbouring_relation": dict(NEIGHBOURING_RELATION),
                 **release_provenance(generator.method.name)}
    if "public_facts" not in statement:
        declared = (statement.get("public_data") or {}).get("declared")
        statement["public_facts"] = public_facts(generator.data, generator.class_names,
                                                 public=declared)
    # Whole or not at all: the files go to a folder beside it, renamed into place once
    # all are written, so a Ctrl-C or a crash mid-write leaves no partial release (a
    # release is its privacy.json and what it covers).
    release_dir = Path(release_dir)
    release_dir.parent.mkdir(parents=True, exist_ok=True)
    partial = release_dir.with_name(f".{release_dir.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    try:
        _write_release_files(partial, generator=generator, statement=statement,
                             num_synthetic=num_synthetic, seed=seed,
                             samples_per_class=samples_per_class)
        if release_dir.exists():
            shutil.rmtree(release_dir)
        os.replace(partial, release_dir)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def _write_release_files(release_dir: Path, *, generator: TrainedGenerator,
                         statement: dict[str, Any], num_synthetic: int, seed: int,
                         samples_per_class: int) -> None:
    k = generator.data.num_classes
    grid_labels = torch.arange(k).repeat_interleave(samples_per_class)
    grid = generator.sample(grid_labels, seed=seed)
    names = list(generator.class_names)
    caption = sample_caption(statement, generator.method.name)
    figure = sample_figure(_to_uint8(grid), names, caption=caption)
    write_sample_figure(release_dir / SAMPLES_FILE, figure, caption=caption, class_names=names)
    write_synthetic_parquet(release_dir / SYNTHETIC_FILE, generator, count=num_synthetic,
                            seed=seed + 1)
    save_weights(generator.module.state_dict(), release_dir / GENERATOR_WEIGHTS)
    (release_dir / GENERATOR_CONFIG).write_text(json.dumps(generator.descriptor(), indent=2))
    (release_dir / "privacy.json").write_text(json.dumps(reader_layout(statement), indent=2))
