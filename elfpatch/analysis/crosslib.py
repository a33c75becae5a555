"""Who defines and who references each UNIQUE symbol within a set of libraries.

Fixing one library alone is safe only if no other library needs its UNIQUE
symbols: a library that references one as undefined fails to load once the
definition is made LOCAL or hidden, and a symbol defined by several
libraries of the set is one object shared on purpose (a singleton, a type
tag whose address is its identity); localising it hands each library a copy
of its own.  This module finds both situations before anything is written.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice

from elfpatch.elf import constants as C
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import SymbolTable, read_dynsym
from elfpatch.elf.versions import read_versions

CXX_RUNTIMES = ("libstdc++.", "libc++.")


@dataclass
class LibrarySymbols:
    """The dynamic symbols of one library that matter to the cross-library check."""

    label: str
    unique_defined: set[str] = field(default_factory=set)
    other_defined: set[str] = field(default_factory=set)  # GLOBAL/WEAK definitions
    undefined: set[str] = field(default_factory=set)
    # Undefined names whose symbol version is one of the C++ runtime's (GLIBCXX_3.4.21 of
    # libstdc++.so.6): the runtime provides them, whoever else of the set exports them too.
    from_runtime: set[str] = field(default_factory=set)
    # The newest GLIBCXX_ version it requires of libstdc++: any libstdc++ that loads it
    # defines every symbol of that version or older.
    runtime_level: tuple[int, ...] = ()


# How many libraries a SharedUse names; the counts cover the rest.  Naming
# every other library would make the plan of N copies of one library grow
# with N squared (2,000 copies: hundreds of megabytes of report).
SAMPLE_SIZE = 8


@dataclass(frozen=True)
class SharedUse:
    """How the rest of the set uses one UNIQUE symbol of one library.

    The tuples name the first ``SAMPLE_SIZE`` libraries, in the order the set
    was given; the counts say how many there are in all.
    """

    referenced_by: tuple[str, ...]  # libraries that need it (undefined there)
    also_defined_by: tuple[str, ...]  # other libraries that define it too
    referenced_count: int
    also_defined_count: int

    @property
    def is_shared(self) -> bool:
        return bool(self.referenced_count or self.also_defined_count)


def dynamic_symbols(elf: ElfFile, label: str) -> LibrarySymbols:
    info = LibrarySymbols(label)
    table = read_dynsym(elf)
    if table is None:
        return info
    bindings, shndxs = table.bindings, table.shndxs
    exported = set(table.exported_indices())
    versions = read_versions(elf, table.count)
    info.runtime_level = max((version_level(n.name) for n in versions.needs
                              if n.file.startswith("libstdc++.") and not n.weak), default=())
    for index, name in _named_entries(table):
        if shndxs[index] == C.SHN_UNDEF:
            if bindings[index] != C.STB_LOCAL:
                info.undefined.add(name)
                if (versions.needed_file(index) or "").startswith(CXX_RUNTIMES):
                    info.from_runtime.add(name)
        elif index in exported:
            unique = bindings[index] == C.STB_GNU_UNIQUE
            (info.unique_defined if unique else info.other_defined).add(name)
    return info


def version_level(version: str) -> tuple[int, ...]:
    """GLIBCXX_3.4.21 -> (3, 4, 21); other version names -> () (they never compare)."""
    prefix = "GLIBCXX_"
    if not version.startswith(prefix):
        return ()
    try:
        return tuple(int(part) for part in version[len(prefix):].split("."))
    except ValueError:
        return ()


def _named_entries(table: SymbolTable) -> list[tuple[int, str]]:
    offsets = table.name_offsets
    return [(i, table.name(i)) for i in range(1, table.count) if offsets[i]]


def shared_uses(libraries: list[LibrarySymbols], hidden: dict[str, set[str]] | None = None,
                runtime: dict[str, tuple[int, ...]] | None = None,
                ) -> dict[str, dict[str, SharedUse]]:
    """library label -> UNIQUE (or ``hidden``) symbol -> how the rest of the set uses it.

    Only symbols some other library uses are listed.  Time and memory are
    linear in the number of (library, symbol) pairs: the definers and users
    of a symbol are gathered once, and each library gets counts and a
    bounded sample of them rather than its own copy of the whole list.
    """
    definers: dict[str, list[str]] = defaultdict(list)
    referencers: dict[str, list[str]] = defaultdict(list)
    all_hidden = set().union(*(hidden or {}).values())
    runtime_users: dict[str, set[str]] = defaultdict(set)
    for lib in libraries:
        for name in lib.unique_defined | lib.other_defined:
            definers[name].append(lib.label)
        for name in lib.undefined:
            referencers[name].append(lib.label)
        for name in lib.from_runtime & all_hidden:
            runtime_users[name].add(lib.label)
        if runtime and lib.runtime_level:
            # An unversioned reference takes libstdc++'s copy too, when every libstdc++
            # this library can load with has it (defined at its level or below).
            for name in (lib.undefined - lib.from_runtime) & all_hidden:
                level = runtime.get(name)
                if level and level <= lib.runtime_level:
                    runtime_users[name].add(lib.label)
    uses: dict[str, dict[str, SharedUse]] = {}
    for lib in libraries:
        mine: dict[str, SharedUse] = {}
        mine_hidden = (hidden or {}).get(lib.label, set())
        for name in lib.unique_defined | mine_hidden:
            users: Sequence[str] = referencers.get(name, ())
            itself = name in lib.undefined  # the library's own reference is no other's use
            if name in mine_hidden and name in runtime_users:
                # Their reference asks the C++ runtime's version: hidden here, it binds there.
                users = [u for u in users if u not in runtime_users[name]]
                itself = itself and lib.label not in runtime_users[name]
            user_count = len(users) - itself
            other_count = len(definers[name]) - 1  # the library itself is one definer
            if user_count or other_count:
                mine[name] = SharedUse(_sample(users, lib.label),
                                       _sample(definers[name], lib.label),
                                       user_count, other_count)
        if mine:
            uses[lib.label] = mine
    return uses


def _sample(labels: Sequence[str], excluded: str) -> tuple[str, ...]:
    """The first ``SAMPLE_SIZE`` of ``labels`` other than ``excluded``."""
    return tuple(islice((label for label in labels if label != excluded), SAMPLE_SIZE))
