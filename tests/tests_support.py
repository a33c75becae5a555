"""Oracles the tests share: readelf's view of a file, fixture output parsing, opt-in inputs."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool

_SYMBOL_TABLE = re.compile(r"^Symbol table '(\S+)' contains")
_SYMBOL_ROW = re.compile(r"^\s*(\d+):\s+[0-9a-f]+\s+\S+\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*(\S*)")


def readelf_symbols(path: Path | str, *extra: str) -> list[tuple[str, int, str, str, str]]:
    """(table, index, type, binding, name) of every symbol, as readelf prints them."""
    require_tool("readelf")
    text = subprocess.run(["readelf", "-W", "-s", "--dyn-syms", *extra, str(path)],
                          capture_output=True, text=True, check=True).stdout
    rows, table = [], None
    for line in text.splitlines():
        header = _SYMBOL_TABLE.match(line)
        if header:
            table = header.group(1)
            continue
        row = _SYMBOL_ROW.match(line)
        if row and table:
            name = row.group(6).split("@")[0]
            rows.append((table, int(row.group(1)), row.group(2), row.group(3), name))
    return rows


def readelf_unique(path: Path | str, *extra: str) -> list[tuple[str, int, str]]:
    """(table, index, name) of the UNIQUE symbols, in readelf's order."""
    return [(table, index, name) for table, index, _t, binding, name
            in readelf_symbols(path, *extra) if binding == "UNIQUE"]


def readelf_unique_names(path: Path | str) -> set[str]:
    return {name for _table, _index, name in readelf_unique(path)}


def output_of(built: object) -> dict[str, str]:
    """key=value lines a fixture host prints."""
    stdout = built.run().stdout  # type: ignore[attr-defined]
    pairs = (line.split("=", 1) for line in stdout.splitlines() if "=" in line)
    return {key: value for key, value in pairs}


def readelf_unique_definitions(path: Path | str) -> set[tuple[int, str]]:
    """(index, name) of the UNIQUE symbols ``.dynsym`` defines (Ndx not UND), per readelf."""
    require_tool("readelf")
    text = subprocess.run(["readelf", "--dyn-syms", "-W", str(path)], capture_output=True,
                          text=True, check=True).stdout
    rows = (_SYMBOL_ROW.match(line) for line in text.splitlines())
    return {(int(row.group(1)), row.group(6).split("@")[0]) for row in rows
            if row and row.group(3) == "UNIQUE" and row.group(5) != "UND"}


def skip_without(*tools: str) -> None:
    for tool in tools:
        require_tool(tool)


# Opt-in tests on real, large inputs (a PyTorch wheel and one of its libraries)
# that are not part of the repository: each runs only when its variable names a file.
TORCH_LIBRARY_VARIABLE = "ELFPATCH_TORCH_LIB"  # e.g. .../torch/lib/libtorch_cpu.so
TORCH_WHEEL_VARIABLE = "ELFPATCH_TORCH_WHEEL"  # e.g. torch-...-manylinux_2_28_x86_64.whl


def opt_in_file(variable: str, what: str) -> Path:
    """The file ``$variable`` names; a skip when it is unset, a failure when it is missing."""
    configured = os.environ.get(variable)
    if not configured:
        pytest.skip(f"set {variable} to {what} to run this")
    path = Path(configured)
    if not path.is_file():
        pytest.fail(f"{variable}={configured}: no such file")
    return path


__all__ = ["TORCH_LIBRARY_VARIABLE", "TORCH_WHEEL_VARIABLE", "opt_in_file", "output_of", "pytest",
           "readelf_symbols", "readelf_unique", "readelf_unique_definitions",
           "readelf_unique_names", "skip_without"]
