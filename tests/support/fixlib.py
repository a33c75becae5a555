"""What the fix tests share: the libraries they build, and the oracles they ask.

The library carries every kind of UNIQUE symbol GCC emits (static locals of
inline and template functions, template static data members from implicit
and explicit instantiation, ``thread_local`` statics, guard variables,
C++17 inline variables) behind ``extern "C"`` functions a C program calls.
It is built in several variants (hash styles, packed relative relocations,
stripped, without section headers, aarch64); builds are cached by
``elfpatch.fixtures.build`` (sources, flags, compiler identity).

The oracles are tools that share no code with elfpatch: eu-elflint,
GNU ld and gold, LIEF, pyelftools, and the loader itself (readelf is read
in ``support.readelf``).  The library pair whose user needs the other's
template members (``cross_pair``) serves the runtime and CLI tests.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from elfpatch.fixtures import build

from elfpatch.base.regular_file import TEMPORARY_MARK

from .build import invoke, remove_section_headers, require_tool
from .tools import require_module

MODES = ("local", "weak-hidden", "global")

LIBRARY = {
    "fixlib.h": """
#pragma once
#include <string>
#ifndef VERSION
#define VERSION 1
#endif
// static local of an inline function (constant initialised: no guard)
inline int& bump_counter() { static int count = 0; return count; }
// static local with a dynamic initialiser: the object and its guard variable
inline std::string& label() {
    static std::string text = "v" + std::to_string(VERSION);
    return text;
}
// static local of a function template
template <class T> T& template_slot() { static T slot = T(10 * VERSION); return slot; }
// static data members of a class template (one with a guard)
template <class T> struct Table { static int size; static std::string name; };
template <class T> int Table<T>::size = 4 * VERSION;
template <class T> std::string Table<T>::name = "table" + std::to_string(VERSION);
// thread_local statics (type TLS), one with a TLS guard variable
template <class T> int& per_thread() { static thread_local int value = 7 * VERSION; return value; }
inline std::string& thread_text() {
    static thread_local std::string text = "t" + std::to_string(VERSION);
    return text;
}
// C++17 inline variables
struct Settings { static inline int level = 100 + VERSION; };
inline int answer = 40 + VERSION;
inline std::string greeting = "hello" + std::to_string(VERSION);
""",
    "fixlib.cpp": """
#include "fixlib.h"
template struct Table<long>;  // explicit instantiation
extern "C" {
int fix_bump() { return ++bump_counter(); }
int fix_tls_bump() { return ++per_thread<int>(); }
const char* fix_label() { return label().c_str(); }
const char* fix_names() {
    static std::string all;
    all = Table<int>::name + "," + Table<long>::name + "," + greeting;
    return all.c_str();
}
// Registers a thread-local destructor, which keeps the library loaded until the
// thread exits whatever its bindings: the dlopen host does not call it.
const char* fix_thread_text() { return thread_text().c_str(); }
int fix_total() {
    return template_slot<int>() + Table<int>::size + Table<long>::size + Settings::level + answer;
}
}
""",
}

# Every UNIQUE definition LIBRARY must carry in .dynsym (checked, so that a
# compiler that stops emitting one is noticed rather than silently untested).
EXPECTED_UNIQUE = {
    "_ZZ12bump_countervE5count", "_ZZ5labelB5cxx11vE4text", "_ZGVZ5labelB5cxx11vE4text",
    "_ZZ13template_slotIiERT_vE4slot", "_ZN5TableIiE4sizeE", "_ZN5TableIlE4sizeE",
    "_ZN5TableIiE4nameB5cxx11E", "_ZGVN5TableIiE4nameB5cxx11E", "_ZN5TableIlE4nameB5cxx11E",
    "_ZGVN5TableIlE4nameB5cxx11E", "_ZZ10per_threadIiERivE5value",
    "_ZZ11thread_textB5cxx11vE4text", "_ZGVZ11thread_textB5cxx11vE4text",
    "_ZN8Settings5levelE", "answer", "_Z8greetingB5cxx11", "_ZGV8greetingB5cxx11",
}

# A C program linked against the library; what it prints with VERSION 1.
PROGRAM = {
    "main.c": """
