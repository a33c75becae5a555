"""The layers of README's Layout section are the package's real import graph.

The table in README.md lists, for each layer, its folders and files; every
module of the package is in exactly one of them, and every import of every
module, those inside functions and under ``TYPE_CHECKING`` included, must go
to its own layer or one below.  ``elfpatch/analysis/`` must also
stay free of I/O and processes: it gets opened files and returns data.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "elfpatch"

# What a module that does no I/O and starts no process has no use for.
_IO_MODULES = {"os", "subprocess", "multiprocessing", "concurrent", "socket", "tempfile",
               "shutil", "ctypes", "signal", "mmap", "fcntl", "threading", "io"}
# (``replace`` and ``stat`` are left out: str.replace and the like share the names.)
_IO_CALLS = {"open", "fork", "popen", "system", "read_text", "read_bytes", "write_text",
             "write_bytes", "mkdir", "unlink", "rmdir", "symlink_to", "iterdir"}


@dataclass(frozen=True)
class Import:
    module: str
    target: str
    line: int


def layer_table() -> list[tuple[str, list[str]]]:
    """(layer, folders and files) from README, lowest layer first; a folder ends in /."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- layers:.*?-->(.*?)<!-- end of layers -->", text, re.S)
    assert block, "README.md has no layer table"
    rows = []
    for line in block.group(1).splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0] not in ("layer", "---"):
            rows.append((cells[0], re.findall(r"`([\w./]+)`", cells[1])))
    return rows


FIXTURES = ROOT / "fixtures"  # installed as elfpatch.fixtures


def module_name(path: Path) -> str:
    if path.is_relative_to(FIXTURES):
        parts = ["elfpatch", "fixtures", *path.relative_to(FIXTURES).with_suffix("").parts]
    else:
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    files = [*PACKAGE.rglob("*.py"), *FIXTURES.glob("*.py")]
    return {module_name(path): path for path in sorted(files)}


