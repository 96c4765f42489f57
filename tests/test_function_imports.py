"""Imports of the package's own modules sit at the top of a module.

A function-level (lazy) import of a ``raydp_synth`` module hides a dependency from
the reader and usually papers over a layering problem; it stays only where it buys
something, and says what: a comment on its line or the line above, starting
``lazy:`` (e.g. ``# lazy: the driver loads torch and Ray; --help stays instant``).
At most :data:`MAX_FUNCTION_IMPORTS` in the package (issue 44).

Counted: ``import``/``from ... import`` statements of ``raydp_synth`` modules inside a
function body. Not counted: module-level imports, ``if TYPE_CHECKING:`` blocks, and
third-party imports (torch, Ray, scikit-learn, matplotlib may stay lazy to keep a
command line fast).
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import raydp_synth

PACKAGE_ROOT = Path(raydp_synth.__file__).parent

#: The most function-level imports of the package's own modules, all files together.
MAX_FUNCTION_IMPORTS = 20

#: Files whose function-level imports are left uncounted, each with its count: empty
#: since the imports of issue 44's restructuring moved to the top of their modules.
#: A count may only go down; keep the dict empty.
ALLOWANCE: dict[str, int] = {}

REASON = "lazy:"


@dataclass(frozen=True)
class FunctionImport:
    file: str  # relative to the package folder
    line: int
    target: str

    def __str__(self) -> str:
        return f"raydp_synth/{self.file}:{self.line} imports {self.target}"


def _package_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts if parts[-1] == "__init__" else parts[:-1]).removesuffix(".__init__")


def _targets(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        return [".".join(base + ([node.module] if node.module else []))]
    return [node.module or ""]


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in (
        "TYPE_CHECKING", "typing.TYPE_CHECKING")


def function_imports(path: Path) -> list[FunctionImport]:
    """The imports of ``raydp_synth`` modules inside a function body of ``path``."""
    return imports_in(path.read_text(), package=_package_of(path),
                      file=path.relative_to(PACKAGE_ROOT).as_posix())


def imports_in(source: str, *, package: str, file: str) -> list[FunctionImport]:
    """The function-level imports of ``raydp_synth`` modules in ``source``, a module
    of ``package`` (for relative imports)."""
    found: list[FunctionImport] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            if in_function and isinstance(child, ast.Import | ast.ImportFrom):
                targets = [t for t in _targets(child, package)
                           if t.split(".")[0] == "raydp_synth"]
                if targets:
                    found.append(FunctionImport(file, child.lineno, targets[0]))
            visit(child, in_function or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    visit(ast.parse(source, filename=file), False)
    return found


def _all_function_imports() -> list[FunctionImport]:
    return [found for path in sorted(PACKAGE_ROOT.rglob("*.py"))
            for found in function_imports(path)]


def _has_reason(imp: FunctionImport) -> bool:
    lines = (PACKAGE_ROOT / imp.file).read_text().splitlines()
    own = lines[imp.line - 1]
    above = lines[imp.line - 2].strip() if imp.line >= 2 else ""
    return (REASON in own.partition("#")[2]) or (above.startswith("#") and REASON in above)


def test_function_level_imports_stay_few() -> None:
    counted = [imp for imp in _all_function_imports() if imp.file not in ALLOWANCE]
    assert len(counted) <= MAX_FUNCTION_IMPORTS, (
        f"{len(counted)} function-level imports of raydp_synth modules (at most "
        f"{MAX_FUNCTION_IMPORTS}); move them to the top of their module:\n"
        + "\n".join(map(str, counted)))


def test_every_function_level_import_says_why() -> None:
    silent = [imp for imp in _all_function_imports()
              if imp.file not in ALLOWANCE and not _has_reason(imp)]
    assert not silent, (
        f"function-level imports without a '# {REASON} why' comment on their line or the "
        "line above (or move them to the top of the module):\n" + "\n".join(map(str, silent)))


def test_the_allowance_only_goes_down() -> None:
    counts = Counter(imp.file for imp in _all_function_imports())
    over = {file: (counts[file], allowed) for file, allowed in ALLOWANCE.items()
            if counts[file] > allowed}
    assert not over, ("files above their ALLOWANCE (found, allowed): "
                      f"{over}; move the new imports to the top of the module")


def test_the_walk_finds_function_level_imports_only() -> None:
    source = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "from raydp_synth.errors import ConfigError\n"
        "if TYPE_CHECKING:\n"
        "    from raydp_synth.data import DataInfo\n"
        "def f() -> None:\n"
        "    import torch\n"
        "    # lazy: a reason\n"
        "    from raydp_synth.log import progress\n"
        "    if TYPE_CHECKING:\n"
        "        from raydp_synth.paths import require_writable_folder\n"
        "    def g() -> None:\n"
        "        from . import paths\n"
        "class C:\n"
        "    def m(self) -> None:\n"
        "        import raydp_synth.config\n"
    )
    found = imports_in(source, package="raydp_synth", file="probe.py")
    assert [(imp.line, imp.target) for imp in found] == [
        (9, "raydp_synth.log"), (13, "raydp_synth"), (16, "raydp_synth.config")]
