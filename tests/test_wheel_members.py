"""Finding and reading a wheel's ELF members, by every path the reader takes.

The members are told apart by their first bytes, read after each member's
local header (stored, deflated, bzip2, lzma); a large member is decoded
into an anonymous temporary file that is then mapped.  Each path must give
what ``zipfile`` itself gives.  A deflated member is inflated by ISA-L when
it is installed, else by zlib: both are checked, and both must refuse what
zipfile refuses (a wrong CRC-32, a wrong size), with one clean error.
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

from elfpatch.errors import InputError
from elfpatch.wheel import read as wheel
from elfpatch.wheel import zipread
from elfpatch.wheel.zipread import ZipArchive, open_zip

SOURCES = {"value.cpp": 'extern "C" int value() { return 42; }\n'}


@pytest.fixture(scope="module")
def library(cxx: object) -> bytes:
    return build.build_shared(SOURCES, "libmembers", ["-O1"]).read_bytes()


@pytest.fixture(params=["isal", "zlib"])
def inflater(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Members inflated by ISA-L (skipped where it is not installed), or by zlib."""
    if request.param == "isal":
        pytest.importorskip("isal", reason="isal is not installed (pip install isal)")
    else:
        monkeypatch.setitem(sys.modules, "isal", None)  # its import now fails
    zipread.deflate_module.cache_clear()
    zipread.decode_failures.cache_clear()
    yield request.param
    zipread.deflate_module.cache_clear()
    zipread.decode_failures.cache_clear()


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


def _archive(path: Path, members: list[tuple[str, bytes, int]]) -> ZipArchive:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data, method in members:
            archive.writestr(zipfile.ZipInfo(name), data, compress_type=method)
    return open_zip(path)


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
    reference = zipfile.ZipFile(tmp_path / "mixed.zip")
    expected = [info.filename for info in reference.infolist()
                if info.file_size >= 16 and reference.read(info)[:4] == b"\x7fELF"]
    assert [m.name for m in wheel.elf_members(archive)] == expected
    assert expected == ["stored.so", "deflated.so", "bzip2.so", "lzma.so", "magic-in-text.txt"]
    for member in archive.members:  # every method decodes to what zipfile reads
        assert b"".join(archive.decoded_chunks(member)) == reference.read(member.name)


def test_a_corrupt_member_is_one_clean_error(library: bytes, tmp_path: Path) -> None:
    path = tmp_path / "corrupt.zip"
    _archive(path, [("broken.so", library, zipfile.ZIP_DEFLATED)]).close()
    data = bytearray(path.read_bytes())
    start = 30 + len("broken.so")
    data[start : start + 64] = bytes(range(64))  # the deflate stream's first bytes
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="corrupt compressed data"):
        wheel.elf_members(open_zip(path))


def test_a_large_member_is_read_into_a_mapped_file(library: bytes, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    archive = _archive(tmp_path / "one.zip", [("lib.so", library, zipfile.ZIP_DEFLATED)])
    monkeypatch.setattr(wheel, "IN_MEMORY_LIMIT", 0)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    elf = wheel.open_member(archive, archive.members[0])
    try:
        assert bytes(elf.view) == library
        assert elf.header.type_name == "DYN" and elf.sections  # it parses as the library
        assert elf.name == f"{tmp_path / 'one.zip'}:lib.so"
        assert list((tmp_path / "tmp").iterdir()) == []  # an anonymous file: no name
    finally:
        elf.close()


@pytest.mark.parametrize("in_memory", [True, False], ids=["in-memory", "mapped"])
def test_inflated_members_equal_what_zipfile_reads(library: bytes, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   inflater: str, in_memory: bool) -> None:
    big = library * 40  # several inflate steps, some bounded by the output limit
    monkeypatch.setattr(zipread, "READ_STEP", 4096)
    monkeypatch.setattr(zipread, "DECODE_STEP", 64 << 10)
    if not in_memory:
        monkeypatch.setattr(wheel, "IN_MEMORY_LIMIT", 0)
    members = [("lib.so", library), ("big.so", big), ("zeros.so", b"\x7fELF" + bytes(1 << 22))]
    archive = _archive(tmp_path / "m.zip", [(n, d, zipfile.ZIP_DEFLATED) for n, d in members])
    for member, (_name, data) in zip(archive.members, members, strict=True):
        assert bytes(wheel.member_data(archive, member)) == data


@pytest.mark.parametrize(("field", "words"), [("crc", "CRC-32 does not match"),
                                              ("size", "inflates past its stated")])
def test_a_member_that_lies_about_itself_is_refused(library: bytes, tmp_path: Path,
                                                     inflater: str, field: str,
                                                     words: str) -> None:
    path = tmp_path / "lying.zip"
    _archive(path, [("lib.so", library, zipfile.ZIP_DEFLATED)]).close()
    info = zipfile.ZipFile(path).getinfo("lib.so")
    _with_central_field(path, "lib.so", field, info.CRC ^ 1 if field == "crc" else 100)
    with pytest.raises(zipfile.BadZipFile):
        zipfile.ZipFile(path).read("lib.so")  # zipfile refuses it too
    archive = open_zip(path)
    with pytest.raises(InputError, match=words) as raised:
        wheel.open_member(archive, archive.members[0])
    assert raised.value.path == f"{path}:lib.so"


def test_a_member_shorter_than_stated_is_refused(library: bytes, tmp_path: Path,
                                                 inflater: str) -> None:
    path = tmp_path / "short.zip"
    _archive(path, [("lib.so", library, zipfile.ZIP_DEFLATED)]).close()
    _with_central_field(path, "lib.so", "size", len(library) + 1)
    archive = open_zip(path)
    with pytest.raises(InputError, match=f"inflates to {len(library)} bytes"):
        wheel.open_member(archive, archive.members[0])


def test_the_head_of_a_member_is_its_first_bytes(library: bytes, tmp_path: Path) -> None:
    """Whatever the method, and however many compressed bytes the first ones need."""
    text = os.urandom(3000) + b"\x7fELF"  # incompressible: the magic is far into the stream
    archive = _archive(tmp_path / "h.zip", [(f"{m}", text, m) for m in (0, 8, 12, 14)])
    for member in archive.members:
        assert archive.head(member, 3004) == text[:3004]
        assert archive.head(member, 4) == text[:4]
