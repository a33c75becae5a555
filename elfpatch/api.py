"""elfpatch as a library: the four commands as functions that return data.

Build backends, repair tools and notebooks call these instead of the
command line, and the command line is built on them.  Each takes a path or
an iterable of paths (``str`` or ``os.PathLike``), keeps no state between
calls, and returns the frozen result the command line renders.

Every problem with an input or an option is an ``ElfpatchError`` (``.path``,
``.reason``, ``.hint``).  By default the first one is raised; with
``keep_going=True`` the call goes on past unreadable inputs and returns
them in the result's ``errors`` (``fix`` still writes nothing then).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ParamSpec, TypeAlias, TypeVar

from elfpatch.errors import ElfpatchError, UsageError

if TYPE_CHECKING:
    from elfpatch.analysis.check import CheckResult
    from elfpatch.analysis.init_order import InitsResult
    from elfpatch.analysis.policy import Policy
    from elfpatch.analysis.unique import FileScan
    from elfpatch.loader.dlopen import LoadHost
    from elfpatch.loader.host import HostProfile
    from elfpatch.plan.bindings import FixMode
    from elfpatch.service.fix import FixResult
    from elfpatch.service.wheel_fix import WheelsResult

PathLike: TypeAlias = "str | os.PathLike[str]"
Paths: TypeAlias = "PathLike | Iterable[PathLike]"


@dataclass(frozen=True)
class ScanReport:
    """``scan``: one record per ELF file or wheel member, and the inputs that failed."""

    files: tuple[FileScan, ...]
    errors: tuple[ElfpatchError, ...]


def path_list(paths: Paths) -> list[str]:
    """One path or many, as strings; a lone string is one path, never its characters."""
    if isinstance(paths, (str, os.PathLike)):
        given = [os.fspath(paths)]
    else:
        try:
            given = [os.fspath(path) for path in paths]
        except TypeError as error:
            raise UsageError("paths", f"expected a path or an iterable of paths ({error})") \
                from None
    if not given:
        raise UsageError("paths", "no paths given")
    return given


P = ParamSpec("P")
R = TypeVar("R")


def _leaves_nothing_open(call: Callable[P, R]) -> Callable[P, R]:
    """The wheels a call opened (and kept open while it read their members) are closed
    when it returns: no descriptor outlives the call, and no state lives between calls."""
    @functools.wraps(call)
    def closing(*args: P.args, **kwargs: P.kwargs) -> R:
        from elfpatch.elf.source import archives_kept_open

        with archives_kept_open():
            return call(*args, **kwargs)
    return closing


def _raise_first(errors: Sequence[ElfpatchError], keep_going: bool) -> None:
    if errors and not keep_going:
        raise errors[0]


# Told what is being analysed as the work goes on ("3/120 torch/lib/libc10.so").
Progress: TypeAlias = "Callable[[str], None]"


@_leaves_nothing_open
def scan(paths: Paths, *, host: LoadHost | str | None = None, now: bool = False,
         loader: bool = True, keep_going: bool = False,
         progress: Progress | None = None) -> ScanReport:
    """UNIQUE symbols of every ELF file, folder (recursively) and wheel under ``paths``;
    ``progress`` hears of each file as it is read.

    With ``loader`` (the default), each shared library of this machine's kind
    also gets ``load``: whether glibc loads it and whether dlclose then
    unloads it, with the blockers.  ``host`` is the process that loads it
    (``elfpatch.loader.dlopen.LoadHost``, or "python", "c", "c++" or a
    program's path); by default a wheel's members load in this Python
    interpreter and a loose file in a plain C program.  ``now``: the host
    dlopens with RTLD_NOW (as Python's import does) instead of RTLD_LAZY.
    """
    from elfpatch.service.runner import scan_paths

    chosen = _load_host(host)
    outcome = scan_paths(path_list(paths), progress)
    _raise_first(outcome.errors, keep_going)
    files, errors = outcome.results, list(outcome.errors)
    if loader:
        from elfpatch.service.load import with_load_verdicts

        files = with_load_verdicts(files, chosen, errors=errors, now=now)
        _raise_first(errors, keep_going)
    return ScanReport(tuple(files), tuple(errors))


def _load_host(host: LoadHost | str | None) -> LoadHost | None:
    if host is None or not isinstance(host, str):
        return host
    from elfpatch.loader.dlopen import LoadHost

    return LoadHost.named(host)


@_leaves_nothing_open
def fix(paths: Paths, *, output: PathLike | None = None, in_place: bool = False,
        mode: FixMode | str = "local", only: str | None = None, exclude: str | None = None,
        strict: bool = False, force: bool = False, dry_run: bool = False,
        hide: Sequence[str] = (), keep_going: bool = False) -> FixResult:
    """Rewrite the UNIQUE bindings of ``paths``, analysed as one set.

    Exactly one of ``output`` (a file, or a folder mirroring the inputs),
    ``in_place`` and ``dry_run``.  All files are written, or none.
    ``hide`` also makes the exports whose demangled name matches one of its
    regexes LOCAL (``"preset:cxx-instantiations"``: the C++ runtime's template
    instantiations and the runtime functions ``libstdc++_nonshared.a`` copies in),
    unless another library of the set references them.
    """
    from elfpatch.plan.bindings import FixOptions, fix_mode
    from elfpatch.service.fix import fix_paths

    targets = (output is not None) + in_place
    if targets > 1 or (targets == 0 and not dry_run):
        raise UsageError("fix", "give exactly one of output= and in_place=True (or dry_run=True)")
    options = FixOptions(fix_mode(mode), only, exclude, strict, force, tuple(hide))
    result = fix_paths(path_list(paths), options,
                       None if output is None else os.fspath(output), dry_run)
    _raise_first(result.errors, keep_going)
    return result


@_leaves_nothing_open
def repair_wheels(wheels: Paths, wheel_dir: PathLike | None = None, *,
                  mode: FixMode | str = "local", only: str | None = None,
                  exclude: str | None = None, strict: bool = False,
                  force: bool = False, dry_run: bool = False, hide: Sequence[str] = (),
                  keep_going: bool = False,
                  progress: Callable[[str], None] | None = None) -> WheelsResult:
    """``fix WHEEL -w wheel_dir``: each wheel's ELF members fixed as one set, RECORD rewritten.

    Every wheel is written into ``wheel_dir`` (a wheel with nothing to fix
    byte for byte), or none is; ``dry_run`` plans without a ``wheel_dir``.
    ``progress`` is called with a short line as each step starts.
    """
    from elfpatch.plan.bindings import FixOptions, fix_mode
    from elfpatch.service.wheel_fix import fix_wheels

    given = path_list(wheels)
    for wheel in given:
        if not wheel.endswith(".whl"):
            raise UsageError(wheel, "is not a wheel (*.whl): only wheels are repaired into a "
                             "wheel folder")
        if wheel_dir is None and not dry_run:
            raise UsageError(wheel, "a wheel is repaired into a new wheel in a folder",
                             hint="elfpatch fix WHEEL -w OUTDIR (wheel_dir= in the API)")
    options = FixOptions(fix_mode(mode), only, exclude, strict, force, tuple(hide))
    result = fix_wheels(given, None if wheel_dir is None else os.fspath(wheel_dir), options,
                        dry_run, progress)
    _raise_first(result.errors, keep_going)
    return result


@_leaves_nothing_open
def inits(paths: Paths, *, closure: bool = False, sort_algorithm: int = 2,
          follow_code: bool = True, host: HostProfile | None = None,
          keep_going: bool = False, progress: Progress | None = None) -> InitsResult:
    """Static initializers in run order and their risks; ``closure`` follows DT_NEEDED.

    ``follow_code=False`` lists the initializers without reading their machine
    code: fast, and no risks.  ``host`` describes the system the closure is
    resolved for (``elfpatch.loader.host.HostProfile``: glibc version, CPU,
    LD_LIBRARY_PATH, ld.so.cache); by default, this machine.
    """
    from elfpatch.service.inits import analyse_closure, analyse_paths

    given = path_list(paths)
    if sort_algorithm not in (1, 2):
        raise UsageError("sort_algorithm", f"{sort_algorithm!r} is not 1 or 2 "
                         "(glibc.rtld.dynamic_sort)")
    if closure:
        if len(given) != 1:
            raise UsageError("closure", "the closure takes exactly one root path")
        if given[0].lower().endswith((".whl", ".zip")):
            raise UsageError(given[0], "the closure starts from one ELF file, not a wheel",
                             hint="unpack the wheel and give the library or program to start "
                             "from (the loader resolves DT_NEEDED on disk)")
        result = analyse_closure(given[0], sort_algorithm, follow_code=follow_code, host=host,
                                 progress=progress)
    else:
        result = analyse_paths(given, follow_code=follow_code, progress=progress)
    _raise_first(result.errors, keep_going)
    return result


@_leaves_nothing_open
def check(paths: Paths = (), *, policy: Policy | None = None, config: PathLike | None = None,
          baseline: PathLike | None = None, update_baseline: bool = False,
          environment: bool = False, python: PathLike | None = None, jobs: int = 1,
          source_locations: bool = False, progress: Progress | None = None,
          keep_going: bool = False, host: LoadHost | str | None = None,
          now: bool = False) -> CheckResult:
    """The CI gate: findings, violations and clashes of ``paths`` under a policy.

    ``policy`` as given, else read from ``config`` (TOML with [tool.elfpatch]),
    else from the nearest pyproject.toml; ``baseline`` lists known findings,
    and with ``update_baseline`` today's error findings are written to it
    (they are then reported as in the baseline).  ``environment`` also checks
    the libraries installed for ``python`` (default: this interpreter) for
    UNIQUE clashes between distributions.  ``source_locations`` reads DWARF
    for where UNIQUE variables are declared (SARIF uses it).  ``host`` and
    ``now`` choose the process and dlopen mode of the ``cannot-load`` and
    ``stays-loaded`` rules, as in ``scan``.
    """
    from elfpatch.analysis.check import CheckResult
    from elfpatch.analysis.policy import as_policy
    from elfpatch.service.check import (
        as_baselined,
        baseline_keys,
        read_baseline,
        run_check,
        write_baseline,
    )
    from elfpatch.service.policy_file import load_policy

    given = _check_arguments(paths, policy, config, baseline, update_baseline, environment,
                             python, jobs)
    load_host = _load_host(host)
    chosen = as_policy(policy) if policy is not None else \
        load_policy(None if config is None else os.fspath(config))
    known = set() if update_baseline else \
        read_baseline(None if baseline is None else os.fspath(baseline))
    result = run_check(given, chosen, known, jobs, progress=progress,
                       need_sources=source_locations, host=load_host,
                       now=now) if given else CheckResult(chosen)
    if environment:
        from elfpatch.service.environment import add_environment

        result = add_environment(result, os.fspath(python or sys.executable), jobs)
    if update_baseline and baseline is not None and not result.errors:
        write_baseline(os.fspath(baseline), result)
        result = as_baselined(result, baseline_keys(result))
    _raise_first(result.errors, keep_going)
    return result


def _check_arguments(paths: Paths, policy: Policy | None, config: PathLike | None,
                     baseline: PathLike | None, update_baseline: bool, environment: bool,
                     python: PathLike | None, jobs: int) -> list[str]:
    """``check``'s arguments checked once, for the command line and Python alike."""
    if policy is not None and config is not None:
        raise UsageError("check", "give policy= or config=, not both")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise UsageError("jobs", f"{jobs!r} is not a positive number of processes")
    if update_baseline and baseline is None:
        raise UsageError("check", "--update-baseline needs --baseline FILE (baseline= in the "
                         "API)")
    if python is not None and not environment:
        raise UsageError("check", "--python names the interpreter for --environment (python= "
                         "goes with environment=True in the API)")
    given = paths if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not given and not environment:
        raise UsageError("check", "give PATHS, --environment, or both")
    return path_list(given) if given else []