#include <stdio.h>
int fix_bump(void);
int fix_tls_bump(void);
const char* fix_label(void);
const char* fix_names(void);
const char* fix_thread_text(void);
int fix_total(void);
int main(void) {
    int first = fix_bump(), second = fix_bump(), tls = fix_tls_bump();
    printf("bump=%d,%d tls=%d label=%s names=%s,%s total=%d\\n", first, second, tls,
           fix_label(), fix_names(), fix_thread_text(), fix_total());
    return 0;
}
""",
}
PROGRAM_OUTPUT = "bump=1,2 tls=8 label=v1 names=table1,table1,hello1,t1 total=160\n"

# Loads two copies of the library (built with VERSION 1 and 2) with RTLD_LOCAL,
# prints what each sees, closes each and asks whether it is still loaded.
HOST = {
    "host.cpp": """
#include <dlfcn.h>
#include <cstdio>
template <class F> static F get(void* handle, const char* name) {
    return reinterpret_cast<F>(dlsym(handle, name));
}
int main(int argc, char** argv) {
    if (argc != 3) return 2;
    void* handles[2];
    for (int i = 0; i < 2; ++i) {
        handles[i] = dlopen(argv[i + 1], RTLD_NOW | RTLD_LOCAL);
        if (!handles[i]) { std::printf("copy%d error=%s\\n", i + 1, dlerror()); return 1; }
        void* h = handles[i];
        int bump = get<int (*)()>(h, "fix_bump")();
        int tls = get<int (*)()>(h, "fix_tls_bump")();
        std::printf("copy%d label=%s names=%s total=%d bump=%d tls=%d\\n", i + 1,
                    get<const char* (*)()>(h, "fix_label")(),
                    get<const char* (*)()>(h, "fix_names")(),
                    get<int (*)()>(h, "fix_total")(), bump, tls);
    }
    for (int i = 0; i < 2; ++i) {
        dlclose(handles[i]);
        void* again = dlopen(argv[i + 1], RTLD_NOW | RTLD_NOLOAD);
        std::printf("copy%d unloaded=%d\\n", i + 1, again == nullptr);
        if (again) dlclose(again);
    }
    return 0;
}
""",
}


# -- variants -------------------------------------------------------------------

@dataclass(frozen=True)
class Variant:
    """One way of building (and then altering) the library."""

    name: str
    flags: tuple[str, ...] = ()
    machine: str = "host"  # or "aarch64"
    alteration: str | None = None  # "strip" or "no-section-headers"

    @property
    def linkable(self) -> bool:
        """Linkers need section headers; a file without them is only loaded."""
        return self.alteration != "no-section-headers"


VARIANTS = {v.name: v for v in (
    Variant("default"),
    Variant("sysv-hash", ("-Wl,--hash-style=sysv",)),
    Variant("both-hash", ("-Wl,--hash-style=both",)),
    Variant("relr", ("-Wl,-z,pack-relative-relocs",)),
    Variant("stripped", alteration="strip"),
    Variant("no-section-headers", ("-Wl,--hash-style=both",), alteration="no-section-headers"),
    Variant("linked-by-gold", ("-fuse-ld=gold", "-Wl,--hash-style=both")),
    Variant("emit-relocs", ("-Wl,--emit-relocs",)),  # relocation sections that use .symtab
    Variant("aarch64", ("-Wl,--hash-style=both",), machine="aarch64"),
    Variant("i686", ("-Wl,--hash-style=both",), machine="i686"),  # Elf32, REL relocations
    Variant("s390x", ("-Wl,--hash-style=both",), machine="s390x"),  # big-endian, 8-byte .hash
)}

# Debian's cross compilers, and the qemu-user program that runs what they build.
_QEMU = {"aarch64": "qemu-aarch64", "i686": "qemu-i386", "s390x": "qemu-s390x"}


def toolchain(machine: str) -> build.Toolchain:
    """The compiler for ``machine``, or a skip naming what to install."""
    if machine == "host":
        found = build.host_toolchain()
        if not found.available():
            pytest.skip(f"{found.cxx} is not installed (apt-get install g++)")
        return found
    triplet = f"{machine}-linux-gnu"
    cross = build.Toolchain(machine, f"{triplet}-g++", f"{triplet}-gcc",
                            (_QEMU[machine], "-L", f"/usr/{triplet}"), machine)
    if not cross.available():
        pytest.skip(f"{triplet}-g++ is not installed (apt-get install g++-{triplet})")
    return cross


def tool_prefix(chain: build.Toolchain) -> str:
    """``aarch64-linux-gnu-`` for a cross toolchain, "" for the host's."""
    return chain.cxx[: -len("g++")] if chain.cxx.endswith("-g++") else ""


