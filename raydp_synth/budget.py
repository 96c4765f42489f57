"""``python -m raydp_synth.budget STUDY_DIR``: a study's ledger and its statement.

Reads the ledger file only (no Ray needed, also while the study runs): every grant
and refusal, and the study's current (epsilon, delta) statement, replayed from the
ledger by the accountant's Ray-free core (the replay of a restarted accountant).
Curator-only: the ledger is inside the trusted boundary (a random-stopping study's
trial count K is in it).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import dp_accounting as dpa

from raydp_synth.accountant.core import LEDGER_NAME, StudyBudget
from raydp_synth.accountant.ledger import Ledger
from raydp_synth.accountant.strategies import pricing_class
from raydp_synth.cli import add_version_argument, run_cli
from raydp_synth.errors import ConfigError
from raydp_synth.privacy.events import event_from_json
from raydp_synth.privacy.pricing import epsilon

__all__ = ["ledger_statement", "main"]


def ledger_statement(study_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(statement, entries) of the study in ``study_dir``, priced from its ledger.

    The ledger is replayed by the accountant's own core
    (:meth:`~raydp_synth.accountant.core.StudyBudget.replay`), so the statement is the
    one the accountant makes from the same ledger.

    Raises:
        ConfigError: no ledger in ``study_dir``, or one that cannot be replayed.
    """
    path = Path(study_dir) / LEDGER_NAME
    if not path.is_file():
        raise ConfigError(f"{path} does not exist; pass a study directory (STORAGE/NAME)")
    entries = Ledger(path).entries()
    return StudyBudget.replay(entries, source=path).ledger_statement(), entries


def _plan_epsilon(entry: dict[str, Any], delta: float) -> str:
    """The epsilon of an entry's plan, for display ("" without one, "unpriced" for a
    refused plan that RDP cannot price)."""
    if "event" not in entry:
        return ""
    try:
        return f"{epsilon(event_from_json(entry['event']), delta=delta):.4f}"
    except (ConfigError, KeyError, TypeError, ValueError, ArithmeticError,
            dpa.UnsupportedEventError):
        return "unpriced"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m raydp_synth.budget",
                                     description="Print a study's ledger and its privacy statement.")
    parser.add_argument("study_dir", type=Path, help="the study directory (STORAGE/NAME)")
    add_version_argument(parser)
    args = parser.parse_args(argv)
    statement, entries = ledger_statement(args.study_dir)
    print(f"ledger of {args.study_dir} ({statement['mode']}):")
    print(f"  {'time':<32} {'kind':<8} {'trial':<22} {'plan epsilon':>12}  reason")
    for entry in entries[1:]:
        plan_eps = _plan_epsilon(entry, statement["delta"])
        kind = entry["kind"] + ("*" if entry.get("phase") == "final" else "")
        trial = entry.get("trial_id") or ", ".join(entry.get("trial_ids", []))  # undraw
        print(f"  {entry.get('time', ''):<32} {kind:<8} {trial:<22} "
              f"{plan_eps:>12}  {entry.get('reason') or ''}")
    print(f"study statement: ({statement['epsilon']:.4f}, {statement['delta']:g})-DP for the whole "
          f"search so far (budget epsilon {statement['budget_epsilon']:g}); "
          f"{statement['trials_granted']} trials granted, {statement['trials_refused']} refused")
    for line in pricing_class(statement["mode"]).ledger_lines(statement):
        print(line)
    return 0


if __name__ == "__main__":
    run_cli(main)
