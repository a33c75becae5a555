"""Opening the files elfpatch reads and writes without ever waiting on a pipe.

A plain ``open()`` of a FIFO waits for the other end forever, and opening a
device or socket is never what the user meant.  Every file elfpatch opens by
a path it was given (a library, ``--config``, ``--baseline``, the loader's
cache) goes through here: anything but a regular file is refused with one
line.  The one exception is ``/dev/null``, the usual way to say "an empty
file" (``--config /dev/null``): it reads as empty and swallows writes.

The check is made twice.  ``os.stat`` before opening avoids touching a
device at all; then the file is opened with ``O_NONBLOCK`` (a FIFO opens at
once instead of blocking, and a socket fails) and ``fstat`` of the open
descriptor decides, so a file swapped for a FIFO between the two steps is
still refused rather than read.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from elfpatch.errors import InputError

NOT_REGULAR = "not a regular file (a pipe, socket or device)"


def _refuse_kind(path: str, status: os.stat_result) -> None:
    if stat.S_ISDIR(status.st_mode):
        raise InputError(path, "is a directory")
    if not (stat.S_ISREG(status.st_mode) or _is_null_device(status)):
        raise InputError(path, NOT_REGULAR)


def _is_null_device(status: os.stat_result) -> bool:
    if not stat.S_ISCHR(status.st_mode):
        return False
    try:
        null = Path(os.devnull).stat()
    except OSError:
        return False
    return stat.S_ISCHR(null.st_mode) and status.st_rdev == null.st_rdev


def _open_checked(path: str, flags: int, mode: int = 0o666) -> int:
    """A descriptor for ``path``, which is a regular file; refuses anything else.

    ``OSError`` from the system (missing, permission denied ...) propagates
    for the caller to word; a non-regular file raises ``InputError``.
    """
    try:
        _refuse_kind(path, Path(path).stat())
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
    try:
        descriptor = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as error:
        # A socket (ENXIO), or a FIFO opened for writing with no reader (ENXIO).
        if error.errno in (errno.ENXIO, errno.EOPNOTSUPP):
            raise InputError(path, NOT_REGULAR) from None
        raise
    try:
        _refuse_kind(path, os.fstat(descriptor))
        os.set_blocking(descriptor, True)  # no effect on regular files; restores the default
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def open_regular_descriptor(path: str | Path) -> int:
    """A read-only descriptor for ``path``, if it is a regular file.

    Raises ``InputError`` for a directory, FIFO, socket or device, and
    ``OSError`` when the file cannot be opened (``cannot_open`` words it).
    """
    return _open_checked(str(path), os.O_RDONLY)


def open_regular(path: str | Path) -> BinaryIO:
    """``path`` opened for reading in binary mode, if it is a regular file (as above)."""
    return os.fdopen(open_regular_descriptor(path), "rb")


def cannot_open(name: str, error: OSError) -> InputError:
    """The one line for an input that could not be opened."""
    if isinstance(error, FileNotFoundError):
        return InputError(name, "no such file")
    if isinstance(error, IsADirectoryError):
        return InputError(name, "is a directory")
    if isinstance(error, PermissionError):
        return InputError(name, "permission denied")
    return InputError(name, f"cannot read: {error.strerror or error}")


def read_regular_bytes(path: str | Path) -> bytes:
    with open_regular(path) as handle:
        return handle.read()


def read_regular_text(path: str | Path) -> str:
    """The text of a regular file (UTF-8), as ``Path.read_text`` reads it, without hanging."""
    return read_regular_bytes(path).decode("utf-8")


def write_regular_text(path: str | Path, text: str) -> None:
    """Replace the contents of ``path`` (created if missing) with ``text``.

    An existing FIFO, socket or device is refused, never written to (a
    write to a FIFO without a reader would block).
    """
    descriptor = _open_checked(str(path), os.O_WRONLY | os.O_CREAT)
    with os.fdopen(descriptor, "wb") as handle:
        if stat.S_ISREG(os.fstat(descriptor).st_mode):  # not /dev/null
            handle.truncate(0)  # only once it is known to be a regular file
        handle.write(text.encode("utf-8"))


# Every temporary file elfpatch makes (staged outputs, scratch files, spilled
# wheel members) ends with this mark, so that folder walks skip them and a
# later run can recognise what a killed one left.
TEMPORARY_MARK = ".elfpatch-tmp"


def is_temporary_name(name: str) -> bool:
    """Whether a file name is one of elfpatch's temporary files."""
    return name.startswith(".") and name.endswith(TEMPORARY_MARK)


