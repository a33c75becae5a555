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
    # On one line: indenting switches json to its pure-Python encoder, which
    # took 0.3 s for a torch wheel's report (``jq .`` pretty-prints it).
    click.echo(json.dumps(document, ensure_ascii=False))


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
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except Exception as error:  # a bug: one line, and the traceback on request
            if ctx.obj and ctx.obj.get("traceback"):
                raise
            click.echo(f"elfpatch: internal error: {type(error).__name__}: {error} "
                       "(rerun with --traceback and report it)", err=True)
            ctx.exit(ExitCode.BAD_INPUT)


@click.group(cls=ElfpatchGroup, epilog=EXIT_CODES_HELP)
@click.version_option(__version__, prog_name="elfpatch")
@click.option("--traceback", is_flag=True, help="Show the full traceback of unexpected errors.")
@click.pass_context
def main(ctx: click.Context, traceback: bool) -> None:
    """Find and fix STB_GNU_UNIQUE symbols and static-initializer hazards in ELF files."""
    if traceback:  # imported only then: the runner pulls in the analyses, slow to load
        from elfpatch import runner

        runner.RAISE_UNEXPECTED = True
    ctx.obj = {"traceback": traceback}


@main.command(epilog="Exit codes: 0 scanned (with or without findings); 2 usage error or a "
              "path that could not be read as ELF (the other paths are still scanned).")
@click.argument("paths", nargs=-1, required=True)
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


@main.command(epilog="Exit codes: 0 fixed (or nothing to fix); 1 refused by --strict (nothing "
              "written); 2 usage error or an input that could not be read or written (nothing "
              "is written when any input of the set cannot be read).")
@click.argument("paths", nargs=-1, required=True)
@click.option("-o", "--output", type=click.Path(), help="Write here (a file, or a folder "
              "mirroring the inputs) and leave the inputs untouched.")
@click.option("--in-place", is_flag=True, help="Replace each input (atomically, verified).")
@click.option("-w", "--wheel-dir", type=click.Path(), help="Write repaired wheels here "
              "(PATHS are wheels; RECORD is rewritten).")
@click.option("--to", "mode", type=click.Choice(["local", "weak-hidden", "global"]),
              default="local", show_default=True, help="New binding of UNIQUE symbols.")
@click.option("--only", metavar="REGEX", help="Rewrite only symbols whose mangled or "
              "demangled name matches.")
@click.option("--exclude", metavar="REGEX", help="Leave symbols whose name matches.")
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@click.option("--strict", is_flag=True, help="Refuse (exit 1) instead of keeping symbols "
              "other libraries of the set need GLOBAL.")
@click.option("--force", is_flag=True, help="Localise even symbols other libraries need.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (version 1).")
def fix(paths: tuple[str, ...], output: str | None, in_place: bool, wheel_dir: str | None,
        mode: str,
        only: str | None, exclude: str | None, dry_run: bool, strict: bool, force: bool,
        as_json: bool) -> None:
    """Rewrite STB_GNU_UNIQUE bindings so libraries unload and stay private.

    All PATHS (files, folders) are analysed as one set first: a UNIQUE symbol
    another library of the set references or also defines is made GLOBAL
    rather than LOCAL, so the set keeps loading and sharing what it shares.
    """
    import re

    from elfpatch.patch.fix import fix_paths
    from elfpatch.patch.plan import FixOptions

    targets = sum(1 for given in (output, in_place or None, wheel_dir) if given)
    if targets > 1 or (targets == 0 and not dry_run):
        raise click.UsageError("give exactly one of -o/--output, --in-place and -w/--wheel-dir "
                               "(or --dry-run)")
    if strict and force:
        raise click.UsageError("--strict and --force contradict each other")
    for pattern in (only, exclude):
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as error:
                raise click.BadParameter(f"{pattern!r}: {error}") from None
    options = FixOptions(mode, only, exclude, strict, force)
    if wheel_dir is not None or all(p.endswith(".whl") for p in paths):
        _fix_wheels(paths, wheel_dir or "", options, dry_run, as_json)
    result = fix_paths(paths, options, output, dry_run)
    if as_json:
        from elfpatch.report.fix_json import fix_document

        _emit_json(fix_document(result, dry_run))
    else:
        from elfpatch.report.fix_text import render_fix
        from elfpatch.report.style import color_wanted, make_styler

        click.echo(render_fix(result, make_styler(color_wanted()), dry_run), nl=False)
    _emit_errors(result.errors)
    if result.errors:
        sys.exit(ExitCode.BAD_INPUT)
    sys.exit(ExitCode.FINDINGS if result.refused else ExitCode.OK)


