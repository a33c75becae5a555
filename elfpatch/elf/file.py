"""An ELF file mapped into memory: header, sections, segments, dynamic entries.

``ElfFile`` parses only the headers up front; every table is located lazily
and exposed as whole columns (see ``symbols.py``, ``relocations.py``), so a
434 MB library costs a few page faults, not one Python object per symbol.

Every offset and size read from the file is checked before use: a corrupt
input raises ``CorruptElfError`` naming the file and the field, never an
IndexError or struct.error.
"""

from __future__ import annotations

import io
import mmap
import struct
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from elfpatch.base.regular_file import cannot_open, open_regular
from elfpatch.elf import constants as C
from elfpatch.errors import CorruptElfError, NotElfError

# Header layouts after e_ident: (format, size of one section/program header)
_EHDR_FIELDS = {
    C.ELFCLASS32: "HHIIIIIHHHHHH",
    C.ELFCLASS64: "HHIQQQIHHHHHH",
}
_SHDR = {32: "IIIIIIIIII", 64: "IIQQQQIIQQ"}
_PHDR32 = "IIIIIIII"  # type offset vaddr paddr filesz memsz flags align
_PHDR64 = "IIQQQQQQ"  # type flags offset vaddr paddr filesz memsz align
_AR_MAGIC = b"!<arch>\n"  # static libraries (.a)


@dataclass(frozen=True)
class ElfHeader:
    elf_class: int  # 32 or 64
    little_endian: bool
    osabi: int
    type: int
    machine: int
    entry: int
    phoff: int
    shoff: int
    flags: int
    ehsize: int
    phentsize: int
    phnum: int
    shentsize: int
    shnum: int
    shstrndx: int

    @property
    def machine_name(self) -> str:
        return machine_name(self.machine)

    @property
    def type_name(self) -> str:
        return C.ELF_TYPE_NAMES.get(self.type, f"ET_{self.type}")


@dataclass(frozen=True)
class Section:
    index: int
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    addralign: int
    entsize: int
    header_offset: int  # where this section's header sits in the file

    @property
    def occupies_file(self) -> bool:
        return self.type != C.SHT_NOBITS


@dataclass(frozen=True)
class Segment:
    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int


def machine_name(machine: int) -> str:
    if machine in C.MACHINE_NAMES:
        return C.MACHINE_NAMES[machine]
    from elftools.elf.enums import ENUM_E_MACHINE

    for name, value in ENUM_E_MACHINE.items():
        if value == machine and name.startswith("EM_"):
            return name[3:].lower()
    return f"EM_{machine}"


def printable(text: str) -> str:
    """``text`` with the bytes ``surrogateescape`` kept (not UTF-8) shown as ``\\xNN``.

    Names and paths keep their exact bytes that way, but such a string cannot
    be written to a UTF-8 stream: reports pass what they print through this.
    """
    if text.isascii():
        return text
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def has_elf_magic(prefix: bytes) -> bool:
    return prefix[:4] == C.ELF_MAGIC