def built_library(variant: Variant, sources: dict[str, str] = LIBRARY, name: str = "libfixme",
                  extra: tuple[str, ...] = ()) -> Path:
    """The linked library of ``variant`` (before any alteration), from the build cache."""
    return build.build_shared(sources, name, ["-O1", "-g0", *variant.flags, *extra],
                              toolchain=toolchain(variant.machine))


def variant_input(variant: Variant, folder: Path) -> Path:
    """The file to fix for ``variant``: the build itself, or an altered copy in ``folder``."""
    linked = built_library(variant)
    if variant.alteration is None:
        return linked
    folder.mkdir(parents=True, exist_ok=True)
    if variant.alteration == "strip":
        strip = require_tool(tool_prefix(toolchain(variant.machine)) + "strip")
        copy = folder / linked.name
        shutil.copy(linked, copy)
        subprocess.run([strip, "--strip-all", str(copy)], check=True, capture_output=True)
        return copy
    return remove_section_headers(linked, folder / linked.name)


def can_run(chain: build.Toolchain) -> bool:
    return chain.runner_available()


def run_program(chain: build.Toolchain, program: Path, *args: str,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "LD_BIND_NOW"}
    environment.update(env or {})
    return subprocess.run([*chain.runner, str(program), *args], cwd=program.parent,
                          capture_output=True, text=True, env=environment, timeout=120)


# -- a pair of libraries, one using the other's template members ----------------

CROSS = {
    "registry.h": """
#pragma once
#include <string>
template <class T> struct Registry {
    static int count;
    static std::string label;
    static int bump() { return ++count; }
};
""",
    "base.cpp": """
#include "registry.h"
template <class T> int Registry<T>::count = 0;
template <class T> std::string Registry<T>::label = "registry" + std::to_string(sizeof(T));
template struct Registry<int>;
inline int& private_counter() { static int value = 0; return value; }
extern "C" int base_private_bump() { return ++private_counter(); }
extern "C" int base_count() { return Registry<int>::count; }
""",
    "user.cpp": """
#include "registry.h"
extern template struct Registry<int>;
extern "C" int user_bump() { return Registry<int>::bump(); }
extern "C" const char* user_label() { return Registry<int>::label.c_str(); }
""",
    "host.cpp": """
#include <dlfcn.h>
#include <cstdio>
int main() {
    void* user = dlopen("./libuser.so", RTLD_NOW | RTLD_LOCAL);
    if (!user) { std::printf("error=%s\\n", dlerror()); return 1; }
    void* base = dlopen("./libbase.so", RTLD_NOW | RTLD_LOCAL);
    auto bump = reinterpret_cast<int (*)()>(dlsym(user, "user_bump"));
    auto label = reinterpret_cast<const char* (*)()>(dlsym(user, "user_label"));
    auto count = reinterpret_cast<int (*)()>(dlsym(base, "base_count"));
    auto mine = reinterpret_cast<int (*)()>(dlsym(base, "base_private_bump"));
    bump();
    bump();
    std::printf("user_bumps=2 base_sees=%d label=%s private=%d\\n", count(), label(), mine());
    return 0;
}
""",
}
CROSS_OUTPUT = "user_bumps=2 base_sees=2 label=registry4 private=1\n"
COUNT = "_ZN8RegistryIiE5countE"
LABEL = "_ZN8RegistryIiE5labelB5cxx11E"
LABEL_GUARD = "_ZGVN8RegistryIiE5labelB5cxx11E"
PRIVATE = "_ZZ15private_countervE5value"


