"""The package's layers: every import points down, and no module imports itself
back through others.

Each top-level package (or module) of ``raydp_synth`` has a layer; a module may
import from its own package and from lower layers only. Function-level and
``TYPE_CHECKING`` imports count too: a lazy import is still a dependency. The order
is the one the README's Layout section explains.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import raydp_synth

PACKAGE_ROOT = Path(raydp_synth.__file__).parent

#: Bottom to top. A module may import from its own entry and from earlier entries.
LAYERS = (
    "errors",
    "log",
    "paths",
    "config",
    "privacy",
    "data",
    "accountant",
    "runtime",
    "methods",
    "release",
    "config_file",
    "evaluation",
    "cli",
    "train",
    "tune",
    "budget",
    "evaluate",
    "report",
    "sample",
    "dashboard",
    "stop_cluster",
    "self_check",
    "console",
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, int]]:
    """The ``raydp_synth`` modules ``path`` imports, with line numbers."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((target, node.lineno))
            # ``from pkg import submodule`` imports the submodule.
            found += [(f"{target}.{alias.name}", node.lineno) for alias in node.names]
    return [(name, line) for name, line in found if name.split(".")[0] == "raydp_synth"]


#: The package root is the public API's facade (``raydp_synth/__init__.py``): it names
#: the train, tune, evaluation and release entry points of every layer, but only under
#: ``TYPE_CHECKING``, and loads each on first attribute access (PEP 562), after the
#: package is initialised. Those imports are exempt from the layer and cycle checks:
#: they never run while ``import raydp_synth`` does (the tests below hold the root to
#: that: no runtime import of the package's own modules, and ``import raydp_synth``
#: loads nothing else).
FACADE = "raydp_synth"


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE_ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in files.items():
        if module == FACADE:
            continue  # lazy exports: see FACADE
        for target, _ in _imports(path):
            if target in files and target != module:
                graph[module].add(target)
    return graph


def _layer(module: str) -> int:
    parts = module.split(".")
    entry = PACKAGE_ROOT / parts[1] if len(parts) > 1 else None
    if entry is None or not (entry.with_suffix(".py").is_file() or entry.is_dir()):
        return -1  # the package's own __init__, or a name it defines (``__version__``)
    if parts[1] not in LAYERS:
        raise AssertionError(f"{module} is in no layer: add {parts[1]!r} to LAYERS")
    return LAYERS.index(parts[1])


def test_every_package_has_a_layer() -> None:
    entries = {p.stem if p.is_file() else p.name for p in PACKAGE_ROOT.iterdir()
               if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()}
    assert entries <= set(LAYERS), f"not layered: {sorted(entries - set(LAYERS))}"


def test_no_upward_import() -> None:
    upward = []
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        source = _module_name(path)
        if source == FACADE:
            continue  # lazy exports: see FACADE
        for target, line in _imports(path):
            if _layer(target) > _layer(source):
                upward.append(f"{path.relative_to(PACKAGE_ROOT.parent)}:{line} imports {target}")
    assert not upward, "imports that point up a layer:\n" + "\n".join(upward)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_no_import_cycle() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_facade_imports_the_package_only_for_type_checking() -> None:
    """The root's own imports of ``raydp_synth`` modules all sit under
    ``if TYPE_CHECKING:``: at run time it loads them on attribute access only."""
    tree = ast.parse((PACKAGE_ROOT / "__init__.py").read_text())
    checked = {id(node) for block in tree.body
               if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
               for node in ast.walk(block)}
    eager = [node.lineno for node in ast.walk(tree)
             if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in checked
             and any(name.split(".")[0] == "raydp_synth"
                     for name in ([a.name for a in node.names] if isinstance(node, ast.Import)
                                  else [node.module or ""]))]
    assert not eager, f"raydp_synth/__init__.py imports the package at run time, lines {eager}"


def test_importing_the_package_loads_nothing_else() -> None:
    code = ("import sys, raydp_synth; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('raydp_synth', 'torch', 'ray', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "['raydp_synth']"


@pytest.mark.parametrize("cycle", [{"a": {"b"}, "b": {"c"}, "c": {"a"}}])
def test_the_cycle_check_finds_a_cycle(cycle: dict[str, set[str]]) -> None:
    assert _cycles(cycle) == [["a", "b", "c"]]


#: Modules of ``raydp_synth.methods`` that every method may import: the contract,
#: the registry and the shared building blocks.
SHARED_METHOD_MODULES = ("base", "registry", "components")

#: The declared dependencies between method folders, each with its reason; no other
#: method imports another. PrivImage+G's fine-tuning *is* a dpGAN run (Li et al.
#: 2024, PrivImage, section 4.3: the pre-trained GAN is fine-tuned with dpGAN's
#: DP-SGD), so it runs dpGAN's loop and config rather than a copy of them.
METHOD_BASES: dict[str, frozenset[str]] = {"privimage": frozenset({"dpgan"})}


def _method_folder(module: str) -> str | None:
    """The method folder of ``raydp_synth.methods.<folder>...``, None outside one."""
    parts = module.split(".")
    if parts[:2] != ["raydp_synth", "methods"] or len(parts) < 3:
        return None
    return None if parts[2] in SHARED_METHOD_MODULES else parts[2]


def test_no_method_imports_another() -> None:
    """A method folder imports the shared modules, never a sibling method (but for
    :data:`METHOD_BASES`): what two methods share lives in ``methods/components``,
    which imports no method."""
    crossing = []
    for path in sorted((PACKAGE_ROOT / "methods").rglob("*.py")):
        module = _module_name(path)
        source = _method_folder(module)
        component = module.startswith("raydp_synth.methods.components")
        for target, line in _imports(path):
            folder = _method_folder(target)
            sibling = (source is not None and folder != source
                       and folder not in METHOD_BASES.get(source, frozenset()))
            if folder is not None and (component or sibling):
                crossing.append(f"{path.relative_to(PACKAGE_ROOT.parent)}:{line} imports {target}")
    assert not crossing, "a method imports another method:\n" + "\n".join(crossing)


def test_declared_method_bases_form_no_cycle() -> None:
    for method, bases in METHOD_BASES.items():
        for base in bases:
            assert method not in METHOD_BASES.get(base, frozenset()), (method, base)
            assert (PACKAGE_ROOT / "methods" / base / "__init__.py").is_file(), base


def test_the_sibling_check_finds_a_sibling_import() -> None:
    assert _method_folder("raydp_synth.methods.dpgan.loop") == "dpgan"
    assert _method_folder("raydp_synth.methods.components.pairs") is None
    assert _method_folder("raydp_synth.methods.registry") is None
    assert _method_folder("raydp_synth.runtime.context") is None


def test_the_readme_layout_table_lists_every_layer_in_order() -> None:
    """README.md's Layout table names each layer once, bottom to top, as LAYERS does."""
    readme = (PACKAGE_ROOT.parent / "README.md").read_text()
    section = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines()
            if line.startswith("| `")]
    named = [name.removesuffix(".py").removesuffix("/")
             for cell in rows for name in re.findall(r"`([^`]+)`", cell)]
    assert named == list(LAYERS)
