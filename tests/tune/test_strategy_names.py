"""No code compares a search strategy's name outside the strategy tables (issue 44).

A strategy is a plug-in (raydp_synth/tune/strategies/): the code asks the strategy
object, or the trial role it hands its trials, what to do; it never branches on the
name. This test walks every module of the package (like tests/test_layers.py) and
fails on a comparison (``==``, ``!=``, ``in``, ``not in``) against a strategy's or a
trial role's name: a string literal, a tuple/list/set of them, the role-name
constants (``PUBLIC_SEARCH``, ``SUBSAMPLED_*``), or a module constant that holds one.

Allowed where the names are defined: the strategies' own modules and tables
(``raydp_synth/tune/strategies/``), the tune CLI (its argparse choices come from the
table), and the accountant (``raydp_synth/accountant/``), whose pricing modes are
its own table's keys (``raydp_synth/accountant/strategies/registry.py``, ``PRICING``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from raydp_synth.tune.strategies.registry import STRATEGIES
from raydp_synth.tune.strategies.roles import TRIAL_ROLES

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "raydp_synth"

#: Where a strategy's name may be compared (paths relative to the package root).
ALLOWED = (
    "tune/strategies/",  # the strategies and their tables
    "tune/__main__.py",  # the CLI: --strategy's choices
    "accountant/",  # the pricing table's own modes: accountant/strategies/registry.py
)

NAMES = frozenset(STRATEGIES) | frozenset(TRIAL_ROLES)
CONSTANTS = frozenset({"PUBLIC_SEARCH", "SUBSAMPLED_SEARCH", "SUBSAMPLED_FINAL"})
OPERATORS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)


def _names_in(node: ast.AST, constants: frozenset[str]) -> bool:
    """Whether ``node`` is, or literally holds, a strategy name (or a constant of one)."""
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_in(e, constants) for e in node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in ("frozenset", "set", "tuple"):
        return any(_names_in(a, constants) for a in node.args)
    if isinstance(node, ast.Name):
        return node.id in constants
    if isinstance(node, ast.Attribute):
        return node.attr in constants
    return False


def _module_constants(tree: ast.Module) -> frozenset[str]:
    """The role-name constants, and this module's own constants that hold a name."""
    found = set(CONSTANTS)
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) and node.value else []
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if value is not None and _names_in(value, frozenset(found)):
            found |= {t.id for t in targets if isinstance(t, ast.Name)}
    return frozenset(found)


def comparisons_of_names(source: str, filename: str = "<source>") -> list[int]:
    """The lines of ``source`` that compare a strategy name."""
    tree = ast.parse(source, filename=filename)
    constants = _module_constants(tree)
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or not any(
                isinstance(op, OPERATORS) for op in node.ops):
            continue
        if any(_names_in(side, constants) for side in (node.left, *node.comparators)):
            lines.append(node.lineno)
    return lines


def test_the_check_finds_each_kind_of_comparison() -> None:
    found = comparisons_of_names(
        'LIVE = frozenset({"compose", PUBLIC_SEARCH})\n'
        'a = s.selection == "random-stopping"\n'
        'b = mode in ("random-stopping", "subsampled")\n'
        'c = selection != SUBSAMPLED_FINAL\n'
        'd = s in LIVE\n'
        'e = s.selection is not None and "subsampled-search" != s.selection\n'
        'f = sampler == "dp-hypo"\n'  # a sampler, not a strategy
        'g = {"compose": 1}\n')  # a table, no comparison
    assert found == [2, 3, 4, 5, 6]


def test_no_strategy_name_is_compared_outside_the_tables() -> None:
    offenders = []
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        relative = path.relative_to(PACKAGE_ROOT).as_posix()
        if relative.startswith(ALLOWED):
            continue
        offenders += [f"raydp_synth/{relative}:{line}"
                      for line in comparisons_of_names(path.read_text(), str(path))]
    assert not offenders, ("strategy names compared outside the strategy tables (ask the "
                           "strategy or the trial role instead):\n" + "\n".join(offenders))