def cross_pair(folder: Path, *flags: str) -> Path:
    """libbase.so, libuser.so (needs libbase.so) and a host dlopening libuser.so."""
    toolchain("host")
    built = build.build_targets(CROSS, [
        build.Target("libbase.so", ("base.cpp",), shared=True),
        build.Target("libuser.so", ("user.cpp",), shared=True, libraries=("libbase.so",)),
        build.Target("host", ("host.cpp",), link=("dl",)),
    ], ["-O2", "-g0", *flags], label="fix-cross")
    shutil.copytree(built, folder)
    (folder / ".complete").unlink()
    return folder


def run_cross(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["./host"], cwd=folder, capture_output=True, text=True, timeout=60)


# -- running elfpatch -------------------------------------------------------------

@dataclass(frozen=True)
class FixRun:
    exit_code: int
    stdout: str
    stderr: str
    document: dict[str, Any] | None  # the --json document, when asked for


def fix(*args: str | Path, as_json: bool = True) -> FixRun:
    """``elfpatch fix ARGS`` in-process; exceptions other than exits fail the test."""
    argv = ["fix", *(["--json"] if as_json else []), *map(str, args)]
    result = invoke(*argv)
    if result.exception is not None:
        raise result.exception
    document = json.loads(result.stdout) if as_json and result.stdout.strip() else None
    return FixRun(result.exit_code, result.stdout, result.stderr, document)


def changes_by_name(document: dict[str, Any], table: str = ".dynsym") -> dict[str, dict]:
    """{library file name: {symbol: change}} of one table, from a fix --json document."""
    found: dict[str, dict] = {}
    for library in document["libraries"]:
        found[Path(library["path"]).name] = {c["name"]: c for c in library["changes"]
                                             if c["table"] == table}
    return found


def temporary_files(folder: Path) -> list[Path]:
    """elfpatch's temporary files below ``folder`` (today's names and the old ones)."""
    return sorted(p for p in folder.rglob(".*")
                  if p.name.endswith((TEMPORARY_MARK, ".elfpatch")))


# -- oracles ------------------------------------------------------------------------

def elflint_lines(path: Path) -> set[str]:
    """``eu-elflint --gnu-ld``'s complaints, with the file name replaced by FILE.

    A complaint that names its symbol ("symbol 40 (_ZZ...)") loses the index,
    which changes when a fix moves the symbol in front of the globals.
    """
    require_tool("eu-elflint")
    result = subprocess.run(["eu-elflint", "--gnu-ld", str(path)], capture_output=True,
                            text=True)
    text = (result.stdout + result.stderr).replace(str(path), "FILE")
    return {_NAMED_SYMBOL.sub("symbol (", line) for line in text.splitlines()
            if line.strip() and line != "No errors"}


_NAMED_SYMBOL = re.compile(r"symbol \d+ \(")


def new_elflint_lines(before: Path, after: Path, mode: str) -> set[str]:
    """Complaints about ``after`` that ``before`` did not earn."""
    new = elflint_lines(after) - elflint_lines(before)
    if mode == "weak-hidden":  # WEAK+HIDDEN in .dynsym always earns this note
        new = {line for line in new if "non-default visibility" not in line}
    return new


_BINDINGS = {0: "LOCAL", 1: "GLOBAL", 2: "WEAK", 10: "UNIQUE"}
_VISIBILITIES = {0: "DEFAULT", 1: "INTERNAL", 2: "HIDDEN", 3: "PROTECTED"}

