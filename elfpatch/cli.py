"""The ``elfpatch`` command line: parses options, calls the library, renders.

Heavy modules are imported inside the commands so that ``--help`` and
start-up stay fast.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import click

from elfpatch import __version__
from elfpatch.errors import (
    EXIT_CODES_HELP,
    ElfpatchError,
    ExitCode,
    InternalError,
    caused_by_interrupt,
    exit_code_for,
)

if TYPE_CHECKING:  # for the signatures only: the commands import what they run
    from pathlib import Path

    from elfpatch.analysis.check import CheckResult
    from elfpatch.plan.bindings import FixOptions


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
        kind = "internal error" if isinstance(error, InternalError) else "error"
        _echo(f"elfpatch: {kind}: {error.one_line()}", err=True)


def _emit_json(document: dict[str, Any]) -> None:
    """Every JSON document goes out here: valid UTF-8, on one line.

    Names and paths keep stray bytes as surrogates; they are written as
    ``\\xNN`` text.  One line: indenting switches json to its pure-Python
    encoder, which took 0.3 s for a torch wheel's report (``jq .`` pretty-prints it).
    """
    from elfpatch.report.scan_json import printable_document

    _echo(json.dumps(printable_document(document), ensure_ascii=False))


class ElfpatchGroup(click.Group):
    """Turns ElfpatchError into one line on stderr and exit code 2, a bug into exit code 3."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ElfpatchError as error:
            if ctx.obj and ctx.obj.get("traceback"):
                raise
            _emit_errors([error])
            ctx.exit(exit_code_for([error]) or ExitCode.BAD_INPUT)
        except KeyboardInterrupt:
            # Commands that write catch this themselves and say what was written.
            _exit_interrupted(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except Exception as error:  # a bug: one line, and the traceback on request
            if caused_by_interrupt(error):
                _exit_interrupted(ctx)
            if ctx.obj and ctx.obj.get("traceback"):
                raise
            _echo(f"elfpatch: internal error: {type(error).__name__}: {error} "
                       "(rerun with --traceback and report it)", err=True)
            ctx.exit(ExitCode.INTERNAL)


def _exit_interrupted(ctx: click.Context) -> NoReturn:
    _echo("elfpatch: interrupted", err=True)
    ctx.exit(ExitCode.INTERRUPTED)


@click.group(cls=ElfpatchGroup, epilog=EXIT_CODES_HELP)
@click.version_option(__version__, prog_name="elfpatch")
@click.option("--traceback", is_flag=True, help="Show the full traceback of unexpected errors.")
@click.pass_context
def main(ctx: click.Context, traceback: bool) -> None:
    """Find and fix STB_GNU_UNIQUE symbols and static-initializer hazards in ELF files."""
    ctx.obj = {"traceback": traceback}


HOST_HELP = ("The process that dlopens each library: python, c, c++ or a program's path "
             "(default: python for wheel members, c for loose files).")
NOW_HELP = ("The host dlopens with RTLD_NOW, as Python's import does (default: RTLD_LAZY): "
            "function slots are bound at load too.")


@main.command(epilog="Exit codes: 0 scanned (with or without findings); 2 usage error or a "
              "path that could not be read as ELF (the other paths are still scanned); 3 a bug "
              "of elfpatch.")
@click.argument("paths", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (schema version 1).")
@click.option("-v", "--verbose", is_flag=True, help="List every UNIQUE symbol, and every file "
              "without any.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr (shown only on a "
              "terminal).")
@click.option("--host", metavar="PROGRAM", help=HOST_HELP)
@click.option("--now", is_flag=True, help=NOW_HELP)
@click.option("--no-loader", is_flag=True,
              help="Skip the loader's load and unload verdict (faster on huge libraries).")
def scan(paths: tuple[str, ...], as_json: bool, verbose: bool, quiet: bool, host: str | None,
         now: bool, no_loader: bool) -> None:
    """Report STB_GNU_UNIQUE symbols and what they do at load time.

    PATHS are ELF files, folders (searched recursively) and wheels or zips.
    """
    from elfpatch import api
    from elfpatch.report.style import color_wanted, make_styler

    progress = _ProgressLine(enabled=not quiet and sys.stderr.isatty(), prefix="scan: ")
    try:
        outcome = api.scan(paths, host=host, now=now, loader=not no_loader, keep_going=True,
                           progress=progress)
    finally:
        progress.clear()
    if as_json:
        from elfpatch.report.scan_json import scan_document

        _emit_json(scan_document(list(outcome.files), list(outcome.errors)))
    else:
        from elfpatch.report.scan_text import render_scan

        style = make_styler(color_wanted())
        _echo(render_scan(list(outcome.files), list(outcome.errors), style, verbose), nl=False)
    _emit_errors(outcome.errors)
    sys.exit(exit_code_for(outcome.errors) or ExitCode.OK)


@main.command(epilog="Exit codes: 0 fixed (or nothing to fix); 1 refused by --strict (nothing "
              "written); 2 usage error or an input that could not be read or written (nothing "
              "is written when any input of the set cannot be read); 3 a bug of elfpatch; 130 "
              "interrupted (the report says what was written).")
@click.argument("paths", nargs=-1, required=True)
@click.option("-o", "--output", type=click.Path(), help="Write here (a file, or a folder "
              "mirroring the inputs) and leave the inputs untouched: an output that is an "
              "input, a device, pipe or socket, or a link to nothing is refused.")
@click.option("--in-place", is_flag=True, help="Replace each input by an atomic rename, "
              "once verified (a kill leaves it original or fixed). Other hard links of a "
              "file that are not given keep the original. Runs on one file take turns.")
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
              "runtime's template instantiations and the runtime functions "
              "libstdc++_nonshared.a copies in. Adds to hide = [...] of [tool.elfpatch].")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (version 1).")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr (shown only on a "
              "terminal, for -w).")
