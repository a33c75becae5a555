"""``check --format sarif``: a SARIF 2.1.0 log, as GitHub code scanning reads it.

One run; a rule per check rule, with its help; a result per finding (those in
the baseline carry an external suppression, so they stay known without being
raised again) and per UNIQUE clash between packages. A library in a wheel is a
nested artifact: the wheel, then the member path inside it, which is also the
result's location, so the location is the same wherever the wheel was built.
Each result has a partial fingerprint made from its baseline key, which is what
lets code scanning follow one finding from run to run. An input that could not
be read is a tool execution notification, and the run is then not successful.
"""

from __future__ import annotations

import hashlib
from typing import Any

from elfpatch.analysis.check import (
    CheckResult,
    CheckRule,
    Clash,
    Finding,
    LibraryCheck,
)
from elfpatch.analysis.policy import Level

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
RULE_CLASH = "unique-clash"  # not a CheckRule: clashes are judged across libraries
# The fingerprint's name carries a version: a change of how keys are made is a new one.
FINGERPRINT = "elfpatchFindingKey/v2"

# id: (name, short description, help). The help is what a reader of the alert
# sees under "Rule help": what happens at run time, and what to do.
RULES: dict[str, tuple[str, str, str]] = {
    CheckRule.UNIQUE.value: (
        "GnuUniqueSymbol",
        "An STB_GNU_UNIQUE symbol is defined by a shared library.",
        "glibc's loader keeps one definition of each STB_GNU_UNIQUE symbol per process: "
        "every library defining it shares the first one loaded, even under RTLD_LOCAL, and "
        "a library whose definition is used can never be unloaded by dlclose. Rewrite the "
        "binding (elfpatch fix, or fix -w for wheels), rebuild with -fno-gnu-unique, or "
        "accept the symbol with an allow pattern in [tool.elfpatch]."),
    CheckRule.INITIALIZERS.value: (
        "StaticInitializerBudget",
        "A library has more static initializers than its budget allows.",
        "Each static initializer runs when the library is loaded, before any of its "
        "functions is called. Raise max-initializers in [tool.elfpatch], or build the "
        "globals on first use (function-local statics) or at compile time (constexpr)."),
    CheckRule.EXIT_DESTRUCTOR.value: (
        "ExitTimeDestructor",
        "A global object is destroyed at exit.",
        "An object destroyed at exit can still be used afterwards by other destructors, "
        "atexit functions or detached threads, which then read a destroyed object. Never "
        "destroying it (static T& t = *new T;) avoids that."),
    CheckRule.INIT_ORDER.value: (
        "StaticInitializationOrder",
        "An initializer reads a global before it is constructed.",
        "A static initializer reads a global that another initializer constructs later "
        "(the static initialization order fiasco). Make the global constinit or constexpr, "
        "or a function-local static built on first use."),
    CheckRule.DESTRUCTION_ORDER.value: (
        "StaticDestructionOrder",
        "A destructor reads a global already destroyed at exit.",
        "Destructors run in the reverse order of registration: this one reads a global "
        "whose destructor has already run (the static destruction order fiasco). Never "
        "destroy the global it reads (static T& t = *new T;)."),
    CheckRule.CANNOT_LOAD.value: (
        "LibraryCannotLoad",
        "dlopen of the library fails in the host process.",
        "The loader model finds that dlopen fails: a DT_NEEDED library or a symbol version "
        "the library needs is not found, a symbol a load-time relocation names is defined "
        "nowhere, it is a PIE program, or it needs more initial-exec TLS than dlopen allows. "
        "Ship or depend on what is missing, or set cannot-load = \"ignore\"."),
    CheckRule.STAYS_LOADED.value: (
        "LibraryStaysLoaded",
        "dlclose leaves the library mapped.",
        "glibc keeps the library loaded after dlclose: it entered an STB_GNU_UNIQUE name "
        "first, carries DF_1_NODELETE, registers thread_local destructors while it loads, "
        "or a library that stays loaded needs it or binds to it. Its destructors do not run "
        "and a later dlopen finds the old copy. The message names the cure of each blocker "
        "(elfpatch fix for UNIQUE symbols, fix --hide for exported instantiations)."),
    RULE_CLASH: (
        "GnuUniqueClash",
        "Libraries of different packages define the same STB_GNU_UNIQUE symbol.",
        "Loaded into one process, libraries of two packages that define the same "
        "STB_GNU_UNIQUE symbol share one copy of it (torch 1.8 next to cupy 9). Fix the "
        "bindings of one of them (elfpatch fix), or set unique = \"warn\"."),
}


def render_sarif(result: CheckResult, version: str) -> dict[str, Any]:
    """The SARIF log of a check result (a JSON document); ``version``: elfpatch's."""
    artifacts = _Artifacts()
    results = []
    for library in result.libraries:
        known = _Known(library, artifacts)
        results += [_finding_result(finding, known) for finding in library.findings]
    results += [_clash_result(clash, result.clashes_fail) for clash in result.clashes]
    run: dict[str, Any] = {
        "tool": {"driver": _driver(version)},
        "invocations": [_invocation(result)],
        "results": results,
    }
    if artifacts.entries:
        run["artifacts"] = artifacts.entries
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def _driver(version: str) -> dict[str, Any]:
    return {"name": "elfpatch", "version": version, "semanticVersion": version,
            "rules": [_rule(rule_id, *described) for rule_id, described in RULES.items()]}


