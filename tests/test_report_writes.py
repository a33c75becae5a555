"""Reports and baselines replace their file atomically, as fixed libraries do.

``check --output FORMAT=FILE``, ``--update-baseline`` and the config-free
reports all go through ``write_regular_text``: the new text is written to a
locked temporary file beside the old one and renamed over it, so a reader,
a failed write or a kill finds the old text or the new one, whole.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from elfpatch.base import regular_file


def _temporary_files(folder: Path) -> list[str]:
    return sorted(entry.name for entry in folder.iterdir()
                  if regular_file.is_temporary_name(entry.name))


def test_a_write_that_fails_midway_leaves_the_old_report_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = tmp_path / "report.json"
    regular_file.write_regular_text(report, "old report\n")

    def half_then_fail(descriptor: int, data: bytes | memoryview) -> None:
        os.write(descriptor, bytes(data)[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(regular_file, "write_all", half_then_fail)
    with pytest.raises(OSError, match="No space left"):
        regular_file.write_regular_text(report, "a much longer new report\n" * 100)
    assert report.read_text() == "old report\n"
    assert _temporary_files(tmp_path) == []


def test_the_report_is_a_new_file_renamed_over_the_old(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    regular_file.write_regular_text(report, "first\n")
    with report.open() as reader:  # a reader of the old report keeps reading it whole
        regular_file.write_regular_text(report, "second\n")
        assert reader.read() == "first\n"
    assert report.read_text() == "second\n"
    assert _temporary_files(tmp_path) == []


def test_an_existing_report_keeps_its_permissions(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text("old\n")
    report.chmod(0o640)
    regular_file.write_regular_text(report, "new\n")
    assert stat.S_IMODE(report.stat().st_mode) == 0o640


def test_a_new_report_gets_the_umask_and_the_umask_is_left_alone(tmp_path: Path) -> None:
    previous = os.umask(0o027)
    try:
        assert regular_file.new_file_mode() == 0o640
        regular_file.write_regular_text(tmp_path / "new.json", "{}\n")
        assert os.umask(0o027) == 0o027  # reading it did not change it
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o640


def test_a_link_to_a_report_stays_a_link(tmp_path: Path) -> None:
    target = tmp_path / "reports" / "check.sarif"
    target.parent.mkdir()
    target.write_text("old\n")
    link = tmp_path / "latest.sarif"
    link.symlink_to(target)
    regular_file.write_regular_text(link, "new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    assert _temporary_files(target.parent) == [] and _temporary_files(tmp_path) == []


def test_dev_null_swallows_the_report() -> None:
    before = Path(os.devnull).stat()
    regular_file.write_regular_text(os.devnull, "anything\n")
    after = Path(os.devnull).stat()
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (
        before.st_ino, before.st_rdev)
