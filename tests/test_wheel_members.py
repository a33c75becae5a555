"""Finding and reading a wheel's ELF members, by every path the reader takes.

The members are told apart by their first bytes, read from each member's
local header (stored and deflated) or, for other compression methods, through
zipfile; a large member is decompressed into an anonymous mapping.  Each path
must give what ``zipfile`` itself gives.  A deflated member is inflated by
ISA-L when it is installed, else by zlib: both are checked, and both must
refuse what zipfile refuses (a wrong CRC-32, a wrong size).
"""

from __future__ import annotations

import os
import struct
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from elfpatch.fixtures import build

from elfpatch import wheel
from elfpatch.errors import InputError

SOURCES = {"value.cpp": 'extern "C" int value() { return 42; }\n'}


@pytest.fixture(scope="module")
def library(cxx: object) -> bytes:
    return build.build_shared(SOURCES, "libmembers", ["-O1"]).read_bytes()


@pytest.fixture(params=["isal", "zlib"])
def inflater(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Members inflated by ISA-L (skipped where it is not installed), or by zlib."""
    if request.param == "isal":
        pytest.importorskip("isal", reason="isal is not installed")
    else:
        monkeypatch.setitem(sys.modules, "isal", None)  # its import now fails
    wheel._deflate.cache_clear()
    yield request.param
    wheel._deflate.cache_clear()


def _with_central_field(path: Path, name: str, field: str, value: int) -> None:
    """Overwrite one field of a member's central-directory and local headers."""
    local_at, central_at = {"crc": (14, 16), "size": (22, 24)}[field]
    data = bytearray(path.read_bytes())
    info = zipfile.ZipFile(path).getinfo(name)
    struct.pack_into("<I", data, info.header_offset + local_at, value)
    central = data.index(b"PK\x01\x02")
    while data[central + 46 : central + 46 + len(name)] != name.encode():
        central = data.index(b"PK\x01\x02", central + 4)
    struct.pack_into("<I", data, central + central_at, value)
    path.write_bytes(bytes(data))


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


@pytest.mark.parametrize("in_memory", [True, False], ids=["in-memory", "mapped"])
def test_inflated_members_equal_what_zipfile_reads(library: bytes, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   inflater: str, in_memory: bool) -> None:
    big = library * 40  # several inflate steps, some bounded by the output limit
    monkeypatch.setattr(wheel, "_INFLATE_INPUT", 4096)
    monkeypatch.setattr(wheel, "_INFLATE_OUTPUT", 64 << 10)
    if not in_memory:
        monkeypatch.setattr(wheel, "_IN_MEMORY_LIMIT", 0)
    members = [("lib.so", library), ("big.so", big), ("zeros.so", b"\x7fELF" + bytes(1 << 22))]
    archive = _archive(tmp_path / "m.zip", [(n, d, zipfile.ZIP_DEFLATED) for n, d in members])
    for name, data in members:
        assert bytes(wheel._member_data(archive, archive.getinfo(name))) == data == \
            archive.read(name)


@pytest.mark.parametrize(("field", "words"), [("crc", "CRC-32 does not match"),
                                              ("size", "inflates past its stated")])
def test_a_member_that_lies_about_itself_is_refused(library: bytes, tmp_path: Path,
                                                     inflater: str, field: str,
                                                     words: str) -> None:
    path = tmp_path / "lying.zip"
    _archive(path, [("lib.so", library, zipfile.ZIP_DEFLATED)]).close()
    info = zipfile.ZipFile(path).getinfo("lib.so")
    _with_central_field(path, "lib.so", field, info.CRC ^ 1 if field == "crc" else 100)
    archive = zipfile.ZipFile(path)
    with pytest.raises(zipfile.BadZipFile):
        archive.read("lib.so")  # zipfile refuses it too
    with pytest.raises(InputError, match=words):
        wheel.open_member(archive, "lib.so", "lying.zip")


def test_a_member_shorter_than_stated_is_refused(library: bytes, tmp_path: Path,
                                                 inflater: str) -> None:
    path = tmp_path / "short.zip"
    _archive(path, [("lib.so", library, zipfile.ZIP_DEFLATED)]).close()
    _with_central_field(path, "lib.so", "size", len(library) + 1)
    with pytest.raises(InputError, match=f"inflates to {len(library)} bytes"):
        wheel.open_member(zipfile.ZipFile(path), "lib.so", "short.zip")
