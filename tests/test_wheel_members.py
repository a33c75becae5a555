"""Finding and reading a wheel's ELF members, by every path the reader takes.

The members are told apart by their first bytes, read from each member's
local header (stored and deflated) or, for other compression methods, through
zipfile; a large member is decompressed into an anonymous mapping.  Each path
must give what ``zipfile`` itself gives.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest
from elfpatch.fixtures import build

from elfpatch import wheel
from elfpatch.errors import InputError

SOURCES = {"value.cpp": 'extern "C" int value() { return 42; }\n'}


@pytest.fixture(scope="module")
def library(cxx: object) -> bytes:
    return build.build_shared(SOURCES, "libmembers", ["-O1"]).read_bytes()


def _archive(path: Path, members: list[tuple[str, bytes, int]]) -> zipfile.ZipFile:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data, method in members:
            archive.writestr(zipfile.ZipInfo(name), data, compress_type=method)
    return zipfile.ZipFile(path)


def test_members_are_found_by_magic_whatever_their_compression(library: bytes,
                                                               tmp_path: Path) -> None:
    noise = os.urandom(4096)  # incompressible: deflate stores it in a raw block
    text = b"ELF is not at the start of this text, " * 200  # a dynamic Huffman table first
    members = [
        ("stored.so", library, zipfile.ZIP_STORED),
        ("deflated.so", library, zipfile.ZIP_DEFLATED),
        ("bzip2.so", library, zipfile.ZIP_BZIP2),
        ("lzma.so", library, zipfile.ZIP_LZMA),
        ("noise.bin", noise, zipfile.ZIP_DEFLATED),
        ("text.txt", text, zipfile.ZIP_DEFLATED),
        ("elf-named-but-not.so", b"#!/bin/sh\n" * 10, zipfile.ZIP_DEFLATED),
        ("tiny", b"\x7fELF", zipfile.ZIP_STORED),  # too short to be an ELF file
        ("magic-in-text.txt", b"\x7fELF" + text, zipfile.ZIP_DEFLATED),
    ]
    archive = _archive(tmp_path / "mixed.zip", members)
    expected = [info.filename for info in archive.infolist()
                if info.file_size >= 16 and archive.read(info)[:4] == b"\x7fELF"]
    assert wheel.elf_members(archive, "mixed.zip") == expected
    assert expected == ["stored.so", "deflated.so", "bzip2.so", "lzma.so", "magic-in-text.txt"]


def test_a_corrupt_member_is_one_clean_error(library: bytes, tmp_path: Path) -> None:
    path = tmp_path / "corrupt.zip"
    _archive(path, [("broken.so", library, zipfile.ZIP_DEFLATED)]).close()
    data = bytearray(path.read_bytes())
    start = 30 + len("broken.so")
    data[start : start + 64] = bytes(range(64))  # the deflate stream's first bytes
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="cannot read archive member"):
        wheel.elf_members(zipfile.ZipFile(path), "corrupt.zip")


def test_a_large_member_is_read_into_a_mapping(library: bytes, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    archive = _archive(tmp_path / "one.zip", [("lib.so", library, zipfile.ZIP_DEFLATED)])
    monkeypatch.setattr(wheel, "_IN_MEMORY_LIMIT", 0)
    elf = wheel.open_member(archive, "lib.so", "one.zip")
    try:
        assert bytes(elf.view) == library
        assert elf.header.type_name == "DYN" and elf.sections  # it parses as the library
    finally:
        elf.close()
