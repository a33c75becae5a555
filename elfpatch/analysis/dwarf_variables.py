"""Where variables are declared in the source, from DWARF (through pyelftools).

A UNIQUE variable's declaring file and line, for reports that point at the
source (SARIF).  Only the variables asked for are looked up, and only when
the debug information can hold them.
"""

from __future__ import annotations

import posixpath
from typing import Any, Literal

from elfpatch.elf.file import ElfFile

# pyelftools ships no type information: its DWARF info, compile units, entries and
# attributes are Any here, and every value taken from them is given its type.

# DWARF location operations that name a variable's place (DWARF 5, section 7.7.1).
_DW_OP_ADDR = 0x03
_DW_OP_CONST4U = 0x0C
_DW_OP_CONST8U = 0x0E
_DW_OP_FORM_TLS_ADDRESS = 0x9B
_DW_OP_GNU_PUSH_TLS_ADDRESS = 0xE0


def variable_declarations(elf: ElfFile, wanted: dict[tuple[bool, int], str],
                          ) -> dict[str, tuple[str, int]]:
    """Where each wanted variable is declared in the source: symbol -> (file, line).

    ``wanted`` maps (thread-local, st_value) to the symbol's name: a variable's
    DWARF location is its address (or, thread-local, its offset in the TLS
    block), which is the symbol's value whatever the variable is called in the
    source (a function-local static has no linkage name). The file is relative
    to the compile unit's folder when it lies below it, so it reads the same on
    every machine that built from the same tree. Nothing without debug info.
    """
    from elftools.common.exceptions import DWARFError, ELFError
    from elftools.elf.elffile import ELFFile

    # Asked of our own section table first: pyelftools' has_dwarf_info() also counts
    # .eh_frame, which every C++ library has, and a wheel member's stream is a copy.
    if not wanted or not any(elf.section_by_name(name) is not None
                             for name in (".debug_info", ".zdebug_info")):
        return {}
    if not _may_hold(elf, wanted):
        return {}
    try:
        parsed = ELFFile(elf.stream())  # type: ignore[arg-type]
        return _declarations(parsed.get_dwarf_info(), wanted, parsed.little_endian)
    except (ELFError, DWARFError, ValueError, KeyError, IndexError, AttributeError,
            TypeError):
        return {}  # unreadable debug info only costs the source locations


# sh_flags: the section's contents are compressed (ELF gABI).
_SHF_COMPRESSED = 0x800


def _may_hold(elf: ElfFile, wanted: dict[tuple[bool, int], str]) -> bool:
    """Whether .debug_info can locate any wanted variable: a DW_OP_addr operand is the
    address written out whole, so when no wanted address appears in the section's
    bytes, no DIE needs parsing (libtorch_cuda_linalg.so: 200k DIEs, 4 s, none of its
    2 UNIQUE symbols among them). Thread-local offsets are small numbers that appear
    anywhere, and a compressed section cannot be searched: both are parsed."""
    section = elf.section_by_name(".debug_info")
    if section is None or section.flags & _SHF_COMPRESSED or any(tls for tls, _ in wanted):
        return True
    order: Literal["little", "big"] = "little" if elf.byte_order == "<" else "big"
    raw = bytes(elf.bytes_at(section.offset, section.size, ".debug_info"))
    return any(raw.find(value.to_bytes(elf.word_size, order)) >= 0 for _tls, value in wanted)


def _declarations(dwarf: Any, wanted: dict[tuple[bool, int], str],
                  little: bool) -> dict[str, tuple[str, int]]:
    found: dict[str, tuple[str, int]] = {}
    for unit in dwarf.iter_CUs():
        files = None
        for die in unit.iter_DIEs():
            if die.tag != "DW_TAG_variable" or "DW_AT_location" not in die.attributes:
                continue
            place = _place(die.attributes["DW_AT_location"], little)
            name = wanted.get(place) if place is not None else None
            if name is None or name in found:
                continue
            files = files if files is not None else _file_names(dwarf, unit)
            declared = _declared(die, files)
            if declared is not None:
                found[name] = declared
                if len(found) == len(wanted):  # every one found: the rest is not read
                    return found
    return found


def _place(attribute: Any, little: bool) -> tuple[bool, int] | None:
    """(thread-local, address or TLS offset) of a one-operation location."""
    if attribute.form not in ("DW_FORM_exprloc", "DW_FORM_block1", "DW_FORM_block"):
        return None
    ops = bytes(attribute.value)
    order: Literal["little", "big"] = "little" if little else "big"
    if ops[:1] == bytes([_DW_OP_ADDR]) and len(ops) in (5, 9):
        return False, int.from_bytes(ops[1:], order)
    if len(ops) in (6, 10) and ops[0] in (_DW_OP_CONST4U, _DW_OP_CONST8U) and \
            ops[-1] in (_DW_OP_FORM_TLS_ADDRESS, _DW_OP_GNU_PUSH_TLS_ADDRESS):
        return True, int.from_bytes(ops[1:-1], order)
    return None


def _declared(die: Any, files: list[str]) -> tuple[str, int] | None:
    """decl_file and decl_line, from the DIE or the declaration it completes."""
    for _ in range(4):  # a definition points at its declaration (a class's member)
        attributes = die.attributes
        if "DW_AT_decl_file" in attributes and "DW_AT_decl_line" in attributes:
            index = attributes["DW_AT_decl_file"].value
            if 0 <= index < len(files) and files[index]:
                return files[index], int(attributes["DW_AT_decl_line"].value)
            return None
        link = next((a for a in ("DW_AT_specification", "DW_AT_abstract_origin")
                     if a in attributes), None)
        if link is None:
            return None
        die = die.get_DIE_from_attribute(link)
    return None


def _file_names(dwarf: Any, unit: Any) -> list[str]:
    """The line table's files by DW_AT_decl_file index (DWARF 5 counts from 0, earlier
    versions from 1), each relative to the compile unit's folder when below it."""
    program = dwarf.line_program_for_CU(unit)
    if program is None:
        return []
    header = program.header
    top = unit.get_top_DIE().attributes
    comp_dir = _text(top["DW_AT_comp_dir"].value) if "DW_AT_comp_dir" in top else ""
    folders = [_text(d) for d in header["include_directory"]]
    version = header["version"]
    names = [] if version >= 5 else [""]
    for entry in header["file_entry"]:
        index = entry.dir_index
        folder = (folders[index] if index < len(folders) else "") if version >= 5 else \
            (comp_dir if index == 0 else folders[index - 1] if index - 1 < len(folders) else "")
        names.append(_relative(posixpath.join(folder, _text(entry.name)), comp_dir))
    return names


def _relative(path: str, comp_dir: str) -> str:
    path = posixpath.normpath(path)
    if comp_dir and path.startswith(comp_dir.rstrip("/") + "/"):
        return path[len(comp_dir.rstrip("/")) + 1:]
    return path


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value