@click.option("-v", "--verbose", is_flag=True, help="List every symbol under its reason "
              "(as --dry-run does), not the summary.")
def fix(paths: tuple[str, ...], output: str | None, in_place: bool, wheel_dir: str | None,
        mode: str,
        only: str | None, exclude: str | None, dry_run: bool, strict: bool, force: bool,
        hide: tuple[str, ...], as_json: bool, quiet: bool, verbose: bool) -> None:
    """Rewrite STB_GNU_UNIQUE bindings so libraries unload and stay private.

    All PATHS (files, folders) are analysed as one set first: a UNIQUE symbol
    another library of the set references or also defines is made GLOBAL
    rather than LOCAL, so the set keeps loading and sharing what it shares.
    """
    from elfpatch import api
    from elfpatch.plan.bindings import FixOptions, fix_mode

    targets = sum(1 for given in (output, in_place or None, wheel_dir) if given)
    if targets > 1 or (targets == 0 and not dry_run):
        raise click.UsageError("give exactly one of -o/--output, --in-place and -w/--wheel-dir "
                               "(or --dry-run)")
    from elfpatch.service.policy_file import load_policy

    hide = (*load_policy(None).hide, *hide)
    # Checked: one line if wrong.
    options = FixOptions(fix_mode(mode), only, exclude, strict, force, hide)
    if wheel_dir is not None or all(p.endswith(".whl") for p in paths):
        _fix_wheels(paths, wheel_dir, options, dry_run, as_json, quiet, verbose)
    from elfpatch.service.fix import planned_destinations, run_clock

    _terminate_as_interrupt()
    started = run_clock()
    try:
        result = api.fix(paths, output=output, in_place=in_place, mode=mode, only=only,
                         exclude=exclude, strict=strict, force=force, dry_run=dry_run,
                         hide=hide, keep_going=True)
    except KeyboardInterrupt:
        _report_interruption_from_files(
            [] if dry_run else planned_destinations(paths, output), started)
    if as_json:
        from elfpatch.report.fix_json import fix_document

        render = lambda: _emit_json(fix_document(result, dry_run))  # noqa: E731
    else:
        from elfpatch.report.fix_text import render_fix
        from elfpatch.report.style import color_wanted, make_styler

        render = lambda: _echo(render_fix(result, make_styler(color_wanted()), dry_run,  # noqa: E731
                                          verbose), nl=False)
    _finish_fix(render, result.errors, result.interrupted, result.refused,
                lambda: [(o.destination, o.written) for o in result.outcomes])


