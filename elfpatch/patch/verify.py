"""Re-reading a patched file before it replaces anything.

The checks are independent of how the edits were computed: they compare
the output with the input by symbol name and string-table offset.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from elfpatch.elf import constants as C
from elfpatch.elf.file import ElfFile
from elfpatch.elf.hashes import dynamic_symbol_count, read_gnu_hash, read_sysv_hash
from elfpatch.elf.relocations import dynamic_relocation_tables
from elfpatch.elf.symbols import DYNSYM, SymbolTable, read_dynsym, read_symtab
from elfpatch.errors import ElfpatchError
from elfpatch.patch.plan import TARGET_GLOBAL, TARGET_LOCAL, TARGET_WEAK_HIDDEN, LibraryPlan

_EXPECTED = {
    TARGET_LOCAL: (C.STB_LOCAL, None),
    TARGET_WEAK_HIDDEN: (C.STB_WEAK, C.STV_HIDDEN),
    TARGET_GLOBAL: (C.STB_GLOBAL, C.STV_DEFAULT),
}


class VerificationError(ElfpatchError):
    """The patched copy failed a check; the original was left untouched."""


def verify_output(original: ElfFile, output_path: Path, plan: LibraryPlan) -> None:
    label = original.name
    try:
        with ElfFile.open(output_path) as patched:
            _verify(original, patched, plan)
    except VerificationError:
        raise
    except ElfpatchError as error:
        raise VerificationError(label, f"patched copy does not parse: {error.reason}; "
                                "original left untouched") from None


def _fail(original: ElfFile, reason: str) -> VerificationError:
    return VerificationError(original.name, f"verification of the patched copy failed: {reason}; "
                             "original left untouched")


def _verify(original: ElfFile, patched: ElfFile, plan: LibraryPlan) -> None:
    if patched.size != original.size:
        raise _fail(original, "file size changed")
    tables = {t.kind: t for t in (read_dynsym(patched), read_symtab(patched)) if t is not None}
    old_tables = {t.kind: t for t in (read_dynsym(original), read_symtab(original))
                  if t is not None}
    wanted: dict[str, dict[int, str]] = defaultdict(dict)
    for change in plan.changes:
        wanted[change.table][change.index] = change.target
    for kind, targets in wanted.items():
        _verify_bindings(original, old_tables[kind], tables[kind], targets)
    for table in tables.values():
        _verify_locals_first(original, table)
    old_dynsym, new_dynsym = read_dynsym(original), tables.get(DYNSYM)
    if old_dynsym is not None and new_dynsym is not None:
        _verify_relocations(original, patched, old_dynsym, new_dynsym)
        _verify_hash_sizes(original, patched, new_dynsym)


def _verify_bindings(original: ElfFile, old_table: SymbolTable, table: SymbolTable,
                     targets: dict[int, str]) -> None:
    """Each planned symbol, found by its string-table offset, has its new binding."""
    wanted = {old_table.name_offsets[index]: target for index, target in targets.items()}
    for index in table.unique_indices():
        if table.name_offsets[index] in wanted:
            raise _fail(original, f"{table.name(index)} is still UNIQUE in {table.kind}")
    infos, others = table.infos, table.others
    seen = {
        offset for index, offset in enumerate(table.name_offsets)
        if offset in wanted and _has_binding(infos[index], others[index], wanted[offset])
    }
    missing = set(wanted) - seen
    if missing:
        raise _fail(original, f"{table.kind} lacks a planned binding "
                    f"(string offset {min(missing)})")


def _has_binding(info: int, other: int, target: str) -> bool:
    want_binding, want_visibility = _EXPECTED[target]
    return info >> 4 == want_binding and want_visibility in (None, other & 0x3)


def _verify_locals_first(original: ElfFile, table: SymbolTable) -> None:
    if table.first_global is None:
        return
    bindings = [info >> 4 for info in table.infos]
    first = table.first_global
    if any(b != C.STB_LOCAL for b in bindings[1:first]) or C.STB_LOCAL in bindings[first:]:
        raise _fail(original, f"{table.kind} locals do not all precede sh_info ({first})")


def _verify_relocations(original: ElfFile, patched: ElfFile, old_table: SymbolTable,
                        new_table: SymbolTable) -> None:
    """Every relocation still names the same symbol (same string-table offset) and type."""
    old_names, new_names = old_table.name_offsets, new_table.name_offsets
    for old, new in zip(dynamic_relocation_tables(original), dynamic_relocation_tables(patched),
                        strict=True):
        if old.types != new.types or old.offsets != new.offsets:
            raise _fail(original, f"{old.name} types or offsets changed")
        new_symbols = new.symbol_indices
        if new_symbols and max(new_symbols) >= new_table.count:
            raise _fail(original, f"{old.name} refers past the end of .dynsym")
        if [old_names[a] for a in old.symbol_indices] != [new_names[b] for b in new_symbols]:
            raise _fail(original, f"{old.name}: a relocation no longer names its symbol")


def _verify_hash_sizes(original: ElfFile, patched: ElfFile, table: SymbolTable) -> None:
    count = dynamic_symbol_count(patched)
    gnu, sysv = read_gnu_hash(patched), read_sysv_hash(patched)
    if (gnu is not None or sysv is not None) and count != table.count:
        raise _fail(original, f"hash table implies {count} dynamic symbols, .dynsym has "
                    f"{table.count}")
    if gnu is not None and sysv is not None:
        from elfpatch.elf.hashes import gnu_hash_symbol_count

        if gnu_hash_symbol_count(patched, gnu) != table.count:
            raise _fail(original, ".gnu.hash does not cover .dynsym")