# -- inputs held for the length of a run ------------------------------------------------

FileIdentity = tuple[int, int, int, int, int]  # device, inode, size, mtime_ns, ctime_ns


def identity_of(status: os.stat_result) -> FileIdentity:
    """What says a file is still the one that was read: which file, and its last change.

    ``st_ctime`` changes with every write and cannot be set back by anyone,
    so an unchanged identity means unchanged bytes.
    """
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


class HeldFile:
    """An input opened once and read through this descriptor for the whole run.

    Every later read goes through ``path`` (``/proc/self/fd/N``), so a plan
    is applied to the very bytes it was made from even if the name is
    replaced meanwhile; ``unchanged`` tells whether the name still leads to
    those bytes.  With ``exclusive`` the file is locked (``flock``) until
    ``close``: two elfpatch runs fixing one file in place take turns.
    """

    def __init__(self, name: str, descriptor: int) -> None:
        self.name = name
        self.fd = descriptor
        self.identity = identity_of(os.fstat(descriptor))

    @property
    def path(self) -> Path:
        return Path(f"/proc/self/fd/{self.fd}")

    def still_named(self) -> bool:
        """Whether ``name`` still leads to this file (not replaced by another run's rename)."""
        try:
            status = Path(self.name).stat()
        except OSError:
            return False
        return (status.st_dev, status.st_ino) == self.identity[:2]

    def unchanged(self) -> bool:
        """Whether ``name`` leads to this file and its bytes are those that were read."""
        try:
            return identity_of(Path(self.name).stat()) == self.identity == \
                identity_of(os.fstat(self.fd))
        except OSError:
            return False

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # releases the lock too
            self.fd = -1


def hold_files(names: list[str], exclusive: bool, attempts: int = 100) -> list[HeldFile]:
    """Open (and with ``exclusive``, lock) every file of ``names``, in ``names``' order.

    Locks are taken in one global order (device, inode), so runs that share
    files never wait on each other in a circle.  A lock that was waited for
    may belong to a file another run has since replaced: then everything is
    released and taken again on what the names lead to now.
    """
    import fcntl

    for _attempt in range(attempts):
        held: list[HeldFile] = []
        try:
            for name in names:
                held.append(HeldFile(name, open_regular_descriptor(name)))
            if not exclusive:
                return held
            for item in sorted(held, key=lambda h: h.identity[:2]):
                fcntl.flock(item.fd, fcntl.LOCK_EX)
            if all(item.still_named() for item in held):
                return held
        except BaseException:
            for item in held:
                item.close()
            raise
        for item in held:
            item.close()
    raise InputError(names[0], "keeps being replaced by other programs while elfpatch waits "
                     "for it", hint="run again when nothing else is writing it")


# -- scratch space ------------------------------------------------------------------------

# Kept free beyond what a run needs: the file system's own bookkeeping, and
# whatever else is writing there meanwhile.
_SPARE_BYTES = 64 << 20


def free_bytes(folder: Path) -> int:
    """Bytes an unprivileged writer may still use in ``folder``'s file system."""
    status = os.statvfs(folder)
    return status.f_bavail * status.f_frsize


def human_size(size: int) -> str:
    """``4.5 GiB``: a size as people read it."""
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:,.0f} {unit}" if unit == "bytes" else f"{value:,.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def require_space(folder: Path, needed: int, label: str, purpose: str, hint: str) -> None:
    """Refuse, before writing anything, a run whose scratch or output files cannot fit.

    Raises ``InputError`` for ``label`` naming ``folder``, the space needed and
    the space there; a folder whose space cannot be read is not refused.
    """
    try:
        free = free_bytes(folder)
    except OSError:
        return
    if free < needed + _SPARE_BYTES:
        raise InputError(label, f"needs {human_size(needed + _SPARE_BYTES)} free in {folder} "
                         f"{purpose}, and it has {human_size(free)}", hint=hint)
