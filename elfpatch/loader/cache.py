"""``/etc/ld.so.cache``: the soname -> path table ldconfig writes and ld.so consults.

Two layouts exist.  The current one starts with ``glibc-ld.so.cache1.1``:
a 48-byte header, 24-byte entries (flags, name, path, an unused OS version,
hwcap bits) and a string table whose offsets count from that header, plus
an optional extension directory naming the ``glibc-hwcaps`` subdirectories.
The old one starts with ``ld.so-1.7.0``: 12-byte entries (flags, name,
path) whose string offsets count from the end of the entry array; a
current-format table may follow it, and when it does ld.so uses only that.

The flags say which ABI an entry is for (``0x303`` is x86-64 libc6, ``3``
plain libc6 such as i386, ``0xa03`` aarch64 ...); a lookup takes the flag
values the requesting program's loader accepts, so a 64-bit program never
gets the i386 copy of a library.

Which entry ld.so takes is modelled for glibc 2.35 and later: the
glibc-hwcaps entries (bit 62 of the hwcap field) by the priority of the
host's subdirectories, else the first plain entry; an entry with a legacy
hwcap bit other than ``tls`` is never taken, and from glibc 2.40 on no
entry with any legacy bit is.  The caller says which rules apply (the
accepted flags, the host's glibc-hwcaps names, ``legacy_entries``), from
a ``loader.host.HostProfile``; nothing here asks the machine it runs on.

Every offset is checked before use.  A cache that is missing, truncated or
otherwise corrupt reads as an empty cache: ld.so ignores such a file and
falls back to its default directories, and so do we.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from elfpatch.base.regular_file import read_regular_bytes
from elfpatch.elf.constants import (
    EM_AARCH64,
    EM_ARM,
    EM_IA_64,
    EM_LOONGARCH,
    EM_MIPS,
    EM_PPC64,
    EM_RISCV,
    EM_S390,
    EM_SPARCV9,
    EM_X86_64,
)
from elfpatch.errors import ElfpatchError

DEFAULT_CACHE_PATH = Path("/etc/ld.so.cache")

OLD_MAGIC = b"ld.so-1.7.0"
NEW_MAGIC = b"glibc-ld.so.cache1.1"

# Bits of an entry's flags, as ldconfig writes them.
FLAG_TYPE_MASK = 0x00FF
FLAG_ELF = 0x0001
FLAG_ELF_LIBC5 = 0x0002
FLAG_ELF_LIBC6 = 0x0003
FLAG_REQUIRED_MASK = 0xFF00
FLAG_SPARC_LIB64 = 0x0100
FLAG_IA64_LIB64 = 0x0200
FLAG_X8664_LIB64 = 0x0300
FLAG_S390_LIB64 = 0x0400
FLAG_POWERPC_LIB64 = 0x0500
FLAG_MIPS64_LIBN32 = 0x0600
FLAG_MIPS64_LIBN64 = 0x0700
FLAG_X8664_LIBX32 = 0x0800
FLAG_ARM_LIBHF = 0x0900
FLAG_AARCH64_LIB64 = 0x0A00
FLAG_ARM_LIBSF = 0x0B00
FLAG_MIPS_LIB32_NAN2008 = 0x0C00
FLAG_MIPS64_LIBN32_NAN2008 = 0x0D00
FLAG_MIPS64_LIBN64_NAN2008 = 0x0E00
FLAG_RISCV_FLOAT_ABI_SOFT = 0x0F00
FLAG_RISCV_FLOAT_ABI_DOUBLE = 0x1000
FLAG_LARCH_FLOAT_ABI_SOFT = 0x1100
FLAG_LARCH_FLOAT_ABI_DOUBLE = 0x1200

# What `ldconfig -p` prints for the bits above.
_TYPE_NAMES = {0: "libc4", FLAG_ELF: "ELF", FLAG_ELF_LIBC5: "libc5", FLAG_ELF_LIBC6: "libc6"}
_REQUIRED_NAMES = {
    0: "",
    FLAG_SPARC_LIB64: "64bit",
    FLAG_IA64_LIB64: "IA-64",
    FLAG_X8664_LIB64: "x86-64",
    FLAG_S390_LIB64: "64bit",
    FLAG_POWERPC_LIB64: "64bit",
    FLAG_MIPS64_LIBN32: "N32",
    FLAG_MIPS64_LIBN64: "64bit",
    FLAG_X8664_LIBX32: "x32",
    FLAG_ARM_LIBHF: "hard-float",
    FLAG_AARCH64_LIB64: "AArch64",
    FLAG_ARM_LIBSF: "soft-float",
    FLAG_MIPS_LIB32_NAN2008: "nan2008",
    FLAG_MIPS64_LIBN32_NAN2008: "N32,nan2008",
    FLAG_MIPS64_LIBN64_NAN2008: "64bit,nan2008",
    FLAG_RISCV_FLOAT_ABI_SOFT: "soft-float",
    FLAG_RISCV_FLOAT_ABI_DOUBLE: "double-float",
    FLAG_LARCH_FLOAT_ABI_SOFT: "soft-float",
    FLAG_LARCH_FLOAT_ABI_DOUBLE: "double-float",
}

# Bit 62 of an entry's hwcap: the low 32 bits index the glibc-hwcaps names.
HWCAP_EXTENSION = 1 << 62
_HWCAP_ISA_LEVEL_MASK = (1 << 10) - 1  # x86 ISA level bits right above bit 32
_HWCAP_TLS = 1 << 63

_EXTENSION_MAGIC = 0xEAA42174
_EXTENSION_TAG_GLIBC_HWCAPS = 1

_NEW_HEADER = "20sIIB3xI12x"  # magic+version, nlibs, strings size, flags, extension offset
_NEW_ENTRY = "iIIIQ"  # flags, key, value, osversion (unused), hwcap
_OLD_ENTRY = "iII"  # flags, key, value
_ENDIAN_FLAGS = {0: None, 2: "<", 3: ">"}  # 1 is "invalid": the cache is ignored


@dataclass(frozen=True)
class CacheEntry:
    """One line of the cache: a library name, its ABI flags, the file it maps to."""

    soname: str
    flags: int
    path: str
    hwcap: int = 0
    hwcaps_subdirectory: str | None = None  # e.g. "x86-64-v3" for glibc-hwcaps entries

    @property
    def abi(self) -> str:
        """The ABI as ``ldconfig -p`` names it, e.g. ``libc6,x86-64``."""
        kind = _TYPE_NAMES.get(self.flags & FLAG_TYPE_MASK, f"unknown {self.flags:#x}")
        required = _REQUIRED_NAMES.get(self.flags & FLAG_REQUIRED_MASK,
                                       f"unknown {self.flags & FLAG_REQUIRED_MASK:#x}")
        return f"{kind},{required}" if required else kind

    @property
    def is_glibc_hwcaps(self) -> bool:
        return _is_hwcaps_extension(self.hwcap)


@dataclass(frozen=True)
class LdCache:
    """The entries of one cache file, in file order (sorted as ldconfig sorted them)."""

    entries: tuple[CacheEntry, ...] = ()
    format: str = "none"  # "new", "old", "old+new" or "none" (missing or unreadable)

    def __len__(self) -> int:
        return len(self.entries)

    def lookup(self, name: str, accepted_flags: frozenset[int],
               hwcaps: Sequence[str] = (), *, legacy_entries: bool = True) -> str | None:
        """The path ld.so takes from the cache for ``name``, or None.

        ``accepted_flags`` are the flag values the requesting loader accepts
        (see ``accepted_cache_flags``); ``hwcaps`` the glibc-hwcaps
        subdirectories it supports, best first.  Like ld.so, a binary search
        finds the run of entries with this name; among them a supported
        glibc-hwcaps entry of the best priority wins, else the first plain one.
        Entries that need a legacy hwcap (other than ``tls``) are not taken;
        with ``legacy_entries`` False (glibc 2.40 and later) no entry with
        any legacy hwcap bit, ``tls`` included, is taken.
        """
        first = self._first_index(name)
        if first is None:
            return None
        best: str | None = None
        best_priority = len(hwcaps)
        for entry in self.entries[first:]:
            if not names_equal(name, entry.soname):
                break
            if entry.flags not in accepted_flags:
                continue
            if entry.is_glibc_hwcaps:
                subdirectory = entry.hwcaps_subdirectory
                if subdirectory is not None and subdirectory in hwcaps:
                    priority = list(hwcaps).index(subdirectory)
                    if best is None or priority < best_priority:
                        best, best_priority = entry.path, priority
                continue
            if best is not None:
                break  # glibc-hwcaps entries sort before plain ones
            if entry.hwcap & (~_HWCAP_TLS if legacy_entries else ~0):
                continue
            return entry.path
        return best

    def _first_index(self, name: str) -> int | None:
        """Index of the first entry named ``name``, by ld.so's binary search."""
        left, right = 0, len(self.entries) - 1
        while left <= right:
            middle = (left + right) // 2
            order = compare_names(name, self.entries[middle].soname)
            if order == 0:
                while middle > 0 and names_equal(name, self.entries[middle - 1].soname):
                    middle -= 1
                return middle
            if order < 0:  # the table is sorted from the greatest name down
                left = middle + 1
            else:
                right = middle - 1
        return None


