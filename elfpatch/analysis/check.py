"""``check``: the analyses of every library, judged by a policy, net of a baseline.

A finding has a stable key (library, rule, subject) so a baseline file can
list what a project already ships and the gate fails only on new findings.
Libraries in a wheel are identified by their member path, which does not
change from one version of the wheel to the next.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from elfpatch.analysis.unique import FileScan, scan_elf
from elfpatch.elf.file import ElfFile
from elfpatch.errors import ElfpatchError, InputError
from elfpatch.inputs import ElfSource, open_source, split_sources
from elfpatch.policy import Policy
from elfpatch.regular_file import read_regular_text, write_regular_text

# Told what is being analysed, for a progress line.
Progress = Callable[[str], None]

RULE_UNIQUE = "unique"
RULE_INITIALIZERS = "max-initializers"
RULE_EXIT_DESTRUCTOR = "exit-time-destructor"
RULE_INIT_ORDER = "init-order"
RULE_DESTRUCTION_ORDER = "destruction-order"


@dataclass(frozen=True)
class Finding:
    library: str  # the library's identity (archive member, or path as given)
    rule: str
    subject: str  # the symbol, object or count the finding is about
    message: str
    level: str  # "error" or "warn" (after the policy)
    baselined: bool = False

    @property
    def key(self) -> str:
        return f"{self.library}|{self.rule}|{self.subject}"

    @property
    def violation(self) -> bool:
        return self.level == "error" and not self.baselined


@dataclass(frozen=True)
class LibraryFacts:
    """What the analyses found in one library, before any policy."""

    source: ElfSource
    scan: FileScan
    initializers: int  # user initializers (the C runtime's own excluded)
    exit_destructors: tuple[tuple[str, str, bool], ...]  # (object, message, read at exit)
    init_order_errors: tuple[tuple[str, str, str], ...]  # (reader, object, message)
    destruction_order_errors: tuple[tuple[str, str, str], ...] = ()  # (destructor, object, …)

    @property
    def identity(self) -> str:
        return self.source.member or self.source.path


@dataclass(frozen=True)
class LibraryCheck:
    facts: LibraryFacts
    findings: tuple[Finding, ...]


@dataclass(frozen=True)
class Clash:
    """One UNIQUE symbol defined by libraries of different packages."""

    symbol: str
    demangled: str
    defined_by: tuple[tuple[str, str], ...]  # (package, library)


@dataclass(frozen=True)
class CheckResult:
    policy: Policy
    libraries: tuple[LibraryCheck, ...] = ()
    clashes: tuple[Clash, ...] = ()
    errors: tuple[ElfpatchError, ...] = ()

    @property
    def findings(self) -> list[Finding]:
        return [f for lib in self.libraries for f in lib.findings]

    @property
    def violations(self) -> list[Finding]:
        return [f for f in self.findings if f.violation]

    @property
    def clashes_fail(self) -> bool:
        """Whether a UNIQUE clash between packages fails the check (as UNIQUE errors do)."""
        return self.policy.unique == "error"

    @property
    def passed(self) -> bool:
        failing_clashes = bool(self.clashes) and self.clashes_fail
        return not self.violations and not self.errors and not failing_clashes


def gather_facts(source: ElfSource, need_effects: bool) -> LibraryFacts:
    """Analyse one library (run in a worker process with -j)."""
    with open_source(source) as elf:
        return facts_of(elf, source, need_effects)


def facts_of(elf: ElfFile, source: ElfSource, need_effects: bool) -> LibraryFacts:
    from elfpatch.analysis.initializers import list_initializers

    scan = scan_elf(elf, source.path, source.member)
    listing = list_initializers(elf, source.path, source.member)
    count = sum(1 for e in listing.initializers if not e.is_runtime)
    destructors: list[tuple[str, str, bool]] = []
    order_errors: list[tuple[str, str, str]] = []
    destruction_errors: list[tuple[str, str, str]] = []
    if need_effects and count:
        from elfpatch.analysis.init_order import analyse_object
        from elfpatch.analysis.risks import (
            KIND_DESTRUCTION_ORDER,
            KIND_EXIT_DESTRUCTOR,
            SEVERITY_ERROR,
        )

        report, _ = analyse_object(elf, source.path, source.member, listing)
        for risk in report.risks:
            if risk.kind == KIND_EXIT_DESTRUCTOR:
                destructors.append((risk.object, risk.message, bool(risk.read_at_exit)))
            elif risk.kind == KIND_DESTRUCTION_ORDER:
                destruction_errors.append((risk.reader, risk.object, risk.message))
            elif risk.severity == SEVERITY_ERROR:
                order_errors.append((risk.reader, risk.object, risk.message))
    return LibraryFacts(source, scan, count, tuple(destructors), tuple(order_errors),
                        tuple(destruction_errors))


def judge(facts: LibraryFacts, policy: Policy, baseline: set[str]) -> LibraryCheck:
    findings = [*_unique_findings(facts, policy), *_budget_findings(facts, policy),
                *_effect_findings(facts, policy)]
    marked = tuple(Finding(f.library, f.rule, f.subject, f.message, f.level, f.key in baseline)
                   for f in findings)
    return LibraryCheck(facts, marked)


def _unique_findings(facts: LibraryFacts, policy: Policy) -> list[Finding]:
    if policy.unique == "ignore":
        return []
    return [Finding(facts.identity, RULE_UNIQUE, symbol.name,
                    f"STB_GNU_UNIQUE {symbol.kind.replace('_', ' ')}: {symbol.demangled}",
                    policy.unique)
            for symbol in facts.scan.dynamic_unique_definitions
            if not policy.allowed(symbol.name, symbol.demangled)]


def _budget_findings(facts: LibraryFacts, policy: Policy) -> list[Finding]:
    budget = policy.initializer_budget(facts.identity)
    if budget is None or facts.initializers <= budget:
        return []
    return [Finding(facts.identity, RULE_INITIALIZERS, str(budget),
                    f"{facts.initializers} static initializers, over the budget of {budget}",
                    "error")]


def _effect_findings(facts: LibraryFacts, policy: Policy) -> list[Finding]:
    findings = []
    if policy.exit_time_destructors != "ignore":
        # "read-at-exit": only the objects a destructor, atexit function or thread reads.
        every = policy.exit_time_destructors_scope == "all"
        findings += [Finding(facts.identity, RULE_EXIT_DESTRUCTOR, obj, message,
                             policy.exit_time_destructors)
                     for obj, message, read in facts.exit_destructors if every or read]
    if policy.init_order != "ignore":
        findings += [Finding(facts.identity, RULE_INIT_ORDER, f"{reader}->{obj}", message,
                             policy.init_order)
                     for reader, obj, message in facts.init_order_errors]
    if policy.destruction_order != "ignore":
        findings += [Finding(facts.identity, RULE_DESTRUCTION_ORDER, f"{reader}->{obj}", message,
                             policy.destruction_order)
                     for reader, obj, message in facts.destruction_order_errors]
    return findings


def distribution_key(name: str) -> str:
    """A distribution name normalised as packaging does (PEP 503): Foo_Bar and foo-bar are one."""
    return re.sub(r"[-_.]+", "-", name).lower()


def package_of_source(source: ElfSource) -> str:
    """The package a library belongs to: its wheel's distribution, or its own path.

    Two wheels of one distribution (for two Python versions, say) are one
    package: their libraries never load into one process together.
    """
    if source.member is not None and source.path.lower().endswith(".whl"):
        return distribution_key(Path(source.path).name.split("-", 1)[0])
    return source.path


def find_clashes(facts: Iterable[LibraryFacts], package_of: dict[str, str]) -> list[Clash]:
    """UNIQUE symbols defined by libraries that belong to different packages."""
    definers: dict[str, list[tuple[str, str]]] = defaultdict(list)
    names: dict[str, str] = {}
    for fact in facts:
        package = package_of.get(fact.source.path, fact.source.path)
        for symbol in fact.scan.dynamic_unique_definitions:
            definers[symbol.name].append((package, fact.identity))
            names[symbol.name] = symbol.demangled
    return [Clash(name, names[name], tuple(sorted(set(where))))
            for name, where in sorted(definers.items())
            if len({package for package, _ in where}) > 1]


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
        return {str(key) for key in document["findings"]}
    except FileNotFoundError:
        raise InputError(path, "no such baseline file",
                         hint="create it with --update-baseline") from None
    except OSError as error:
        raise InputError(path, f"cannot read the baseline: {error.strerror or error}") from None
    except (ValueError, KeyError, TypeError) as error:
        raise InputError(path, f"not an elfpatch baseline ({error})",
                         hint="write one with --update-baseline") from None


def write_baseline(path: str, result: CheckResult) -> int:
    """Write the error findings' keys to ``path``, creating it if needed; how many."""
    keys = sorted({f.key for f in result.findings if f.level == "error"})
    try:
        write_regular_text(path, json.dumps({"version": 1, "findings": keys}, indent=2) + "\n")
    except OSError as error:
        raise InputError(path, f"cannot write the baseline: {error.strerror or error}") from None
    return len(keys)


