"""The release bundle: what a curator may publish."""

from raydp_synth.release.bundle import privacy_statement, sample_grid, write_release
from raydp_synth.release.generator import TrainedGenerator

__all__ = ["TrainedGenerator", "privacy_statement", "sample_grid", "write_release"]
