"""The ``elfpatch`` console script: the command line, with Ctrl-C answered from the first instant.

Importing the command line takes a while (click, then each command's
modules); an interrupt in that time would otherwise print a traceback.
Nothing has been written before a command runs, and each command that
writes reports for itself what an interrupt left behind.
"""

from __future__ import annotations

import sys

_INTERRUPTED = 130


def main() -> None:
    try:
        from elfpatch.cli import main as command_line

        command_line()
    except KeyboardInterrupt:
        _ignore_interrupts()
        sys.stderr.write("elfpatch: interrupted\n")
        _exit_interrupted()
    except SystemExit as done:
        _ignore_interrupts()
        if done.code == _INTERRUPTED:
            _exit_interrupted()
        raise
    finally:
        # The report is out and the exit status chosen: an interrupt now would only
        # kill the process on its way out, the report's last lines unflushed.
        _ignore_interrupts()


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
