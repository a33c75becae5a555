"""Whose fault an unexpected exception during one input's analysis is.

Every failure an input can cause is meant to be raised as an
``ElfpatchError`` by the reader; anything else that escapes an analysis is
either a corruption the reader let through or a bug of elfpatch's.  The two
call for different actions (fix the build, or report the bug), so they are
told apart by reading the whole file's structure again.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from contextlib import contextmanager

from elfpatch.elf.file import ElfFile
from elfpatch.elf.integrity import read_all_structure
from elfpatch.errors import PARSE_FAILURES, ElfpatchError, InternalError, malformed
from elfpatch.service.parallel import ChildCrashed


@contextmanager
def failures_judged(label: str, elf: ElfFile) -> Iterator[None]:
    """Any exception of the analysis of ``elf`` inside, other than its own errors,
    raised again as the error ``failure_of`` finds for it."""
    try:
        yield
    except ElfpatchError:
        raise
    except Exception as error:
        if isinstance(error, ChildCrashed) and _interrupted(error):
            # Ctrl-C reached the forked half first: still an interrupt, no failure.
            raise KeyboardInterrupt from error
        raise failure_of(label, elf, error) from None


def failure_of(label: str, elf: ElfFile, error: Exception) -> ElfpatchError:
    """The error to report against ``label`` for ``error``, raised while analysing the
    still open ``elf``.

    A structure that does not read back (``read_all_structure``) is what is wrong
    with the input, in the reader's words; a file that reads cleanly throughout
    leaves the failure to elfpatch (``InternalError``, exit code 3), never a
    "malformed" input that would send a user hunting through a good build.
    Either keeps the traceback behind ``error`` for ``--traceback``.
    """
    what, detail = _described(error)
    try:
        read_all_structure(elf)
    except ElfpatchError as problem:
        return type(problem)(label, problem.reason, problem.hint, detail)
    except PARSE_FAILURES as problem:
        return malformed(label, problem)
    except Exception:  # the reader failing on its own: ours too
        pass
    return InternalError(label, f"the analysis failed ({what}) although every header and "
                         "table of the file reads cleanly", detail=detail)


def _described(error: Exception) -> tuple[str, str]:
    """(the exception in one line, its traceback); a forked half's failure is told
    by the last line of the traceback it sent back."""
    if isinstance(error, ChildCrashed):
        text = str(error)
        lines = [line for line in text.splitlines() if line.strip()]
        return (lines[-1].strip() if lines else "the forked half failed"), text
    return f"{type(error).__name__}: {error}", "".join(traceback.format_exception(error))


def _interrupted(error: ChildCrashed) -> bool:
    """Whether the forked half ended on an interrupt (its traceback's last line)."""
    return _described(error)[0].startswith("KeyboardInterrupt")
