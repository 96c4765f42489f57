"""``raydp-synth COMMAND ...``: the installed console script, one command for every
``python -m raydp_synth.X`` entry point.

``raydp-synth tune dpaf --trials 4`` runs exactly ``python -m raydp_synth.tune dpaf
--trials 4``: each command is the ``main(argv)`` of its module, imported only when
that command runs (``raydp-synth --version`` starts neither torch nor Ray). A command
whose module this version does not ship says so in one line (exit 2).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Sequence

from raydp_synth.cli import run_cli, version_line
from raydp_synth.errors import ConfigError

__all__ = ["COMMANDS", "command_main", "dispatch", "main"]

#: command -> (module whose ``main(argv)`` runs it, one-line description).
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("raydp_synth.train.__main__", "one DP training run on Ray Train"),
    "tune": ("raydp_synth.tune.__main__",
             "a hyperparameter search under one privacy budget, and its release"),
    "evaluate": ("raydp_synth.evaluate", "the curator's evaluation of a run (CAS, FID, IS)"),
    "budget": ("raydp_synth.budget", "a study's ledger and its privacy statement"),
    "sample": ("raydp_synth.sample",
               "more samples from a release (post-processing, no privacy cost)"),
    "report": ("raydp_synth.report", "one table of the runs' and studies' privacy and utility"),
    "dashboard": ("raydp_synth.dashboard.__main__",
                  "Prometheus and Grafana for a Ray session, with the budget dashboard"),
    "stop-cluster": ("raydp_synth.stop_cluster",
                     "stop one local Ray cluster (a --keep-cluster run's), not every Ray here"),
    "self-check": ("raydp_synth.self_check",
                   "check that this environment (a cluster image, a node) runs raydp_synth"),
}


def usage() -> str:
    """The console script's help: its commands and where each one's options are."""
    width = max(map(len, COMMANDS))
    lines = ["usage: raydp-synth COMMAND [ARGS...] | --version | --help", "", "commands:"]
    lines += [f"  {name:<{width}}  {description}" for name, (_, description) in COMMANDS.items()]
    lines += ["", "raydp-synth COMMAND --help lists a command's options (the same as "
              "python -m raydp_synth.COMMAND)."]
    return "\n".join(lines)


def command_main(command: str) -> Callable[[list[str] | None], int]:
    """The ``main(argv)`` of ``command``, imported now.

    Raises:
        ConfigError: an unknown command, or one whose module this version lacks.
    """
    if command not in COMMANDS:
        raise ConfigError(f"unknown command {command!r}; choose one of "
                          f"{', '.join(COMMANDS)} (raydp-synth --help)")
    module_name = COMMANDS[command][0]
    main = None
    if importlib.util.find_spec(module_name) is not None:
        main = getattr(importlib.import_module(module_name), "main", None)
    if not callable(main):
        raise ConfigError(f"raydp-synth {command} is not available in this version "
                          f"({version_line()})")
    return main


def dispatch(argv: Sequence[str] | None) -> int:
    """Run the command ``argv[0]`` with the rest of ``argv``; its exit code."""
    args = list(argv or [])
    if not args:
        raise ConfigError("give a command: " + ", ".join(COMMANDS) + " (raydp-synth --help)")
    if args[0] in ("-h", "--help"):
        print(usage())
        return 0
    if args[0] == "--version":
        print(version_line())
        return 0
    return command_main(args[0])(args[1:])


def main(argv: list[str] | None = None) -> None:
    """The ``raydp-synth`` console script (``[project.scripts]``): user errors are one
    line and exit code 2, like every ``python -m`` form (:func:`raydp_synth.cli.run_cli`)."""
    import sys

    run_cli(dispatch, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
