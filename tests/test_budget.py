"""``python -m raydp_synth.budget``: the ledger's statement, replayed without Ray."""

from __future__ import annotations

import subprocess
import sys

import pytest

from raydp_synth.budget import ledger_statement, main
from raydp_synth.errors import ConfigError
from tests.accountant.test_core import DELTA, Study, _compose, _plan


def test_states_the_budget_the_accountant_replays(tmp_path, capsys):
    study = Study(tmp_path, _compose(3.0))
    for trial_id, plan in [("t0", _plan(6.0, None, 1)), ("t1", _plan(0.6, None, 30)),
                           ("t1", _plan(0.6, None, 30)), ("t2", {"type": "Nope"}),
                           ("t3", _plan(6.0, None, 1))]:
        study.request(trial_id, plan)
    statement, entries = ledger_statement(tmp_path)
    assert entries == study.ledger.entries()
    assert statement == {
        "mode": "compose", "epsilon": study.budget.spent_epsilon(), "delta": DELTA,
        "budget_epsilon": 3.0, "trials_granted": 2, "trials_refused": 2,
    }
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"({statement['epsilon']:.4f}, {DELTA:g})-DP" in out
    assert "2 trials granted, 2 refused" in out
    assert out.count("budget exhausted") == 2 and "not a valid plan" in out


def test_refuses_a_directory_without_a_ledger(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        ledger_statement(tmp_path)


def test_reading_a_ledger_loads_no_torch_or_ray():
    """The statement is priced by dp-accounting from the ledger alone: a curator's
    ``budget`` (and ``--help``) stays fast on a machine without torch warmed up."""
    code = ("import sys, raydp_synth.budget; "
            "print(sorted(m for m in ('torch', 'ray') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
