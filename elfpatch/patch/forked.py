"""Two independent pieces of work on two cores, for the verification of big files.

Verifying a patched libtorch-sized library is about a tenth of a second of
Python spread over tables that do not depend on each other.  A forked child
runs one half on the very same objects and mapped files (copy-on-write:
nothing is read again) while this process runs the other; the child sends
back only what went wrong.  Where forking is unsafe or impossible (other
threads running, no ``os.fork``), both halves simply run here in turn.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

from elfpatch.errors import ElfpatchError


class ChildCrashed(RuntimeError):
    """The forked half died of an unexpected exception (its traceback is the message)."""


def run_alongside(here: Callable[[], None], there: Callable[[], None]) -> None:
    """Run ``there`` in a forked child while running ``here``; raise what either raised.

    An ``ElfpatchError`` from the child is raised here as it was; anything
    else becomes ``ChildCrashed``.  An error of ``here`` wins over the child's.
    """
    if not _can_fork():
        here()
        there()
        return
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(reader)
        _run_child(there, writer)
    os.close(writer)
    finished = False
    try:
        here()
        finished = True
    finally:
        if not finished:  # here failed or was interrupted: the child's result no longer matters
            os.kill(pid, signal.SIGKILL)
        report = _read_all(reader)
        os.close(reader)
        _pid, status = os.waitpid(pid, 0)
    _raise_reported(report)
    if os.waitstatus_to_exitcode(status) != 0:  # died before it could say why
        raise ChildCrashed(f"the forked half ended with status {status:#x} and no report")


def _can_fork() -> bool:
    # Forking a process with other threads running can leave the child holding
    # a lock nobody will release.
    return hasattr(os, "fork") and threading.active_count() == 1


def _run_child(work: Callable[[], None], writer: int) -> None:
    status = 0
    try:
        try:
            work()
            report = b""
        except BaseException as error:  # reported to the parent, which decides what it means
            report = _report_of(error)
        view = memoryview(report)
        while view:
            view = view[os.write(writer, view) :]
    except BaseException:
        status = 1
    finally:
        os._exit(status)  # no atexit handlers, no flushing of the parent's buffers


def _report_of(error: BaseException) -> bytes:
    # Imported here: a passing verification never needs them.
    import pickle
    import traceback

    if isinstance(error, ElfpatchError):
        return pickle.dumps(error)
    return pickle.dumps(ChildCrashed("".join(traceback.format_exception(error))))


def _read_all(reader: int) -> bytes:
    chunks = []
    while chunk := os.read(reader, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _raise_reported(report: bytes) -> None:
    if not report:
        return
    import pickle

    error = pickle.loads(report)
    if isinstance(error, (ElfpatchError, ChildCrashed)):
        raise error
    raise ChildCrashed(f"unexpected report from the child: {error!r}")