def _rule(rule_id: str, name: str, short: str, help_text: str) -> dict[str, Any]:
    return {"id": rule_id, "name": name,
            "shortDescription": {"text": short},
            "fullDescription": {"text": help_text},
            "help": {"text": help_text, "markdown": help_text},
            "properties": {"tags": ["elf", "c++", "loader"]}}


_RULE_INDEX = {rule_id: index for index, rule_id in enumerate(RULES)}


def _sarif_level(level: Level) -> str:
    return "error" if level is Level.ERROR else "warning"


def fingerprint(key: str) -> str:
    """A stable fingerprint of a baseline key (fixed length, whatever the key holds)."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


class _Known:
    """What the results of one library look up, built once: its artifact location, its
    UNIQUE symbols by name, and where DWARF declares them."""

    def __init__(self, library: LibraryCheck, artifacts: _Artifacts) -> None:
        facts = library.facts
        self.where = artifacts.location(facts.source.path, facts.source.member,
                                        facts.baseline_name)
        self.symbols = {s.name: s for s in facts.scan.dynamic_unique_definitions}
        self.declared = {name: (file, line) for name, file, line in facts.declared_at}


def _finding_result(finding: Finding, known: _Known) -> dict[str, Any]:
    record: dict[str, Any] = {
        "ruleId": finding.rule.value,
        "ruleIndex": _RULE_INDEX[finding.rule.value],
        "level": _sarif_level(finding.level),
        "message": {"text": finding.message},
        "locations": [_location(finding, known)],
        "partialFingerprints": {FINGERPRINT: fingerprint(finding.key)},
        "properties": {"key": finding.key},
    }
    # Where the source declares it (DWARF), when the library carries debug info.
    source = known.declared.get(finding.subject) if finding.rule == CheckRule.UNIQUE else None
    if source is not None:
        file, line = source
        record["relatedLocations"] = [{
            "id": 0, "message": {"text": "declared here (DWARF)"},
            "physicalLocation": {"artifactLocation": {"uri": _uri(file)},
                                 "region": {"startLine": line}}}]
    if finding.baselined:
        record["suppressions"] = [{"kind": "external", "status": "accepted",
                                   "justification": "in the elfpatch baseline"}]
    return record


def _location(finding: Finding, known: _Known) -> dict[str, Any]:
    location: dict[str, Any] = {"physicalLocation": {"artifactLocation": dict(known.where)}}
    symbol = known.symbols.get(finding.subject) if finding.rule == CheckRule.UNIQUE else None
    if symbol is not None:
        location["logicalLocations"] = [{"name": symbol.demangled,
                                         "fullyQualifiedName": symbol.demangled,
                                         "decoratedName": symbol.name,
                                         "kind": "variable"}]
    return location


def _clash_result(clash: Clash, fails: bool) -> dict[str, Any]:
    where = ", ".join(f"{library} ({package})" for package, library in clash.defined_by)
    key = f"clash|{clash.symbol}|{'|'.join(package for package, _ in clash.defined_by)}"
    return {
        "ruleId": RULE_CLASH,
        "ruleIndex": _RULE_INDEX[RULE_CLASH],
        "level": "error" if fails else "warning",
        "message": {"text": f"{clash.demangled} is STB_GNU_UNIQUE in {where}: loaded "
                            "together, they share one copy"},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(library)}},
                       "logicalLocations": [{"fullyQualifiedName": clash.demangled,
                                             "decoratedName": clash.symbol,
                                             "kind": "variable"}]}
                      for _package, library in clash.defined_by],
        "partialFingerprints": {FINGERPRINT: fingerprint(key)},
    }


def _invocation(result: CheckResult) -> dict[str, Any]:
    invocation: dict[str, Any] = {"executionSuccessful": not result.errors}
    if result.errors:
        invocation["toolExecutionNotifications"] = [
            {"level": "error", "message": {"text": error.one_line()},
             "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(error.path)}}}]}
            for error in result.errors]
    return invocation


def _uri(path: str) -> str:
    """A relative URI reference: '/'-separated, with what URIs cannot hold %-escaped."""
    from urllib.parse import quote

    return quote(path.replace("\\", "/"), safe="/:@!$&'()*+,;=-._~")


class _Artifacts:
    """The run's artifacts: each wheel once, and each library (nested in its wheel)."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self._index: dict[tuple[str, str | None], int] = {}

    def location(self, path: str, member: str | None, name: str) -> dict[str, Any]:
        """The artifact location of a library: its member path in a wheel, else its name
        below the folder given (``name``)."""
        parent = self._add((path, None), {"uri": _uri(path)}, None) if member else None
        uri = _uri(member if member is not None else name)
        index = self._add((path, member), {"uri": uri}, parent)
        return {"uri": uri, "index": index}

    def _add(self, identity: tuple[str, str | None], location: dict[str, Any],
             parent: int | None) -> int:
        if identity not in self._index:
            entry: dict[str, Any] = {"location": location, "roles": ["analysisTarget"]}
            if parent is not None:
                entry["parentIndex"] = parent
            self._index[identity] = len(self.entries)
            self.entries.append(entry)
        return self._index[identity]
