"""`elfpatch scan` reports exactly the UNIQUE symbols readelf lists, on every kind of build."""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from conftest import require_tool, run_elfpatch
from elfpatch.fixtures import build
from tests_support import readelf_unique

LIBRARY = {
    "statics.h": """
#pragma once
#include <string>
inline int& inline_counter() { static int count = 0; return count; }
inline std::string& inline_name() { static std::string name("n"); return name; }
template <class T> T& template_local() { static T value{}; return value; }
template <class T> struct Holder { static int member; static std::string text; };
template <class T> int Holder<T>::member = 3;
template <class T> std::string Holder<T>::text = "t";
template <class T> int& per_thread() { static thread_local int value = 7; return value; }
struct Config { static inline int level = 2; };
""",
    "statics.cpp": """
#include "statics.h"
template struct Holder<long>;
extern "C" int use_all() {
    return inline_counter() + (int)inline_name().size() + template_local<int>()
        + Holder<int>::member + (int)Holder<int>::text.size() + per_thread<int>()
        + Config::level + Holder<long>::member;
}
""",
}

# name -> (kind, type) for the symbols the library above must carry
EXPECTED = {
    "_ZZ14inline_countervE5count": ("function_local_static", "OBJECT"),
    "_ZGVZ11inline_nameB5cxx11vE4name": ("guard_variable", "OBJECT"),
    "_ZZ14template_localIiERT_vE5value": ("function_local_static", "OBJECT"),
    "_ZN6HolderIiE6memberE": ("template_static_member", "OBJECT"),
    "_ZN6HolderIlE6memberE": ("template_static_member", "OBJECT"),
    "_ZGVN6HolderIiE4textB5cxx11E": ("guard_variable", "OBJECT"),
    "_ZZ10per_threadIiERivE5value": ("function_local_static", "TLS"),
    "_ZN6Config5levelE": ("inline_variable", "OBJECT"),
}

VARIANTS = {
    "default": [],
    "sysv-hash": ["-Wl,--hash-style=sysv"],
    "both-hash": ["-Wl,--hash-style=both"],
    "relr": ["-Wl,-z,pack-relative-relocs"],
}


def remove_section_headers(source: Path, destination: Path) -> Path:
    """A copy with e_shoff, e_shnum and e_shstrndx zeroed: only PT_DYNAMIC is left."""
    data = bytearray(source.read_bytes())
    is_64 = data[4] == 2
    order = "little" if data[5] == 1 else "big"
    shoff, shnum, shstrndx = (0x28, 0x3C, 0x3E) if is_64 else (0x20, 0x30, 0x32)
    data[shoff : shoff + (8 if is_64 else 4)] = bytes(8 if is_64 else 4)
    data[shnum : shnum + 2] = (0).to_bytes(2, order)
    data[shstrndx : shstrndx + 2] = (0).to_bytes(2, order)
    destination.write_bytes(bytes(data))
    return destination


def scan_json(*paths: str) -> dict:
    result = run_elfpatch("scan", "--json", *paths)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def reported(document: dict, file_index: int = 0) -> list[tuple[str, int, str]]:
    return [(u["table"], u["index"], u["name"]) for u in document["files"][file_index]["unique"]]


def build_library(flags: list[str], toolchain: build.Toolchain | None = None) -> Path:
    return build.build_shared(LIBRARY, "libstatics", ["-O1", *flags], toolchain=toolchain)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_scan_equals_readelf(cxx: object, variant: str) -> None:
    library = build_library(VARIANTS[variant])
    expected = readelf_unique(library)
    assert {name for _t, _i, name in expected} >= set(EXPECTED)
    assert reported(scan_json(str(library))) == expected


def test_kinds_types_and_demangling(cxx: object) -> None:
    document = scan_json(str(build_library([])))
    symbols = {u["name"]: u for u in document["files"][0]["unique"] if u["table"] == ".dynsym"}
    for name, (kind, symbol_type) in EXPECTED.items():
        assert (symbols[name]["kind"], symbols[name]["type"]) == (kind, symbol_type), name
        assert symbols[name]["defined"] is True
    require_tool("c++filt")
    names = sorted(symbols)
    filtered = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                              text=True, check=True).stdout.splitlines()
    assert [symbols[n]["demangled"] for n in names] == filtered
    assert document["files"][0]["unloads_on_dlclose"] is False


