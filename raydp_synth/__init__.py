"""raydp_synth: Ray Tune + Opacus differentially private image generators under one
privacy budget for the whole search (README.md)."""

#: The package's version, its single source: pyproject.toml reads it
#: (``[tool.setuptools.dynamic]``), so a checkout and an installed wheel agree.
__version__ = "0.1.0"
