"""Ctrl-C is an interruption however Python hands it over, never an internal error,
and never lost.

An interrupt that comes while a module imported on the way defines a class
reaches the command, on Python 3.11, as ``RuntimeError: Error calling
__set_name__``, the KeyboardInterrupt its cause: a fix interrupted as it
imported ``analysis.crosslib`` said "internal error" (CI, SIGINT round of
``test_fix_sets``).  The command line must say "interrupted" and exit 130.
"""

from __future__ import annotations

import subprocess
import sys

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


# The console script, with the command line replaced by code that drops the last
# reference to an object whose weakref callback is hit by Ctrl-C: what the import
# system's module-lock callback does when the signal comes during an import.
SWALLOWED_INTERRUPT = """
import time
import weakref
import elfpatch.cli
from elfpatch.console import main

class Thing:
    pass

def interrupted(_reference):
    raise KeyboardInterrupt

def command_line():
    thing = Thing()
    reference = weakref.ref(thing, interrupted)
    del thing
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        pass
    print("the command ran to its end")

elfpatch.cli.main = command_line
main()
"""


def test_an_interrupt_python_would_swallow_still_interrupts() -> None:
    """Python prints an exception raised in a weakref callback and goes on; the console
    script sends the interrupt again, and the command stops."""
    run = subprocess.run([sys.executable, "-c", SWALLOWED_INTERRUPT], capture_output=True,
                         text=True, timeout=60)
    assert "the command ran to its end" not in run.stdout
    assert "Exception ignored" not in run.stderr, run.stderr
    assert run.stderr == "elfpatch: interrupted\n"
    assert run.returncode == ExitCode.INTERRUPTED


# The console script while the command line's modules load: one of them defines a class
# as Ctrl-C comes (what click's import did in CI), before the command line's own
# handler is in place.
INTERRUPTED_IMPORT = """
import importlib.abc, importlib.util, sys

class InterruptedImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        return importlib.util.spec_from_loader(name, self) if name == "elfpatch.cli" else None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        class Interrupted:
            def __set_name__(self, owner, name):
                raise KeyboardInterrupt

        class Owner:
            attribute = Interrupted()

sys.meta_path.insert(0, InterruptedImport())
from elfpatch.console import main
main()
"""


def test_an_interrupt_wrapped_while_the_command_line_loads_is_an_interruption() -> None:
    run = subprocess.run([sys.executable, "-c", INTERRUPTED_IMPORT], capture_output=True,
                         text=True, timeout=60)
    assert run.stderr == "elfpatch: interrupted\n"
    assert run.returncode == ExitCode.INTERRUPTED
