"""Bad input gets one clear line naming the path and exit code 2, never a traceback.

Every broken file is scanned together with a good library: the broken one
is one ``elfpatch: error: PATH: reason`` line on stderr and one entry of
"errors" in the JSON, and the good one is still reported.  Corrupt ELF
files are made by poking bytes into a built library at places located with
pyelftools (not with the reader under test).
"""

from __future__ import annotations

import json
import os
import stat
import struct
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from elftools.elf.elffile import ELFFile
from support.build import (
    invoke,
    make_wheel,
    platform,
    remove_section_headers,
    stripped_copy,
)
from support.inits import scenario

from elfpatch.errors import InputError
from elfpatch.service.runner import scan_paths


@pytest.fixture(scope="module")
def good_library() -> Path:
    return platform("host").library()


class Layout:
    """Where things are in a 64-bit little-endian ELF file, from pyelftools."""

    def __init__(self, path: Path) -> None:
        self.data = path.read_bytes()
        with path.open("rb") as stream:
            elf = ELFFile(stream)
            self.shoff = elf.header.e_shoff
            self.index = {s.name: i for i, s in enumerate(elf.iter_sections())}
            self.sections = {s.name: s.header for s in elf.iter_sections()}
            dynsym = elf.get_section_by_name(".dynsym")
            self.first_unique = next(i for i, s in enumerate(dynsym.iter_symbols())
                                     if s.entry.st_info.bind in ("STB_GNU_UNIQUE", "STB_LOOS"))
            self.dynamic = next(s for s in elf.iter_segments() if s["p_type"] == "PT_DYNAMIC")
            self.dynamic_tags = [t.entry.d_tag for t in elf.get_section_by_name(".dynamic")
                                 .iter_tags()]

    def section_field(self, name: str, field: int) -> int:
        """Offset of a field of section ``name``'s header (sh_offset is 24, sh_size 32...)."""
        return self.shoff + self.index[name] * 64 + field

    def dynamic_entry(self, tag: str) -> int:
        """File offset of the d_val of the first dynamic entry with ``tag``."""
        return self.dynamic["p_offset"] + self.dynamic_tags.index(tag) * 16 + 8

    def patched(self, *edits: tuple[int, bytes]) -> bytes:
        content = bytearray(self.data)
        for offset, value in edits:
            content[offset : offset + len(value)] = value
        return bytes(content)


def q(value: int) -> bytes:
    return struct.pack("<Q", value)


def i32(value: int) -> bytes:
    return struct.pack("<I", value)


def h(value: int) -> bytes:
    return struct.pack("<H", value)


HUGE = 1 << 40
SH_OFFSET, SH_SIZE, SH_LINK, SH_ENTSIZE = 24, 32, 40, 56

