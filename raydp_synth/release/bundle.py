"""Writing ``release/``: generator weights and config, samples.png,
synthetic.parquet and privacy.json (design.md 8).

Everything here is computed from the trained generator (a DP release, by
post-processing) and from public quantities: the plan and the class names.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from raydp_synth.data import write_parquet
from raydp_synth.privacy.plan import PrivacyPlan

__all__ = ["privacy_statement", "sample_grid", "write_release"]


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


def privacy_statement(plan: PrivacyPlan, *, scope: str, dataset: str) -> dict[str, Any]:
    """The JSON privacy statement of a plan, epsilon computed by dp-accounting."""
    return {
        "epsilon": plan.epsilon(),
        "delta": plan.delta,
        "target_epsilon": plan.target_epsilon,
        "accountant": "dp_accounting.rdp.RdpAccountant (default orders)",
        "neighbouring_relation": "add or remove one record",
        "dataset": dataset,
        "scope": scope,
        "plan": plan.to_dict(),
    }


def write_release(
    release_dir: Path,
    *,
    generator: torch.nn.Module,
    latent_dim: int,
    num_classes: int,
    class_names: Sequence[str],
    generator_config: dict[str, Any],
    statement: dict[str, Any],
    num_synthetic: int,
    seed: int,
    samples_per_class: int = 10,
) -> None:
    """Write the bundle into ``release_dir`` (created if missing)."""
    release_dir.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    generator = generator.cpu().eval()

    def sample(labels: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            z = torch.randn(len(labels), latent_dim, generator=gen)
            return generator(z, labels)

    grid_labels = torch.arange(num_classes).repeat_interleave(samples_per_class)
    sample_grid(_to_uint8(sample(grid_labels)), rows=num_classes).save(release_dir / "samples.png")
    labels = torch.arange(num_synthetic) % num_classes
    chunks = [_to_uint8(sample(labels[i : i + 512])) for i in range(0, num_synthetic, 512)]
    write_parquet(release_dir / "synthetic.parquet", np.concatenate(chunks), labels.numpy(), list(class_names))
    torch.save(generator.state_dict(), release_dir / "generator.pt")
    (release_dir / "generator.json").write_text(json.dumps(generator_config, indent=2))
    (release_dir / "privacy.json").write_text(json.dumps(statement, indent=2))
