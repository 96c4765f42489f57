"""Writing ``release/``: generator weights and config, samples.png,
synthetic.parquet and privacy.json (design.md 8).

Everything here is computed from the trained generator (a DP release, by
post-processing) and from public quantities: the plan and the class names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from raydp_synth.data import write_parquet
from raydp_synth.privacy.plan import PrivacyPlan
from raydp_synth.release.generator import GENERATOR_CONFIG, GENERATOR_WEIGHTS, TrainedGenerator

__all__ = ["privacy_statement", "public_data_note", "sample_grid", "write_release"]


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
    return img.resize((img.width * scale, img.height * scale), Image.NEAREST)


def privacy_statement(
    plan: PrivacyPlan, *, scope: str, dataset: str, public: str | None = None
) -> dict[str, Any]:
    """The JSON privacy statement of a plan, epsilon computed by dp-accounting.

    A non-private reference plan (no noise) gets ``epsilon: null`` and
    ``private: false``: it is a measurement of what privacy costs, not a release.
    ``public`` names the data the curator declared public (``--public``): it was
    used without noise and the guarantee does not cover it.
    """
    statement: dict[str, Any] = {
        "epsilon": plan.epsilon() if plan.private else None,
        "delta": plan.delta,
        "target_epsilon": plan.target_epsilon if plan.private else None,
        "private": plan.private,
        "accountant": "dp_accounting.rdp.RdpAccountant (default orders)",
        "neighbouring_relation": "add or remove one record",
        "dataset": dataset,
        "scope": scope,
        "plan": plan.to_dict(),
    }
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

    Args:
        generator: the trained generator (a DP release) and its public config.
        statement: :func:`privacy_statement` of the run or study.
        num_synthetic: size of ``synthetic.parquet`` (labels balanced).
        seed: public seed of the latents.
    """
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
