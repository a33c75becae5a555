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

import contextlib
import errno
import os
import secrets
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


def release_descriptor(descriptor: int) -> None:
    """Close ``descriptor``, unless it is -1 (released before).

    An object owning a descriptor sets its ``fd`` to -1 *before* closing it: Ctrl-C
    or SIGTERM arriving just as ``os.close`` returns raises there, and the ``close``
    of the cleanup that follows must not close that number again (EBADF, or worse,
    a descriptor opened since under the same number).
    """
    if descriptor >= 0:
        os.close(descriptor)


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
    """Replace the contents of ``path`` (created if missing) with ``text``, atomically.

    The text goes to a locked temporary file beside ``path`` that is renamed
    over it, so a reader, a crash or a kill sees the old file or the new one,
    never half of either.  An existing file keeps its permission bits; a
    symbolic link keeps pointing where it did and the file it names is
    replaced.  ``/dev/null`` swallows the text; an existing FIFO, socket or
    device is refused, never written to (a write to a FIFO without a reader
    would block).
    """
    destination = Path(path)
    try:
        status: os.stat_result | None = destination.stat()
    except FileNotFoundError:
        status = None
    if status is not None:
        _refuse_kind(str(path), status)
        if _is_null_device(status):
            return
    if destination.is_symlink():
        destination = Path(os.path.realpath(destination))
    mode = stat.S_IMODE(status.st_mode) if status is not None else new_file_mode()
    _replace_atomically(destination, text.encode("utf-8"), mode)


def _replace_atomically(destination: Path, data: bytes, mode: int) -> None:
    descriptor, temporary = create_locked_temporary(destination.parent, destination.name)
    try:
        write_all(descriptor, data)
        os.fchmod(descriptor, mode)
        os.fsync(descriptor)  # the rename must not reach the disk before the bytes
        temporary.replace(destination)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    finally:
        os.close(descriptor)


def write_all(descriptor: int, data: bytes | memoryview) -> None:
    """Write every byte of ``data`` (``os.write`` may write fewer than it is given)."""
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def copy_bytes(source: int, start: int, length: int, destination: int,
               at: int | None = None) -> None:
    """``length`` bytes of ``source`` from ``start`` into ``destination``.

    Written at offset ``at``, or at the destination's position (advancing it)
    when ``at`` is None.  The kernel copies them (``copy_file_range``: no
    trip through Python, and shared extents where the file system can) when
    it can; across file systems on older kernels, or where it is missing,
    they are read and written.  A source shorter than promised is an error.
    """
    done = 0
    with contextlib.suppress(AttributeError, OSError):
        while done < length:
            copied = os.copy_file_range(source, destination, length - done, start + done,
                                        None if at is None else at + done)
            if copied == 0:
                break
            done += copied
    while done < length:
        data = os.pread(source, min(8 << 20, length - done), start + done)
        if not data:
            raise OSError(f"a source file ended {length - done} bytes early "
                          "(it changed while being copied)")
        if at is None:
            write_all(destination, data)
        else:
            _write_all_at(destination, data, at + done)
        done += len(data)


def _write_all_at(descriptor: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(descriptor, view, offset)
        view, offset = view[written:], offset + written


def new_file_mode() -> int:
    """The permission bits a new file gets here: 0666 less the process's umask.

    Read from ``/proc/self/status``, which leaves the umask alone; setting it
    to read it back would change it for every thread meanwhile.
    """
    with contextlib.suppress(OSError, ValueError, StopIteration):
        status = Path("/proc/self/status").read_text(encoding="ascii", errors="replace")
        line = next(line for line in status.splitlines() if line.startswith("Umask:"))
        return 0o666 & ~int(line.split()[1], 8)
    mask = os.umask(0o022)  # a kernel without the Umask line (before Linux 4.7)
    os.umask(mask)
    return 0o666 & ~mask


# Every temporary file elfpatch makes (staged outputs, scratch files, spilled
# wheel members) ends with this mark, so that folder walks skip them and a
# later run can recognise what a killed one left.
TEMPORARY_MARK = ".elfpatch-tmp"


def is_temporary_name(name: str) -> bool:
    """Whether a file name is one of elfpatch's temporary files."""
    return name.startswith(".") and name.endswith(TEMPORARY_MARK)


# Room left in a file name (255 bytes on Linux) for the dot, the random part and the mark.
_STEM_BYTES = 255 - 1 - 1 - 16 - len(TEMPORARY_MARK)


def temporary_name(destination_name: str) -> str:
    """A fresh, unpredictable temporary name for a file that will become ``destination_name``."""
    stem = os.fsencode(destination_name)[:_STEM_BYTES].decode("utf-8", "ignore") or "out"
    return f".{stem}.{secrets.token_hex(8)}{TEMPORARY_MARK}"


def same_file(descriptor: int, path: Path) -> bool:
    """Whether ``path`` (not followed if a link) names the file open as ``descriptor``."""
    try:
        on_disk = os.lstat(path)
    except OSError:
        return False
    mine = os.fstat(descriptor)
    return (on_disk.st_dev, on_disk.st_ino) == (mine.st_dev, mine.st_ino)


def create_locked_temporary(directory: Path, destination_name: str) -> tuple[int, Path]:
    """A new, locked temporary file in ``directory`` (O_EXCL, never through a link).

    The lock (``flock``) lasts while the descriptor is open: it tells a later
    run's sweep of stale temporary files that this one is alive.
    """
    import fcntl

    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        path = directory / temporary_name(destination_name)
        descriptor = os.open(path, flags, 0o600)
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        # A stale-file sweep may have taken the lock and removed the name in
        # the instant between O_EXCL and flock: then start again.
        if same_file(descriptor, path):
            return descriptor, path
        os.close(descriptor)


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
        descriptor, self.fd = self.fd, -1  # forgotten first: see release_descriptor
        release_descriptor(descriptor)  # releases the lock too


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
