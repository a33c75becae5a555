"""Registrations and look-ups of a key, against the code of the registry they go to.

``analysis.registries`` pairs a look-up with the registrations of its key
once it knows what each function called does.  The function is often
another object's (the registry's library): this module finds the object
that defines it, in symbol lookup order, opens it and reads the function.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from itertools import compress
from pathlib import Path

from elfpatch.analysis.effects import EffectsAnalyzer
from elfpatch.analysis.effects.addresses import AddressIndex
from elfpatch.analysis.registries import (
    FunctionRole,
    KeyedUse,
    Roles,
    contested,
    roles_in_object,
)
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import SymbolTable, read_dynsym
from elfpatch.errors import ElfpatchError
from elfpatch.loader.closure import Closure, LoadedObject, dependency_closure
from elfpatch.loader.host import HostProfile


def roles(uses: Sequence[KeyedUse], lookup_order: Sequence[str],
          indexed: Mapping[str, AddressIndex] | None = None) -> Roles:
    """(calling object, function) -> its role, for the uses whose key is contested.

    A function of the calling object itself is read there; another object's
    is read in the first object of ``lookup_order`` (paths, in symbol lookup
    order) that exports it.  None where no object at hand defines it.
    ``indexed``: path -> the address index of an object still open, built
    already (libtorch_cpu.so's takes a tenth of a second to build again).
    """
    wanted = contested(uses)
    if not wanted:
        return {}
    names = {u.call.function for u in wanted if u.call.address is None}
    definitions = _definitions(names, lookup_order, indexed or {})
    where: dict[str, dict[int, list[tuple[str, str]]]] = {}
    keys: dict[str, dict[int, set[str]]] = {}
    found: dict[tuple[str, str], FunctionRole | None] = {}
    for use in wanted:
        key = (use.object, use.call.function)
        if use.call.address is not None:
            definer: tuple[str, int] | None = (use.object, use.call.address)
        else:
            definer = definitions.get(use.call.function)
        found[key] = None
        if definer is not None:
            where.setdefault(definer[0], {}).setdefault(definer[1], []).append(key)
            keys.setdefault(definer[0], {}).setdefault(definer[1], set()).add(use.call.key)
    for path, functions in where.items():
        index = indexed.get(path) if indexed is not None else None
        for address, role in _read_roles(path, keys[path], index).items():
            for key in functions[address]:
                found[key] = role
    return found


def _definitions(names: set[str], lookup_order: Sequence[str],
                 indexed: Mapping[str, AddressIndex]) -> dict[str, tuple[str, int]]:
    """function name -> (path, address) of its first exported definition in lookup order
    (an object ``indexed`` is open still, its .dynsym read already)."""
    definitions: dict[str, tuple[str, int]] = {}
    for path in lookup_order:
        left = names - definitions.keys()
        if not left:
            break
        try:
            if path in indexed:
                found = _exported_by(indexed[path].elf, left)
            else:
                with ElfFile.open(path) as elf:
                    found = _exported_by(elf, left)
        except ElfpatchError:
            continue
        for name, value in found.items():
            definitions[name] = (path, value)
    return definitions


def _exported_by(elf: ElfFile, names: set[str]) -> dict[str, int]:
    table = read_dynsym(elf)
    return _exported(table, names) if table is not None else {}


def _exported(table: SymbolTable, names: set[str]) -> dict[str, int]:
    """name -> value of those of ``names`` the table exports.  The string table is
    searched for the names first (a big library exports tens of thousands)."""
    strings = bytes(table.elf.view[table.strtab_offset : table.strtab_offset + table.strtab_size])
    offsets: dict[int, str] = {}
    for name in names:
        wanted = name.encode("utf-8", "surrogateescape") + b"\0"
        at = strings.find(wanted)
        while at >= 0:
            offsets[at] = name
            at = strings.find(wanted, at + 1)
    if not offsets:
        return {}
    found: dict[str, int] = {}
    exported = set(table.exported_indices())
    name_offsets = table.name_offsets
    # The entries named so picked in C; only they are looked at here.
    for index in compress(range(len(name_offsets)), map(offsets.__contains__, name_offsets)):
        wanted_name = offsets[name_offsets[index]]
        if index in exported and wanted_name not in found:
            found[wanted_name] = table.values[index]
    return found


def _read_roles(path: str, functions: Mapping[int, Collection[str]],
                index: AddressIndex | None = None) -> dict[int, FunctionRole]:
    try:
        if index is not None:  # a fresh analyzer: what it reads must not depend on history
            return roles_in_object(EffectsAnalyzer(index.elf, index), path, functions)
        with ElfFile.open(path) as elf:
            return roles_in_object(EffectsAnalyzer(elf), path, functions)
    except ElfpatchError:
        return {}


def lookup_order_of(path: str, host: HostProfile | None = None) -> list[str]:
    """The object and its dependencies in symbol lookup order; the object alone when
    they cannot be found (its registry functions are then not judged)."""
    try:
        closure = dependency_closure(Path(path), host=host)
    except (ElfpatchError, OSError, ValueError):
        return [path]
    return [str(o.path) for o in closure.load_order]


def dependencies(closure: Closure) -> dict[str, set[str]]:
    """path -> the paths of every object it needs, directly or not."""
    by_name: dict[str, LoadedObject] = {}
    for loaded in closure.load_order:
        by_name.setdefault(loaded.path.name, loaded)
        if loaded.soname:
            by_name.setdefault(loaded.soname, loaded)
    direct = {str(o.path): {str(by_name[n].path) for n in o.needed if n in by_name}
              for o in closure.load_order}
    needs: dict[str, set[str]] = {}
    for start in direct:
        seen: set[str] = set()
        stack = list(direct[start])
        while stack:
            current = stack.pop()
            if current not in seen:
                seen.add(current)
                stack.extend(direct.get(current, ()))
        needs[start] = seen
    return needs
