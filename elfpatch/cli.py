"""The ``elfpatch`` command line: parses options, calls the library, renders.

Heavy modules are imported inside the commands so that ``--help`` and
start-up stay fast.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import click

from elfpatch import __version__
from elfpatch.errors import EXIT_CODES_HELP, ElfpatchError, ExitCode


def _echo(text: str, err: bool = False, nl: bool = True) -> None:
    """Every line goes out here: names and paths that kept stray bytes as surrogates
    are written as ``\\xNN`` text, never as an encoding error."""
    from elfpatch.elf.file import printable

    click.echo(printable(text), err=err, nl=nl)


def _emit_errors(errors: Sequence[ElfpatchError]) -> None:
    """One line per error; with --traceback, also the traceback behind any that has one."""
    context = click.get_current_context(silent=True)
    with_traceback = bool(context and context.find_root().obj
                          and context.find_root().obj.get("traceback"))
    for error in errors:
        if with_traceback and error.detail:
            _echo(error.detail.rstrip(), err=True)
        _echo(f"elfpatch: error: {error.one_line()}", err=True)


def _emit_json(document: dict[str, Any]) -> None:
    """Every JSON document goes out here: valid UTF-8, on one line.

    Names and paths keep stray bytes as surrogates; they are written as
    ``\\xNN`` text.  One line: indenting switches json to its pure-Python
    encoder, which took 0.3 s for a torch wheel's report (``jq .`` pretty-prints it).
    """
    from elfpatch.report.scan_json import printable_document

    _echo(json.dumps(printable_document(document), ensure_ascii=False))


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
        except KeyboardInterrupt:
            # Commands that write catch this themselves and say what was written.
            _echo("elfpatch: interrupted", err=True)
            ctx.exit(ExitCode.INTERRUPTED)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except Exception as error:  # a bug: one line, and the traceback on request
            if ctx.obj and ctx.obj.get("traceback"):
                raise
            _echo(f"elfpatch: internal error: {type(error).__name__}: {error} "
                       "(rerun with --traceback and report it)", err=True)
            ctx.exit(ExitCode.BAD_INPUT)


@click.group(cls=ElfpatchGroup, epilog=EXIT_CODES_HELP)
@click.version_option(__version__, prog_name="elfpatch")
@click.option("--traceback", is_flag=True, help="Show the full traceback of unexpected errors.")
@click.pass_context
def main(ctx: click.Context, traceback: bool) -> None:
    """Find and fix STB_GNU_UNIQUE symbols and static-initializer hazards in ELF files."""
    ctx.obj = {"traceback": traceback}


@main.command(epilog="Exit codes: 0 scanned (with or without findings); 2 usage error or a "
              "path that could not be read as ELF (the other paths are still scanned).")
@click.argument("paths", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (schema version 1).")
@click.option("-v", "--verbose", is_flag=True, help="List every UNIQUE symbol.")
@click.option("--host", metavar="PROGRAM",
              help="The process that dlopens each library: python, c, c++ or a program's "
              "path (default: python for wheel members, c for loose files).")
@click.option("--no-loader", is_flag=True,
              help="Skip the loader's load and unload verdict (faster on huge libraries).")
def scan(paths: tuple[str, ...], as_json: bool, verbose: bool, host: str | None,
         no_loader: bool) -> None:
    """Report STB_GNU_UNIQUE symbols and what they do at load time.

    PATHS are ELF files, folders (searched recursively) and wheels or zips.
    """
    from elfpatch import api
    from elfpatch.report.style import color_wanted, make_styler

    outcome = api.scan(paths, host=host, loader=not no_loader, keep_going=True)
    if as_json:
        from elfpatch.report.scan_json import scan_document

        _emit_json(scan_document(list(outcome.files), list(outcome.errors)))
    else:
        from elfpatch.report.scan_text import render_scan

        style = make_styler(color_wanted())
        _echo(render_scan(list(outcome.files), list(outcome.errors), style, verbose), nl=False)
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
@click.option("--hide", "hide", multiple=True, metavar="REGEX",
              help="Also make exports whose demangled name matches LOCAL (unless another "
              "library of the set needs them); preset:cxx-instantiations names the C++ "
              "runtime's template instantiations. Adds to hide = [...] of [tool.elfpatch].")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (version 1).")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr (shown only on a "
              "terminal, for -w).")
def fix(paths: tuple[str, ...], output: str | None, in_place: bool, wheel_dir: str | None,
        mode: str,
        only: str | None, exclude: str | None, dry_run: bool, strict: bool, force: bool,
        hide: tuple[str, ...], as_json: bool, quiet: bool) -> None:
    """Rewrite STB_GNU_UNIQUE bindings so libraries unload and stay private.

    All PATHS (files, folders) are analysed as one set first: a UNIQUE symbol
    another library of the set references or also defines is made GLOBAL
    rather than LOCAL, so the set keeps loading and sharing what it shares.
    """
    from elfpatch import api
    from elfpatch.patch.plan import FixOptions

    targets = sum(1 for given in (output, in_place or None, wheel_dir) if given)
    if targets > 1 or (targets == 0 and not dry_run):
        raise click.UsageError("give exactly one of -o/--output, --in-place and -w/--wheel-dir "
                               "(or --dry-run)")
    from elfpatch.policy import load_policy

    hide = (*load_policy(None).hide, *hide)
    options = FixOptions(mode, only, exclude, strict, force, hide)  # checked: one line if wrong
    if wheel_dir is not None or all(p.endswith(".whl") for p in paths):
        _fix_wheels(paths, wheel_dir, options, dry_run, as_json, quiet)
    _terminate_as_interrupt()
    try:
        result = api.fix(paths, output=output, in_place=in_place, mode=mode, only=only,
                         exclude=exclude, strict=strict, force=force, dry_run=dry_run,
                         hide=hide, keep_going=True)
    except KeyboardInterrupt:
        _echo("elfpatch: interrupted before anything was written", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    if as_json:
        from elfpatch.report.fix_json import fix_document

        _emit_json(fix_document(result, dry_run))
    else:
        from elfpatch.report.fix_text import render_fix
        from elfpatch.report.style import color_wanted, make_styler

        _echo(render_fix(result, make_styler(color_wanted()), dry_run), nl=False)
    _emit_errors(result.errors)
    if result.interrupted:
        _emit_interruption([(o.destination, o.written) for o in result.outcomes])
        sys.exit(ExitCode.INTERRUPTED)
    if result.errors:
        sys.exit(ExitCode.BAD_INPUT)
    sys.exit(ExitCode.FINDINGS if result.refused else ExitCode.OK)


def _terminate_as_interrupt() -> None:
    """SIGTERM (a CI job cancelled, ``kill``) is handled like Ctrl-C: the report says
    which files were written."""
    import signal

    def interrupt(_signal: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def _emit_interruption(outcomes: list[tuple[str | None, bool]]) -> None:
    """After Ctrl-C: which outputs now hold the fix and which are as they were."""
    written = [destination for destination, done in outcomes if done]
    left = [destination for destination, done in outcomes if not done]
    _echo(f"elfpatch: interrupted: {len(written)} written, {len(left)} left as they were",
          err=True)
    for destination in written:
        _echo(f"  written: {destination}", err=True)
    for destination in left:
        _echo(f"  not written: {destination}", err=True)


def _fix_wheels(paths: tuple[str, ...], wheel_dir: str | None, options: Any, dry_run: bool,
                as_json: bool, quiet: bool = False) -> None:
    """``fix -w OUTDIR``: repaired wheels; every wheel is written, or none."""
    from elfpatch.errors import InputError
    from elfpatch.service.wheel_fix import fix_wheels

    for path in paths:
        if not path.endswith(".whl"):
            raise InputError(path, "-w/--wheel-dir takes wheels (*.whl) only")
        if not wheel_dir and not dry_run:
            raise InputError(path, "a wheel is repaired into a new wheel",
                             hint="elfpatch fix WHEEL -w OUTDIR")
    _terminate_as_interrupt()
    progress = _ProgressLine(enabled=not quiet and sys.stderr.isatty())
    try:
        result = fix_wheels(list(paths), wheel_dir, options, dry_run, progress)
    finally:
        progress.clear()
    if as_json:
        from elfpatch.report.fix_json import wheel_document

        _emit_json(wheel_document(result, options.mode, dry_run))
    else:
        from elfpatch.report.fix_text import render_wheels
        from elfpatch.report.style import color_wanted, make_styler

        _echo(render_wheels(result, make_styler(color_wanted()), dry_run), nl=False)
    _emit_errors(result.errors)
    if result.interrupted:
        _emit_interruption([(w.destination or w.wheel, w.written) for w in result.wheels])
        sys.exit(ExitCode.INTERRUPTED)
    if result.errors:
        sys.exit(ExitCode.BAD_INPUT)
    sys.exit(ExitCode.FINDINGS if result.refused else ExitCode.OK)


class _ProgressLine:
    """One line on stderr, rewritten in place as work goes on; nothing unless enabled."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._shown = False

    def __call__(self, text: str) -> None:
        if not self.enabled:
            return
        import shutil

        width = max(20, shutil.get_terminal_size().columns - 1)
        line = text if len(text) <= width else text[: width - 3] + "..."
        sys.stderr.write(f"\r\x1b[K{line}")
        sys.stderr.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self._shown = False


