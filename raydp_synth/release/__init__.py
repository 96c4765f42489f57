"""The release bundle: what a curator may publish."""

from raydp_synth.release.bundle import privacy_statement, sample_grid, write_release

__all__ = ["privacy_statement", "sample_grid", "write_release"]
