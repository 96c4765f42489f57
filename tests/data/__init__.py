"""Tests of the raydp_synth.data layer."""
