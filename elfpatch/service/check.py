"""Running ``check``: every input opened and analysed (in worker processes), the baseline file.

What a library's findings are, and whether the check passes, is decided in
``analysis.check``; this module gets the facts it judges.  Each library is
analysed in a forked worker of a process pool (``parallel.worker_pool``;
the largest first), one library's failure is one error among the results,
and the baseline is a JSON file of finding keys.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from concurrent.futures import as_completed
from dataclasses import replace

from elfpatch.analysis.check import (
    CheckResult,
    LibraryFacts,
    facts_of,
    find_clashes,
    judge,
    package_of_source,
)
from elfpatch.analysis.policy import Level, Policy
from elfpatch.base.regular_file import read_regular_text, write_regular_text
from elfpatch.elf.source import ElfSource, open_source
from elfpatch.errors import PARSE_FAILURES, ElfpatchError, InputError, malformed
from elfpatch.loader.dlopen import LoadHost
from elfpatch.service.failures import failures_judged
from elfpatch.service.inputs import split_sources
from elfpatch.service.load import with_load_verdicts
from elfpatch.service.parallel import cycles_uncollected, run_alongside, worker_pool

# Told what is being analysed, for a progress line.
Progress = Callable[[str], None]


def run_check(paths: Iterable[str], policy: Policy, baseline: set[str], jobs: int = 1,
              need_effects: bool = True, progress: Progress | None = None,
              need_sources: bool = False, host: LoadHost | None = None,
              now: bool = False) -> CheckResult:
    """``need_sources``: also find where UNIQUE definitions are declared (DWARF; for SARIF);
    ``host`` and ``now``: the process and dlopen mode of the loader's verdicts."""
    sources, errors = split_sources(paths)
    need_effects = need_effects and (policy.exit_time_destructors is not Level.IGNORE
                                     or policy.init_order is not Level.IGNORE
                                     or policy.destruction_order is not Level.IGNORE)
    facts = gather_all(sources, need_effects, jobs, errors, progress, need_sources)
    if policy.asks_the_loader:
        facts = _with_load_verdicts(facts, errors, host, now)
    packages = {package_of_source(s) for s in sources if s.member is not None}
    clashes = find_clashes(facts, {s.path: package_of_source(s) for s in sources}) \
        if len(packages) > 1 else []
    return CheckResult(policy, tuple(judge(f, policy, baseline) for f in facts),
                       tuple(clashes), tuple(errors))


def _with_load_verdicts(facts: list[LibraryFacts], errors: list[ElfpatchError],
                        host: LoadHost | None, now: bool) -> list[LibraryFacts]:
    scans = with_load_verdicts([f.scan for f in facts], host, errors=errors, now=now)
    return [replace(f, scan=scan) for f, scan in zip(facts, scans, strict=True)]


def gather_all(sources: list[ElfSource], need_effects: bool, jobs: int,
               errors: list[ElfpatchError], progress: Progress | None = None,
               need_sources: bool = False) -> list[LibraryFacts]:
    """Each source's facts, in ``jobs`` processes; ``progress`` hears of each one done."""
    tell = progress or (lambda _text: None)
    total = len(sources)
    pool = worker_pool(jobs) if total > 2 else None
    if pool is None:
        outcomes = []
        for number, source in enumerate(sources, 1):
            tell(f"check: {number}/{total} {source.member or source.path}")
            outcomes.append(_guarded(source, need_effects, need_sources))
    else:
        # Largest first, so one huge library does not start last and finish alone.
        order = sorted(range(total), key=lambda i: -sources[i].size)
        try:
            futures = {i: pool.submit(_guarded, sources[i], need_effects, need_sources)
                       for i in order}
            done = {future: i for i, future in futures.items()}
            for number, future in enumerate(as_completed(done), 1):
                finished = sources[done[future]]
                tell(f"check: {number}/{total} done, last {finished.member or finished.path}")
            outcomes = [futures[i].result() for i in range(total)]
        finally:
            # Every result is in: the workers' teardown (freeing a big library's
            # memory) overlaps with judging and rendering instead of delaying them.
            pool.shutdown(wait=False, cancel_futures=True)
    facts = []
    for outcome in outcomes:
        if isinstance(outcome, ElfpatchError):
            errors.append(outcome)
        else:
            facts.append(outcome)
    return facts


def _guarded(source: ElfSource, need_effects: bool,
             need_sources: bool = False) -> LibraryFacts | ElfpatchError:
    try:
        return gather_facts(source, need_effects, need_sources)
    except ElfpatchError as error:
        return error
    except PARSE_FAILURES as error:  # opening it: an archive member that does not inflate
        return malformed(source.label, error)


def gather_facts(source: ElfSource, need_effects: bool,
                 need_sources: bool = False) -> LibraryFacts:
    """Analyse one library (run in a worker process with -j); an unexpected failure is
    raised as its error, the input's or elfpatch's (``failures.failure_of``)."""
    with open_source(source) as elf, cycles_uncollected(), failures_judged(source.label, elf):
        return facts_of(elf, source, need_effects, run_alongside, need_sources)


# Version 2: keys of loose files are relative to the folder given, unnamed subjects
# are named by where they are, and repeated keys are numbered. Version 1 keys could be
# shared by two findings, so such a file is re-recorded rather than trusted.
BASELINE_VERSION = 2


def read_baseline(path: str | None) -> set[str]:
    """The finding keys of a baseline file; none when no ``--baseline`` was given.

    A baseline that is missing is an error rather than an empty baseline:
    a mistyped path must not quietly turn every known finding into a failure
    (or hide that the file was never written).
    """
    if path is None:
        return set()
    try:
        document = json.loads(read_regular_text(path))
        version, keys = document["version"], document["findings"]
    except FileNotFoundError:
        raise InputError(path, "no such baseline file",
                         hint="create it with --update-baseline") from None
    except OSError as error:
        raise InputError(path, f"cannot read the baseline: {error.strerror or error}") from None
    except (ValueError, KeyError, TypeError) as error:
        raise InputError(path, f"not an elfpatch baseline ({error})",
                         hint="write one with --update-baseline") from None
    if version != BASELINE_VERSION:
        raise InputError(path, f"a baseline of version {version!r}; this elfpatch reads "
                         f"version {BASELINE_VERSION}",
                         hint="record it again with --update-baseline")
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        raise InputError(path, "not an elfpatch baseline (findings must be a list of keys)",
                         hint="write one with --update-baseline")
    return set(keys)


def write_baseline(path: str, result: CheckResult) -> int:
    """Write the error findings' keys to ``path``, creating it if needed; how many."""
    keys = baseline_keys(result)
    document = {"version": BASELINE_VERSION, "findings": keys}
    try:
        write_regular_text(path, json.dumps(document, indent=2) + "\n")
    except OSError as error:
        raise InputError(path, f"cannot write the baseline: {error.strerror or error}") from None
    return len(keys)


def baseline_keys(result: CheckResult) -> list[str]:
    """What a baseline of this result holds: the keys of its error findings."""
    return sorted({f.key for f in result.findings if f.level is Level.ERROR})


def as_baselined(result: CheckResult, keys: Iterable[str]) -> CheckResult:
    """The result judged against a baseline of ``keys`` (what was just recorded)."""
    known = set(keys)
    libraries = tuple(replace(library, findings=tuple(
        replace(finding, baselined=finding.baselined or finding.key in known)
        for finding in library.findings)) for library in result.libraries)
    return replace(result, libraries=libraries)