@main.command(epilog="Exit codes: 0 listed (risks or not); 2 usage error or an input that "
              "could not be read.")
@click.argument("paths", nargs=-1, required=True)
@click.option("--closure", is_flag=True, help="Follow DT_NEEDED as the loader does and list "
              "every object in the order its initializers run (one root PATH).")
@click.option("--sort-algorithm", type=click.Choice(["1", "2"]), default="2", show_default=True,
              help="glibc.rtld.dynamic_sort: 2 (default since glibc 2.35) or 1 (the old one).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (version 1).")
@click.option("-v", "--verbose", is_flag=True, help="List finalizers and every warning.")
@click.option("--list-only", is_flag=True, help="List the initializers without reading their "
              "machine code (fast; no risks).")
def inits(paths: tuple[str, ...], closure: bool, sort_algorithm: str, as_json: bool,
          verbose: bool, list_only: bool) -> None:
    """Static initializers in run order, their translation units, and init-order risks."""
    from elfpatch import api

    result = api.inits(paths, closure=closure, sort_algorithm=int(sort_algorithm),
                       follow_code=not list_only, keep_going=True)
    if as_json:
        from elfpatch.report.inits_json import inits_document

        _emit_json(inits_document(result))
    else:
        from elfpatch.report.inits_text import render_inits
        from elfpatch.report.style import color_wanted, make_styler

        _echo(render_inits(result, make_styler(color_wanted()), verbose), nl=False)
    _emit_errors(result.errors)
    sys.exit(ExitCode.BAD_INPUT if result.errors else ExitCode.OK)


