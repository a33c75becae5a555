"""``check``: the analyses of every library, judged by a policy, net of a baseline.

A finding has a key (library, rule, subject) so a baseline file can list
what a project already ships and the gate fails only on new findings.  The
key is the same on every machine and in every folder: a library is named by
its member path in a wheel, its path below the folder given, or its file
name; a subject without a name of its own by what identifies it (an
initializer by its array and index and translation unit, an object by its
address).  No two findings of a run share a key: a repeated one is numbered.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import PurePath
from typing import TYPE_CHECKING

from elfpatch.analysis.policy import DestructorScope, Level, Policy
from elfpatch.analysis.unique import FileScan, scan_elf
from elfpatch.base.alongside import Alongside, in_turn
from elfpatch.base.text_enum import TextEnum
from elfpatch.elf.file import ElfFile
from elfpatch.elf.source import ElfSource
from elfpatch.errors import ElfpatchError
from elfpatch.loader.dlopen import Blocker

if TYPE_CHECKING:
    from elfpatch.analysis.initializers import InitializerEntry
    from elfpatch.analysis.risks import Risk


class CheckRule(TextEnum):
    """A rule of the policy; the value names it in reports, baseline keys and SARIF."""

    UNIQUE = "unique"
    INITIALIZERS = "max-initializers"
    EXIT_DESTRUCTOR = "exit-time-destructor"
    INIT_ORDER = "init-order"
    DESTRUCTION_ORDER = "destruction-order"
    CANNOT_LOAD = "cannot-load"
    STAYS_LOADED = "stays-loaded"


# The names the reports and tests import.


@dataclass(frozen=True)
class Finding:
    library: str  # the library's identity (archive member, or path as given)
    rule: CheckRule
    subject: str  # the symbol, object or count the finding is about
    message: str
    level: Level  # ERROR or WARN (after the policy)
    baselined: bool = False
    # The baseline key, one per finding (``judge`` sets it); by default made of the above.
    key: str = ""

    def __post_init__(self) -> None:
        # Made from the enums or their values ("error"): stored as the enums.
        object.__setattr__(self, "rule", CheckRule(self.rule))
        object.__setattr__(self, "level", Level(self.level))
        if not self.key:
            object.__setattr__(self, "key", f"{self.library}|{self.rule}|{self.subject}")

    @property
    def violation(self) -> bool:
        return self.level is Level.ERROR and not self.baselined


@dataclass(frozen=True)
class LibraryFacts:
    """What the analyses found in one library, before any policy."""

    source: ElfSource
    scan: FileScan
    initializers: int  # user initializers (the C runtime's own excluded)
    exit_destructors: tuple[tuple[str, str, bool], ...]  # (object, message, read at exit)
    init_order_errors: tuple[tuple[str, str, str], ...]  # (reader, object, message)
    destruction_order_errors: tuple[tuple[str, str, str], ...] = ()  # (destructor, object, …)
    # Where UNIQUE definitions are declared in the source, from DWARF, when asked for
    # and present: (symbol, file, line).
    declared_at: tuple[tuple[str, str, int], ...] = ()

    @property
    def identity(self) -> str:
        return self.source.member or self.source.path

    @property
    def baseline_name(self) -> str:
        """The library in baseline keys: its member path, its path below the folder given,
        or its file name; never where the build happened to be."""
        source = self.source
        if source.member is not None:
            return source.member
        if source.root is not None:
            relative = PurePath(source.path).relative_to(source.root) \
                if PurePath(source.path).is_relative_to(source.root) else None
            if relative is not None:
                return relative.as_posix()
        return PurePath(source.path).name


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
        return self.policy.unique is Level.ERROR

    @property
    def passed(self) -> bool:
        failing_clashes = bool(self.clashes) and self.clashes_fail
        return not self.violations and not self.errors and not failing_clashes


def facts_of(elf: ElfFile, source: ElfSource, need_effects: bool,
             alongside: Alongside = in_turn, need_sources: bool = False) -> LibraryFacts:
    """What the analyses find in one opened library; ``need_effects``: follow its code;
    ``need_sources``: find where its UNIQUE definitions are declared (DWARF)."""
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
            RiskKind,
            Severity,
        )

        report, _ = analyse_object(elf, source.path, source.member, listing, alongside)
        names = _initializer_names(listing.initializers)
        registered: list[tuple[Risk, str]] = []
        for risk in report.risks:
            reader = _reader_name(risk, names)
            if risk.kind == RiskKind.EXIT_DESTRUCTOR:
                registered.append((risk, reader))
            elif risk.severity != Severity.ERROR:
                continue  # a link-order dependence, a read only assumed: not a failure
            elif risk.kind == RiskKind.DESTRUCTION_ORDER:
                destruction_errors.append((reader, risk.object, risk.message))
            else:
                order_errors.append((reader, risk.object, risk.message))
        destructors = _destructor_subjects(registered)
    declared = _declarations(elf, scan) if need_sources else ()
    return LibraryFacts(source, scan, count, tuple(destructors), tuple(order_errors),
                        tuple(destruction_errors), declared)


def _declarations(elf: ElfFile, scan: FileScan) -> tuple[tuple[str, str, int], ...]:
    from elfpatch.analysis.dwarf_variables import variable_declarations
    from elfpatch.elf.symbols import read_dynsym

    definitions = scan.dynamic_unique_definitions
    table = read_dynsym(elf) if definitions else None
    if table is None:
        return ()
    values = table.values
    wanted = {(symbol.type == "TLS", values[symbol.index]): symbol.name
              for symbol in definitions}
    found = variable_declarations(elf, wanted)
    return tuple((name, file, line) for name, (file, line) in sorted(found.items()))


# What the effects analysis calls an object it found no symbol for.
UNNAMED_OBJECT = "an object"


def _initializer_names(entries: Iterable[InitializerEntry]) -> dict[str, str]:
    """Each initializer's label in risks, and its name in keys: its symbol, or (without
    one) its array, index and translation unit's file name, never its address."""
    names = {}
    for entry in entries:
        if entry.symbol:
            names[entry.symbol] = entry.symbol
            continue
        unit = f" of {PurePath(entry.translation_unit).name}" if entry.translation_unit else ""
        names[f"{entry.kind}[{entry.index}]@{entry.address or 0:#x}"] = \
            f"{entry.kind}[{entry.index}]{unit}"
    return names


