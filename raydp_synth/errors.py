"""Domain errors of raydp_synth.

User errors subclass built-ins so that callers can catch them generically; the
command-line entry points turn every :class:`UserError` into one clear line on
stderr and exit code 2 (no traceback). Anything else is a bug and keeps its
traceback; :class:`PrivacyInvariantError` names the bugs that would break the
privacy argument.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BudgetExhausted", "ConfigError", "DataError", "Interrupted", "LedgerError",
           "PrivacyInvariantError", "UserError"]


class UserError(Exception):
    """Base of every error caused by the user's input rather than by a bug."""


class Interrupted(UserError):
    """The user stopped a command (Ctrl-C): what was kept and how to go on; the CLI
    prints it and exits 130.

    Attributes:
        resume_name, resume_storage: a study that ``--resume --name NAME --storage
        DIR`` continues (None where nothing is to resume); the CLI that knows its own
        arguments turns them into the exact command.
    """

    def __init__(self, message: str, *, resume_name: str | None = None,
                 resume_storage: Path | None = None) -> None:
        super().__init__(message)
        self.resume_name, self.resume_storage = resume_name, resume_storage


class ConfigError(UserError, ValueError):
    """A configuration value is invalid (names the field, its value and the fix)."""


class DataError(UserError, ValueError):
    """A dataset cannot be read or is unusable (names the file and the fix)."""


class BudgetExhausted(UserError, RuntimeError):
    """The privacy budget cannot afford what was asked; nothing was spent."""


class LedgerError(UserError, RuntimeError):
    """The study's ledger cannot be written (full disk, permissions, storage gone):
    the accountant grants nothing until it can (fail closed)."""


class PrivacyInvariantError(RuntimeError):
    """An invariant that the privacy argument relies on does not hold (a mechanism
    without its sample rate, a plan without a finite price, an accountant without its
    trial count...). Never the user's input: a bug, raised before anything that the
    argument would no longer cover is released (docs/architecture.md, "Privacy
    invariants")."""
