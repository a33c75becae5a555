"""Bad input gets one clear line naming the path and exit code 2, never a traceback."""

from __future__ import annotations

import os
import shutil
import struct
import zipfile
from pathlib import Path

import pytest
from conftest import run_elfpatch
from elfpatch.fixtures import build
from test_scan import LIBRARY, make_wheel

from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import read_dynsym


@pytest.fixture(scope="module")
def good_library() -> Path:
    if not build.compiler_available():
        pytest.skip("no C++ compiler (g++) installed")
    return build.build_shared(LIBRARY, "libstatics", ["-O1"])


def assert_one_clean_error(args: list[str], path: Path, command: str = "scan") -> str:
    result = run_elfpatch(command, *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert str(path) in lines[0]
    return lines[0]


def patched(source: Path, destination: Path, offset: int, data: bytes) -> Path:
    content = bytearray(source.read_bytes())
    content[offset : offset + len(data)] = data
    destination.write_bytes(bytes(content))
    return destination


def test_empty_and_text_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.so"
    empty.write_bytes(b"")
    assert "empty file" in assert_one_clean_error([str(empty)], empty)
    text = tmp_path / "notes.txt"
    text.write_text("hello world, this is not ELF\n")
    assert "not an ELF file" in assert_one_clean_error([str(text)], text)


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.2, 0.5, 0.9, 0.999])
def test_truncated_elf(good_library: Path, tmp_path: Path, fraction: float) -> None:
    data = good_library.read_bytes()
    cut = tmp_path / "cut.so"
    cut.write_bytes(data[: max(10, int(len(data) * fraction))])
    assert_one_clean_error([str(cut)], cut)


@pytest.mark.parametrize("length", [10, 40, 63, 64])
def test_elf_cut_inside_its_header(good_library: Path, tmp_path: Path, length: int) -> None:
    cut = tmp_path / "cut.so"
    cut.write_bytes(good_library.read_bytes()[:length])
    assert_one_clean_error([str(cut)], cut)


def test_corrupt_section_offsets_and_sizes(good_library: Path, tmp_path: Path) -> None:
    with ElfFile.open(good_library) as elf:
        dynsym = read_dynsym(elf)
        assert dynsym is not None and dynsym.section is not None
        header = dynsym.section.header_offset
        shentsize_offset = 0x3A
    huge = struct.pack("<Q", 1 << 40)
    cases = {
        "offset": patched(good_library, tmp_path / "offset.so", header + 24, huge),
        "size": patched(good_library, tmp_path / "size.so", header + 32, huge),
        "entsize": patched(good_library, tmp_path / "entsize.so", header + 56,
                           struct.pack("<Q", 7)),
        "link": patched(good_library, tmp_path / "link.so", header + 40, struct.pack("<I", 999)),
        "shentsize": patched(good_library, tmp_path / "shentsize.so", shentsize_offset,
                             struct.pack("<H", 12)),
        "shoff": patched(good_library, tmp_path / "shoff.so", 0x28, huge),
    }
    for path in cases.values():
        assert_one_clean_error([str(path)], path)


def test_string_index_past_its_table(good_library: Path, tmp_path: Path) -> None:
    with ElfFile.open(good_library) as elf:
        dynsym = read_dynsym(elf)
        assert dynsym is not None
        index = dynsym.unique_indices()[0]
        offset = dynsym.entry_offset(index)
    broken = patched(good_library, tmp_path / "strindex.so", offset, struct.pack("<I", 1 << 30))
    assert "string index" in assert_one_clean_error([str(broken)], broken)


def test_archives(good_library: Path, tmp_path: Path) -> None:
    not_a_wheel = make_wheel(tmp_path / "fake-1.0-py3-none-any.whl",
                             {"x.so": good_library.read_bytes()}, with_metadata=False)
    assert "not a wheel" in assert_one_clean_error([str(not_a_wheel)], not_a_wheel)
    corrupt = tmp_path / "corrupt-1.0-py3-none-any.whl"
    corrupt.write_bytes(b"PK\x03\x04" + b"\0" * 100)
    assert_one_clean_error([str(corrupt)], corrupt)
    truncated = tmp_path / "truncated-1.0-py3-none-any.whl"
    whole = make_wheel(tmp_path / "whole.whl", {"pkg/x.so": good_library.read_bytes()})
    truncated.write_bytes(whole.read_bytes()[:2000])
    assert_one_clean_error([str(truncated)], truncated)
    assert zipfile.is_zipfile(whole)


def test_missing_path_folder_without_elf_and_directory_as_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.so"
    assert "no such file" in assert_one_clean_error([str(missing)], missing)
    empty_folder = tmp_path / "folder"
    empty_folder.mkdir()
    (empty_folder / "readme.md").write_text("no ELF here")
    assert "no ELF" in assert_one_clean_error([str(empty_folder)], empty_folder)


def test_unreadable_file_and_dangling_link(good_library: Path, tmp_path: Path) -> None:
    dangling = tmp_path / "dangling.so"
    dangling.symlink_to(tmp_path / "gone.so")
    assert "no such file" in assert_one_clean_error([str(dangling)], dangling)
    locked = tmp_path / "locked.so"
    shutil.copy(good_library, locked)
    locked.chmod(0)
    if os.access(locked, os.R_OK):
        pytest.skip("running as root: file permissions do not stop reads")
    assert "permission denied" in assert_one_clean_error([str(locked)], locked)


def test_good_paths_are_still_reported(good_library: Path, tmp_path: Path) -> None:
    text = tmp_path / "bad.so"
    text.write_text("garbage")
    result = run_elfpatch("scan", "--json", str(text), str(good_library))
    assert result.returncode == 2
    import json

    document = json.loads(result.stdout)
    assert [f["path"] for f in document["files"]] == [str(good_library)]
    assert [e["path"] for e in document["errors"]] == [str(text)]


def test_fix_refuses_bad_input_and_writes_nothing(good_library: Path, tmp_path: Path) -> None:
    good = tmp_path / "good.so"
    shutil.copy(good_library, good)
    before = good.read_bytes()
    bad = tmp_path / "bad.so"
    bad.write_text("garbage")
    result = run_elfpatch("fix", "--in-place", str(good), str(bad))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert good.read_bytes() == before


def test_usage_errors_exit_2() -> None:
    assert run_elfpatch("scan").returncode == 2
    assert run_elfpatch("fix", "x.so").returncode == 2
    assert run_elfpatch("fix", "--only", "(", "--dry-run", "x.so").returncode == 2
