"""readelf and nm as oracles: the one place the tests run them and read what they print.

binutils shares no code with elfpatch, so what it lists is what a fix or a
scan is compared with.  Each output format has one parser here: the symbol
tables (``-s``), the section headers (``-S``), the file header (``-h``),
the dynamic section (``-d``), relocations (``-r``, RELR included), hex dumps
(``-x``), the warnings on stderr, and ``nm``'s name list.  A test that
needs another view adds a function here rather than parsing output itself
(``tests/test_layers.py`` checks that).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .build import require_tool


def _readelf(path: Path | str, *options: str,
             check: bool = True) -> subprocess.CompletedProcess[str]:
    """``readelf -W OPTIONS PATH``; a skip when binutils is missing."""
    require_tool("readelf")
    return subprocess.run(["readelf", "-W", *options, str(path)], capture_output=True,
                          text=True, errors="replace", check=check, timeout=120)


# -- symbol tables (-s, --dyn-syms, -D) -------------------------------------------------------

_TABLE = re.compile(r"^Symbol table (?:'(\S+)'|for image) contains")
_ROW = re.compile(r"^\s*(\d+):\s+([0-9a-f]+)\s+(\d+|0x[0-9a-f]+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)"
                  r"\s*(\S*)")


@dataclass(frozen=True)
class ReadelfSymbol:
    table: str  # ".dynsym" or ".symtab"
    index: int
    value: int
    size: int
    type: str  # OBJECT, FUNC, TLS, FILE, ...
    binding: str  # LOCAL, GLOBAL, WEAK, UNIQUE
    visibility: str
    ndx: str  # a section index, UND or ABS
    name: str  # without its @VERSION


def parse_symbols(text: str) -> list[ReadelfSymbol]:
    """The rows of every symbol table in ``readelf -s`` output, in readelf's order."""
    rows, table = [], None
    for line in text.splitlines():
        header = _TABLE.match(line)
        if header:
            table = header.group(1) or ".dynsym"  # -D names no section: it is the dynamic table
            continue
        row = _ROW.match(line)
        if row and table:
            index, value, size, stype, bind, vis, ndx, name = row.groups()
            rows.append(ReadelfSymbol(table, int(index), int(value, 16), int(size, 0), stype,
                                      bind, vis, ndx, name.split("@")[0]))
    return rows


def readelf_symbols(path: Path | str, *, use_dynamic: bool = False) -> list[ReadelfSymbol]:
    """Every symbol of ``.dynsym`` and ``.symtab``; with ``use_dynamic`` found through
    PT_DYNAMIC (``-D``), as for a file without section headers."""
    tables = ["-D"] if use_dynamic else ["--dyn-syms"]
    return parse_symbols(_readelf(path, "-s", *tables).stdout)


def symtab_address(path: Path | str, name: str) -> int:
    """The value of the .symtab symbol ``name``."""
    return next(s.value for s in readelf_symbols(path) if s.table == ".symtab" and s.name == name)


def tu_initializer(path: Path | str, fragment: str) -> int | None:
    """Where the initializer of the TU whose gcc name holds ``fragment`` starts (None:
    there is none, as where -flto merged the initializers)."""
    return next((s.value for s in readelf_symbols(path) if s.table == ".symtab"
                 and s.name.startswith("_GLOBAL__sub_I_") and fragment in s.name), None)


def readelf_unique(path: Path | str, *, use_dynamic: bool = False) -> list[tuple[str, int, str]]:
    """(table, index, name) of the UNIQUE symbols, in readelf's order."""
    return [(s.table, s.index, s.name) for s in readelf_symbols(path, use_dynamic=use_dynamic)
            if s.binding == "UNIQUE"]


def readelf_unique_names(path: Path | str) -> set[str]:
    return {name for _table, _index, name in readelf_unique(path)}


def readelf_unique_definitions(path: Path | str) -> set[tuple[int, str]]:
    """(index, name) of the UNIQUE symbols ``.dynsym`` defines (Ndx not UND)."""
    return {(s.index, s.name) for s in readelf_symbols(path)
            if s.table == ".dynsym" and s.binding == "UNIQUE" and s.ndx != "UND"}


def readelf_symbol_sections(path: Path | str) -> dict[str, str]:
    """Symbol name -> name of the section it is defined in (symbols with a section index)."""
    names = {str(s.index): s.name for s in readelf_sections(path)}
    return {s.name: names[s.ndx] for s in readelf_symbols(path) if s.ndx in names and s.name}


# -- section headers (-S) and the file header (-h) --------------------------------------------

_SECTION = re.compile(
    r"^\s*\[\s*(\d+)\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)")
