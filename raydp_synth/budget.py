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

from raydp_synth.cli import add_version_argument, run_cli
from raydp_synth.errors import ConfigError

__all__ = ["ledger_statement", "main"]


def ledger_statement(study_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(statement, entries) of the study in ``study_dir``, priced from its ledger.

    The ledger is replayed by the accountant's own core
    (:meth:`~raydp_synth.accountant.core.StudyBudget.replay`), so the statement is the
    one the accountant makes from the same ledger.

    Raises:
        ConfigError: no ledger in ``study_dir``, or one that cannot be replayed.
    """
    from raydp_synth.accountant.core import LEDGER_NAME, StudyBudget
    from raydp_synth.accountant.ledger import Ledger

    path = Path(study_dir) / LEDGER_NAME
    if not path.is_file():
        raise ConfigError(f"{path} does not exist; pass a study directory (STORAGE/NAME)")
    entries = Ledger(path).entries()
    budget = StudyBudget.replay(entries, source=path)
    settings = budget.settings
    statement = {"mode": settings.mode, "epsilon": budget.spent_epsilon(),
                 "delta": settings.delta, "budget_epsilon": settings.epsilon,
                 "trials_granted": len(budget.grants), "trials_refused": len(budget.refused)}
    if settings.mode == "random-stopping":
        statement.update(distribution=settings.distribution, mean_trials=settings.trials,
                         trial_count_secret=budget.trial_count)
        if settings.density_ratio != 1:
            statement.update(density_ratio=settings.density_ratio)
    if settings.mode == "subsampled":
        eps = budget.subsampled_epsilons()
        statement.update(distribution=settings.distribution, mean_trials=settings.trials,
                         trial_count_secret=budget.trial_count,
                         tune_fraction=settings.tune_fraction, tuning_epsilon=eps["tuning"],
                         final_run_epsilon=eps["final"])
    return statement, entries


def _plan_epsilon(entry: dict[str, Any], delta: float) -> str:
    """The epsilon of an entry's plan, for display ("" without one, "unpriced" for a
    refused plan that RDP cannot price)."""
    import dp_accounting as dpa

    from raydp_synth.privacy.events import event_from_json
    from raydp_synth.privacy.pricing import epsilon

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
    if statement["mode"] == "random-stopping":
        print(f"  random stopping: {statement['distribution']} with mean "
              f"{statement['mean_trials']}; K={statement['trial_count_secret']} "
              "(curator-only: never publish K)")
        if "density_ratio" in statement:
            print(f"  adaptive (dp-hypo): proposals within [1/{statement['density_ratio']:g}, "
                  f"{statement['density_ratio']:g}] x the prior, priced by DP-HyPO's bound")
    if statement["mode"] == "subsampled":
        final = statement["final_run_epsilon"]
        print(f"  subsampled tuning (Koskela & Kulkarni 2023, variant 1): tuning phase on a "
              f"Poisson q={statement['tune_fraction']:g} subset, {statement['distribution']} "
              f"trial count with mean {statement['mean_trials']}; K={statement['trial_count_secret']} "
              "(curator-only: never publish K)")
        print(f"  tuning phase epsilon {statement['tuning_epsilon']:.4f} (amplified, Zhu & Wang "
              "2019); final run (grant*) epsilon "
              + ("not granted yet" if final is None else f"{final:.4f}")
              + f"; composed (RDP) {statement['epsilon']:.4f}")
    return 0


if __name__ == "__main__":
    run_cli(main)
