"""``--help`` and an argument error of the run and study commands stay instant: the
parsers are built from light modules (the strategy names and the option defaults,
:mod:`raydp_synth.tune.strategies.names`, :mod:`raydp_synth.tune.defaults`), and
torch, Ray, Optuna and the accountant load only once the arguments parse."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch", "ray", "optuna", "dp_accounting", "opacus")

_LOADED = '''
import runpy, sys
sys.argv = [{module!r}, *{argv!r}]
try:
    runpy.run_module({module!r}, run_name="__main__", alter_sys=True)
except SystemExit as done:
    code = done.code
print("\\nLOADED", code, sorted(m for m in {heavy!r} if m in sys.modules))
'''


@pytest.mark.parametrize("module", ["raydp_synth.tune", "raydp_synth.train"])
@pytest.mark.parametrize(("argv", "code"), [(["--help"], 0),
                                            (["dpaf", "--epsilon", "ten"], 2)])
def test_help_and_argument_errors_load_no_heavy_module(module: str, argv: list[str],
                                                       code: int) -> None:
    script = _LOADED.format(module=module, argv=argv, heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip().splitlines()[-1] == f"LOADED {code} []"
