"""Mutated ELF bytes only ever produce elfpatch's own clean errors.

Hypothesis pokes values into the places where structure lives (the ELF
header, program and section headers, the dynamic table, symbol, string,
hash and relocation tables) of libraries built for several machines, with
and without section headers, and cuts files short.  The reader and the scan
analysis may raise ``ElfpatchError`` and nothing else; the command line
never prints a traceback.
"""

from __future__ import annotations

import struct
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.build import POINTERS, invoke, platform, remove_section_headers

from elfpatch.analysis.initializers import list_initializers
from elfpatch.analysis.unique import scan_elf
from elfpatch.elf.file import ElfFile
from elfpatch.elf.hashes import dynamic_symbol_count, read_gnu_hash, read_sysv_hash
from elfpatch.elf.relocations import dynamic_relocation_tables, relr_addresses
from elfpatch.elf.symbols import symbol_tables
from elfpatch.errors import ElfpatchError

# (platform, link flags, without section headers)
SEEDS = (
    ("host", (), False),
    ("host", ("-Wl,-z,pack-relative-relocs",), False),
    ("host", (), True),
    ("host", ("-Wl,--hash-style=sysv",), True),
    ("32bit", (), False),
    ("bigendian", ("-Wl,--hash-style=sysv",), True),
    ("bigendian", (), False),
    # Stripped: function bounds come from the unwind tables; -O2: gcc lays the cold
    # functions out ahead of the initializers (elf/layout.py).
    ("host", ("-O2", "-s"), False),
)

# A static initializer too, for the initializer listing.
FUZZ_LIBRARY = {
    "statics.h": """
#include <string>
inline int& counter() { static int count = 0; return count; }
template <class T> struct Holder { static std::string text; };
template <class T> std::string Holder<T>::text = "t";
template <class T> int& per_thread() { static thread_local int value = 7; return value; }
""",
    "statics.cpp": """
#include "statics.h"
#include <vector>
static std::vector<int> made_at_load(3, 1);
// Code gcc lays out as never expected to run, ahead of the initializers
// (elf/layout.py reads where it ends).
__attribute__((cold, noinline)) void note_slow(int n) { counter() += n; }
__attribute__((cold, noinline)) void take_slow(int n) { note_slow(n); counter() -= 2; }
extern "C" int use_all() {
    if (counter() > 100) take_slow(1);
    return counter() + (int)Holder<int>::text.size() + per_thread<int>()
        + (int)made_at_load.size();
}
""",
}

_TABLES = (".dynsym", ".dynstr", ".symtab", ".strtab", ".gnu.hash", ".hash", ".rela.dyn",
           ".rel.dyn", ".rela.plt", ".rel.plt", ".relr.dyn", ".init_array", ".shstrtab",
           ".fini_array", ".eh_frame_hdr")


@dataclass(frozen=True)
class Seed:
    name: str
    data: bytes
    regions: tuple[tuple[int, int], ...]  # (offset, size) of the structures worth mutating


@cache
def _seed(index: int) -> Seed | str:
    name, flags, headerless = SEEDS[index]
    try:
        library = platform(name).library(flags, {**FUZZ_LIBRARY, **POINTERS}, "libfuzz")
    except pytest.skip.Exception as skipped:
        return str(skipped)
    regions = _regions(library)
    data = library.read_bytes()
    if headerless:
        with tempfile.TemporaryDirectory() as folder:
            data = remove_section_headers(library, Path(folder) / "bare.so").read_bytes()
    return Seed(f"{name}{'-headerless' if headerless else ''}", data, regions)


def _regions(path: Path) -> tuple[tuple[int, int], ...]:
    """Found with pyelftools, so a bug in the reader cannot hide its own tables."""
    with path.open("rb") as stream:
        elf = ELFFile(stream)
        header = elf.header
        found = [(0, header.e_ehsize),
                 (header.e_phoff, header.e_phnum * header.e_phentsize),
                 (header.e_shoff, header.e_shnum * header.e_shentsize)]
        found += [(s["p_offset"], s["p_filesz"]) for s in elf.iter_segments()
                  if s["p_type"] == "PT_DYNAMIC"]
        found += [(s["sh_offset"], s["sh_size"]) for s in elf.iter_sections()
                  if s.name in _TABLES]
    return tuple((offset, size) for offset, size in found if size > 0)


def seed(index: int) -> Seed:
    found = _seed(index)
    if isinstance(found, str):
        if index == 0:
            pytest.skip(found)
        found = _seed(0)
        assert isinstance(found, Seed)
    return found

# Values that make offsets, sizes, counts and indices interesting.
_WORDS = st.sampled_from([0, 1, 2, 3, 7, 8, 0x10, 0x18, 0x40, 0x7F, 0x80, 0xFF, 0xFFFF, 0x10000,
                          0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 32, 1 << 40, (1 << 63) - 1,
                          1 << 63, (1 << 64) - 1])


