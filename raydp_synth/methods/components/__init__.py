"""Building blocks that several methods share, so that no method folder imports
another: the small-images WGAN-GP networks (:mod:`.gan_networks`), the critic's
per-record pair gradients (:mod:`.pairs`), the WGAN-GP hyperparameters
(:mod:`.wgan_config`), and dpGAN's clip groups, config and loop (:mod:`.clip_groups`,
:mod:`.dpgan_config`, :mod:`.dpgan_loop`), which PrivImage+G runs as its fine-tuning.
"""