_HEADER_CLASS = re.compile(r"^\s*Class:\s+ELF(32|64)", re.M)
_HEADER_DATA = re.compile(r"^\s*Data:\s+.*(little|big) endian", re.M)


@dataclass(frozen=True)
class ReadelfSection:
    index: int
    name: str
    address: int
    offset: int
    size: int


def readelf_sections(path: Path | str) -> list[ReadelfSection]:
    """The section headers readelf lists (the null section's row is not one of them)."""
    found = []
    for match in map(_SECTION.match, _readelf(path, "-S").stdout.splitlines()):
        if match and match.group(1) != "0":
            index, name, address, offset, size = match.groups()
            found.append(ReadelfSection(int(index), name, int(address, 16), int(offset, 16),
                                        int(size, 16)))
    return found


def readelf_section(path: Path | str, name: str) -> ReadelfSection:
    found = next((s for s in readelf_sections(path) if s.name == name), None)
    assert found is not None, f"{path} has no {name}"
    return found


def readelf_word_and_order(path: Path | str) -> tuple[int, Literal["little", "big"]]:
    """(word size in bytes, byte order) from the file header."""
    header = _readelf(path, "-h").stdout
    elf_class, data = _HEADER_CLASS.search(header), _HEADER_DATA.search(header)
    assert elf_class and data, header
    return int(elf_class.group(1)) // 8, "little" if data.group(1) == "little" else "big"


# -- section contents (-x) ----------------------------------------------------------------------

_HEX_LINE = re.compile(r"^\s*0x[0-9a-f]+\s+(.*)$")


def readelf_hex_dump(path: Path | str, section: str, size: int) -> bytes:
    """The ``size`` bytes of ``section`` as stored in the file, from ``readelf -x``."""
    data = bytearray()
    for match in map(_HEX_LINE.match, _readelf(path, "-x", section).stdout.splitlines()):
        if match is None:
            continue
        wanted = min(16, size - len(data))  # the rest of the line is the ASCII column
        for group in match.group(1).split():
            if wanted <= 0:
                break
            data += bytes.fromhex(group)
            wanted -= len(group) // 2
    assert len(data) == size
    return bytes(data)


# -- the dynamic section (-d) -------------------------------------------------------------------

def readelf_dynamic_tags(path: Path | str) -> set[str]:
    """The dynamic tags readelf names, e.g. {"GNU_HASH", "RELR", ...}."""
    text = _readelf(path, "-d").stdout
    return {line.split("(", 1)[1].split(")", 1)[0] for line in text.splitlines()
            if line.strip().startswith("0x") and "(" in line}


# -- relocations (-r) ---------------------------------------------------------------------------

_RELOCATIONS = re.compile(r"^Relocation section '([^']+)'")
_RELOCATION = re.compile(r"^([0-9a-f]+)\s+[0-9a-f]+\s+(R_\w+)\s*(.*)$")
_SYMBOL_ADDEND = re.compile(r"^([0-9a-f]+)\s+(\S+)(?:\s+([+-])\s+([0-9a-f]+))?$")
# RELR locations: binutils 2.38-2.40 print one address a line after "N offsets";
# later versions print "index: entry address symbol" rows and "address symbol"
# continuation rows.
_RELR_ROW = re.compile(r"^\s*[0-9a-f]+:\s+[0-9a-f]+\s+([0-9a-f]{8,16})\b")
_RELR_ADDRESS = re.compile(r"^\s*([0-9a-f]{8,16})(?:\s+\S.*)?$")


@dataclass(frozen=True)
class ReadelfRelocation:
    section: str
    offset: int
    type: str
    symbol: str | None
    value: int  # the symbol's value (0 without a symbol)
    addend: int | None  # None for REL, whose addend is the slot's content


@dataclass(frozen=True)
class ReadelfRelocations:
    entries: tuple[ReadelfRelocation, ...]  # REL and RELA rows
    relr: tuple[int, ...]  # the addresses of the RELR sections, in order


def readelf_relocations(path: Path | str) -> ReadelfRelocations:
    """Every relocation ``readelf -r`` lists, and the locations of packed relative ones."""
    entries: list[ReadelfRelocation] = []
    relr: list[int] = []
    section = ""
    for line in _readelf(path, "-r").stdout.splitlines():
        header = _RELOCATIONS.match(line)
        if header:
            section = header.group(1)
            continue
        if section.startswith(".relr"):
            row = _RELR_ROW.match(line) or _RELR_ADDRESS.match(line)
            if row:
                relr.append(int(row.group(1), 16))
            continue
        match = _RELOCATION.match(line)
        if match:
            entries.append(_relocation(section, match))
    return ReadelfRelocations(tuple(entries), tuple(relr))


