"""Whether a written wheel's RECORD matches its content, judged without elfpatch.

The hashes are checked by the ``wheel`` package's ``WheelFile``, which
compares each member it reads with its RECORD row and raises on a
mismatch or on a member without a row.  It does not compare sizes, nor
notice a row naming a member the archive lacks or a row given twice, so
the row set is checked here with the standard library's ``zipfile`` and
``csv``: every member listed once, every size right, RECORD's own row
without hash or size.  elfpatch's own RECORD parser is never used: it is
part of what these tests check.
"""

from __future__ import annotations

import csv
import io
import zipfile
from pathlib import Path

from .tools import require_module

# Hash names PEP 427 refuses; WheelFile refuses them too, but say so plainly here.
_WEAK_HASHES = ("md5=", "sha1=")


def record_rows(path: Path) -> tuple[str, list[list[str]]]:
    """(RECORD's member name, its rows as ``csv`` reads them)."""
    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if n.endswith(".dist-info/RECORD")]
        assert len(names) == 1, f"{path}: RECORD members {names}"
        text = archive.read(names[0]).decode("utf-8")
    return names[0], list(csv.reader(io.StringIO(text, newline="")))


def assert_rows_match_members(path: Path) -> None:
    """Every member listed exactly once with its size; RECORD's row has no hash."""
    record, rows = record_rows(path)
    assert all(len(row) == 3 for row in rows), rows
    listed = [row[0] for row in rows]
    assert len(listed) == len(set(listed)), f"listed twice: {listed}"
    with zipfile.ZipFile(path) as archive:
        members = {info.filename: info for info in archive.infolist() if not info.is_dir()}
        assert set(listed) == set(members), set(listed) ^ set(members)
        for name, digest, size in rows:
            if name == record:
                assert (digest, size) == ("", ""), f"RECORD's own row: {digest},{size}"
                continue
            assert digest and not digest.startswith(_WEAK_HASHES), f"{name}: hash {digest!r}"
            assert size == str(members[name].file_size) == str(len(archive.read(name))), name


def assert_hashes_verified_by_wheel(path: Path) -> None:
    """Every member read through ``WheelFile``, which raises on a hash mismatch."""
    wheelfile = require_module("wheel.wheelfile", "wheel")
    with wheelfile.WheelFile(path) as checked:
        for info in checked.infolist():
            if not info.is_dir():
                checked.read(info.filename)


def assert_record_matches(path: Path) -> None:
    """The written wheel's RECORD lists its members and their true hashes and sizes."""
    assert_rows_match_members(path)
    assert_hashes_verified_by_wheel(path)