# name -> (the broken bytes, made from the layout of the good library; words the error names)
CORRUPTIONS: dict[str, tuple[Callable[[Layout], bytes], str]] = {
    "empty": (lambda lay: b"", "empty file"),
    "text": (lambda lay: b"hello world, this is not ELF\n", "not an ELF file"),
    "magic only": (lambda lay: b"\x7fELF", "not an ELF file"),
    "cut at 10": (lambda lay: lay.data[:10], "not an ELF file"),
    "cut at 40": (lambda lay: lay.data[:40], "inside the ELF header"),
    "cut at 63": (lambda lay: lay.data[:63], "inside the ELF header"),
    "cut at 64": (lambda lay: lay.data[:64], "past the end of the file"),
    "cut at half": (lambda lay: lay.data[: len(lay.data) // 2], "past the end of the file"),
    "cut at len-1": (lambda lay: lay.data[:-1], "past the end of the file"),
    "ELF class 3": (lambda lay: lay.patched((4, b"\x03")), "unknown ELF class"),
    "data encoding 0": (lambda lay: lay.patched((5, b"\x00")), "unknown data encoding"),
    "e_shoff huge": (lambda lay: lay.patched((0x28, q(HUGE))), "section header 0"),
    "e_shoff near the end": (lambda lay: lay.patched((0x28, q(len(lay.data) - 100))),
                             "section header table"),
    "e_shentsize wrong": (lambda lay: lay.patched((0x3A, h(12))), "e_shentsize is 12"),
    "e_shnum huge": (lambda lay: lay.patched((0x3C, h(0xFFF0))), "section header table"),
    "e_phoff huge": (lambda lay: lay.patched((0x20, q(HUGE))), "program header 0"),
    "e_phentsize wrong": (lambda lay: lay.patched((0x36, h(10))), "e_phentsize is 10"),
    "e_phnum huge": (lambda lay: lay.patched((0x38, h(0xFFFF))), "program header"),
    "section name past .shstrtab": (
        lambda lay: lay.patched((lay.section_field(".dynsym", 0), i32(1 << 30))),
        "string index"),
    ".dynsym offset huge": (
        lambda lay: lay.patched((lay.section_field(".dynsym", SH_OFFSET), q(HUGE))),
        "past the end of the file"),
    ".dynsym size huge": (
        lambda lay: lay.patched((lay.section_field(".dynsym", SH_SIZE), q(HUGE * 24))),
        "past the end of the file"),
    ".dynsym size not whole entries": (
        lambda lay: lay.patched((lay.section_field(".dynsym", SH_SIZE), q(24 * 5 + 3))),
        "not a multiple"),
    ".dynsym entsize 7": (
        lambda lay: lay.patched((lay.section_field(".dynsym", SH_ENTSIZE), q(7))),
        "entry size"),
    ".dynsym entsize 0": (
        lambda lay: lay.patched((lay.section_field(".dynsym", SH_ENTSIZE), q(0))),
        "entry size"),
    ".dynsym sh_link to a missing section": (
        lambda lay: lay.patched((lay.section_field(".dynsym", SH_LINK), i32(999))),
        "does not exist"),
    ".dynsym sh_link to itself": (
        lambda lay: lay.patched((lay.section_field(".dynsym", SH_LINK),
                                 i32(lay.index[".dynsym"]))),
        "not a string table"),
    ".dynstr offset huge": (
        lambda lay: lay.patched((lay.section_field(".dynstr", SH_OFFSET), q(HUGE))),
        "string table"),
    ".dynstr cut short": (
        lambda lay: lay.patched((lay.section_field(".dynstr", SH_SIZE), q(3))),
        "string index"),
    ".symtab past the end": (
        lambda lay: lay.patched((lay.section_field(".symtab", SH_OFFSET), q(len(lay.data) - 10))),
        ".symtab"),
    "symbol name index past its table": (
        lambda lay: lay.patched((lay.sections[".dynsym"].sh_offset + 24 * lay.first_unique,
                                 i32(1 << 30))),
        "string index"),
}


def assert_one_clean_error(bad: Path, good: Path, words: str = "") -> dict[str, Any]:
    """Scan ``bad`` and ``good`` together: one error line for ``bad``, ``good`` reported."""
    result = invoke("scan", "--json", str(bad), str(good))
    assert result.exception is None, result.exception
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"elfpatch: error: {bad}"), lines[0]
    assert words in lines[0], lines[0]
    assert "internal error" not in lines[0]
    document = json.loads(result.stdout)
    assert [f["path"] for f in document["files"]] == [str(good)]
    assert [e["path"].split(":")[0] for e in document["errors"]] == [str(bad)]
    return document


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_corrupt_elf(case: str, good_library: Path, tmp_path: Path) -> None:
    make, words = CORRUPTIONS[case]
    bad = tmp_path / "broken.so"
    bad.write_bytes(make(Layout(good_library)))
    assert_one_clean_error(bad, good_library, words)


@pytest.mark.parametrize("case", ["DT_SYMTAB", "DT_STRSZ", "DT_GNU_HASH", "nbuckets", "bucket",
                                  "DT_STRTAB gone"])
def test_corrupt_file_without_section_headers(case: str, good_library: Path,
                                              tmp_path: Path) -> None:
    """With no section headers, .dynsym is sized from the hash table: corrupt that."""
    headerless = remove_section_headers(good_library, tmp_path / "headerless.so")
    lay = Layout(good_library)
    lay.data = headerless.read_bytes()
    gnu_hash = lay.sections[".gnu.hash"].sh_offset
    (bloom_size,) = struct.unpack_from("<I", lay.data, gnu_hash + 8)
    buckets = gnu_hash + 16 + 8 * bloom_size
    edits, words = {
        "DT_SYMTAB": ([(lay.dynamic_entry("DT_SYMTAB"), q(HUGE))], "DT_SYMTAB"),
        "DT_STRSZ": ([(lay.dynamic_entry("DT_STRSZ"), q(HUGE))], "string table"),
        "DT_GNU_HASH": ([(lay.dynamic_entry("DT_GNU_HASH"), q(HUGE))], "DT_GNU_HASH"),
        "nbuckets": ([(gnu_hash, i32(0x7FFFFFFF))], ".gnu.hash"),
        "bucket": ([(buckets, i32(0x7FFFFFFF))], ".gnu.hash chain"),
        "DT_STRTAB gone": ([(lay.dynamic_entry("DT_STRTAB") - 8, q(0x7FFFFFFE))],
                           "DT_STRTAB"),
    }[case]
    bad = tmp_path / "broken.so"
    bad.write_bytes(lay.patched(*edits))
    assert_one_clean_error(bad, good_library, words)



def test_an_unwind_table_pointing_below_address_zero_is_done_without(good_library: Path,
                                                                     tmp_path: Path) -> None:
    """A stripped library whose .eh_frame_hdr search table puts a function before address
    0: the table gives no function bounds (as one in a form not read), and the
    initializers are still followed.  It raised OverflowError in the analysis."""
    bad = stripped_copy(good_library, tmp_path / "stripped.so")
    data = bytearray(bad.read_bytes())
    with bad.open("rb") as stream:
        header = next(s for s in ELFFile(stream).iter_segments()
                      if s["p_type"] == "PT_GNU_EH_FRAME")
        first_entry = header["p_offset"] + 12
        struct.pack_into("<i", data, first_entry, -header["p_vaddr"] - 16)
    bad.write_bytes(bytes(data))
    for args in (("inits", "--json"), ("inits", "--json", "--closure")):
        result = invoke(*args, str(bad))
        assert result.exception is None, result.exception
        assert result.exit_code == 0, (args, result.stderr)
        assert json.loads(result.stdout)["errors"] == []


# A class template's static string, built by the initializer through its GOT slot.
_TEMPLATE_STRING = {"text.cpp": """
#include <string>
template <class T> struct Holder { static std::string text; };
template <class T> std::string Holder<T>::text = "t";
extern "C" int text_size() { return (int)Holder<int>::text.size(); }
"""}


def test_data_symbols_without_names_are_no_failure(tmp_path: Path) -> None:
    """Every defined data symbol of .dynsym renamed to "" (st_name 0): the GOT slots
    the initializer builds those objects through name nothing, and the analysis goes
    on without them.  It raised IndexError (an empty name taken for a key)."""
    library = platform("host").library((), _TEMPLATE_STRING, "libtext")
    bad = tmp_path / "unnamed.so"
    data = bytearray(library.read_bytes())
    with library.open("rb") as stream:
        dynsym = ELFFile(stream).get_section_by_name(".dynsym")
        for index, symbol in enumerate(dynsym.iter_symbols()):
            if symbol.entry.st_info.type == "STT_OBJECT" and symbol.entry.st_shndx != "SHN_UNDEF":
                struct.pack_into("<I", data, dynsym["sh_offset"] + index * dynsym["sh_entsize"], 0)
    bad.write_bytes(bytes(data))
    for args in (("inits", "--json"), ("scan", "--json"), ("check", "--config", os.devnull)):
        result = invoke(*args, str(bad))
        assert result.exception is None, result.exception
        assert result.exit_code in (0, 1), (args, result.stderr)


def test_names_that_are_not_utf8_are_no_failure(tmp_path: Path) -> None:
    """A byte 0xff at the start of each imported function's name in .dynstr (names are
    bytes; elfpatch keeps those that are not UTF-8 as escapes): the registry pass,
    which looks the registration functions an initializer calls up in the string
    tables, searches for the same bytes.  It raised UnicodeEncodeError encoding such
    a name."""
    library = scenario("cross_library_registry").path("libboth_good.so")
    bad = tmp_path / "bytes.so"
    data = bytearray(library.read_bytes())
    with library.open("rb") as stream:
        elf = ELFFile(stream)
        dynsym, dynstr = elf.get_section_by_name(".dynsym"), elf.get_section_by_name(".dynstr")
        for symbol in dynsym.iter_symbols():
            if symbol.entry.st_info.type == "STT_FUNC" and symbol.entry.st_shndx == "SHN_UNDEF":
                data[dynstr["sh_offset"] + symbol.entry.st_name] = 0xFF
    bad.write_bytes(bytes(data))
    for args in (("inits", "--json"), ("check", "--config", os.devnull)):
        result = invoke(*args, str(bad))
        assert result.exception is None, result.exception
        assert result.exit_code in (0, 1), (args, result.stderr)


# -- archives and paths ------------------------------------------------------------------

def test_zip_named_whl_without_dist_info(good_library: Path, tmp_path: Path) -> None:
    fake = make_wheel(tmp_path / "fake-1.0-py3-none-any.whl", {"x.so": good_library.read_bytes()},
                      with_metadata=False)
    assert_one_clean_error(fake, good_library, "not a wheel")


def test_corrupt_and_truncated_zips(good_library: Path, tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt-1.0-py3-none-any.whl"
    corrupt.write_bytes(b"PK\x03\x04" + b"\0" * 100)
    assert_one_clean_error(corrupt, good_library, "zip")
    whole = make_wheel(tmp_path / "whole.whl", {"pkg/x.so": good_library.read_bytes()})
    truncated = tmp_path / "truncated-1.0-py3-none-any.whl"
    truncated.write_bytes(whole.read_bytes()[:2000])
    assert_one_clean_error(truncated, good_library, "zip")
    renamed = tmp_path / "notes.zip"
    renamed.write_text("a text file named like an archive")
    assert_one_clean_error(renamed, good_library, "zip")
    assert zipfile.is_zipfile(whole)


def damaged_member(wheel: Path, destination: Path, damage: Callable[[bytearray, int], None]
                   ) -> Path:
    raw = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo("pkg/x.so")
    central = raw.rfind(b"PK\x01\x02", 0, raw.find(b"PK\x05\x06"))
    while raw[central + 46 : central + 46 + len(b"pkg/x.so")] != b"pkg/x.so":
        central = raw.rfind(b"PK\x01\x02", 0, central)
    damage(raw, info.header_offset)
    damage(raw, central + 2)  # the same fields sit 2 bytes later in the central directory
    destination.write_bytes(bytes(raw))
    return destination


def test_damaged_wheel_members(good_library: Path, tmp_path: Path) -> None:
    """A member whose compressed bytes, method or encryption flag is wrong."""
    wheel = make_wheel(tmp_path / "pkg-1.0-py3-none-any.whl",
                       {"pkg/x.so": good_library.read_bytes()})

    def scramble(raw: bytearray, local: int) -> None:
        if raw[local : local + 4] == b"PK\x03\x04":
            start = local + 30 + int.from_bytes(raw[local + 26 : local + 28], "little")
            for k in range(start + 200, start + 260):
                raw[k] ^= 0x55

    def method(raw: bytearray, header: int) -> None:
        raw[header + 8 : header + 10] = h(99)

    def encrypted(raw: bytearray, header: int) -> None:
        raw[header + 6] |= 1

    for name, damage, words in (("deflate", scramble, "corrupt compressed data"),
                                ("method", method, "compression method"),
                                ("encrypted", encrypted, "encrypted")):
        bad = damaged_member(wheel, tmp_path / f"{name}-1.0-py3-none-any.whl", damage)
        document = assert_one_clean_error(bad, good_library, words)
        assert document["errors"][0]["path"] == f"{bad}:pkg/x.so"


def test_missing_path_and_dangling_link(good_library: Path, tmp_path: Path) -> None:
    assert_one_clean_error(tmp_path / "nope.so", good_library, "no such file")
    dangling = tmp_path / "dangling.so"
    dangling.symlink_to(tmp_path / "gone.so")
    assert_one_clean_error(dangling, good_library, "dangling symbolic link")
    through_a_file = tmp_path / "file.so" / "inner.so"
    (tmp_path / "file.so").write_bytes(b"x")
    assert_one_clean_error(through_a_file, good_library, "no such file")


def test_folder_without_elf(good_library: Path, tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "readme.md").write_text("no ELF here")
    (folder / "sub" / "lib.so").write_text("a text file named like a library")
    assert_one_clean_error(folder, good_library, "no ELF")


def scan_in_subprocess(*paths: Path) -> subprocess.CompletedProcess[str]:
    """The command in a child with a time limit: opening a FIFO would block forever."""
    try:
        return subprocess.run([sys.executable, "-m", "elfpatch", "scan", "--json",
                               *map(str, paths)], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"scan of {paths} did not finish: it waits on a FIFO")


def test_fifo_named_directly(good_library: Path, tmp_path: Path) -> None:
    pipe = tmp_path / "pipe.so"
    os.mkfifo(pipe)
    result = scan_in_subprocess(pipe, good_library)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"elfpatch: error: {pipe}: not a regular file (a pipe, socket or device)"]
    assert [f["path"] for f in json.loads(result.stdout)["files"]] == [str(good_library)]


def test_fifo_and_dangling_link_inside_a_folder_are_skipped(good_library: Path,
                                                            tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    os.mkfifo(folder / "a-pipe.so")
    (folder / "b-dangling.so").symlink_to(tmp_path / "gone.so")
    (folder / "c.so").write_bytes(good_library.read_bytes())
    result = scan_in_subprocess(folder)
    assert (result.returncode, result.stderr) == (0, "")
    assert [f["path"] for f in json.loads(result.stdout)["files"]] == [str(folder / "c.so")]


def test_unreadable_file_chmod_000(good_library: Path, tmp_path: Path) -> None:
    locked = tmp_path / "locked.so"
    locked.write_bytes(good_library.read_bytes())
    locked.chmod(0)
    if os.access(locked, os.R_OK):
        pytest.skip("running as root: file permissions do not stop reads")
    assert_one_clean_error(locked, good_library, "permission denied")


def unreadable_even_for_root() -> Path:
    """A write-only sysctl: the kernel refuses reads whoever asks."""
    path = Path("/proc/sys/vm/compact_memory")
    if not path.exists() or not stat.S_ISREG(path.stat().st_mode):
        pytest.skip(f"{path} is not there to stand for an unreadable file")
    try:
        path.open("rb").close()
    except PermissionError:
        return path
    pytest.skip(f"{path} is readable here")


def test_unreadable_file_is_one_input_error(good_library: Path) -> None:
    """What the scan itself makes of a file it may not read."""
    path = unreadable_even_for_root()
    outcome = scan_paths([str(path), str(good_library)])
    assert [s.path for s in outcome.results] == [str(good_library)]
    assert len(outcome.errors) == 1 and isinstance(outcome.errors[0], InputError)
    assert outcome.errors[0].path == str(path) and "permission denied" in outcome.errors[0].reason


def test_unreadable_file_on_the_command_line(good_library: Path) -> None:
    assert_one_clean_error(unreadable_even_for_root(), good_library, "permission denied")


def test_several_bad_paths_each_one_line(good_library: Path, tmp_path: Path) -> None:
    paths = [tmp_path / "missing.so", tmp_path / "empty.so", tmp_path / "text.so"]
    paths[1].write_bytes(b"")
    paths[2].write_text("text")
    result = invoke("scan", "--json", *map(str, paths), str(good_library))
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert [line.split(": ")[2] for line in lines] == [str(p) for p in paths]
    assert [f["path"] for f in json.loads(result.stdout)["files"]] == [str(good_library)]
    text = invoke("scan", *map(str, paths), str(good_library))
    assert text.exit_code == 2 and text.stderr == result.stderr
    assert "3 inputs could not be read" in text.stdout


def test_no_traceback_from_the_installed_command(good_library: Path, tmp_path: Path) -> None:
    bad = tmp_path / "cut.so"
    bad.write_bytes(good_library.read_bytes()[:100])
    result = subprocess.run([sys.executable, "-m", "elfpatch", "scan", str(bad),
                             str(good_library)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"elfpatch: error: {bad}: section header 0 (offset {Layout(good_library).shoff:#x}, "
        f"size 0x40) extends past the end of the file (0x64 bytes); truncated or corrupt"]
    assert str(good_library) in result.stdout


def test_usage_errors_exit_2() -> None:
    assert invoke("scan").exit_code == 2
    assert invoke("scan", "--no-such-option", "x.so").exit_code == 2
