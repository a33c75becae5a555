"""The ``elfpatch`` console script: the command line, with Ctrl-C answered from the first instant.

Importing the command line takes a while (click, then each command's
modules); an interrupt in that time would otherwise print a traceback.
Nothing has been written before a command runs, and each command that
writes reports for itself what an interrupt left behind.
"""

from __future__ import annotations

import _thread
import sys

_INTERRUPTED = 130


def main() -> None:
    _interrupts_never_swallowed()
    try:
        from elfpatch.cli import main as command_line

        command_line()
    except KeyboardInterrupt:
        _report_interrupted()
    except SystemExit as done:
        _ignore_interrupts()
        if done.code == _INTERRUPTED:
            _exit_interrupted()
        raise
    except Exception as error:  # the command line's own handler is not in place yet
        from elfpatch.errors import caused_by_interrupt

        if not caused_by_interrupt(error):
            raise
        _report_interrupted()
    finally:
        # The report is out and the exit status chosen: an interrupt now would only
        # kill the process on its way out, the report's last lines unflushed.
        _ignore_interrupts()


def _report_interrupted() -> None:
    _ignore_interrupts()
    sys.stderr.write("elfpatch: interrupted\n")
    _exit_interrupted()


def _interrupts_never_swallowed() -> None:
    """Python cannot raise an exception out of a weakref callback or a finaliser: it
    prints "Exception ignored" and goes on.  The import system runs such a callback for
    every module lock, so a Ctrl-C landing there was lost, with a traceback, and the
    command ran to its end.  The interrupt is sent again, from another thread: one
    sent from the hook itself would land in the hook, and be swallowed again.  That
    thread runs only once this one lets go of the interpreter (after the switch
    interval, or at a blocking call), long after the hook has returned."""
    report_unraisable = sys.unraisablehook

    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            _thread.start_new_thread(_thread.interrupt_main, ())
        else:
            report_unraisable(unraisable)

    sys.unraisablehook = hook


def _ignore_interrupts() -> None:
    import signal

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)


def _exit_interrupted() -> None:
    """Exit 130 now, the report flushed.

    Not ``sys.exit``: once a KeyboardInterrupt has gone through code Python
    runs for itself (an import, a callback), the interpreter replaces any
    exit status with death by SIGINT on its way out, and the caller would
    see no exit code at all.
    """
    import contextlib
    import os

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(_INTERRUPTED)