SymbolView = dict[tuple[str, int], tuple[str, str, str]]  # (table, index) -> name, bind, vis


def elfpatch_symbols(path: Path) -> SymbolView:
    from elfpatch.elf.file import ElfFile
    from elfpatch.elf.symbols import symbol_tables

    view: SymbolView = {}
    with ElfFile.open(path) as elf:
        for table in symbol_tables(elf):
            for i in range(table.count):
                view[(table.kind, i)] = (table.name(i), _BINDINGS.get(table.infos[i] >> 4, "?"),
                                         _VISIBILITIES[table.others[i] & 3])
    return view


def _pyelftools_name(value: str, prefix: str) -> str:
    name = value[len(prefix):] if value.startswith(prefix) else value
    return "UNIQUE" if name in ("LOOS", "GNU_UNIQUE") else name


def pyelftools_symbols(path: Path) -> SymbolView:
    """Both tables from their sections, or .dynsym through PT_DYNAMIC without sections."""
    from elftools.elf.elffile import ELFFile

    view: SymbolView = {}
    with path.open("rb") as handle:
        elf = ELFFile(handle)
        tables = [(s.name if s["sh_type"] == "SHT_SYMTAB" else ".dynsym", s)
                  for s in elf.iter_sections() if s["sh_type"] in ("SHT_DYNSYM", "SHT_SYMTAB")]
        if elf.num_sections() == 0:
            tables = [(".dynsym", _dynamic_segment(elf))]
        for kind, table in tables:
            for i, symbol in enumerate(table.iter_symbols()):
                view[(kind, i)] = (symbol.name, _pyelftools_name(symbol["st_info"]["bind"], "STB_"),
                                   _pyelftools_name(symbol["st_other"]["visibility"], "STV_"))
    return view


def pyelftools_dynamic_symbols(path: Path) -> SymbolView:
    """.dynsym found through PT_DYNAMIC and sized by the hash tables, as the loader does."""
    from elftools.elf.elffile import ELFFile

    with path.open("rb") as handle:
        segment = _dynamic_segment(ELFFile(handle))
        return {(".dynsym", i): (s.name, _pyelftools_name(s["st_info"]["bind"], "STB_"),
                                 _pyelftools_name(s["st_other"]["visibility"], "STV_"))
                for i, s in enumerate(segment.iter_symbols())}


def _dynamic_segment(elf: Any) -> Any:
    return next(s for s in elf.iter_segments() if s["p_type"] == "PT_DYNAMIC")


def lief_symbols(path: Path) -> SymbolView:
    lief = require_module("lief")
    binary = lief.parse(str(path))
    assert binary is not None, f"LIEF cannot parse {path}"
    view: SymbolView = {}
    for kind, symbols in ((".dynsym", binary.dynamic_symbols), (".symtab", binary.symtab_symbols)):
        for i, s in enumerate(symbols):
            binding = str(s.binding).split(".")[-1]
            view[(kind, i)] = (s.name, "UNIQUE" if binding == "GNU_UNIQUE" else binding,
                               str(s.visibility).split(".")[-1])
    return view


Relocation = tuple[int, str, str, int]  # offset, type, symbol name, addend


def pyelftools_relocations(path: Path) -> list[Relocation]:
    """Every dynamic relocation, found through PT_DYNAMIC (works without sections)."""
    from elftools.elf.elffile import ELFFile

    found: list[Relocation] = []
    with path.open("rb") as handle:
        segment = _dynamic_segment(ELFFile(handle))
        for kind, table in segment.get_relocation_tables().items():
            for r in table.iter_relocations():
                if kind == "RELR":
                    found.append((r["r_offset"], "RELR", "", 0))
                    continue
                symbol = r["r_info_sym"]
                name = segment.get_symbol(symbol).name if symbol else ""
                found.append((r["r_offset"], str(r["r_info_type"]), name,
                              r.entry.get("r_addend", 0)))
    return sorted(found)


