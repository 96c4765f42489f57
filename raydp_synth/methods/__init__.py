"""DP image-synthesis methods, as plug-ins behind :class:`Method`."""

from raydp_synth.methods.base import Method
from raydp_synth.methods.registry import METHODS, get_method, method_names

__all__ = ["METHODS", "Method", "get_method", "method_names"]
