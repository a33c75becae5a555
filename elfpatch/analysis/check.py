"""``check``: the analyses of every library, judged by a policy, net of a baseline.

A finding has a stable key (library, rule, subject) so a baseline file can
list what a project already ships and the gate fails only on new findings.
Libraries in a wheel are identified by their member path, which does not
change from one version of the wheel to the next.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePath

from elfpatch.alongside import Alongside, in_turn
from elfpatch.analysis.unique import FileScan, scan_elf
from elfpatch.elf.file import ElfFile
from elfpatch.errors import ElfpatchError
from elfpatch.loader.dlopen import Blocker
from elfpatch.policy import Policy
from elfpatch.source import ElfSource

RULE_UNIQUE = "unique"
RULE_INITIALIZERS = "max-initializers"
RULE_EXIT_DESTRUCTOR = "exit-time-destructor"
RULE_INIT_ORDER = "init-order"
RULE_DESTRUCTION_ORDER = "destruction-order"
RULE_CANNOT_LOAD = "cannot-load"
RULE_STAYS_LOADED = "stays-loaded"


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


def facts_of(elf: ElfFile, source: ElfSource, need_effects: bool,
             alongside: Alongside = in_turn) -> LibraryFacts:
    """What the analyses find in one opened library; ``need_effects``: follow its code."""
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

        report, _ = analyse_object(elf, source.path, source.member, listing, alongside)
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
                *_effect_findings(facts, policy), *_load_findings(facts, policy)]
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


def _load_findings(facts: LibraryFacts, policy: Policy) -> list[Finding]:
    """What the loader model says: each reason it cannot load, or each blocker of dlclose."""
    verdict = facts.scan.load
    if verdict is None:
        return []
    if not verdict.loads:
        if policy.cannot_load == "ignore":
            return []
        return [Finding(facts.identity, RULE_CANNOT_LOAD, error.split(":", 1)[0],
                        f"dlopen in {verdict.host} fails: {error}", policy.cannot_load)
                for error in verdict.load_errors]
    if verdict.unloads or policy.stays_loaded == "ignore":
        return []
    return [Finding(facts.identity, RULE_STAYS_LOADED,
                    blocker.kind if blocker.via is None else f"{blocker.kind}:{blocker.via}",
                    _blocker_message(verdict.host, blocker), policy.stays_loaded)
            for blocker in verdict.certain_blockers]


def _blocker_message(host: str, blocker: Blocker) -> str:
    example = f" (e.g. {', '.join(blocker.symbols[:2])})" if blocker.symbols else ""
    return (f"stays loaded after dlclose in {host}: {blocker.detail}{example}; "
            f"cure: {blocker.cure}")


def distribution_key(name: str) -> str:
    """A distribution name normalised as packaging does (PEP 503): Foo_Bar and foo-bar are one."""
    return re.sub(r"[-_.]+", "-", name).lower()


def package_of_source(source: ElfSource) -> str:
    """The package a library belongs to: its wheel's distribution, or its own path.

    Two wheels of one distribution (for two Python versions, say) are one
    package: their libraries never load into one process together.
    """
    if source.member is not None and source.path.lower().endswith(".whl"):
        return distribution_key(PurePath(source.path).name.split("-", 1)[0])
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
