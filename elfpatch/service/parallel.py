"""Work on several cores: the one place elfpatch starts processes for it.

Two shapes of work use it.  ``run_alongside`` splits one big file's work
in two: verifying a patched libtorch-sized library, or following what its
375 initializers do, is pure Python spread over parts that do not depend
on each other.  A forked child runs one half on the very same objects and
mapped files (copy-on-write: nothing is read again) while this process runs
the other; the child sends back its result, or what went wrong.
``worker_pool`` is for many files (``check -j``): a process pool whose
workers are forked too.

Both fork, and say so: Python's default start method differs between
versions and platforms (3.14 moved Linux from fork to forkserver), and a
worker that is forked inherits the imported package and needs no pickled
copy of anything but its job.  Where forking is unsafe or impossible (other
threads running, no ``os.fork``), the work simply runs here in turn.
"""

from __future__ import annotations

import gc
import os
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from elfpatch.errors import ElfpatchError

T = TypeVar("T")
U = TypeVar("U")


class ChildCrashed(RuntimeError):
    """The forked half died of an unexpected exception (its traceback is the message)."""


def run_alongside(here: Callable[[], T], there: Callable[[], U], /) -> tuple[T, U]:
    """Run ``there`` in a forked child while running ``here``; their results, or an error.

    ``there``'s result must pickle.  An ``ElfpatchError`` from the child is
    raised here as it was; anything else becomes ``ChildCrashed``.  An error
    of ``here`` wins over the child's.
    """
    if not _can_fork():
        return here(), there()
    reader, writer = os.pipe()
    parent = os.getpid()
    pid = _fork()
    if pid == 0:  # the child: never returns
        os.close(reader)
        _die_with(parent)
        _run_child(there, writer)
    os.close(writer)
    finished = False
    try:
        mine = here()
        finished = True
    finally:
        if not finished:  # here failed or was interrupted: the child's result no longer matters
            os.kill(pid, signal.SIGKILL)
        report = _read_all(reader)
        os.close(reader)
        _pid, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0 or not report:  # died before it could say
        raise ChildCrashed(f"the forked half ended with status {status:#x} and no report")
    return mine, _result_of(report)


@contextmanager
def cycles_uncollected() -> Iterator[None]:
    """Python's cycle collector paused for the analysis of one file, then as it was.

    Following a big library's code builds millions of small objects and next
    to no reference cycles (libtorch_cpu.so: 24 objects in cycles left at the
    end, none worth collecting earlier; the peak memory is the same), yet each
    full collection traverses every one of them: nvJitLink's analysis spent
    0.23 s of 2.6 s in the collector.  A forked half inherits the pause, and
    so no longer writes to every object it shares with its parent, which
    copied their pages.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def worker_pool(workers: int) -> ProcessPoolExecutor | None:
    """A pool of ``workers`` forked processes, or None when the work should run here.

    The caller shuts it down.  Jobs, their function and results must pickle.
    """
    if workers <= 1 or not _can_fork():
        return None
    import multiprocessing

    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"))


# Held off while the process forks: Python runs the fork handlers modules register
# (logging's releases its lock) in both processes, and an interrupt raised in one
# is printed as "Exception ignored" and lost, so a Ctrl-C that lands there would
# neither stop the run nor say so.
_INTERRUPTS = {signal.SIGINT, signal.SIGTERM}


def _fork() -> int:
    """``os.fork``, with interrupts delivered after it returns, in the parent (the
    child starts with none pending)."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)
    try:
        return os.fork()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _can_fork() -> bool:
    # Forking a process with other threads running can leave the child holding
    # a lock nobody will release.
    return hasattr(os, "fork") and threading.active_count() == 1


_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """Have the kernel kill this child when its parent dies (even of SIGKILL).

    Without it a child forked for a killed ``fix`` went on verifying a
    file nobody would read, holding its temporary copy open.
    """
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the parent's own kill on error still holds
        pass
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _run_child(work: Callable[[], object], writer: int) -> None:
    import pickle  # here, after the fork: the parent does not pay for it

    status = 0
    try:
        try:
            report = pickle.dumps((True, work()))
        except BaseException as error:  # reported to the parent, which decides what it means
            report = pickle.dumps((False, _reported_error(error)))
        view = memoryview(report)
        while view:
            view = view[os.write(writer, view) :]
    except BaseException:
        status = 1
    finally:
        os._exit(status)  # no atexit handlers, no flushing of the parent's buffers


def _reported_error(error: BaseException) -> BaseException:
    if isinstance(error, ElfpatchError):
        return error
    import traceback

    return ChildCrashed("".join(traceback.format_exception(error)))


def _read_all(reader: int) -> bytes:
    chunks = []
    while chunk := os.read(reader, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _result_of(report: bytes) -> Any:
    import pickle

    succeeded, value = pickle.loads(report)
    if succeeded:
        return value
    if isinstance(value, (ElfpatchError, ChildCrashed)):
        raise value
    raise ChildCrashed(f"unexpected report from the child: {value!r}")