def _finish_fix(render: Callable[[], None], errors: Sequence[ElfpatchError], interrupted: bool,
                refused: bool, outcomes: Callable[[], Sequence[tuple[str | None, bool]]]) -> None:
    """The report and the exit code of a fix whose result says what it wrote.

    An interrupt from here on does not cut the report short: it is noted,
    and the report ends with what was written and exit code 130.
    """
    with _interrupts_deferred() as late:
        render()
        _emit_errors(errors)
        if interrupted or late:
            _emit_interruption(outcomes())
            sys.exit(ExitCode.INTERRUPTED)
        if errors:
            sys.exit(exit_code_for(errors))
        sys.exit(ExitCode.FINDINGS if refused else ExitCode.OK)


def _terminate_as_interrupt() -> None:
    """SIGTERM (a CI job cancelled, ``kill``) is handled like Ctrl-C: the report says
    which files were written.  The previous handler comes back when the command ends
    (a program that runs the command line in-process keeps its own)."""
    import signal

    def interrupt(_signal: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    context = click.get_current_context(silent=True)
    if context is not None:
        context.call_on_close(lambda: signal.signal(signal.SIGTERM, previous))


class _LateInterrupts:
    """Ctrl-C and SIGTERM after the work is done: noted, so the report still comes out
    whole (and says it was interrupted), instead of cutting it off."""

    def __init__(self) -> None:
        self.seen = False

    def __call__(self, _signal: int, _frame: object) -> None:
        self.seen = True

    def __bool__(self) -> bool:
        return self.seen


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[_LateInterrupts]:
    """While the report is written; the previous handlers come back afterwards."""
    import signal

    late = _LateInterrupts()
    previous = {number: signal.signal(number, late) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield late
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _report_interruption_from_files(destinations: Sequence[str | Path], started: int) -> None:
    """An interrupt that cut the run short: what was written, read off the files, exit 130."""
    import signal

    from elfpatch.service.fix import written_since

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)  # the report is the last thing this run does
    found = written_since(destinations, started)
    if not any(written for _path, written in found):
        _echo("elfpatch: interrupted before anything was written", err=True)
    else:
        _emit_interruption(found)
    sys.exit(ExitCode.INTERRUPTED)


def _emit_interruption(outcomes: Sequence[tuple[str | None, bool]]) -> None:
    """After Ctrl-C: which outputs now hold the fix and which are as they were."""
    written = [destination for destination, done in outcomes if done]
    left = [destination for destination, done in outcomes if not done]
    _echo(f"elfpatch: interrupted: {len(written)} written, {len(left)} left as they were",
          err=True)
    for destination in written:
        _echo(f"  written: {destination}", err=True)
    for destination in left:
        _echo(f"  not written: {destination}", err=True)


def _fix_wheels(paths: tuple[str, ...], wheel_dir: str | None, options: FixOptions, dry_run: bool,
                as_json: bool, quiet: bool = False, verbose: bool = False) -> None:
    """``fix -w OUTDIR``: repaired wheels; every wheel is written, or none."""
    from elfpatch import api
    from elfpatch.service.fix import run_clock
    from elfpatch.service.wheel_fix import wheel_destination

    _terminate_as_interrupt()
    started = run_clock()
    progress = _ProgressLine(enabled=not quiet and sys.stderr.isatty())
    try:
        result = api.repair_wheels(paths, wheel_dir, mode=options.mode, only=options.only,
                                   exclude=options.exclude, strict=options.strict,
                                   force=options.force, dry_run=dry_run, hide=options.hide,
                                   keep_going=True, progress=progress)
    except KeyboardInterrupt:
        progress.clear()
        targets = [] if wheel_dir is None else [wheel_destination(p, wheel_dir) for p in paths]
        _report_interruption_from_files(targets, started)
    finally:
        progress.clear()
    if as_json:
        from elfpatch.report.fix_json import wheel_document

        render = lambda: _emit_json(wheel_document(result, options.mode, dry_run))  # noqa: E731
    else:
        from elfpatch.report.fix_text import render_wheels
        from elfpatch.report.style import color_wanted, make_styler

        render = lambda: _echo(render_wheels(result, make_styler(color_wanted()),  # noqa: E731
                                             dry_run, verbose), nl=False)
    _finish_fix(render, result.errors, result.interrupted, result.refused,
                lambda: [(w.destination or w.wheel, w.written) for w in result.wheels])


class _ProgressLine:
    """One line on stderr, rewritten in place as work goes on; nothing unless enabled.

    Cut to the width of the terminal stderr is on (not stdout's, which may be a
    pipe or a file), measured at each update so a resized window is followed.
    """

    def __init__(self, enabled: bool, prefix: str = "") -> None:
        self.enabled = enabled
        self.prefix = prefix
        self._shown = False

    def __call__(self, text: str) -> None:
        if not self.enabled:
            return
        import os

        try:
            columns = os.get_terminal_size(sys.stderr.fileno()).columns
        except (OSError, ValueError):
            columns = 0
        # A terminal that does not say its size (0 columns) is taken to be 80 wide.
        width = max(20, (columns or 80) - 1)
        text = self.prefix + text
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
              "could not be read; 3 a bug of elfpatch.")
