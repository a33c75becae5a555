"""Temporary files that become real only when a whole set of outputs is verified.

Every output of a run (a fixed library, a repaired wheel) is first written
to a temporary file on the destination's file system, verified, and kept
aside until every other output of the set is verified too; ``commit`` then
renames them all over their destinations with SIGINT, SIGTERM and SIGHUP
held back, so an interrupt lands before the first rename or after the last.

Where the kernel allows it the temporary file is anonymous (``O_TMPFILE``)
until the commit links it under a name for the rename: a run killed while
it writes or verifies leaves nothing on disk.  A named temporary file is
created ``O_EXCL | O_NOFOLLOW`` (never a predictable name, never through a
symbolic link) and holds an ``flock`` for as long as its run lives, so a
later run can prove that one it finds is stale (its name carries
``TEMPORARY_MARK``, it is a regular file of this user, and nobody holds its
lock) and remove it; folder walks skip such names.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import stat
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from elfpatch.base.regular_file import (
    create_locked_temporary,
    is_temporary_name,
    release_descriptor,
    same_file,
    temporary_name,
)
from elfpatch.errors import InputError

# Signals held back while a set is renamed into place.
_HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}

def _proc_fd_path(descriptor: int) -> Path | None:
    """A path that opens the file behind ``descriptor`` (for code that reads by path)."""
    path = Path(f"/proc/self/fd/{descriptor}")
    return path if path.exists() else None


def _create_anonymous(directory: Path) -> int | None:
    """An unnamed file in ``directory``'s file system, or None where that is not supported."""
    if not hasattr(os, "O_TMPFILE") or not Path("/proc/self/fd").is_dir():
        return None
    try:
        descriptor = os.open(directory, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except OSError:  # a file system without O_TMPFILE support
        return None
    fcntl.flock(descriptor, fcntl.LOCK_EX)
    return descriptor


@dataclass
class ScratchFile:
    """A temporary file a run reads and writes and then throws away."""

    fd: int
    path: Path  # opens the same file (``/proc/self/fd/N`` when anonymous)
    name: Path | None = None  # its name on disk, when it has one

    def close(self) -> None:
        if self.fd < 0:
            return
        if self.name is not None:
            with contextlib.suppress(FileNotFoundError):
                self.name.unlink()
        descriptor, self.fd = self.fd, -1  # forgotten first: see release_descriptor
        release_descriptor(descriptor)


@dataclass
class StagedOutput(ScratchFile):
    """A verified output waiting for the commit of its set."""

    destination: Path = field(default_factory=Path)
    # Other hard links of an input replaced in place that were given too: each
    # is replaced by the same new file, so they stay one file.
    also: tuple[Path, ...] = ()

    def publish(self) -> None:
        """Rename the temporary file over the destination (and its other names given).

        A rename is atomic: each path holds the old file or the new one,
        whenever the run is killed.  A hard link not given keeps the old file.
        """
        try:
            self._publish()
        except OSError as error:  # named after the user's path, never the temporary one
            raise OSError(error.errno, error.strerror, str(self.destination)) from None

    def _publish(self) -> None:
        self.destination.parent.mkdir(parents=True, exist_ok=True)
        if self.name is None:  # anonymous: give it a name on the destination's file system
            self.name = self.destination.parent / temporary_name(self.destination.name)
            _link_anonymous(self.fd, self.name)
        pending = [(other, self._linked_beside(other)) for other in self.also]
        self.name.replace(self.destination)
        self.name = None
        for other, name in pending:
            name.replace(other)

    def _linked_beside(self, path: Path) -> Path:
        """A new name for the staged file in ``path``'s folder, to be renamed over ``path``."""
        assert self.name is not None
        name = path.parent / temporary_name(path.name)
        os.link(self.name, name, follow_symlinks=False)
        return name


def _link_anonymous(descriptor: int, name: Path) -> None:
    """Give the O_TMPFILE file behind ``descriptor`` a name.

    linkat with AT_SYMLINK_FOLLOW through /proc (open(2)'s recipe); a
    directory descriptor is passed because os.link with none calls link(2),
    which would link the /proc entry itself.
    """
    folder = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.link(str(descriptor), name, src_dir_fd=folder, follow_symlinks=True)
    finally:
        os.close(folder)


def destination_problem(destination: Path, inputs: Collection[tuple[int, int]]) -> str | None:
    """Why ``destination`` must not be written, or None.

    Only a new path or an existing regular file that is not one of the
    ``inputs`` (device, inode) is ever written: never a device, FIFO,
    socket or folder, never an input reached through a link, ``.`` or
    another hard link, and never through a symbolic link that leads nowhere
    (that would create the link's target and its folders).
    """
    try:
        status = destination.stat()
    except FileNotFoundError:
        return _dangling_link(destination)
    except NotADirectoryError:
        return "a file stands where a folder of this path must be"
    except OSError as error:
        return f"cannot check it: {error.strerror or error}"
    if stat.S_ISDIR(status.st_mode):
        return "is a folder"
    if not stat.S_ISREG(status.st_mode):
        return "is not a regular file (a device, pipe or socket); elfpatch writes only files"
    if (status.st_dev, status.st_ino) in inputs:
        return "is one of the inputs (the same file)"
    return None


def _dangling_link(destination: Path) -> str | None:
    """A symbolic link that leads nowhere, as the path or as one of its missing folders."""
    for path in (destination, *destination.parents):
        if path.exists():
            return None
        if path.is_symlink():
            return (f"{path} is a symbolic link to nothing" if path != destination else
                    "is a symbolic link to nothing")
    return None


def user_path(error: OSError, fallback: Path | str) -> str:
    """The path to name in a message about ``error``: the user's, never a temporary file's.

    An error met while writing a staged or scratch file names that file
    (``/proc/self/fd/N``, ``.name.<random>.elfpatch-tmp``); the user knows
    only ``fallback``, the destination or folder they gave.
    """
    name = os.fsdecode(error.filename) if error.filename is not None else ""
    if not name or name.startswith("/proc/self/fd/") or is_temporary_name(Path(name).name):
        return str(fallback)
    return name


def existing_folder(folder: Path) -> Path:
    """``folder``, or its nearest ancestor that exists (the one a temporary file can go in)."""
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    return folder


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold back SIGINT, SIGTERM and SIGHUP; they are delivered when the block ends."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class Staging:
    """The temporary files of one run: made here, renamed by ``commit``, else removed."""

    def __init__(self) -> None:
        self._outputs: list[StagedOutput] = []
        self._scratch: list[ScratchFile] = []
        self.committed: list[Path] = []  # destinations written so far (read after an interrupt)
        self._swept: set[Path] = set()

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.discard()

    def output(self, destination: Path, also: Iterable[Path] = ()) -> StagedOutput:
        """A new temporary file for ``destination``, on its file system.

        It is made in the nearest folder that exists: the destination's own
        folders are created only by the commit, so a run that fails creates none.
        """
        descriptor, path, name = self._new_file(existing_folder(destination.parent),
                                                destination.name)
        staged = StagedOutput(descriptor, path, name, destination, tuple(also))
        self._outputs.append(staged)
        return staged

    def scratch(self, directory: Path) -> ScratchFile:
        """A temporary file in ``directory``'s file system, removed when the run ends."""
        scratch = ScratchFile(*self._new_file(directory, "scratch"))
        self._scratch.append(scratch)
        return scratch

    def _new_file(self, directory: Path, stem: str) -> tuple[int, Path, Path | None]:
        """(descriptor, a path that opens it, its name on disk or None when anonymous)."""
        ensure_descriptors(len(self._outputs) + len(self._scratch) + 1, directory)
        self._sweep(directory)
        descriptor = _create_anonymous(directory)
        if descriptor is not None:
            path = _proc_fd_path(descriptor)
            assert path is not None
            return descriptor, path, None
        descriptor, name = create_locked_temporary(directory, stem)
        return descriptor, name, name

    def commit(self) -> list[Path]:
        """Rename every output over its destination, in the order they were made."""
        with signals_held():
            for staged in self._outputs:
                staged.publish()
                self.committed.append(staged.destination)
        self.discard()
        return list(self.committed)

    def discard(self) -> None:
        """Remove every temporary file not yet renamed into place."""
        for item in [*self._outputs, *self._scratch]:
            item.close()
        self._outputs.clear()
        self._scratch.clear()

    def _sweep(self, directory: Path) -> None:
        if directory not in self._swept:
            self._swept.add(directory)
            remove_stale(directory)


# Descriptors kept free for everything else a run opens (the inputs, the archive).
_SPARE_DESCRIPTORS = 64


def ensure_descriptors(held: int, destination: Path) -> None:
    """Room to hold ``held`` staged files open until the commit.

    Every staged file stays open (and locked) until its set commits; the soft
    limit on open files is raised as far as the hard limit allows.
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = held + _SPARE_DESCRIPTORS
    if wanted <= soft:
        return
    ceiling = wanted * 2 if hard == resource.RLIM_INFINITY else min(hard, wanted * 2)
    if ceiling < wanted:
        raise InputError(str(destination), f"a set of {held}+ files needs about {wanted} open "
                         f"files, and the limit is {hard}", hint="raise it (ulimit -n) or fix "
                         "the files in smaller sets")
    resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))


def remove_stale(directory: Path) -> list[Path]:
    """Remove the temporary files of runs that died in ``directory``; the paths removed.

    A file is removed only when elfpatch can prove it is its own and stale:
    a temporary name, a regular file (not a link) of this user, and no live
    run holds its lock.
    """
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        if is_temporary_name(entry.name) and _remove_if_stale(Path(entry.path)):
            removed.append(Path(entry.path))
    return removed


def _remove_if_stale(path: Path) -> bool:
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode) or status.st_uid != os.getuid():
            return False
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live run's
        if not same_file(descriptor, path):
            return False
        path.unlink()
        return True
    except OSError:
        return False
    finally:
        os.close(descriptor)
