"""Oracles the tests share: readelf's view of a file, and fixture output parsing."""

from __future__ import annotations

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


def skip_without(*tools: str) -> None:
    for tool in tools:
        require_tool(tool)


__all__ = ["output_of", "pytest", "readelf_symbols", "readelf_unique", "readelf_unique_names",
           "skip_without"]