def _reader_name(risk: Risk, names: dict[str, str]) -> str:
    name = names.get(risk.reader, risk.reader)
    # One part of an initializer gcc -flto merged: the part is what reads.
    return name if risk.reader_part is None else f"{name} part {risk.reader_part}"


# Joins an object to the initializer that registered its destructor, where the
# object alone is not one (a static in a header: one copy per translation unit).
REGISTERED_BY = " registered by "


def _destructor_subjects(registered: list[tuple[Risk, str]]) -> list[tuple[str, str, bool]]:
    """(subject, message, read at exit) of each exit-time destructor: the object, and
    where an object's name is not enough, the initializer that registered it."""
    objects = [_destroyed_object(risk, reader) for risk, reader in registered]
    repeated = {name for name, n in Counter(objects).items()
                if n > 1 and REGISTERED_BY not in name}
    return [(f"{name}{REGISTERED_BY}{reader}" if name in repeated else name, risk.message,
             bool(risk.read_at_exit))
            for name, (risk, reader) in zip(objects, registered, strict=True)]


def _destroyed_object(risk: Risk, registered_by: str) -> str:
    """The object an exit-time destructor destroys: its symbol, else where it is."""
    if risk.object != UNNAMED_OBJECT:
        return risk.object
    if risk.object_address is not None:
        return f"{UNNAMED_OBJECT} at {risk.object_address:#x}"
    return f"{UNNAMED_OBJECT}{REGISTERED_BY}{registered_by}"


def judge(facts: LibraryFacts, policy: Policy, baseline: set[str]) -> LibraryCheck:
    findings = [*_unique_findings(facts, policy), *_budget_findings(facts, policy),
                *_effect_findings(facts, policy), *_load_findings(facts, policy)]
    keys = distinct_keys([f"{facts.baseline_name}|{f.rule}|{f.subject}" for f in findings])
    marked = tuple(replace(f, key=key, baselined=key in baseline)
                   for f, key in zip(findings, keys, strict=True))
    return LibraryCheck(facts, marked)


def distinct_keys(keys: list[str]) -> list[str]:
    """The keys, a repeated one numbered (``…#2``) in the order found: a baseline that
    holds one such finding does not let a second through."""
    seen: Counter[str] = Counter()
    distinct = []
    for key in keys:
        seen[key] += 1
        distinct.append(key if seen[key] == 1 else f"{key}#{seen[key]}")
    return distinct


def _unique_findings(facts: LibraryFacts, policy: Policy) -> list[Finding]:
    if policy.unique is Level.IGNORE:
        return []
    return [Finding(facts.identity, CheckRule.UNIQUE, symbol.name,
                    f"STB_GNU_UNIQUE {symbol.kind.replace('_', ' ')}: {symbol.demangled}",
                    policy.unique)
            for symbol in facts.scan.dynamic_unique_definitions
            if not policy.allowed(symbol.name, symbol.demangled)]


def _budget_findings(facts: LibraryFacts, policy: Policy) -> list[Finding]:
    budget = policy.initializer_budget(facts.identity)
    if budget is None or facts.initializers <= budget:
        return []
    return [Finding(facts.identity, CheckRule.INITIALIZERS, str(budget),
                    f"{facts.initializers} static initializers, over the budget of {budget}",
                    Level.ERROR)]


def _effect_findings(facts: LibraryFacts, policy: Policy) -> list[Finding]:
    findings = []
    if policy.exit_time_destructors is not Level.IGNORE:
        # "read-at-exit": only the objects a destructor, atexit function or thread reads.
        every = policy.exit_time_destructors_scope is DestructorScope.ALL
        findings += [Finding(facts.identity, CheckRule.EXIT_DESTRUCTOR, obj, message,
                             policy.exit_time_destructors)
                     for obj, message, read in facts.exit_destructors if every or read]
    if policy.init_order is not Level.IGNORE:
        findings += [Finding(facts.identity, CheckRule.INIT_ORDER, f"{reader}->{obj}", message,
                             policy.init_order)
                     for reader, obj, message in facts.init_order_errors]
    if policy.destruction_order is not Level.IGNORE:
        findings += [Finding(facts.identity, CheckRule.DESTRUCTION_ORDER, f"{reader}->{obj}",
                             message, policy.destruction_order)
                     for reader, obj, message in facts.destruction_order_errors]
    return findings


def _load_findings(facts: LibraryFacts, policy: Policy) -> list[Finding]:
    """What the loader model says: each reason it cannot load, or each blocker of dlclose."""
    verdict = facts.scan.load
    if verdict is None:
        return []
    if not verdict.loads:
        if policy.cannot_load is Level.IGNORE:
            return []
        return [Finding(facts.identity, CheckRule.CANNOT_LOAD, error.split(":", 1)[0],
                        f"dlopen in {verdict.host} fails: {error}", policy.cannot_load)
                for error in verdict.load_errors]
    if verdict.unloads or policy.stays_loaded is Level.IGNORE:
        return []
    return [Finding(facts.identity, CheckRule.STAYS_LOADED,
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
