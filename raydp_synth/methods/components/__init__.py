"""Building blocks that several methods share, so that no method folder imports
another: the small-images WGAN-GP networks (:mod:`.gan_networks`), the critic's
per-record pair gradients (:mod:`.pairs`), the WGAN-GP hyperparameters
(:mod:`.wgan_config`), the WGAN-GP optimisers and generator step (:mod:`.wgan_gp`),
and the clip groups of a grouped DP-SGD release (:mod:`.clip_groups`).

dpGAN's config and loop live in its own folder (:mod:`raydp_synth.methods.dpgan`);
PrivImage+G, which fine-tunes as a dpGAN run, imports them from there: the one
declared dependency between methods (``tests/test_layers.py``, ``METHOD_BASES``).
"""