def pyelftools_static_relocations(path: Path) -> list[tuple[str, int, str, str, int]]:
    """Relocation sections that use .symtab (left by --emit-relocs): section, offset, type,
    symbol name, addend."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.relocation import RelocationSection

    found = []
    with path.open("rb") as handle:
        elf = ELFFile(handle)
        symtab = elf.get_section_by_name(".symtab")
        if symtab is None:
            return []
        index = elf.get_section_index(".symtab")
        for section in elf.iter_sections():
            if not isinstance(section, RelocationSection) or section["sh_link"] != index:
                continue
            for r in section.iter_relocations():
                name = symtab.get_symbol(r["r_info_sym"]).name
                found.append((section.name, r["r_offset"], str(r["r_info_type"]), name,
                              r.entry.get("r_addend", 0)))
    return found


def lief_relocations(path: Path) -> list[Relocation]:
    lief = require_module("lief")
    binary = lief.parse(str(path))
    relocations = [*binary.dynamic_relocations, *binary.pltgot_relocations]
    return sorted({(r.address, str(r.type), r.symbol.name if r.has_symbol else "", r.addend)
                   for r in relocations})


def elfpatch_relocations(path: Path) -> list[Relocation]:
    from elfpatch.elf.file import ElfFile
    from elfpatch.elf.relocations import dynamic_relocation_tables, relr_addresses
    from elfpatch.elf.symbols import read_dynsym

    found: list[Relocation] = []
    with ElfFile.open(path) as elf:
        dynsym = read_dynsym(elf)
        assert dynsym is not None
        for table in dynamic_relocation_tables(elf):
            for k, offset in enumerate(table.offsets):
                kind, symbol, addend = table.entry(k)
                found.append((offset, str(kind), dynsym.name(symbol) if symbol else "", addend))
        found.extend((address, "RELR", "", 0) for address in relr_addresses(elf))
    return sorted(found)


# -- which bytes changed, and where they are ---------------------------------------------

@dataclass(frozen=True)
class Region:
    name: str
    type: str
    start: int
    end: int
    entsize: int


def file_regions(layout: Path) -> list[Region]:
    """The sections of ``layout`` (pyelftools) and its section header table."""
    from elftools.elf.elffile import ELFFile

    with layout.open("rb") as handle:
        elf = ELFFile(handle)
        regions = [Region(s.name, s["sh_type"], s["sh_offset"], s["sh_offset"] + s["sh_size"],
                          s["sh_entsize"])
                   for s in elf.iter_sections() if s["sh_type"] not in ("SHT_NOBITS", "SHT_NULL")]
        shoff, count, size = elf["e_shoff"], elf["e_shnum"], elf["e_shentsize"]
        regions.append(Region("<section headers>", "", shoff, shoff + count * size, size))
    return regions


def changed_offsets(before: bytes, after: bytes) -> list[int]:
    assert len(before) == len(after)
    changed: list[int] = []
    step = 4096
    for start in range(0, len(before), step):
        if before[start : start + step] != after[start : start + step]:
            changed.extend(i for i in range(start, min(start + step, len(before)))
                           if before[i] != after[i])
    return changed


def region_of(regions: list[Region], offset: int) -> Region | None:
    return next((r for r in regions if r.start <= offset < r.end), None)


# -- moving a file's tables about (the region tests and the fix fuzz) ---------------------

@dataclass(frozen=True)
class SectionPlace:
    index: int
    name: str
    type: str
    header: int  # file offset of its section header
    offset: int
    size: int


@dataclass(frozen=True)
class SegmentPlace:
    index: int
    type: str
    header: int  # file offset of its program header
    offset: int
    filesz: int


@dataclass(frozen=True)
class Layout:
    """Where a file's headers and tables are, read with pyelftools (not elfpatch)."""

    elf_class: int
    little: bool
    phoff: int
    phentsize: int
    phnum: int
    shoff: int
    loads: tuple[tuple[int, int, int], ...]  # (offset, vaddr, filesz) of each PT_LOAD
    dynamic: tuple[tuple[int, str, int], ...]  # (file offset of the entry, tag, value)
    sections: tuple[SectionPlace, ...]
    segments: tuple[SegmentPlace, ...]

    @property
    def word(self) -> int:
        return self.elf_class // 8

    def address_of(self, offset: int) -> int:
        """The virtual address file ``offset`` is loaded at."""
        for start, vaddr, size in self.loads:
            if start <= offset < start + size:
                return vaddr + offset - start
        raise ValueError(f"offset {offset:#x} is not loaded")

    def dynamic_entry(self, tag: str) -> tuple[int, int] | None:
        """(file offset of the entry, value) of the first ``DT_`` entry ``tag``."""
        return next(((at, value) for at, name, value in self.dynamic if name == tag), None)

    def section(self, name: str) -> SectionPlace | None:
        return next((s for s in self.sections if s.name == name), None)

    def put(self, data: bytearray, offset: int, value: int, size: int | None = None) -> None:
        """Write ``value`` as a word of this file's class and byte order (or ``size`` bytes)."""
        size = size or self.word
        data[offset : offset + size] = (value % (1 << (8 * size))).to_bytes(
            size, "little" if self.little else "big")

    def set_dynamic(self, data: bytearray, tag: str, value: int) -> None:
        entry = self.dynamic_entry(tag)
        assert entry is not None, f"no {tag} in the dynamic table"
        self.put(data, entry[0] + self.word, value)

    def set_section(self, data: bytearray, name: str, field: str, value: int) -> None:
        """Rewrite ``sh_offset`` or ``sh_size`` of section ``name``."""
        section = self.section(name)
        assert section is not None, f"no section {name}"
        at = {"offset": (24, 16), "size": (32, 20)}[field][0 if self.elf_class == 64 else 1]
        self.put(data, section.header + at, value)

    def set_segment(self, data: bytearray, index: int, field: str, value: int) -> None:
        """Rewrite ``p_offset`` or ``p_filesz`` of program header ``index``."""
        at = {"offset": (8, 4), "filesz": (32, 16)}[field][0 if self.elf_class == 64 else 1]
        self.put(data, self.segments[index].header + at, value)

    def set_phnum(self, data: bytearray, count: int) -> None:
        self.put(data, 0x38 if self.elf_class == 64 else 0x2C, count, 2)


