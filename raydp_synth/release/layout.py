"""The release folder's file names and the fixed wording a run prints about it.

Plain strings, no torch: a command line can name a release's files (``--config``,
``raydp-synth sample``) and say what a run will be before it loads any model.
:mod:`~raydp_synth.release.generator` and :mod:`~raydp_synth.release.bundle` write
and read these files.
"""

from __future__ import annotations

__all__ = [
    "GENERATOR_CONFIG",
    "GENERATOR_WEIGHTS",
    "LEGACY_GENERATOR_WEIGHTS",
    "REPRODUCIBILITY_LINE",
    "REPRODUCIBILITY_RUN",
    "SAMPLES_FILE",
    "SYNTHETIC_FILE",
]

#: The released weights: safetensors (tensors only, no pickle; loading runs no code).
GENERATOR_WEIGHTS = "generator.safetensors"
#: The weights of releases written before safetensors: a torch state-dict pickle,
#: still read (with ``weights_only=True``: tensors only, no arbitrary objects).
LEGACY_GENERATOR_WEIGHTS = "generator.pt"
#: The non-tensor config that rebuilds the network (method, config, data facts, class names).
GENERATOR_CONFIG = "generator.json"
#: The sample grid's file in ``release/``.
SAMPLES_FILE = "samples.png"
#: The synthetic dataset's file in ``release/``.
SYNTHETIC_FILE = "synthetic.parquet"

#: Why a run with a user-chosen ``--dp-seed`` is not a DP release (``privacy.json``'s
#: ``reason`` beside ``"dp_release": false``; the CLI says it at start and end).
REPRODUCIBILITY_RUN = (
    "reproducibility run, not a DP release: --dp-seed fixed the DP randomness (Poisson "
    "batches and noise); a seed that is reused, guessed or known replays the same "
    "batches and noise across releases, which composition does not cover (it assumes "
    "fresh secret randomness per release). Do not publish it as DP; run without --dp-seed "
    "for a release")

#: What the CLI prints of it, at the start and the end of a run with ``--dp-seed``.
REPRODUCIBILITY_LINE = ("reproducibility run, not a DP release (a reused --dp-seed replays "
                        "batches and noise across releases; composition does not cover it)")