@main.command(epilog="Exit codes: 0 the story was told; 2 no C++ compiler or a build failed.")
def demo() -> None:
    """Build two plugins with g++, show the UNIQUE bugs, fix them, show them gone."""
    from elfpatch.demo import run_demo

    run_demo(click.echo)


@main.command(epilog="Exit codes: 0 the policy passed (or --update-baseline recorded the "
              "findings); 1 the policy was violated; 2 usage error or an input that could not "
              "be read.")
@click.argument("paths", nargs=-1)
@click.option("--config", type=click.Path(), help="Policy file (TOML with [tool.elfpatch]); "
              "default: the nearest pyproject.toml.")
@click.option("--format", "output_format", type=click.Choice(["text", "json", "github", "junit"]),
              default="text", show_default=True)
@click.option("-v", "--verbose", is_flag=True, help="Text: every library and finding, not the "
              "summary.")
@click.option("--baseline", type=click.Path(), help="Known findings (JSON) that do not fail.")
@click.option("--update-baseline", is_flag=True, help="Write the current findings to --baseline "
              "(created if missing) and exit 0.")
@click.option("-j", "--jobs", type=click.IntRange(1, 64), default=None,
              help="Analyse libraries in this many processes (default: one per core, up to 8).")
@click.option("--environment", is_flag=True, help="Also check the libraries installed in the "
              "Python environment (see --python) for UNIQUE symbols that libraries of different "
              "distributions, or of PATHS and an installed distribution, both define. Installed "
              "libraries are held to this clash rule only, PATHS to the whole policy.")
@click.option("--python", "python", type=click.Path(exists=True, dir_okay=False),
              default=None, metavar="PYTHON", help="The interpreter whose environment "
              "--environment checks (default: the one running elfpatch).")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr (shown only on a "
              "terminal).")
def check(paths: tuple[str, ...], config: str | None, output_format: str, verbose: bool,
          baseline: str | None, update_baseline: bool, jobs: int | None, environment: bool,
          python: str | None, quiet: bool) -> None:
    """The CI gate: analyse wheels, folders and libraries and apply the policy."""
    import os

    jobs = jobs or min(8, os.cpu_count() or 1)
    from elfpatch.analysis.check import CheckResult
    from elfpatch.policy import load_policy
    from elfpatch.service.check import read_baseline, run_check, write_baseline

    if update_baseline and not baseline:
        raise click.UsageError("--update-baseline needs --baseline FILE")
    if python is not None and not environment:
        raise click.UsageError("--python names the interpreter for --environment")
    if not paths and not environment:
        raise click.UsageError("give PATHS, --environment, or both")
    policy = load_policy(config)
    known = set() if update_baseline else read_baseline(baseline)
    progress = _ProgressLine(enabled=not quiet and sys.stderr.isatty())
    try:
        result = run_check(paths, policy, known, jobs, progress=progress) if paths else \
            CheckResult(policy)
    finally:
        progress.clear()
    if environment:
        from elfpatch.service.environment import add_environment

        result = add_environment(result, python or sys.executable, jobs)
    recorded = write_baseline(baseline, result) if update_baseline and baseline else None
    _render_check(result, output_format, verbose)
    _emit_errors(result.errors)
    if result.errors:
        sys.exit(ExitCode.BAD_INPUT)
    if recorded is not None:
        _echo(f"elfpatch: recorded {recorded} error findings in {baseline}; later runs "
              f"with --baseline {baseline} fail only on new ones", err=True)
        sys.exit(ExitCode.OK)
    sys.exit(ExitCode.OK if result.passed else ExitCode.FINDINGS)


def _render_check(result: Any, output_format: str, verbose: bool) -> None:
    from elfpatch.report import check_report

    if output_format == "json":
        _emit_json(check_report.render_json(result))
    elif output_format == "github":
        _echo(check_report.render_github(result), nl=False)
    elif output_format == "junit":
        _echo(check_report.render_junit(result), nl=False)
    else:
        from elfpatch.report.style import color_wanted, make_styler

        _echo(check_report.render_text(result, make_styler(color_wanted()), verbose),
                   nl=False)