def _fix_wheels(paths: tuple[str, ...], wheel_dir: str, options: Any, dry_run: bool,
                as_json: bool) -> None:
    from elfpatch.errors import InputError
    from elfpatch.patch.wheel_fix import fix_wheels

    for path in paths:
        if not path.endswith(".whl"):
            raise InputError(path, "-w/--wheel-dir takes wheels (*.whl) only")
        if not wheel_dir and not dry_run:
            raise InputError(path, "a wheel is repaired into a new wheel",
                             hint="elfpatch fix WHEEL -w OUTDIR")
    results, errors = fix_wheels(list(paths), wheel_dir, options, dry_run)
    if as_json:
        from elfpatch.report.fix_json import wheel_document

        _emit_json(wheel_document(results, errors, options.mode, dry_run))
    else:
        from elfpatch.report.fix_text import render_wheels
        from elfpatch.report.style import color_wanted, make_styler

        click.echo(render_wheels(results, make_styler(color_wanted()), dry_run), nl=False)
    all_errors = errors + [e for r in results for e in r.fix.errors]
    _emit_errors(all_errors)
    if all_errors:
        sys.exit(ExitCode.BAD_INPUT)
    sys.exit(ExitCode.FINDINGS if any(r.fix.refused for r in results) else ExitCode.OK)


@main.command(epilog="Exit codes: 0 listed (risks or not); 2 usage error or an input that "
              "could not be read.")
@click.argument("paths", nargs=-1, required=True)
@click.option("--closure", is_flag=True, help="Follow DT_NEEDED as the loader does and list "
              "every object in the order its initializers run (one root PATH).")
@click.option("--sort-algorithm", type=click.Choice(["1", "2"]), default="2", show_default=True,
              help="glibc.rtld.dynamic_sort: 2 (default since glibc 2.35) or 1 (the old one).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (version 1).")
@click.option("-v", "--verbose", is_flag=True, help="List finalizers and every warning.")
def inits(paths: tuple[str, ...], closure: bool, sort_algorithm: str, as_json: bool,
          verbose: bool) -> None:
    """Static initializers in run order, their translation units, and init-order risks."""
    from elfpatch.analysis.init_order import analyse_closure, analyse_paths

    if closure:
        if len(paths) != 1:
            raise click.UsageError("--closure takes exactly one root PATH")
        result = analyse_closure(paths[0], int(sort_algorithm))
    else:
        result = analyse_paths(paths)
    if as_json:
        from elfpatch.report.inits_json import inits_document

        _emit_json(inits_document(result))
    else:
        from elfpatch.report.inits_text import render_inits
        from elfpatch.report.style import color_wanted, make_styler

        click.echo(render_inits(result, make_styler(color_wanted()), verbose), nl=False)
    _emit_errors(result.errors)
    sys.exit(ExitCode.BAD_INPUT if result.errors else ExitCode.OK)


@main.command(epilog="Exit codes: 0 the story was told; 2 no C++ compiler or a build failed.")
def demo() -> None:
    """Build two plugins with g++, show the UNIQUE bugs, fix them, show them gone."""
    from elfpatch.demo import run_demo

    run_demo(click.echo)


@main.command(epilog="Exit codes: 0 the policy passed; 1 the policy was violated; 2 usage error "
              "or an input that could not be read.")
@click.argument("paths", nargs=-1)
@click.option("--config", type=click.Path(), help="Policy file (TOML with [tool.elfpatch]); "
              "default: the nearest pyproject.toml.")
@click.option("--format", "output_format", type=click.Choice(["text", "json", "github", "junit"]),
              default="text", show_default=True)
@click.option("--baseline", type=click.Path(), help="Known findings (JSON) that do not fail.")
@click.option("--update-baseline", is_flag=True, help="Write the current findings to --baseline.")
@click.option("-j", "--jobs", type=click.IntRange(1, 64), default=None,
              help="Analyse libraries in this many processes (default: one per core, up to 8).")
@click.option("--environment", "environment", is_flag=False, flag_value=sys.executable,
              default=None, metavar="[PYTHON]", help="Check the libraries installed in this "
              "interpreter's environment for UNIQUE clashes between distributions.")
def check(paths: tuple[str, ...], config: str | None, output_format: str, baseline: str | None,
          update_baseline: bool, jobs: int | None, environment: str | None) -> None:
    """The CI gate: analyse wheels, folders and libraries and apply the policy."""
    import os

    jobs = jobs or min(8, os.cpu_count() or 1)
    from elfpatch.analysis.check import read_baseline, run_check, write_baseline
    from elfpatch.policy import load_policy

    if update_baseline and not baseline:
        raise click.UsageError("--update-baseline needs --baseline FILE")
    if not paths and environment is None:
        raise click.UsageError("give PATHS or --environment")
    policy = load_policy(config)
    if environment is not None:
        from elfpatch.environment import check_environment

        result = check_environment(environment, policy, jobs)
    else:
        known = set() if update_baseline else read_baseline(baseline)
        result = run_check(paths, policy, known, jobs)
    if update_baseline and baseline:
        write_baseline(baseline, result)
    _render_check(result, output_format)
    _emit_errors(result.errors)
    if result.errors:
        sys.exit(ExitCode.BAD_INPUT)
    sys.exit(ExitCode.OK if result.passed or update_baseline else ExitCode.FINDINGS)


def _render_check(result: Any, output_format: str) -> None:
    from elfpatch.report import check_report

    if output_format == "json":
        _emit_json(check_report.render_json(result))
    elif output_format == "github":
        click.echo(check_report.render_github(result), nl=False)
    elif output_format == "junit":
        click.echo(check_report.render_junit(result), nl=False)
    else:
        from elfpatch.report.style import color_wanted, make_styler

        click.echo(check_report.render_text(result, make_styler(color_wanted())), nl=False)