def compare_names(first: str, second: str) -> int:
    """ldconfig's order of library names: runs of digits compare by value.

    Bytes compare as C ``char`` does on the machines ldconfig runs on here
    (signed), so names beyond ASCII sort as they do in the file.
    """
    a, b = _name_bytes(first), _name_bytes(second)
    i = j = 0
    while i < len(a):
        if _is_digit(a, i):
            if not _is_digit(b, j):
                return 1
            end_i, end_j = _digits_end(a, i), _digits_end(b, j)
            difference = int(a[i:end_i]) - int(b[j:end_j])
            if difference:
                return difference
            i, j = end_i, end_j
        elif _is_digit(b, j):
            return -1
        elif _signed(b, j) != _signed(a, i):
            return _signed(a, i) - _signed(b, j)
        else:
            i, j = i + 1, j + 1
    return -_signed(b, j)


def names_equal(first: str, second: str) -> bool:
    return compare_names(first, second) == 0


def _name_bytes(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


def _is_digit(text: bytes, index: int) -> bool:
    return index < len(text) and 0x30 <= text[index] <= 0x39


def _signed(text: bytes, index: int) -> int:
    """The byte at ``index`` as a signed char; 0 past the end (the NUL)."""
    if index >= len(text):
        return 0
    value = text[index]
    return value - 256 if value >= 0x80 else value


def _digits_end(text: bytes, start: int) -> int:
    end = start
    while _is_digit(text, end):
        end += 1
    return end


def _is_hwcaps_extension(hwcap: int) -> bool:
    return ((hwcap >> 32) & ~_HWCAP_ISA_LEVEL_MASK) == (HWCAP_EXTENSION >> 32)


# -- reading ---------------------------------------------------------------------

def read_ld_cache(path: str | Path = DEFAULT_CACHE_PATH) -> LdCache:
    """The cache at ``path``; an empty cache when it is missing or unreadable."""
    try:
        # ld.so maps the cache only when it is a regular file; a FIFO put in
        # its place must not hang us either.
        data = read_regular_bytes(path)
    except (OSError, ElfpatchError):
        return LdCache()
    return parse_ld_cache(data)


def parse_ld_cache(data: bytes) -> LdCache:
    """Entries of a cache image; an empty cache when the image is corrupt."""
    try:
        if data.startswith(NEW_MAGIC):
            return LdCache(_parse_new(data, 0), "new")
        if data.startswith(OLD_MAGIC):
            return _parse_old(data)
    except _Corrupt:
        pass
    return LdCache()


class _Corrupt(Exception):
    """An offset or count in the cache points outside it."""


def _unpack(fmt: str, data: bytes, offset: int) -> tuple[int, ...]:
    size = struct.calcsize(fmt)
    if offset < 0 or offset + size > len(data):
        raise _Corrupt
    return struct.unpack_from(fmt, data, offset)


def _string(data: bytes, offset: int) -> str:
    if offset < 0 or offset >= len(data):
        raise _Corrupt
    end = data.find(b"\0", offset)
    if end < 0:
        raise _Corrupt
    return data[offset:end].decode("utf-8", "surrogateescape")


def _new_byte_order(data: bytes, base: int) -> str:
    flags = _unpack("B", data, base + 28)[0]
    if flags not in _ENDIAN_FLAGS:
        raise _Corrupt  # "invalid": ld.so ignores the file
    order = _ENDIAN_FLAGS[flags]
    return order or ("<" if sys.byteorder == "little" else ">")


def _parse_new(data: bytes, base: int) -> tuple[CacheEntry, ...]:
    """Entries of the current-format table whose header sits at ``base``."""
    order = _new_byte_order(data, base)
    header = _unpack(order + _NEW_HEADER, data, base)
    count, extension_offset = header[1], header[4]
    entry_size = struct.calcsize(order + _NEW_ENTRY)
    first = base + struct.calcsize(order + _NEW_HEADER)
    if count > (len(data) - first) // entry_size:
        raise _Corrupt
    names = _hwcaps_names(data, base, extension_offset, order)
    entries = []
    for index in range(count):
        flags, key, value, _os, hwcap = _unpack(order + _NEW_ENTRY, data,
                                                first + index * entry_size)
        subdirectory = None
        if _is_hwcaps_extension(hwcap):
            position = hwcap & 0xFFFFFFFF
            subdirectory = names[position] if position < len(names) else None
        entries.append(CacheEntry(_string(data, base + key), flags, _string(data, base + value),
                                  hwcap, subdirectory))
    return tuple(entries)


def _hwcaps_names(data: bytes, base: int, offset: int, order: str) -> list[str]:
    """The glibc-hwcaps subdirectory names of the extension directory, if any."""
    if offset == 0 or offset % 4:
        return []
    magic, count = _unpack(order + "II", data, base + offset)
    if magic != _EXTENSION_MAGIC:
        return []
    names: list[str] = []
    for index in range(count):
        tag, _flags, section_offset, size = _unpack(order + "IIII", data,
                                                    base + offset + 8 + 16 * index)
        if tag != _EXTENSION_TAG_GLIBC_HWCAPS or size % 4:
            continue
        for item in range(size // 4):
            string_offset = _unpack(order + "I", data, base + section_offset + 4 * item)[0]
            names.append(_string(data, base + string_offset))
    return names


def _parse_old(data: bytes) -> LdCache:
    order = "<" if sys.byteorder == "little" else ">"
    count = _unpack(order + "I", data, 12)[0]
    entry_size = struct.calcsize(order + _OLD_ENTRY)
    if count > (len(data) - 16) // entry_size:
        raise _Corrupt
    strings = 16 + count * entry_size
    for alignment in (8, 4):  # the new table is aligned as its header type is
        new_base = -(-strings // alignment) * alignment
        if data[new_base:new_base + len(NEW_MAGIC)] == NEW_MAGIC:
            return LdCache(_parse_new(data, new_base), "old+new")
    entries = []
    for index in range(count):
        flags, key, value = _unpack(order + _OLD_ENTRY, data, 16 + index * entry_size)
        entries.append(CacheEntry(_string(data, strings + key), flags,
                                  _string(data, strings + value)))
    return LdCache(tuple(entries), "old")


# -- which entries a loader accepts ------------------------------------------------

_EF_ARM_ABI_FLOAT_HARD = 0x400
_EF_MIPS_ABI2 = 0x20
_EF_MIPS_NAN2008 = 0x400
_EF_RISCV_FLOAT_ABI_MASK = 0x6
_EF_RISCV_FLOAT_ABI_DOUBLE = 0x4
_EF_LARCH_ABI_MASK = 0x3
_EF_LARCH_ABI_DOUBLE = 0x3

# (machine, ELF class) -> the flags that loader accepts (its _dl_cache_check_flags)
_ONLY = {
    (EM_X86_64, 64): FLAG_X8664_LIB64,
    (EM_X86_64, 32): FLAG_X8664_LIBX32,
    (EM_AARCH64, 64): FLAG_AARCH64_LIB64,
    (EM_PPC64, 64): FLAG_POWERPC_LIB64,
    (EM_S390, 64): FLAG_S390_LIB64,
    (EM_SPARCV9, 64): FLAG_SPARC_LIB64,
    (EM_IA_64, 64): FLAG_IA64_LIB64,
}


def accepted_cache_flags(machine: int, elf_class: int, e_flags: int = 0) -> frozenset[int]:
    """The cache flag values ld.so for this kind of object accepts."""
    only = _ONLY.get((machine, elf_class))
    if only is not None:
        return frozenset({only | FLAG_ELF_LIBC6})
    if machine == EM_ARM:
        abi = FLAG_ARM_LIBHF if e_flags & _EF_ARM_ABI_FLOAT_HARD else FLAG_ARM_LIBSF
        return frozenset({abi | FLAG_ELF_LIBC6, FLAG_ELF_LIBC6})
    if machine == EM_RISCV:
        double = e_flags & _EF_RISCV_FLOAT_ABI_MASK == _EF_RISCV_FLOAT_ABI_DOUBLE
        abi = FLAG_RISCV_FLOAT_ABI_DOUBLE if double else FLAG_RISCV_FLOAT_ABI_SOFT
        return frozenset({abi | FLAG_ELF_LIBC6})
    if machine == EM_LOONGARCH:
        double = e_flags & _EF_LARCH_ABI_MASK == _EF_LARCH_ABI_DOUBLE
        abi = FLAG_LARCH_FLOAT_ABI_DOUBLE if double else FLAG_LARCH_FLOAT_ABI_SOFT
        return frozenset({abi | FLAG_ELF_LIBC6})
    if machine == EM_MIPS:
        return _mips_flags(elf_class, e_flags)
    return frozenset({FLAG_ELF, FLAG_ELF_LIBC6})  # i386, ppc, s390 (31-bit) ...


def _mips_flags(elf_class: int, e_flags: int) -> frozenset[int]:
    nan2008 = bool(e_flags & _EF_MIPS_NAN2008)
    if elf_class == 64:
        abi = FLAG_MIPS64_LIBN64_NAN2008 if nan2008 else FLAG_MIPS64_LIBN64
    elif e_flags & _EF_MIPS_ABI2:
        abi = FLAG_MIPS64_LIBN32_NAN2008 if nan2008 else FLAG_MIPS64_LIBN32
    elif nan2008:
        abi = FLAG_MIPS_LIB32_NAN2008
    else:
        return frozenset({FLAG_ELF, FLAG_ELF_LIBC6})
    return frozenset({abi | FLAG_ELF_LIBC6})
