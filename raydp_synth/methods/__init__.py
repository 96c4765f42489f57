"""DP image-synthesis methods, as plug-ins behind :class:`Method`."""

from raydp_synth.methods.base import DataInfo, Method
from raydp_synth.methods.registry import get_method, method_names, register_method

__all__ = ["DataInfo", "Method", "get_method", "method_names", "register_method"]