def elf_layout(path: Path) -> Layout:
    from elftools.elf.elffile import ELFFile

    with path.open("rb") as stream:
        elf = ELFFile(stream)
        header = elf.header
        segments = tuple(SegmentPlace(i, s["p_type"], header.e_phoff + i * header.e_phentsize,
                                      s["p_offset"], s["p_filesz"])
                         for i, s in enumerate(elf.iter_segments()))
        loads = tuple((s["p_offset"], s["p_vaddr"], s["p_filesz"])
                      for s in elf.iter_segments() if s["p_type"] == "PT_LOAD")
        dynamic: list[tuple[int, str, int]] = []
        place = next((s for s in segments if s.type == "PT_DYNAMIC"), None)
        if place is not None:
            table = next(s for s in elf.iter_segments() if s["p_type"] == "PT_DYNAMIC")
            size = 2 * elf.elfclass // 8
            dynamic = [(place.offset + k * size, tag.entry.d_tag, tag.entry.d_val)
                       for k, tag in enumerate(table.iter_tags())]
        sections = tuple(SectionPlace(i, s.name, s["sh_type"],
                                      header.e_shoff + i * header.e_shentsize,
                                      s["sh_offset"], s["sh_size"])
                         for i, s in enumerate(elf.iter_sections()))
        return Layout(elf.elfclass, elf.little_endian, header.e_phoff, header.e_phentsize,
                      header.e_phnum, header.e_shoff, loads, tuple(dynamic), sections,
                      segments)
