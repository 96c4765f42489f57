"""Writing ``release/``: generator weights and config, samples.png,
synthetic.parquet and privacy.json.

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
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from PIL import Image

from raydp_synth.data import write_parquet
from raydp_synth.errors import ConfigError
from raydp_synth.privacy.plan import PrivacyPlan
from raydp_synth.release.generator import GENERATOR_CONFIG, GENERATOR_WEIGHTS, TrainedGenerator

if TYPE_CHECKING:
    from raydp_synth.data import DataInfo

__all__ = [
    "DEFAULT_SYNTHETIC_SAMPLES",
    "NEIGHBOURING_RELATION",
    "privacy_statement",
    "public_data_note",
    "public_facts",
    "sample_grid",
    "validate_synthetic_samples",
    "write_release",
]

#: Rows of ``synthetic.parquet`` unless the user chooses (``--synthetic-samples``):
#: a fixed number, not n (the size of a release is the user's choice, not a
#: function of the data).
DEFAULT_SYNTHETIC_SAMPLES = 10_000

#: The neighbouring relation of every raydp_synth guarantee.
NEIGHBOURING_RELATION: dict[str, str] = {
    "relation": "add or remove one record (an image and its label), with the public facts "
                "(public_facts) held fixed as inputs of the mechanism",
    "dp_accounting": "NeighboringRelation.REPLACE_SPECIAL",
    "note": "n is published (the plan's sample rates q = B/n and step counts), so a "
            "neighbouring dataset keeps n: one record is replaced by a null record that "
            "contributes nothing to any mechanism (the zero-out relation). For the "
            "Poisson-subsampled and one-shot Gaussian mechanisms of a plan, dp-accounting's "
            "RdpAccountant gives the same epsilon under REPLACE_SPECIAL as under "
            "ADD_OR_REMOVE_ONE, the relation it prices with; replacing a record by a null "
            "record gives these mechanisms the output distribution of removing it, so the "
            "add-or-remove-one PLDAccountant's bound (both directions) covers it too",
}


def _to_uint8(images: torch.Tensor) -> np.ndarray:
    return ((images.clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8).cpu().numpy()


def sample_grid(images: np.ndarray, *, rows: int, scale: int = 2, pad: int = 2) -> Image.Image:
    """A PNG-ready grid of uint8 images [rows*cols, C, H, W], row-major."""
    n, c, h, w = images.shape
    cols = n // rows
    grid = np.full((rows * (h + pad) + pad, cols * (w + pad) + pad, c), 255, dtype=np.uint8)
    for i in range(rows * cols):
        r, k = divmod(i, cols)
        y, x = pad + r * (h + pad), pad + k * (w + pad)
        grid[y : y + h, x : x + w] = images[i].transpose(1, 2, 0)
    img = Image.fromarray(grid[:, :, 0] if c == 1 else grid, mode="L" if c == 1 else "RGB")
    return img.resize((img.width * scale, img.height * scale), Image.Resampling.NEAREST)


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
        "public_data": ({"declared": public, "records": data.public_records}
                        if public is not None else None),
    }
    if public_validation is not None:
        facts["score_validation"] = {"declared_public": public_validation}
    elif validation_records is not None:
        facts["score_validation"] = {"records": validation_records}
    facts["note"] = (
        "held fixed between neighbouring datasets and not hidden by the guarantee: n "
        "through q = B/n (sample rates, step counts), the class set (declared, never read "
        "off the labels; it fixes the architecture; a class may have no record), the image "
        "size and channels, the data declared public, and the validation split size the "
        "selection score divides by"
    )
    return facts


def privacy_statement(
    plan: PrivacyPlan,
    *,
    scope: str,
    dataset: str,
    public: str | None = None,
    facts: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON privacy statement of a plan, epsilon computed by dp-accounting.

    A non-private reference plan (no noise) gets ``epsilon: null`` and
    ``private: false``: it is a measurement of what privacy costs, not a release.
    ``public`` names the data the curator declared public (``--public``): it was
    used without noise and the guarantee does not cover it. ``facts``:
    :func:`public_facts` of the run (:func:`write_release` fills them in from the
    generator when absent).
    """
    price = plan.price() if plan.private else None
    statement: dict[str, Any] = {
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

    ``privacy.json`` always names :data:`NEIGHBOURING_RELATION` and lists the
    public facts: the statement's own ``public_facts``, else those the generator
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
    statement = {**statement, "neighbouring_relation": dict(NEIGHBOURING_RELATION)}
    if "public_facts" not in statement:
        declared = (statement.get("public_data") or {}).get("declared")
        statement["public_facts"] = public_facts(generator.data, generator.class_names,
                                                 public=declared)
    release_dir.mkdir(parents=True, exist_ok=True)
    k = generator.data.num_classes
    grid_labels = torch.arange(k).repeat_interleave(samples_per_class)
    grid = generator.sample(grid_labels, seed=seed)
    sample_grid(_to_uint8(grid), rows=k).save(release_dir / "samples.png")
    images, labels = generator.balanced(num_synthetic, seed=seed + 1)
    write_parquet(release_dir / "synthetic.parquet", _to_uint8(torch.as_tensor(images)), labels,
                  list(generator.class_names))
    torch.save(generator.module.state_dict(), release_dir / GENERATOR_WEIGHTS)
    (release_dir / GENERATOR_CONFIG).write_text(json.dumps(generator.descriptor(), indent=2))
    (release_dir / "privacy.json").write_text(json.dumps(statement, indent=2))
