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
        sys.exit(_INTERRUPTED)
    finally:
        # The report is out and the exit status chosen: an interrupt now would only
        # kill the process on its way out, the report's last lines unflushed.
        _ignore_interrupts()


def _ignore_interrupts() -> None:
    import signal

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)
