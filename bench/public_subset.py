"""Write a seeded random subset of a named dataset as a Parquet file to declare public.

The search-strategy bench (``bench/search_strategies.py --strategies public``) needs
a public dataset that resembles the sensitive one in kind and in size, so that a
search on it at no privacy cost tunes the hyperparameters in the noise regime of
the final private run (each public trial is calibrated for the public data's size).
For digits (1,797 8x8 handwritten digits) that is a 2,000-image subset of MNIST's
training images: other writers, other scanner, same classes::

    python bench/public_subset.py --dataset mnist --data-dir DIR --records 2000 \\
        --out bench/runs/public/mnist-2k.parquet
    python bench/search_strategies.py --strategies public \\
        --public-tuning parquet:bench/runs/public/mnist-2k.parquet ...

The rows are drawn without replacement by ``numpy.random.default_rng(--seed)`` from
the training files only (the test files stay the evaluation's); the file records the
draw in its schema metadata. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from raydp_synth.data import write_parquet
from raydp_synth.data.named import load_named_raw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="mnist", help="a named dataset (mnist, ...)")
    parser.add_argument("--data-dir", default=None, help="its folder")
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    raw = load_named_raw(args.dataset, args.data_dir, size=32)
    if not 0 < args.records <= len(raw.labels):
        parser.error(f"--records must be in 1..{len(raw.labels)}")
    rows = np.sort(np.random.default_rng(args.seed).choice(len(raw.labels), args.records,
                                                           replace=False))
    draw = {"dataset": args.dataset, "split": "train", "records": args.records,
            "seed": args.seed, "of": len(raw.labels)}
    write_parquet(args.out, raw.images[rows], raw.labels[rows], raw.class_names,
                  metadata={"raydp_synth.subset": json.dumps(draw)})
    counts = np.bincount(raw.labels[rows], minlength=len(raw.class_names))
    print(f"wrote {args.out}: {args.records} of {len(raw.labels)} {args.dataset} training "
          f"images (seed {args.seed}); per class {counts.tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
