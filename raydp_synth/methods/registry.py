"""The method registry: names -> :class:`~raydp_synth.methods.base.Method` instances."""

from __future__ import annotations

from raydp_synth.errors import ConfigError
from raydp_synth.methods.base import Method

__all__ = ["get_method", "method_names", "register_method"]

_REGISTRY: dict[str, Method] = {}

#: Methods of the papers that are not built yet: asking for one says so (none now).
NOT_BUILT: dict[str, str] = {}


def register_method(method: Method) -> Method:
    """Register a method under ``method.name``; a second registration is an error."""
    if method.name in _REGISTRY:
        raise ValueError(f"method {method.name!r} is already registered")
    _REGISTRY[method.name] = method
    return method


def _load_builtin_methods() -> None:
    # Importing a method module registers it (one import per built-in method).
    import raydp_synth.methods.dpaf  # noqa: F401
    import raydp_synth.methods.dpgan  # noqa: F401
    import raydp_synth.methods.dpwgan  # noqa: F401
    import raydp_synth.methods.privimage  # noqa: F401


def get_method(name: str) -> Method:
    """The registered method called ``name``.

    Raises:
        ConfigError: unknown name (the message lists the registered ones).
    """
    _load_builtin_methods()
    if name in NOT_BUILT:
        raise ConfigError(NOT_BUILT[name])
    if name not in _REGISTRY:
        raise ConfigError(
            f"unknown method {name!r}; registered methods: {', '.join(method_names())}"
        )
    return _REGISTRY[name]


def method_names() -> list[str]:
    _load_builtin_methods()
    return sorted(_REGISTRY)
