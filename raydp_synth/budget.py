"""``python -m raydp_synth.budget STUDY_DIR``: a study's ledger and its statement.

Reads the ledger file only (no Ray needed, also while the study runs): every grant
and refusal, and the study's current (epsilon, delta) statement priced from the
ledger by dp-accounting, as the accountant prices it. Curator-only: the ledger is
inside the trusted boundary (a random-stopping study's trial count K is in it).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from raydp_synth.cli import run_cli
from raydp_synth.errors import ConfigError

__all__ = ["ledger_statement", "main"]


def ledger_statement(study_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(statement, entries) of the study in ``study_dir``, priced from its ledger."""
    from raydp_synth.accountant import LEDGER_NAME, Ledger, StudySettings
    from raydp_synth.privacy.accounting import compose_epsilon
    from raydp_synth.privacy.events import event_from_json

    path = Path(study_dir) / LEDGER_NAME
    if not path.is_file():
        raise ConfigError(f"{path} does not exist; pass a study directory (STORAGE/NAME)")
    entries = Ledger(path).entries()
    if not entries or entries[0].get("kind") != "study":
        raise ConfigError(f"{path} has no study header; it is not a raydp_synth ledger")
    header = entries[0]
    settings = StudySettings(
        epsilon=header["epsilon"], delta=header["delta"], mode=header["mode"],
        trials=header["trials"], distribution=header.get("distribution") or "poisson",
        reference_event=header.get("reference_event"),
    )
    grants = [e for e in entries if e.get("kind") == "grant"]
    if settings.mode == "compose":
        events = [event_from_json(g["event"]) for g in grants]
        epsilon = compose_epsilon(events, settings.delta) if events else 0.0
    else:
        epsilon = settings.random_stopping_epsilon()
    statement = {"mode": settings.mode, "epsilon": epsilon, "delta": settings.delta,
                 "budget_epsilon": settings.epsilon, "trials_granted": len(grants),
                 "trials_refused": sum(1 for e in entries if e.get("kind") == "refusal")}
    if settings.mode == "random-stopping":
        statement.update(distribution=settings.distribution, mean_trials=settings.trials,
                         trial_count_secret=header.get("trial_count"))
    return statement, entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m raydp_synth.budget",
                                     description="Print a study's ledger and its privacy statement.")
    parser.add_argument("study_dir", type=Path, help="the study directory (STORAGE/NAME)")
    args = parser.parse_args(argv)
    from raydp_synth.privacy.accounting import compose_epsilon
    from raydp_synth.privacy.events import event_from_json

    statement, entries = ledger_statement(args.study_dir)
    print(f"ledger of {args.study_dir} ({statement['mode']}):")
    print(f"  {'time':<32} {'kind':<8} {'trial':<22} {'plan epsilon':>12}  reason")
    for entry in entries[1:]:
        plan_eps = ""
        if "event" in entry:
            plan_eps = f"{compose_epsilon([event_from_json(entry['event'])], statement['delta']):.4f}"
        print(f"  {entry.get('time', ''):<32} {entry['kind']:<8} {entry.get('trial_id', ''):<22} "
              f"{plan_eps:>12}  {entry.get('reason') or ''}")
    print(f"study statement: ({statement['epsilon']:.4f}, {statement['delta']:g})-DP for the whole "
          f"search so far (budget epsilon {statement['budget_epsilon']:g}); "
          f"{statement['trials_granted']} trials granted, {statement['trials_refused']} refused")
    if statement["mode"] == "random-stopping":
        print(f"  random stopping: {statement['distribution']} with mean "
              f"{statement['mean_trials']}; K={statement['trial_count_secret']} "
              "(curator-only: never publish K)")
    return 0


if __name__ == "__main__":
    run_cli(main)