def _relocation(section: str, match: re.Match[str]) -> ReadelfRelocation:
    offset, kind, rest = int(match.group(1), 16), match.group(2), match.group(3).strip()
    rela = section.startswith(".rela")
    symbol = _SYMBOL_ADDEND.match(rest)
    if symbol and not re.fullmatch(r"[0-9a-f]+", rest):
        addend = int(symbol.group(4) or "0", 16) * (-1 if symbol.group(3) == "-" else 1)
        return ReadelfRelocation(section, offset, kind, symbol.group(2).split("@")[0],
                                 int(symbol.group(1), 16), addend if rela else None)
    return ReadelfRelocation(section, offset, kind, None, 0, int(rest, 16) if rela else None)


def readelf_relr(path: Path | str) -> list[int]:
    """The addresses readelf lists under the RELR sections, in order."""
    return list(readelf_relocations(path).relr)


# -- what readelf says on stderr ----------------------------------------------------------------

_PROBLEM = re.compile(r"^readelf: (Warning|Error): ")


def readelf_warnings(path: Path | str) -> list[str]:
    """What ``readelf -W -a`` says on stderr, the file name replaced by FILE."""
    result = _readelf(path, "-a", check=False)
    return result.stderr.replace(str(path), "FILE").splitlines()


def readelf_problems(path: Path | str) -> set[str]:
    """The warning and error lines of :func:`readelf_warnings`."""
    return {line for line in readelf_warnings(path) if _PROBLEM.match(line)}


# -- nm -----------------------------------------------------------------------------------------

_NM_ROW = re.compile(r"^([0-9a-f]+) \S (.+)$")
_MAPPING_SYMBOL = re.compile(r"^\$[a-z](\.|$)")


def nm_names(path: Path | str, addresses: set[int]) -> dict[int, set[str]]:
    """Names ``nm`` gives each address (``.symtab``, else ``nm -D``), mapping symbols aside."""
    require_tool("nm")
    found: dict[int, set[str]] = {}
    for dynamic in ([], ["-D"]):
        if found.keys() >= addresses:
            break
        text = subprocess.run(["nm", "--defined-only", *dynamic, str(path)],
                              capture_output=True, text=True, timeout=120).stdout
        names: dict[int, set[str]] = {}
        for match in map(_NM_ROW.match, text.splitlines()):
            if match and int(match.group(1), 16) in addresses \
                    and not _MAPPING_SYMBOL.match(match.group(2)):
                names.setdefault(int(match.group(1), 16), set()).add(match.group(2))
        for address, candidates in names.items():
            found.setdefault(address, candidates)
    return found


# -- symbol versions (-V) ---------------------------------------------------------------------

_VERSYM_ENTRY = re.compile(r"\s+([0-9a-f]+)(h?)\s*\(([^)]*)\)")
_VERSION_FILE = re.compile(r"^\s*\S+: Version: \d+\s+File: (\S+)\s+Cnt: \d+")
_VERSION_NEED = re.compile(r"^\s*\S+:\s+Name: (\S+)\s+Flags: (.*?)\s+Version: \d+")
_VERSION_DEFINITION = re.compile(r"^\s*\S+: Rev: \d+\s+Flags: (.*?)\s+Index: \d+\s+Cnt: \d+\s+"
                                 r"Name: (\S+)")


@dataclass(frozen=True)
class ReadelfVersions:
    """``readelf -V``: each .dynsym entry's version, the versions defined and needed."""

    symbols: tuple[tuple[int, bool, str], ...]  # (index, hidden, name) per .dynsym entry
    defined: frozenset[str]
    needed: frozenset[tuple[str, str, bool]]  # (file, version, weak)


def readelf_versions(path: Path | str) -> ReadelfVersions:
    symbols: list[tuple[int, bool, str]] = []
    defined: set[str] = set()
    needed: set[tuple[str, str, bool]] = set()
    section, file = "", ""
    for line in _readelf(path, "-V").stdout.splitlines():
        if line.startswith(("Version symbols", "Version needs", "Version definition")):
            section = line.split()[1]
            continue
        if section == "symbols" and re.match(r"^\s+[0-9a-f]+:", line):
            entries = line.split(":", 1)[1]
            symbols += [(int(n, 16), h == "h", name) for n, h, name in
                        _VERSYM_ENTRY.findall(entries)]
        elif section == "needs" and (found := _VERSION_FILE.match(line)):
            file = found.group(1)
        elif section == "needs" and (found := _VERSION_NEED.match(line)):
            needed.add((file, found.group(1), "WEAK" in found.group(2)))
        elif section == "definition" and (found := _VERSION_DEFINITION.match(line)):
            defined.add(found.group(2))
    return ReadelfVersions(tuple(symbols), frozenset(defined), frozenset(needed))
