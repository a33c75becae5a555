"""`elfpatch check` on a real PyTorch wheel reports what readelf sees in each of its ELF members.

Opt-in: set ``$ELFPATCH_TORCH_WHEEL`` to a PyTorch wheel (the 2.13.0 CPU
wheel has 136 ELF members, 606 MB unpacked).  check runs once on the whole
wheel; each ELF member is then unpacked on its own and readelf lists the
UNIQUE symbols its ``.dynsym`` defines.  The members are found by their
first bytes (the ELF magic), not by their names: the wheel ships test
programs and ``libgomp.so.1`` next to the ``.so`` files.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
from conftest import run_elfpatch
from support.build import TORCH_WHEEL_VARIABLE, opt_in_file
from support.readelf import readelf_unique_definitions

ELF_MAGIC = b"\x7fELF"


@pytest.fixture(scope="module")
def torch_wheel() -> Path:
    return opt_in_file(TORCH_WHEEL_VARIABLE, "the path of a PyTorch wheel")


@pytest.fixture(scope="module")
def report(torch_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    # From an empty folder, so no pyproject.toml nearby sets the policy.
    result = run_elfpatch("check", "--format", "json", str(torch_wheel),
                          cwd=tmp_path_factory.mktemp("check"))
    assert result.returncode in (0, 1), result.stderr  # 1: the policy was violated
    return json.loads(result.stdout)


def elf_members(archive: zipfile.ZipFile) -> list[str]:
    found = []
    for info in archive.infolist():
        if not info.is_dir():
            with archive.open(info) as member:
                if member.read(len(ELF_MAGIC)) == ELF_MAGIC:
                    found.append(info.filename)
    return found


def reported_definitions(record: dict[str, Any]) -> set[tuple[int, str]]:
    """(index, name) of the UNIQUE symbols check says a member's .dynsym defines."""
    return {(symbol["index"], symbol["name"]) for symbol in record["unique"]
            if symbol["table"] == ".dynsym" and symbol["defined"]}


def unpacked(archive: zipfile.ZipFile, member: str, destination: Path) -> Path:
    with archive.open(member) as source, destination.open("wb") as target:
        shutil.copyfileobj(source, target, 1 << 20)
    return destination


def test_every_elf_member_is_analysed(torch_wheel: Path, report: dict[str, Any]) -> None:
    with zipfile.ZipFile(torch_wheel) as archive:
        expected = elf_members(archive)
    analysed = [record["member"] for record in report["files"]]
    assert report["errors"] == []
    assert len(analysed) == len(expected)
    assert sorted(analysed) == sorted(expected)


def test_unique_definitions_equal_readelf(torch_wheel: Path, report: dict[str, Any],
                                          tmp_path: Path) -> None:
    records = {record["member"]: record for record in report["files"]}
    mismatches = {}
    with zipfile.ZipFile(torch_wheel) as archive:
        for member in elf_members(archive):
            # One member on disk at a time: the largest alone is over 400 MB.
            copy = unpacked(archive, member, tmp_path / "member")
            expected = readelf_unique_definitions(copy)
            copy.unlink()
            record = records[member]
            ours = reported_definitions(record)
            if ours != expected or record["unique_definitions"] != len(expected):
                mismatches[member] = {"only check": sorted(ours - expected)[:5],
                                      "only readelf": sorted(expected - ours)[:5],
                                      "unique_definitions": record["unique_definitions"],
                                      "readelf count": len(expected)}
    assert not mismatches, mismatches
