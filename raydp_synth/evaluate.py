"""``python -m raydp_synth.evaluate RUN_DIR``: the curator's evaluation of a run.

Prints CAS (three classifiers by default;
``--classifiers`` adds ResNet-9), the domain-CNN FID and IS (``fid_cnn``,
``is_cnn``) and, with the FID Inception-v3 weights (``--fid-weights`` or the torch
hub cache), the field's ``fid_inception``, ``is_inception``, ``precision`` and
``recall`` of the run's released generator, and writes ``evaluation.json`` and
``privacy_utility.png`` into the run directory (curator-only: they read the real
test split without noise).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from raydp_synth.cli import (
    add_console_arguments,
    add_fid_weights_argument,
    add_version_argument,
    configure_console_from,
    run_cli,
)
from raydp_synth.data.spec import parse_dataset_spec
from raydp_synth.evaluation.classifiers import CLASSIFIER_KINDS, DEFAULT_CLASSIFIERS

__all__ = ["main"]


def _classifier_list(text: str) -> tuple[str, ...]:
    """``"logreg,resnet9"`` -> ``("logreg", "resnet9")``, each a known kind."""
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in CLASSIFIER_KINDS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(
            f"{text!r}: choose classifiers from {', '.join(CLASSIFIER_KINDS)}, comma-separated")
    return tuple(dict.fromkeys(kinds))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m raydp_synth.evaluate",
        description="Evaluate a training run: CAS, FID, IS and the privacy-utility curve.",
    )
    parser.add_argument("run_dir", type=Path, help="the --out directory of a training run")
    parser.add_argument("--dataset", default=None,
                        help="the run's dataset spec, if it moved (default: from run.json)")
    parser.add_argument("--public-reference", default=None, metavar="DATASET",
                        help="a dataset declared public to train the domain-CNN FID/IS"
                        " network on "
                        "(default: the test split)")
    parser.add_argument("--num-synthetic", "--cas-samples", type=int, default=None,
                        dest="num_synthetic", metavar="N",
                        help="synthetic images for the final figures: the CAS classifiers "
                        "train on them and FID/IS compare them with the test split (default "
                        "10000; privimage-d 2000: 50-step DDIM sampling is slow on CPU; "
                        "DPImageBench trains its CAS classifiers on 60000)")
    parser.add_argument("--classifiers", type=_classifier_list, default=None,
                        metavar="KIND[,KIND...]",
                        help="CAS classifiers, comma-separated, from "
                        f"{', '.join(CLASSIFIER_KINDS)} (default {','.join(DEFAULT_CLASSIFIERS)}; "
                        "resnet9 is a GPU network)")
    parser.add_argument("--curve-synthetic", type=int, default=None,
                        help="synthetic images per checkpoint of the curve (default 2000; "
                        "privimage-d 500)")
    parser.add_argument("--seed", type=int, default=0, help="public seed of the evaluation")
    parser.add_argument("--curve-checkpoints", type=int, default=None, metavar="N",
                        help="checkpoints the curve covers, evenly spread, the last included "
                        "(default: all)")
    parser.add_argument("--inception-samples", type=int, default=None, metavar="N",
                        help="synthetic images of the Inception figures, against at most as "
                        "many test images (default: --num-synthetic; the field uses 10000; "
                        "slow on CPU)")
    add_fid_weights_argument(parser)
    add_version_argument(parser)
    parser.add_argument("--device", default=None,
                        help="where sampling and the CNNs run (default: cuda if available)")
    add_console_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_console_from(args)
    # Sample counts left None take the run's method's defaults (evaluate_run).
    import torch

    # lazy: the report loads every method and the release; `--help` stays quick
    from raydp_synth.evaluation.report import EvaluationSettings, evaluate_run, format_table

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    settings = EvaluationSettings(num_synthetic=args.num_synthetic,
                                  curve_synthetic=args.curve_synthetic, seed=args.seed,
                                  curve_checkpoints=args.curve_checkpoints, device=device,
                                  fid_weights=args.fid_weights,
                                  inception_samples=args.inception_samples,
                                  classifiers=args.classifiers or DEFAULT_CLASSIFIERS)
    public_reference = (None if args.public_reference is None
                        else parse_dataset_spec(args.public_reference))
    result = evaluate_run(args.run_dir, dataset=args.dataset,
                          public_reference=public_reference, settings=settings)
    print(format_table(result))
    return 0


if __name__ == "__main__":
    run_cli(main)
