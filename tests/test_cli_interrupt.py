"""Ctrl-C is an interruption however Python hands it over, never an internal error.

An interrupt that comes while a module imported on the way defines a class
reaches the command, on Python 3.11, as ``RuntimeError: Error calling
__set_name__``, the KeyboardInterrupt its cause: a fix interrupted as it
imported ``analysis.crosslib`` said "internal error" (CI, SIGINT round of
``test_fix_sets``).  The command line must say "interrupted" and exit 130.
"""

from __future__ import annotations

import click
from click.testing import CliRunner

from elfpatch.cli import ElfpatchGroup
from elfpatch.errors import ExitCode


@click.group(cls=ElfpatchGroup)
def commands() -> None:
    """A group with the command line's error handling."""


@commands.command()
def define_a_class() -> None:
    """Defines a class while Ctrl-C comes, as an import does."""

    class Interrupted:
        def __set_name__(self, owner: type, name: str) -> None:
            raise KeyboardInterrupt

    class Owner:
        attribute = Interrupted()


@commands.command()
def fail() -> None:
    """A bug."""
    raise RuntimeError("a bug")


def test_an_interrupt_wrapped_by_python_is_an_interruption() -> None:
    result = CliRunner().invoke(commands, ["define-a-class"])
    assert result.exit_code == ExitCode.INTERRUPTED, result.output
    assert "interrupted" in result.output
    assert "internal error" not in result.output


def test_a_bug_is_still_an_internal_error() -> None:
    result = CliRunner().invoke(commands, ["fail"])
    assert result.exit_code == ExitCode.INTERNAL
    assert "internal error: RuntimeError: a bug" in result.output