class ElfFile:
    """A read-only view of one ELF image (a mapped file or bytes from an archive)."""

    def __init__(self, data: bytes | mmap.mmap, name: str) -> None:
        self.name = name
        self._data = data
        self.view = memoryview(data)
        self.size = len(self.view)
        self.header = self._parse_header()
        self.byte_order = "<" if self.header.little_endian else ">"
        self.word = "I" if self.header.elf_class == 32 else "Q"
        self.word_size = 4 if self.header.elf_class == 32 else 8

    # -- construction -------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path) -> ElfFile:
        """Map ``path`` read-only; errors name the path and the reason."""
        name = str(path)
        try:
            with open_regular(path) as handle:  # a FIFO is refused, not waited on
                size = handle.seek(0, 2)
                if size == 0:
                    raise NotElfError(name, "empty file, not an ELF file")
                data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as error:
            raise cannot_open(name, error) from None
        return cls(data, name)

    def close(self) -> None:
        """Unmap the file now, or, while a slice of it is still referenced, when that goes.

        An exception on its way out (Ctrl-C, an error deep in a parser) holds
        the frames that hold slices; refusing to close then would replace the
        real exception with a BufferError.
        """
        try:
            self.view.release()
            if isinstance(self._data, mmap.mmap):
                self._data.close()
        except BufferError:
            pass  # freed with the last slice

    def __enter__(self) -> ElfFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- bounds-checked access ---------------------------------------------
    def stream(self) -> io.BytesIO | mmap.mmap:
        """The image as a seekable file object, for parsers that read one (pyelftools)."""
        data = self._data
        return data if isinstance(data, mmap.mmap) else io.BytesIO(data)

    def corrupt(self, reason: str) -> CorruptElfError:
        return CorruptElfError(self.name, reason)

    def check_range(self, offset: int, size: int, what: str) -> None:
        if offset < 0 or size < 0 or offset + size > self.size:
            raise self.corrupt(
                f"{what} (offset {offset:#x}, size {size:#x}) extends past the end of "
                f"the file ({self.size:#x} bytes); truncated or corrupt"
            )

    def unpack(self, fmt: str, offset: int, what: str) -> tuple[int, ...]:
        full = self.byte_order + fmt
        self.check_range(offset, struct.calcsize(full), what)
        return struct.unpack_from(full, self.view, offset)

    def unpack_if_inside(self, fmt: str, offset: int) -> tuple[int, ...] | None:
        """The fields at ``offset``, or None when they do not all lie inside the file."""
        full = self.byte_order + fmt
        if offset < 0 or offset + struct.calcsize(full) > self.size:
            return None
        return struct.unpack_from(full, self.view, offset)

    def find(self, needle: bytes, start: int, end: int) -> int:
        """Where ``needle`` first lies within ``[start, end)`` of the image, or -1: the
        search of bytes and mmap themselves, many times a regular expression's."""
        return self._data.find(needle, start, end)

    def bytes_at(self, offset: int, size: int, what: str) -> memoryview:
        self.check_range(offset, size, what)
        return self.view[offset : offset + size]

    def cstring(self, table_offset: int, table_size: int, index: int, what: str) -> str:
        """The NUL-terminated string at ``index`` of a string table."""
        if index >= table_size:
            raise self.corrupt(f"{what}: string index {index} past its table ({table_size} bytes)")
        start = table_offset + index
        end = self._data.find(b"\0", start, table_offset + table_size)
        if end < 0:
            raise self.corrupt(f"{what}: string at index {index} is not NUL-terminated")
        return bytes(self.view[start:end]).decode("utf-8", "surrogateescape")

    # -- header ---------------------------------------------------------------
    def _parse_header(self) -> ElfHeader:
        if bytes(self.view[:8]) == _AR_MAGIC:
            raise NotElfError(self.name, "a static library (ar archive), not a linked ELF file",
                              hint="the loader never sees its UNIQUE symbols until it is linked "
                              "into a shared library or program: check that, or rebuild its "
                              "objects with -fno-gnu-unique")
        if self.size < 16 or not has_elf_magic(bytes(self.view[:4])):
            raise NotElfError(self.name, "not an ELF file (no \\x7fELF magic)")
        ei_class, ei_data, osabi = self.view[4], self.view[5], self.view[7]
        if ei_class not in _EHDR_FIELDS:
            raise self.corrupt(f"unknown ELF class {ei_class} in e_ident")
        if ei_data not in (C.ELFDATA2LSB, C.ELFDATA2MSB):
            raise self.corrupt(f"unknown data encoding {ei_data} in e_ident")
        order = "<" if ei_data == C.ELFDATA2LSB else ">"
        fmt = order + _EHDR_FIELDS[ei_class]
        if self.size < 16 + struct.calcsize(fmt):
            raise self.corrupt("file ends inside the ELF header; truncated")
        fields = struct.unpack_from(fmt, self.view, 16)
        (etype, machine, _version, entry, phoff, shoff, flags, ehsize,
         phentsize, phnum, shentsize, shnum, shstrndx) = fields
        return ElfHeader(32 if ei_class == C.ELFCLASS32 else 64, ei_data == C.ELFDATA2LSB,
                         osabi, etype, machine, entry, phoff, shoff, flags, ehsize,
                         phentsize, phnum, shentsize, shnum, shstrndx)

    # -- sections -------------------------------------------------------------
    @cached_property
    def sections(self) -> list[Section]:
        """Section headers, or [] when the file has none (stripped of them)."""
        h = self.header
        if h.shoff == 0:
            return []
        fmt = _SHDR[h.elf_class]
        entry_size = struct.calcsize(self.byte_order + fmt)
        if h.shentsize != entry_size:
            raise self.corrupt(f"e_shentsize is {h.shentsize}, expected {entry_size}")
        count, strndx = h.shnum, h.shstrndx
        first = self.unpack(fmt, h.shoff, "section header 0")
        if count == 0:  # extended numbering: the real count is in section 0
            count = first[5]
        if strndx == C.SHN_XINDEX:
            strndx = first[6]
        self.check_range(h.shoff, count * entry_size, "section header table")
        raw = [self.unpack(fmt, h.shoff + i * entry_size, f"section header {i}")
               for i in range(count)]
        names = self._section_names(raw, strndx)
        return [Section(i, names[i], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9],
                        h.shoff + i * entry_size) for i, r in enumerate(raw)]

    def _section_names(self, raw: list[tuple[int, ...]], strndx: int) -> list[str]:
        if strndx == C.SHN_UNDEF or strndx >= len(raw):
            return [""] * len(raw)
        str_offset, str_size = raw[strndx][4], raw[strndx][5]
        self.check_range(str_offset, str_size, "section name string table")
        return [self.cstring(str_offset, str_size, r[0], f"name of section {i}")
                for i, r in enumerate(raw)]

    def section_by_name(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def sections_of_type(self, sh_type: int) -> list[Section]:
        return [s for s in self.sections if s.type == sh_type]

    # -- segments -------------------------------------------------------------
    @cached_property
    def segments(self) -> list[Segment]:
        h = self.header
        if h.phoff == 0 or h.phnum == 0:
            return []
        fmt = _PHDR64 if h.elf_class == 64 else _PHDR32
        entry_size = struct.calcsize(self.byte_order + fmt)
        if h.phentsize != entry_size:
            raise self.corrupt(f"e_phentsize is {h.phentsize}, expected {entry_size}")
        segments = []
        for i in range(h.phnum):
            r = self.unpack(fmt, h.phoff + i * entry_size, f"program header {i}")
            if h.elf_class == 64:
                ptype, flags, offset, vaddr, _paddr, filesz, memsz, _align = r
            else:
                ptype, offset, vaddr, _paddr, filesz, memsz, flags, _align = r
            segments.append(Segment(ptype, flags, offset, vaddr, filesz, memsz))
        return segments

    def vaddr_to_offset(self, vaddr: int, what: str) -> int:
        """File offset of a virtual address, through the PT_LOAD segments."""
        for seg in self.segments:
            if seg.type == C.PT_LOAD and seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
                return seg.offset + (vaddr - seg.vaddr)
        raise self.corrupt(f"{what} address {vaddr:#x} is not inside any loaded segment")

    # -- dynamic --------------------------------------------------------------
    @cached_property
    def dynamic(self) -> list[tuple[int, int]]:
        """(tag, value) pairs of the dynamic table up to DT_NULL; [] if static."""
        offset, size = self._dynamic_location()
        if size == 0:
            return []
        entry = 2 * self.word_size
        fmt = self.byte_order + ("iI" if self.word_size == 4 else "qQ")
        self.check_range(offset, size - size % entry, "dynamic table")
        entries = []
        for tag, value in struct.iter_unpack(fmt, self.view[offset : offset + size - size % entry]):
            if tag == C.DT_NULL:
                break
            entries.append((tag, value))
        return entries

    @cached_property
    def dynamic_offset(self) -> int | None:
        offset, size = self._dynamic_location()
        return offset if size else None

    def _dynamic_location(self) -> tuple[int, int]:
        for seg in self.segments:
            if seg.type == C.PT_DYNAMIC:
                return seg.offset, seg.filesz
        for section in self.sections_of_type(C.SHT_DYNAMIC):
            return section.offset, section.size
        return 0, 0

    def dynamic_value(self, tag: int) -> int | None:
        return next((value for t, value in self.dynamic if t == tag), None)

    def dynamic_values(self, tag: int) -> list[int]:
        return [value for t, value in self.dynamic if t == tag]

    @cached_property
    def _dynamic_strtab(self) -> tuple[int, int]:
        addr, size = self.dynamic_value(C.DT_STRTAB), self.dynamic_value(C.DT_STRSZ)
        if addr is None or size is None:
            raise self.corrupt("dynamic table has no DT_STRTAB/DT_STRSZ")
        offset = self.vaddr_to_offset(addr, "DT_STRTAB")
        self.check_range(offset, size, "dynamic string table")
        return offset, size

    def dynamic_string(self, index: int, what: str) -> str:
        offset, size = self._dynamic_strtab
        return self.cstring(offset, size, index, what)

    @property
    def needed(self) -> list[str]:
        return [self.dynamic_string(v, "DT_NEEDED") for v in self.dynamic_values(C.DT_NEEDED)]

    @property
    def soname(self) -> str | None:
        value = self.dynamic_value(C.DT_SONAME)
        return None if value is None else self.dynamic_string(value, "DT_SONAME")

    @property
    def rpath(self) -> str | None:
        value = self.dynamic_value(C.DT_RPATH)
        return None if value is None else self.dynamic_string(value, "DT_RPATH")

    @property
    def runpath(self) -> str | None:
        value = self.dynamic_value(C.DT_RUNPATH)
        return None if value is None else self.dynamic_string(value, "DT_RUNPATH")

    @property
    def nodelete(self) -> bool:
        """DF_1_NODELETE is already set (linked with -z nodelete)."""
        return bool((self.dynamic_value(C.DT_FLAGS_1) or 0) & C.DF_1_NODELETE)