@click.argument("paths", nargs=-1, required=True)
@click.option("--closure", is_flag=True, help="Follow DT_NEEDED as the loader does and list "
              "every object in the order its initializers run (one root PATH).")
@click.option("--sort-algorithm", type=click.Choice(["1", "2"]), default="2", show_default=True,
              help="glibc.rtld.dynamic_sort: 2 (default since glibc 2.35) or 1 (the old one).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (version 1).")
@click.option("-v", "--verbose", is_flag=True, help="List finalizers and every warning.")
@click.option("--list-only", is_flag=True, help="List the initializers without reading their "
              "machine code (fast; no risks).")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr (shown only on a "
              "terminal).")
def inits(paths: tuple[str, ...], closure: bool, sort_algorithm: str, as_json: bool,
          verbose: bool, list_only: bool, quiet: bool) -> None:
    """Static initializers in run order, their translation units, and init-order risks."""
    from elfpatch import api

    progress = _ProgressLine(enabled=not quiet and sys.stderr.isatty(), prefix="inits: ")
    try:
        result = api.inits(paths, closure=closure, sort_algorithm=int(sort_algorithm),
                           follow_code=not list_only, keep_going=True, progress=progress)
    finally:
        progress.clear()
    if as_json:
        from elfpatch.report.inits_json import inits_document

        _emit_json(inits_document(result))
    else:
        from elfpatch.report.inits_text import render_inits
        from elfpatch.report.style import color_wanted, make_styler

        _echo(render_inits(result, make_styler(color_wanted()), verbose), nl=False)
    _emit_errors(result.errors)
    sys.exit(exit_code_for(result.errors) or ExitCode.OK)


@main.command(epilog="Exit codes: 0 the story was told; 2 no C++ compiler or a build failed; "
              "3 a bug of elfpatch.")
def demo() -> None:
    """Build two plugins with g++, show the UNIQUE bugs, fix them, show them gone."""
    from elfpatch.fixtures.demo import run_demo

    run_demo(click.echo)


# What check renders: to stdout with --format, into files with --output FORMAT=FILE.
CHECK_FORMATS = ("text", "json", "github", "junit", "sarif", "markdown")


@main.command(epilog="Exit codes: 0 the policy passed (--update-baseline: the findings were "
              "recorded); 1 the policy was violated (--update-baseline: by what a baseline "
              "cannot hold, a UNIQUE clash between packages); 2 usage error or an input that "
              "could not be read (nothing is recorded then); 3 a bug of elfpatch.")
@click.argument("paths", nargs=-1)
@click.option("--config", type=click.Path(), help="Policy file (TOML with [tool.elfpatch]); "
              "default: the nearest pyproject.toml.")
@click.option("--format", "output_format", type=click.Choice(CHECK_FORMATS), default="text",
              show_default=True, help="What goes to stdout; sarif: SARIF 2.1.0, for GitHub "
              "code scanning; markdown: a summary for a CI job's page.")
@click.option("--output", "outputs", multiple=True, metavar="FORMAT=FILE",
              help="Also write this format to FILE, from the same analysis (repeatable: "
              "--output sarif=elfpatch.sarif --output junit=elfpatch.xml).")
@click.option("-v", "--verbose", is_flag=True, help="Text: every library and finding, not the "
              "summary.")
@click.option("--baseline", type=click.Path(), help="Known findings (JSON) that do not fail.")
@click.option("--update-baseline", is_flag=True, help="Write the current error findings to "
              "--baseline (created if missing); they no longer fail this run or later ones.")
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
@click.option("--host", metavar="PROGRAM", help=HOST_HELP + " Used by the cannot-load and "
              "stays-loaded rules.")
