"""Writing a patched file without ever putting the user's file at risk.

The source is copied (in the kernel) to a staged temporary file on the
destination's file system, the edits are written into the copy, and the
copy is re-read and verified.  It replaces the destination only when every
file of its set is verified (see ``staging.py``): a crash, an error or
Ctrl-C before that leaves the destination as it was.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

from elfpatch.base.regular_file import copy_bytes
from elfpatch.patch.edit import Edit
from elfpatch.patch.staging import ScratchFile


def write_patched(source: Path, target: ScratchFile, make_edits: Callable[[], list[Edit]],
                  verify: Callable[[Path], None]) -> None:
    """Copy ``source`` into ``target`` with the edits applied, and verify the result.

    The kernel copies the file on a second thread (copy_file_range releases
    the GIL) while this one computes the edits.  ``target`` is a staged
    temporary file: it replaces anything only when its whole set commits.
    """
    copy = _BackgroundCopy(source, target.fd)
    copy.start()
    copy.under_way.wait()  # let it reach the kernel before this thread takes the GIL
    try:
        edits = make_edits()
    finally:
        copy.join()
    copy.raise_failure()
    _apply(target.fd, edits)
    verify(target.path)
    os.fchmod(target.fd, stat.S_IMODE(source.stat().st_mode))


class _BackgroundCopy(threading.Thread):
    """Copies ``source`` into the open temporary file.

    Into the staged file's own descriptor, not a reopened path: reopening
    truncates the file, and on ext4 closing a file truncated then rewritten
    starts its writeback at once (auto_da_alloc), which doubled the copy's
    time on a 434 MB library.
    """

    def __init__(self, source: Path, handle: int) -> None:
        super().__init__(name="elfpatch-copy", daemon=True)
        self.source, self.handle = source, handle
        self.failure: BaseException | None = None
        self.under_way = threading.Event()

    def run(self) -> None:
        try:
            with self.source.open("rb") as source:
                self.under_way.set()
                _copy_whole(source.fileno(), self.handle)
        except BaseException as error:  # handed to the main thread by raise_failure
            self.failure = error
        finally:
            self.under_way.set()

    def raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure


def _apply(descriptor: int, edits: list[Edit]) -> None:
    size = os.fstat(descriptor).st_size
    for edit in sorted(edits, key=lambda e: e.offset):
        if edit.offset + len(edit.data) > size:
            raise ValueError(f"edit of {edit.what} at {edit.offset:#x} past end of file")
        os.pwrite(descriptor, edit.data, edit.offset)


def _copy_whole(source: int, destination: int) -> None:
    """All of ``source`` into ``destination`` at the same offsets."""
    copy_bytes(source, 0, os.fstat(source).st_size, destination, at=0)
