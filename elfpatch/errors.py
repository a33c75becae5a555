"""The one error hierarchy of elfpatch, and the exit codes.

Every failure the user can cause (a path that is not ELF, a truncated table,
a broken wheel) is an ``ElfpatchError``.  Its message is built from fields
(what, which file, why) so the CLI can print it as one line; only the CLI
turns errors into exit codes.  One kind is no fault of the input's:
``InternalError``, elfpatch failing on a file that reads cleanly.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from typing import TypeVar


class ExitCode(enum.IntEnum):
    """Exit codes shared by every command (listed in ``--help``)."""

    OK = 0
    FINDINGS = 1  # a policy was violated or a fix was refused (--strict)
    BAD_INPUT = 2  # usage error, or an input that could not be read
    # A bug of elfpatch's own (an unexpected exception): distinct from 2 so that a
    # CI job can tell "your input is bad" from "the tool broke".
    INTERNAL = 3
    INTERRUPTED = 130  # Ctrl-C or SIGTERM (128 + SIGINT, as shells report it)


EXIT_CODES_HELP = (
    "Exit codes: 0 success (findings or not); "
    "1 a policy was violated or a fix was refused; "
    "2 usage error or an input that could not be read; "
    "3 internal error of elfpatch (a bug: rerun with --traceback and report it); "
    "130 interrupted (fix then lists what was written)."
)


# Exceptions a malformed file can still provoke deep in a parser; they are
# reported as a corrupt input rather than as a crash.
PARSE_FAILURES = (ValueError, IndexError, KeyError, struct.error, OverflowError,
                  UnicodeDecodeError, MemoryError)


_Error = TypeVar("_Error", bound="ElfpatchError")


class ElfpatchError(Exception):
    """Base of every error elfpatch reports to the user.

    Its fields are fixed when it is made and its message is built from them
    when printed, so ``str(error)`` and ``one_line()`` always agree; a caller
    that knows a better name for the input makes a new error (``relabelled``).
    """

    _FIELDS = frozenset({"path", "reason", "hint", "detail"})

    path: str
    reason: str
    hint: str | None
    detail: str | None  # the traceback behind it, for --traceback, when it has one

    def __init__(self, path: str, reason: str, hint: str | None = None,
                 detail: str | None = None) -> None:
        for name, value in (("path", path), ("reason", reason), ("hint", hint),
                            ("detail", detail)):
            super().__setattr__(name, value)
        super().__init__(path, reason, hint, detail)

    def __setattr__(self, name: str, value: object) -> None:
        if name in self._FIELDS:
            raise AttributeError(f"{type(self).__name__}.{name} is fixed when the error is "
                                 "made: raise error.relabelled(...) instead")
        super().__setattr__(name, value)

    def __reduce__(self) -> tuple[type, tuple[str, str, str | None, str | None]]:
        # Rebuilt from its fields when sent back from a worker process.
        return (self.__class__, (self.path, self.reason, self.hint, self.detail))

    def __str__(self) -> str:
        return self.one_line()

    def one_line(self) -> str:
        text = f"{self.path}: {self.reason}"
        if self.hint:
            text += f" (hint: {self.hint})"
        return text

    def relabelled(self: _Error, path: str) -> _Error:
        """The same error about ``path`` (a wheel member's name rather than a scratch file),
        carrying this one's traceback."""
        return type(self)(path, self.reason, self.hint, self.detail).with_traceback(
            self.__traceback__)


class UsageError(ElfpatchError):
    """An option or argument that cannot work (``path`` names the option)."""


class NotElfError(ElfpatchError):
    """The file does not start with the ELF magic bytes."""


class CorruptElfError(ElfpatchError):
    """The file is ELF but a header or table points outside it or is inconsistent."""


class UnsupportedElfError(ElfpatchError):
    """The file is valid ELF of a kind elfpatch does not handle for this operation."""


class InputError(ElfpatchError):
    """A path that cannot be read: missing, unreadable, a broken archive."""


class InternalError(ElfpatchError):
    """elfpatch failed on an input whose headers and tables all read cleanly: a bug of
    its own, not the input's fault.  Reported against that input like the errors
    above, so the other inputs are still done, but it makes the exit code 3."""

    def one_line(self) -> str:
        return f"{self.path}: {self.reason} (a bug of elfpatch: rerun with --traceback " \
            "and report it)"


def exit_code_for(errors: Sequence[ElfpatchError]) -> ExitCode | None:
    """The exit code the errors of a run make (None: there are none): 3 when any is
    a bug of elfpatch's, else 2."""
    if any(isinstance(error, InternalError) for error in errors):
        return ExitCode.INTERNAL
    return ExitCode.BAD_INPUT if errors else None


def malformed(label: str, error: BaseException) -> CorruptElfError:
    """A parser's exception on a corrupt input, reported as that input's error.

    The traceback is kept as text (it crosses process boundaries) for
    ``--traceback``: such an exception may also be a bug of ours.
    """
    import traceback

    return CorruptElfError(label, f"malformed ELF data ({type(error).__name__}: {error})",
                           detail="".join(traceback.format_exception(error)))


def caused_by_interrupt(error: BaseException) -> bool:
    """Whether Ctrl-C is what ``error`` wraps: Python 3.11 turns an interrupt that
    comes while a module being imported defines a class into ``RuntimeError: Error
    calling __set_name__``, the KeyboardInterrupt its cause."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