@st.composite
def mutation(draw: st.DrawFn, regions: tuple[tuple[int, int], ...]) -> tuple[int, bytes]:
    """A value poked into a structure, or random bytes anywhere."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.integers(0, 1 << 20)), draw(st.binary(min_size=1, max_size=8))
    offset, size = draw(st.sampled_from(regions))
    where = offset + draw(st.integers(0, max(size - 1, 0)))
    width = draw(st.sampled_from([1, 2, 4, 8]))
    value = draw(_WORDS) & ((1 << (8 * width)) - 1)
    return where, value.to_bytes(width, draw(st.sampled_from(["little", "big"])))


@dataclass(frozen=True)
class Mutant:
    """A seed and the edits made to it: a short repr that reproduces a failure."""

    seed_index: int
    edits: tuple[tuple[int, bytes], ...]
    cut: int | None

    @property
    def name(self) -> str:
        return seed(self.seed_index).name

    @property
    def data(self) -> bytes:
        content = bytearray(seed(self.seed_index).data)
        for where, patch in self.edits:
            where %= len(content)
            content[where : where + len(patch)] = patch
        return bytes(content if self.cut is None else content[: self.cut])


@st.composite
def mutant(draw: st.DrawFn) -> Mutant:
    index = draw(st.integers(0, len(SEEDS) - 1))
    chosen = seed(index)
    edits = tuple(draw(st.lists(mutation(chosen.regions), min_size=1, max_size=4)))
    cut = draw(st.integers(0, len(chosen.data))) if draw(st.integers(0, 4)) == 0 else None
    return Mutant(index, edits, cut)


def read_everything(elf: ElfFile) -> None:
    """Every table the reader offers, every column of it, every entry the scan touches."""
    _ = (elf.sections, elf.segments, elf.dynamic, elf.needed, elf.soname, elf.rpath,
         elf.runpath, elf.nodelete)
    for table in symbol_tables(elf):
        _ = (table.infos, table.others, table.name_offsets, table.shndxs, table.values)
        for index in table.unique_indices()[:50]:
            table.row(index)
        for index in range(min(table.count, 50)):
            table.name(index)
    for relocations in dynamic_relocation_tables(elf):
        _ = (relocations.offsets, relocations.symbol_indices, relocations.types)
        for k in range(min(relocations.count, 50)):
            relocations.entry(k)
    relr_addresses(elf)
    read_gnu_hash(elf)
    read_sysv_hash(elf)
    dynamic_symbol_count(elf)
    scan_elf(elf, elf.name)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutant())
def test_reader_and_scan_raise_only_clean_errors(case: Mutant) -> None:
    try:
        with ElfFile(case.data, f"mutant-of-{case.name}.so") as elf:
            read_everything(elf)
    except ElfpatchError:
        pass


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutant())
def test_initializer_listing_raises_only_clean_errors(case: Mutant) -> None:
    """The init/fini arrays resolved through relocations and RELR, on the same mutants."""
    try:
        with ElfFile(case.data, f"mutant-of-{case.name}.so") as elf:
            list_initializers(elf, elf.name)
    except ElfpatchError:
        pass


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutant())
def test_command_line_never_prints_a_traceback(case: Mutant) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mutant.so"
        path.write_bytes(case.data)
        result = invoke("scan", "--json", str(path))
    assert result.exception is None, result.exception
    assert result.exit_code in (0, 2)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    if result.exit_code == 2:
        assert result.stderr.splitlines() == [line for line in result.stderr.splitlines()
                                              if line.startswith(f"elfpatch: error: {path}")]
        assert len(result.stderr.splitlines()) == 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutant())
def test_inits_never_takes_a_corrupt_file_for_its_own_bug(case: Mutant) -> None:
    """An analysis that fails on a mutant is judged by reading its whole structure
    again: a corrupt file is exit code 2, never an internal error (exit code 3)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mutant.so"
        path.write_bytes(case.data)
        result = invoke("inits", "--json", str(path))
    assert result.exception is None, result.exception
    assert result.exit_code in (0, 2), result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


def test_seeds_are_what_they_claim() -> None:
    """The headerless seeds have no section headers; all parse cleanly as built."""
    seed(0)  # skips when there is no compiler at all
    for index, (_name, _flags, headerless) in enumerate(SEEDS):
        found = _seed(index)
        if isinstance(found, str):  # that machine's compiler is missing: seed 0 stands in
            continue
        with ElfFile(found.data, found.name) as elf:
            assert (elf.sections == []) == headerless
            read_everything(elf)
        assert struct.unpack_from("4s", found.data)[0] == b"\x7fELF"
