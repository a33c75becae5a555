"""elfpatch's reading of GNU symbol versions equals ``readelf -V``, entry for entry."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.build import compile_linked
from support.readelf import readelf_versions

from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import read_dynsym
from elfpatch.elf.versions import read_versions

SYSTEM = Path("/usr/lib/x86_64-linux-gnu")
SAMPLES = ("libc.so.6", "libstdc++.so.6", "libz.so.1", "libm.so.6", "libgcc_s.so.1")


def compare(path: Path) -> None:
    oracle = readelf_versions(path)
    with ElfFile.open(path) as elf:
        table = read_dynsym(elf)
        assert table is not None
        versions = read_versions(elf, table.count)
        assert versions.defined == oracle.defined
        assert {(n.file, n.name, n.weak) for n in versions.needs} == oracle.needed
        assert len(versions.versym) == len(oracle.symbols) == table.count
        for index, (number, hidden, name) in enumerate(oracle.symbols):
            raw = versions.versym[index]
            assert (raw & 0x7FFF, bool(raw & 0x8000)) == (number, hidden), index
            ours, ours_hidden = versions.version_of(index)
            if name in ("*local*", "*global*") or number in versions.base:
                assert ours is None
            else:
                assert (ours, ours_hidden) == (name, hidden), index


@pytest.mark.parametrize("name", SAMPLES)
def test_system_libraries(name: str) -> None:
    path = SYSTEM / name
    if not path.exists():
        pytest.skip(f"{path} is not on this machine")
    compare(path.resolve())


def test_a_version_script_and_a_weak_need(tmp_path: Path) -> None:
    (tmp_path / "map").write_text("V1 { global: old_api; local: *; };\n"
                                  "V2 { global: new_api; } V1;\n")
    provider = compile_linked("gcc", "c", tmp_path / "libp.so",
                              "int old_api(void) { return 1; }\nint new_api(void) { return 2; }\n",
                              soname="libp.so", flags=(f"-Wl,--version-script={tmp_path / 'map'}",))
    user = compile_linked("gcc", "c", tmp_path / "libu.so",
                          "int new_api(void);\nint use(void) { return new_api(); }\n",
                          soname="libu.so", needed=(provider,))
    compare(provider)
    compare(user)
    with ElfFile.open(user) as elf:
        table = read_dynsym(elf)
        assert table is not None
        needs = read_versions(elf, table.count).needs
    assert ("libp.so", "V2") in {(n.file, n.name) for n in needs}


def test_an_unversioned_library_has_empty_tables(tmp_path: Path) -> None:
    library = compile_linked("gcc", "c", tmp_path / "libplain.so", "int f(void) { return 0; }\n",
                             soname="libplain.so", flags=("-nostdlib",))
    with ElfFile.open(library) as elf:
        table = read_dynsym(elf)
        assert table is not None
        versions = read_versions(elf, table.count)
    assert (len(versions.versym), versions.defined, versions.needs) == (0, frozenset(), ())
