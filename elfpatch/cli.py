"""The ``elfpatch`` command line: parses options, calls the library, renders.

Heavy modules are imported inside the commands so that ``--help`` and
start-up stay fast.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from elfpatch import __version__
from elfpatch.errors import EXIT_CODES_HELP, ElfpatchError, ExitCode


def _emit_errors(errors: list[ElfpatchError]) -> None:
    for error in errors:
        click.echo(f"elfpatch: error: {error.one_line()}", err=True)


def _emit_json(document: dict[str, Any]) -> None:
    click.echo(json.dumps(document, indent=2, ensure_ascii=False))


class ElfpatchGroup(click.Group):
    """Turns ElfpatchError into one line on stderr and exit code 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ElfpatchError as error:
            if ctx.obj and ctx.obj.get("traceback"):
                raise
            _emit_errors([error])
            ctx.exit(ExitCode.BAD_INPUT)


@click.group(cls=ElfpatchGroup, epilog=EXIT_CODES_HELP)
@click.version_option(__version__, prog_name="elfpatch")
@click.option("--traceback", is_flag=True, help="Show the full traceback of unexpected errors.")
@click.pass_context
def main(ctx: click.Context, traceback: bool) -> None:
    """Find and fix STB_GNU_UNIQUE symbols and static-initializer hazards in ELF files."""
    from elfpatch import runner

    runner.RAISE_UNEXPECTED = traceback
    ctx.obj = {"traceback": traceback}


@main.command(epilog="Exit codes: 0 scanned (with or without findings); 2 usage error or a "
              "path that could not be read as ELF (the other paths are still scanned).")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (schema version 1).")
@click.option("-v", "--verbose", is_flag=True, help="List every UNIQUE symbol.")
def scan(paths: tuple[str, ...], as_json: bool, verbose: bool) -> None:
    """Report STB_GNU_UNIQUE symbols and what they do at load time.

    PATHS are ELF files, folders (searched recursively) and wheels or zips.
    """
    from elfpatch.report.style import color_wanted, make_styler
    from elfpatch.runner import scan_paths

    outcome = scan_paths(paths)
    if as_json:
        from elfpatch.report.scan_json import scan_document

        _emit_json(scan_document(outcome.results, outcome.errors))
    else:
        from elfpatch.report.scan_text import render_scan

        style = make_styler(color_wanted())
        click.echo(render_scan(outcome.results, outcome.errors, style, verbose), nl=False)
    _emit_errors(outcome.errors)
    sys.exit(ExitCode.BAD_INPUT if outcome.errors else ExitCode.OK)
