"""An interrupt that arrives just as a descriptor is closed: the cleanup that follows
closes nothing twice.

Ctrl-C or SIGTERM (turned into KeyboardInterrupt) is raised by Python right after
``os.close`` returns.  An owner that forgot its descriptor only after closing it
closed the number again in the cleanup: EBADF (an "internal error" where the user
pressed Ctrl-C), or the descriptor opened meanwhile under the same number.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from elfpatch.base.regular_file import hold_files
from elfpatch.patch.staging import ScratchFile
from elfpatch.wheel.zipread import open_zip


def _archive(tmp_path: Path) -> object:
    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("member", b"bytes")
    return open_zip(path)


def _held(tmp_path: Path) -> object:
    path = tmp_path / "held"
    path.write_bytes(b"bytes")
    return hold_files([str(path)], exclusive=True)[0]


def _scratch(tmp_path: Path) -> object:
    path = tmp_path / "scratch"
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    return ScratchFile(descriptor, path, path)


@pytest.mark.parametrize("make", [_archive, _held, _scratch], ids=["zip", "held", "scratch"])
def test_a_close_interrupted_as_it_returns_is_not_repeated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: Callable[[Path], object]) -> None:
    owner = make(tmp_path)
    real_close = os.close
    interrupted: list[int] = []

    def close_then_interrupt(descriptor: int) -> None:
        real_close(descriptor)
        if not interrupted:
            interrupted.append(descriptor)
            raise KeyboardInterrupt  # the signal handler, run as os.close returns

    monkeypatch.setattr(os, "close", close_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        owner.close()  # type: ignore[attr-defined]
    # The lowest free number is the one just closed: a file opened now reuses it.
    reopened = os.open(tmp_path, os.O_RDONLY)
    try:
        assert reopened == interrupted[0]
        owner.close()  # type: ignore[attr-defined]  # the cleanup's close
        os.fstat(reopened)  # still open: not closed in the owner's name
    finally:
        real_close(reopened)