def run_check(paths: Iterable[str], policy: Policy, baseline: set[str], jobs: int = 1,
              need_effects: bool = True, progress: Progress | None = None) -> CheckResult:
    sources, errors = split_sources(paths)
    need_effects = need_effects and (policy.exit_time_destructors != "ignore"
                                     or policy.init_order != "ignore"
                                     or policy.destruction_order != "ignore")
    facts = gather_all(sources, need_effects, jobs, errors, progress)
    packages = {package_of_source(s) for s in sources if s.member is not None}
    clashes = find_clashes(facts, {s.path: package_of_source(s) for s in sources}) \
        if len(packages) > 1 else []
    return CheckResult(policy, tuple(judge(f, policy, baseline) for f in facts),
                       tuple(clashes), tuple(errors))


def gather_all(sources: list[ElfSource], need_effects: bool, jobs: int,
               errors: list[ElfpatchError], progress: Progress | None = None,
               ) -> list[LibraryFacts]:
    """Each source's facts, in ``jobs`` processes; ``progress`` hears of each one done."""
    tell = progress or (lambda _text: None)
    total = len(sources)
    if jobs <= 1 or total <= 2:
        outcomes = []
        for number, source in enumerate(sources, 1):
            tell(f"check: {number}/{total} {source.member or source.path}")
            outcomes.append(_guarded(source, need_effects))
    else:
        # Largest first, so one huge library does not start last and finish alone.
        order = sorted(range(total), key=lambda i: -sources[i].size)
        pool = ProcessPoolExecutor(max_workers=jobs)
        try:
            futures = {i: pool.submit(_guarded, sources[i], need_effects) for i in order}
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


def _guarded(source: ElfSource, need_effects: bool) -> LibraryFacts | ElfpatchError:
    from elfpatch.errors import PARSE_FAILURES, malformed

    try:
        return gather_facts(source, need_effects)
    except ElfpatchError as error:
        return error
    except PARSE_FAILURES as error:
        return malformed(source.label, error)
