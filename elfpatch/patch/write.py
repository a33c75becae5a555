"""Writing a patched file without ever putting the user's file at risk.

The source is copied (in the kernel) to a temporary file beside the
destination, the edits are written into the copy, the copy is re-read and
verified, and only then renamed over the destination.  A crash, an error or
Ctrl-C at any point before the rename leaves the destination as it was and
removes the temporary file.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from elfpatch.patch.reorder import Edit


def write_atomically(source: Path, destination: Path, make_edits: Callable[[], list[Edit]],
                     verify: Callable[[Path], None]) -> None:
    """Copy ``source`` with the edits applied to ``destination``, verified by ``verify``.

    The kernel copies the file on a second thread (sendfile releases the GIL)
    while this one computes the edits.
    """
    destination = Path(os.path.realpath(destination))
    handle, temporary_name = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".elfpatch",
                                              dir=destination.parent)
    temporary = Path(temporary_name)
    try:
        os.close(handle)
        copy = _BackgroundCopy(source, temporary)
        copy.start()
        try:
            edits = make_edits()
        finally:
            copy.join()
        copy.raise_failure()
        _apply(temporary, edits)
        verify(temporary)
        shutil.copymode(source, temporary)
        temporary.replace(destination)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


class _BackgroundCopy(threading.Thread):
    def __init__(self, source: Path, destination: Path) -> None:
        super().__init__(name="elfpatch-copy", daemon=True)
        self.source, self.destination = source, destination
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            shutil.copyfile(self.source, self.destination)
        except BaseException as error:  # handed to the main thread by raise_failure
            self.failure = error

    def raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure


def _apply(path: Path, edits: list[Edit]) -> None:
    size = path.stat().st_size
    descriptor = os.open(path, os.O_WRONLY)
    try:
        for edit in sorted(edits, key=lambda e: e.offset):
            if edit.offset + len(edit.data) > size:
                raise ValueError(f"edit of {edit.what} at {edit.offset:#x} past end of file")
            os.pwrite(descriptor, edit.data, edit.offset)
    finally:
        os.close(descriptor)
