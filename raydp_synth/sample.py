"""``raydp-synth sample RELEASE -n N --out X.parquet`` (also ``python -m
raydp_synth.sample``): more synthetic data from a release.

Post-processing: this reads only the released generator (``generator.json`` and
its weights) and draws latents from a public seed; it reads no data and spends no
privacy budget. Whatever is computed from a differentially private release alone
keeps the release's guarantee (Dwork and Roth, 2014, "The Algorithmic Foundations
of Differential Privacy", Proposition 2.1): the file written is covered by the
(epsilon, delta) that ``RELEASE/privacy.json`` states, whatever N.

The file is written by the release's own Parquet writer
(:func:`~raydp_synth.release.bundle.write_synthetic_parquet`): the Hugging Face
image layout, labels cycling over the declared classes, and the schema metadata
``raydp_synth.sample`` recording the release's method, epsilon and delta and the
seed (so that the file can be drawn again).
"""

from __future__ import annotations

import argparse
import json
import secrets
from pathlib import Path

from raydp_synth.cli import add_version_argument, run_cli
from raydp_synth.errors import ConfigError
from raydp_synth.release.layout import GENERATOR_CONFIG

__all__ = ["SAMPLE_METADATA_KEY", "build_parser", "main", "release_folder"]

#: Schema metadata key of a sampled file: JSON of how its rows were drawn.
SAMPLE_METADATA_KEY = "raydp_synth.sample"


def release_folder(path: Path) -> Path:
    """The release folder that ``path`` names: a ``release/`` folder itself, or a run
    or study directory holding one.

    Raises:
        ConfigError: neither holds ``generator.json``.
    """
    path = path.expanduser()
    for candidate in (path, path / "release"):
        if (candidate / GENERATOR_CONFIG).is_file():
            return candidate
    raise ConfigError(f"{path} holds no released generator ({GENERATOR_CONFIG}); pass a "
                      "release/ folder, or the training run or study directory that holds it")


def build_parser(prog: str = "raydp-synth sample") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Draw more synthetic images from a released generator: post-processing of "
        "the release, no privacy cost (its privacy.json covers the file).")
    parser.add_argument("release", type=Path, metavar="RELEASE",
                        help="a release/ folder, or a run or study directory holding one")
    parser.add_argument("-n", "--num-samples", type=int, required=True, metavar="N",
                        help="rows to write (labels balanced over the declared classes)")
    parser.add_argument("--out", type=Path, required=True, metavar="X.parquet",
                        help="the Parquet file to write (refused if it exists, unless "
                        "--overwrite)")
    parser.add_argument("--seed", type=int, default=None,
                        help="public seed of the latents, for a reproducible file (default: a "
                        "fresh one, printed and recorded in the file)")
    parser.add_argument("--device", default="cpu",
                        help="where the generator runs (default cpu; e.g. cuda); the latents "
                        "are drawn on the CPU, so the images do not depend on it")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    add_version_argument(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # lazy: torch loads only once the arguments parse (`--help` stays instant)
    from raydp_synth.release.bundle import (
        TrainedGenerator,
        validate_synthetic_samples,
        write_synthetic_parquet,
    )

    validate_synthetic_samples(args.num_samples)
    if args.seed is not None and not 0 <= args.seed < 2**63:
        raise ConfigError(f"--seed {args.seed} must be in 0..2**63-1")
    out = args.out.expanduser()
    if out.suffix != ".parquet":
        raise ConfigError(f"--out {args.out} must name a .parquet file")
    if out.is_dir() or (out.exists() and not args.overwrite):
        raise ConfigError(f"--out {args.out} exists; choose a new file or pass --overwrite")
    release = release_folder(args.release)
    generator = TrainedGenerator.from_release(release)
    privacy_path = release / "privacy.json"
    privacy = json.loads(privacy_path.read_text()) if privacy_path.is_file() else {}
    seed = args.seed if args.seed is not None else secrets.randbits(63)
    if args.device != "cpu":
        import torch

        if args.device.startswith("cuda") and not torch.cuda.is_available():
            raise ConfigError(f"--device {args.device}: no CUDA device here; use --device cpu")
        generator = generator.on(args.device)
    record = {"release": str(release.resolve()), "method": generator.method.name,
              "epsilon": privacy.get("epsilon"), "delta": privacy.get("delta"),
              "private": privacy.get("private"), "seed": seed, "rows": args.num_samples}
    write_synthetic_parquet(out, generator, count=args.num_samples, seed=seed,
                            metadata={SAMPLE_METADATA_KEY: json.dumps(record)})
    if privacy.get("private") is False:
        guarantee = "NOT PRIVATE: the release is a non-private reference; do not publish it"
    elif privacy.get("epsilon") is not None:
        guarantee = (f"covered by the release's (epsilon={privacy['epsilon']:.4g}, "
                     f"delta={privacy['delta']:g})-DP guarantee ({privacy_path})")
    else:
        guarantee = f"the release's guarantee: see {privacy_path}"
    print(f"wrote {args.num_samples} synthetic images ({generator.data.num_classes} classes, "
          f"balanced; seed {seed}) to {out}: post-processing of {release}, no privacy cost; "
          f"{guarantee}")
    return 0


if __name__ == "__main__":
    run_cli(main)