def imports_of(name: str, path: Path) -> list[Import]:
    """Every elfpatch module ``name`` imports, wherever the import statement is."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [Import(name, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # ``from elfpatch.x import y`` may import the module elfpatch.x.y.
            found += [Import(name, f"{base}.{alias.name}", node.lineno) for alias in node.names]
    known = modules()
    resolved = []
    for item in found:
        target = item.target
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target.startswith("elfpatch"):
            resolved.append(Import(name, target, item.line))
    return resolved


def places_of(module: str, table: list[tuple[str, list[str]]]) -> list[tuple[int, str]]:
    """(layer index, entry) of every folder or file of the table that holds ``module``."""
    path = modules()[module].relative_to(ROOT).as_posix()
    return [(index, entry) for index, (_layer, entries) in enumerate(table) for entry in entries
            if path == entry or (entry.endswith("/") and path.startswith(entry))]


def layer_of(module: str, table: list[tuple[str, list[str]]]) -> int:
    """The index of the one layer whose folders or files hold ``module``."""
    places = places_of(module, table)
    return places[0][0] if len(places) == 1 else -1


def test_every_module_has_a_layer() -> None:
    table = layer_table()
    assert [layer for layer, _ in table] == ["base", "read", "loader", "analyse", "plan",
                                             "write", "service", "report", "interface"]
    assert {name: places_of(name, table) for name in modules()
            if len(places_of(name, table)) != 1} == {}
    entries = [entry for _layer, listed in table for entry in listed]
    assert [entry for entry in entries if not (ROOT / entry).exists()] == []
    assert [entry for entry in entries if entry.endswith("/") != (ROOT / entry).is_dir()] == []


def test_no_import_goes_up_a_layer() -> None:
    table = layer_table()
    names = [layer for layer, _ in table]
    upward = []
    for name, path in modules().items():
        mine = layer_of(name, table)
        for item in imports_of(name, path):
            theirs = layer_of(item.target, table)
            if theirs > mine:
                upward.append(f"{path.relative_to(ROOT)}:{item.line}: {name} ({names[mine]}) "
                              f"imports {item.target} ({names[theirs]})")
    assert upward == []


def import_circles() -> list[list[str]]:
    """Groups of modules that import one another, directly or through others (Tarjan)."""
    graph = {name: sorted({item.target for item in imports_of(name, path)} - {name})
             for name, path in modules().items()}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(name: str) -> None:
        order[name] = low[name] = len(order)
        stack.append(name)
        for target in graph.get(name, []):
            if target not in order:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in stack:
                low[name] = min(low[name], order[target])
        if low[name] == order[name]:
            group = stack[stack.index(name):]
            del stack[stack.index(name):]
            if len(group) > 1:
                circles.append(sorted(group))

    for name in graph:
        if name not in order:
            visit(name)
    return circles


def test_no_modules_import_each_other() -> None:
    """A circle, even one closed only under TYPE_CHECKING, means two modules are one."""
    assert import_circles() == []


def test_the_import_reader_sees_function_level_imports() -> None:
    """The check above would pass on anything if the reader missed imports."""
    found = imports_of("elfpatch.api", PACKAGE / "api.py")
    assert {"elfpatch.service.runner", "elfpatch.service.check", "elfpatch.errors"} <= \
        {item.target for item in found}
    assert "elfpatch.fixtures.build" in modules()
    assert layer_of("elfpatch.errors", layer_table()) == 0
    assert layer_of("elfpatch.elf.symbols", layer_table()) == 1
    assert layer_of("elfpatch.wheel.write", layer_table()) == 5


@pytest.mark.parametrize("name", [n for n in modules() if n.startswith("elfpatch.analysis")])
def test_analysis_does_no_io(name: str) -> None:
    tree = ast.parse(modules()[name].read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and not node.level}
    calls = {node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
             for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, (ast.Attribute, ast.Name))}
    assert imported & _IO_MODULES == set()
    assert calls & _IO_CALLS == set()


# -- the tests' own structure -------------------------------------------------------------

TESTS = ROOT / "tests"
# Programs whose output only tests/support/readelf.py reads.
_OUTPUT_PARSED_IN_SUPPORT = {"readelf", "eu-readelf", "nm"}


def _test_modules_imported(source: str) -> set[str]:
    """The ``test_*`` modules ``source`` imports, at any depth and in any form."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):  # "from . import test_x" names no module
            names = [node.module] if node.module else [alias.name for alias in node.names]
        else:
            continue
        found |= {n for n in names if any(p.startswith("test_") for p in n.split("."))}
    return found


def _tool_invocations(path: Path) -> set[str]:
    """The programs of _OUTPUT_PARSED_IN_SUPPORT that ``path`` starts: an argument list
    (list or tuple literal) whose first item names one."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.List | ast.Tuple) and node.elts \
                and isinstance(node.elts[0], ast.Constant) \
                and node.elts[0].value in _OUTPUT_PARSED_IN_SUPPORT:
            found.add(node.elts[0].value)
    return found


def test_no_test_module_imports_another_and_readelf_is_read_in_one_place() -> None:
    """What tests share lives in tests/support/; binutils' output has one parser there."""
    assert _test_modules_imported("def f():\n    from test_fix import x\nimport tests.test_a\n") \
        == {"test_fix", "tests.test_a"}
    assert _tool_invocations(TESTS / "support" / "readelf.py") >= {"readelf", "nm"}
    imports = {str(p.relative_to(ROOT)): _test_modules_imported(p.read_text())
               for p in sorted(TESTS.glob("test_*.py"))}
    assert {path: found for path, found in imports.items() if found} == {}
    tools = {str(p.relative_to(ROOT)): _tool_invocations(p) for p in sorted(TESTS.rglob("*.py"))
             if p != TESTS / "support" / "readelf.py"}
    assert {path: found for path, found in tools.items() if found} == {}
