"""`elfpatch scan` reports exactly the UNIQUE symbols readelf lists, on every kind of build.

The library (``support.build.STATICS``) has static locals of inline and template
functions, template static data members (implicit and explicit
instantiation), ``thread_local`` statics, guard variables and C++17 inline
variables.  It is built for the host, aarch64, a 32-bit and a big-endian
machine, and each build is scanned as linked, stripped, without section
headers (so .dynsym is found through PT_DYNAMIC and the GNU or System V
hash table) and with packed relative relocations.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from elftools.elf.elffile import ELFFile
from support.build import (
    EXPECTED,
    PLATFORMS,
    Platform,
    cxxfilt,
    invoke,
    make_wheel,
    platform,
    remove_section_headers,
    stripped_copy,
)
from support.readelf import readelf_dynamic_tags, readelf_symbols, readelf_unique

VARIANTS = ("plain", "stripped", "headerless-gnu", "headerless-sysv", "relr")


def scan_json(*paths: str | Path) -> dict[str, Any]:
    result = invoke("scan", "--json", *map(str, paths))
    assert result.exception is None, result.exception
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    return json.loads(result.stdout)


def reported(document: dict[str, Any], file_index: int = 0) -> list[tuple[str, int, str]]:
    return [(u["table"], u["index"], u["name"]) for u in document["files"][file_index]["unique"]]


def variant_file(target: Platform, variant: str, tmp_path: Path) -> tuple[Path, bool]:
    """The file to scan for ``variant`` and whether readelf must read it with -D."""
    if variant == "plain":
        return target.library(), False
    if variant == "stripped":
        return stripped_copy(target.library(), tmp_path / "libstripped.so", target.strip), False
    if variant.startswith("headerless-"):
        style = variant.split("-", 1)[1]
        library = target.library([f"-Wl,--hash-style={style}"])
        # The point is to size .dynsym from this one hash table: it must be the only one.
        tags = readelf_dynamic_tags(library)
        assert ("GNU_HASH" in tags, "HASH" in tags) == (style == "gnu", style == "sysv"), tags
        return remove_section_headers(library, tmp_path / "libheaderless.so"), True
    assert variant == "relr"
    library = target.library(["-Wl,-z,pack-relative-relocs"])
    if "RELR" not in readelf_dynamic_tags(library):
        pytest.skip(f"{target.toolchain.cxx}'s linker ignores -z pack-relative-relocs")
    return library, False


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("platform_name", PLATFORMS)
def test_scan_equals_readelf(platform_name: str, variant: str, tmp_path: Path) -> None:
    target = platform(platform_name)
    path, use_dynamic = variant_file(target, variant, tmp_path)
    expected = readelf_unique(path, use_dynamic=use_dynamic)
    dynamic_names = {name for table, _i, name in expected if table == ".dynsym"}
    assert dynamic_names == set(EXPECTED)
    document = scan_json(path)
    assert reported(document) == expected
    tables = {table for table, _i, _n in expected}
    assert tables == ({".dynsym", ".symtab"} if variant in ("plain", "relr") else {".dynsym"})
    if use_dynamic:
        # The same entries as the section-header view of the file it was copied from.
        original = [row for row in readelf_unique(target.library(
            [f"-Wl,--hash-style={variant.split('-')[1]}"])) if row[0] == ".dynsym"]
        assert expected == original
        assert all(u["section"] is None for u in document["files"][0]["unique"])


@pytest.mark.parametrize("platform_name", PLATFORMS)
def test_types_kinds_and_demangling(platform_name: str) -> None:
    target = platform(platform_name)
    library = target.library()
    document = scan_json(library)
    record = document["files"][0]
    assert (record["elf_class"], record["soname"]) == (
        32 if platform_name == "32bit" else 64, "libunique.so")
    if platform_name == "aarch64":
        assert record["machine"] == "aarch64"
    dynamic = {u["name"]: u for u in record["unique"] if u["table"] == ".dynsym"}
    for name, (kind, symbol_type) in EXPECTED.items():
        symbol = dynamic[name]
        assert (symbol["kind"], symbol["type"], symbol["defined"]) == (kind, symbol_type, True), \
            name
        assert symbol["section"] in ((".tdata", ".tbss") if symbol_type == "TLS" else
                                     (".data", ".bss")), symbol
        assert symbol["visibility"] == "DEFAULT"
    assert record["unique_definitions"] == len(EXPECTED)
    assert (record["unloads_on_dlclose"], record["nodelete"]) == (False, False)
    names = [u["name"] for u in record["unique"]]
    assert [u["demangled"] for u in record["unique"]] == cxxfilt(names)
    # readelf's type and size columns agree too.
    oracle = {(s.table, s.index): s for s in readelf_symbols(library)}
    for u in record["unique"]:
        row = oracle[(u["table"], u["index"])]
        assert (u["type"], u["size"], u["defined"]) == (row.type, row.size, row.ndx != "UND")


def test_system_libstdcxx() -> None:
    libstdcxx = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
    if not libstdcxx.exists():
        pytest.skip("no system libstdc++ at the Debian path (apt-get install libstdc++6)")
    document = scan_json(libstdcxx)
    expected = readelf_unique(libstdcxx)
    assert expected and reported(document) == expected
    unique = document["files"][0]["unique"]
    assert [u["demangled"] for u in unique] == cxxfilt([u["name"] for u in unique])
    assert {u["kind"] for u in unique} <= {"function_local_static", "guard_variable",
                                           "template_static_member", "inline_variable"}


def test_names_and_paths_that_are_not_utf8(tmp_path: Path) -> None:
    """Stray bytes in a symbol name or a file name are shown as \\xNN, never a crash."""
    library = platform("host").library()
    data = bytearray(library.read_bytes())
    with library.open("rb") as stream:
        elf = ELFFile(stream)
        dynstr = elf.get_section_by_name(".dynstr")["sh_offset"]
        symbol = next(s for s in elf.get_section_by_name(".dynsym").iter_symbols()
                      if s.name == "_ZN6Config5levelE")
    data[dynstr + symbol["st_name"] + 4] = 0xFF  # _ZN6\xffonfig5levelE
    folder = tmp_path / "odd"
    folder.mkdir()
    odd = Path(os.fsdecode(bytes(folder) + b"/lib\xe9.so"))
    odd.write_bytes(bytes(data))
    document = scan_json(folder)
    record = document["files"][0]
    assert record["path"] == f"{folder}/lib\\xe9.so"
    names = {u["name"] for u in record["unique"] if u["table"] == ".dynsym"}
    assert "_ZN6\\xffonfig5levelE" in names
    text = invoke("scan", "-v", str(folder))
    assert text.exit_code == 0 and text.exception is None
    assert "lib\\xe9.so" in text.stdout and "onfig::level" in text.stdout


# -- folders and wheels --------------------------------------------------------------

def test_folder_recursive_links_once_non_elf_ignored(tmp_path: Path) -> None:
    library = platform("host").library()
    other = platform("host").library(["-DUNUSED"])
    folder = tmp_path / "tree"
    (folder / "a" / "deep").mkdir(parents=True)
    (folder / "b").mkdir()
    shutil.copy(library, folder / "a" / "libstatics.so.1")
    (folder / "a" / "libstatics.so").symlink_to("libstatics.so.1")
    (folder / "b" / "alias.so").symlink_to(folder / "a" / "libstatics.so.1")
    (folder / "b" / "to-a").symlink_to(folder / "a", target_is_directory=True)  # not followed
    shutil.copy(other, folder / "a" / "deep" / "libother.so")
    (folder / "notes.txt").write_text("not ELF")
    (folder / "fake.so").write_bytes(b"\x7fEL")  # too short for the magic
    (folder / "b" / "script.so").write_text("#!/bin/sh\n")
    document = scan_json(folder)
    files = [(f["path"], f["member"]) for f in document["files"]]
    assert files == [(str(folder / "a" / "libstatics.so"), None),
                     (str(folder / "a" / "deep" / "libother.so"), None)]
    assert reported(document, 0) == readelf_unique(library)
    assert reported(document, 1) == readelf_unique(other)
    # A file named twice, directly and through a link, is still scanned once.
    twice = scan_json(folder / "a" / "libstatics.so.1", folder / "b" / "alias.so")
    assert len(twice["files"]) == 1


def test_wheel_and_zip_members(tmp_path: Path) -> None:
    library = platform("host").library()
    members = {"pkg/__init__.py": b"", "pkg/_native.cpython-311-x86_64-linux-gnu.so":
               library.read_bytes(), "pkg.libs/libstatics-1a2b3c.so": library.read_bytes(),
               "pkg/data.bin": b"\x7fELF"}  # ELF magic, but too short to be ELF: skipped
    wheel = make_wheel(tmp_path / "pkg-1.0-cp311-cp311-linux_x86_64.whl", members)
    archive = make_wheel(tmp_path / "bundle.zip", {"lib/libstatics.so": library.read_bytes()},
                         with_metadata=False)
    document = scan_json(wheel, archive)
    files = [(f["path"], f["member"]) for f in document["files"]]
    assert files == [(str(wheel), "pkg/_native.cpython-311-x86_64-linux-gnu.so"),
                     (str(wheel), "pkg.libs/libstatics-1a2b3c.so"),
                     (str(archive), "lib/libstatics.so")]
    for index in range(3):
        assert reported(document, index) == readelf_unique(library)
    text = invoke("scan", str(wheel))
    assert text.exit_code == 0
    assert f"{wheel}:pkg.libs/libstatics-1a2b3c.so" in text.stdout


# -- JSON schema and the command line ------------------------------------------------

def scan_schema() -> dict[str, Any]:
    text = resources.files("elfpatch.report").joinpath("scan.schema.json").read_text()
    schema = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def test_json_validates_against_the_shipped_schema(tmp_path: Path) -> None:
    schema = scan_schema()
    library = platform("host").library()
    headerless = remove_section_headers(library, tmp_path / "headerless.so")
    wheel = make_wheel(tmp_path / "pkg-1.0-py3-none-linux_x86_64.whl",
                       {"pkg/x.so": library.read_bytes()})
    (tmp_path / "text.so").write_text("hello")
    result = invoke("scan", "--json", str(library), str(headerless), str(wheel),
                    str(tmp_path / "text.so"))
    assert result.exit_code == 2 and result.exception is None
    document = json.loads(result.stdout)
    jsonschema.validate(document, schema, cls=jsonschema.Draft202012Validator)
    assert document["version"] == 1
    assert [e["path"] for e in document["errors"]] == [str(tmp_path / "text.so")]
    assert len(document["files"]) == 3
    broken = {**document, "files": [{**document["files"][0], "elf_class": 16}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema, cls=jsonschema.Draft202012Validator)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**document, "version": 2}, schema)


def test_exit_codes_and_text_report(tmp_path: Path) -> None:
    library = platform("host").library()
    good = invoke("scan", str(library))
    assert good.exit_code == 0 and good.stderr == ""
    assert "stays loaded after dlclose: first to provide" in good.stdout
    assert f"{len(EXPECTED)} STB_GNU_UNIQUE symbols in .dynsym" in good.stdout
    assert "inline_counter()::count" not in good.stdout  # only a few examples
    assert "\x1b[" not in good.stdout  # no colour when not on a terminal
    verbose = invoke("scan", "-v", str(library)).stdout
    for name in ("inline_counter()::count", "per_thread<int>()::value", "PerThread<short>::slot",
                 "global_inline", "guard variable for Holder<int>::text[abi:cxx11]"):
        assert name in verbose
    missing = tmp_path / "missing.so"
    bad = invoke("scan", str(library), str(missing))
    assert bad.exit_code == 2 and bad.exception is None
    assert str(library) in bad.stdout
    assert bad.stderr.count("\n") == 1 and str(missing) in bad.stderr
    assert invoke("scan").exit_code == 2  # no path: usage error


def test_installed_command_in_a_subprocess(tmp_path: Path) -> None:
    """As a user runs it, from another directory, with a relative path."""
    library = platform("host").library()
    shutil.copy(library, tmp_path / "libstatics.so")
    environment = {**os.environ, "NO_COLOR": "1"}
    result = subprocess.run([sys.executable, "-m", "elfpatch", "scan", "--json", "libstatics.so",
                             "nothing.so"], cwd=tmp_path, capture_output=True, text=True,
                            env=environment, timeout=120)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        "elfpatch: error: nothing.so: no such file or directory"]
    document = json.loads(result.stdout)
    assert reported(document) == readelf_unique(library)