def test_stripped_library(cxx: object, tmp_path: Path) -> None:
    require_tool("strip")
    stripped = tmp_path / "libstripped.so"
    shutil.copy(build_library([]), stripped)
    subprocess.run(["strip", "--strip-all", str(stripped)], check=True)
    expected = readelf_unique(stripped)
    assert expected and all(table == ".dynsym" for table, _i, _n in expected)
    assert reported(scan_json(str(stripped))) == expected


@pytest.mark.parametrize("hash_style", ["gnu", "sysv"])
def test_library_without_section_headers(cxx: object, tmp_path: Path, hash_style: str) -> None:
    library = build_library([f"-Wl,--hash-style={hash_style}"])
    headerless = remove_section_headers(library, tmp_path / "libheaderless.so")
    # The dynamic symbol table is the same bytes: readelf's view of the original is the oracle.
    expected = [row for row in readelf_unique(library) if row[0] == ".dynsym"]
    assert reported(scan_json(str(headerless))) == expected


def test_aarch64_library(aarch64: build.Toolchain) -> None:
    library = build_library([], toolchain=aarch64)
    document = scan_json(str(library))
    assert document["files"][0]["machine"] == "aarch64"
    assert reported(document) == readelf_unique(library)


def test_32bit_library(cxx: object) -> None:
    try:
        library = build_library(["-m32"])
    except build.BuildError:
        pytest.skip("g++ -m32 is not usable here (no 32-bit multilib)")
    document = scan_json(str(library))
    assert document["files"][0]["elf_class"] == 32
    assert reported(document) == readelf_unique(library)


def test_system_libstdcxx() -> None:
    libstdcxx = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
    if not libstdcxx.exists():
        pytest.skip("no system libstdc++ at the Debian path")
    assert reported(scan_json(str(libstdcxx))) == readelf_unique(libstdcxx)


def make_wheel(path: Path, members: dict[str, bytes], with_metadata: bool = True) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        if with_metadata:
            archive.writestr("pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
            archive.writestr("pkg-1.0.dist-info/RECORD", "")
    return path


def test_folder_and_wheel(cxx: object, tmp_path: Path) -> None:
    library = build_library([])
    folder = tmp_path / "tree"
    (folder / "sub").mkdir(parents=True)
    shutil.copy(library, folder / "sub" / "libstatics.so.1")
    (folder / "sub" / "libstatics.so").symlink_to("libstatics.so.1")
    (folder / "notes.txt").write_text("not ELF")
    wheel = make_wheel(tmp_path / "pkg-1.0-cp311-cp311-linux_x86_64.whl",
                       {"pkg/_native.so": library.read_bytes(), "pkg/__init__.py": b""})
    document = scan_json(str(folder), str(wheel))
    files = [(f["path"], f["member"]) for f in document["files"]]
    assert files == [(str(folder / "sub" / "libstatics.so"), None),
                     (str(wheel), "pkg/_native.so")]
    assert reported(document, 1) == readelf_unique(library)


def test_json_matches_the_shipped_schema(cxx: object, tmp_path: Path) -> None:
    schema = json.loads(resources.files("elfpatch.report").joinpath("scan.schema.json")
                        .read_text())
    (tmp_path / "text").write_text("hello")
    result = run_elfpatch("scan", "--json", str(build_library([])), str(tmp_path / "text"))
    assert result.returncode == 2
    document = json.loads(result.stdout)
    jsonschema.validate(document, schema)
    assert document["errors"][0]["path"] == str(tmp_path / "text")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**document, "version": 2}, schema)


def test_text_report(cxx: object) -> None:
    result = run_elfpatch("scan", str(build_library([])))
    assert result.returncode == 0
    assert "will not unload on dlclose" in result.stdout
    assert "inline_counter()::count" in result.stdout
    assert "\x1b[" not in result.stdout  # no colour when not on a terminal
    verbose = run_elfpatch("scan", "-v", str(build_library([]))).stdout
    assert "per_thread<int>()::value" in verbose