@click.option("--now", is_flag=True, help=NOW_HELP)
def check(paths: tuple[str, ...], config: str | None, output_format: str,
          outputs: tuple[str, ...], verbose: bool, baseline: str | None,
          update_baseline: bool, jobs: int | None, environment: bool, python: str | None,
          quiet: bool, host: str | None, now: bool) -> None:
    """The CI gate: analyse wheels, folders and libraries and apply the policy."""
    import os

    from elfpatch import api
    from elfpatch.service.check import baseline_keys

    extra_outputs = _parse_outputs(outputs)
    sarif = "sarif" in (output_format, *(chosen for chosen, _file in extra_outputs))
    progress = _ProgressLine(enabled=not quiet and sys.stderr.isatty())
    try:
        result = api.check(paths, config=config, baseline=baseline,
                           update_baseline=update_baseline, environment=environment,
                           python=python, jobs=jobs or min(8, os.cpu_count() or 1),
                           source_locations=sarif, progress=progress, keep_going=True,
                           host=host, now=now)
    finally:
        progress.clear()
    _write_check_outputs(result, extra_outputs, verbose)
    _render_check(result, output_format, verbose)
    _emit_errors(result.errors)
    if result.errors:
        sys.exit(exit_code_for(result.errors))
    if update_baseline:
        _echo(f"elfpatch: recorded {len(baseline_keys(result))} error findings in {baseline}; "
              f"later runs with --baseline {baseline} fail only on new ones", err=True)
    sys.exit(ExitCode.OK if result.passed else ExitCode.FINDINGS)


def _render_check(result: CheckResult, output_format: str, verbose: bool) -> None:
    if output_format in ("json", "sarif"):
        _emit_json(_check_json(result, output_format))
    else:
        _echo(_check_text(result, output_format, verbose, color=None), nl=False)


def _check_json(result: CheckResult, output_format: str) -> dict[str, Any]:
    from elfpatch.report import check_report

    if output_format == "sarif":
        from elfpatch.report.check_sarif import render_sarif

        return render_sarif(result, __version__)
    return check_report.render_json(result)


def _check_text(result: CheckResult, output_format: str, verbose: bool, color: bool | None) -> str:
    """A text format; ``color=None``: as the terminal and NO_COLOR say."""
    from elfpatch.report import check_report

    if output_format == "github":
        return check_report.render_github(result)
    if output_format == "junit":
        return check_report.render_junit(result)
    if output_format == "markdown":
        from elfpatch.report.check_markdown import render_markdown

        return render_markdown(result)
    from elfpatch.report.style import color_wanted, make_styler

    wanted = color_wanted() if color is None else color
    return check_report.render_text(result, make_styler(wanted), verbose)


def _parse_outputs(given: tuple[str, ...]) -> list[tuple[str, str]]:
    """``--output FORMAT=FILE`` values, checked before any analysis runs."""
    outputs = []
    for value in given:
        output_format, equals, file = value.partition("=")
        if not equals or not file or output_format not in CHECK_FORMATS:
            raise click.BadParameter(f"{value!r}: expected FORMAT=FILE with FORMAT one of "
                                     f"{', '.join(CHECK_FORMATS)}", param_hint="--output")
        outputs.append((output_format, file))
    files = [file for _format, file in outputs]
    if len(set(files)) < len(files):
        raise click.BadParameter("two outputs name the same file", param_hint="--output")
    return outputs


def _write_check_outputs(result: CheckResult, outputs: list[tuple[str, str]],
                         verbose: bool) -> None:
    """Each extra report into its file, from the one analysis (text without colour)."""
    from elfpatch.base.regular_file import write_regular_text
    from elfpatch.errors import InputError
    from elfpatch.report.scan_json import printable_document

    for output_format, file in outputs:
        if output_format in ("json", "sarif"):
            document = printable_document(_check_json(result, output_format))
            text = json.dumps(document, ensure_ascii=False) + "\n"
        else:
            from elfpatch.elf.file import printable

            text = printable(_check_text(result, output_format, verbose, color=False))
        try:
            write_regular_text(file, text)
        except OSError as error:
            raise InputError(file, f"cannot write the report: {error.strerror or error}") \
                from None
