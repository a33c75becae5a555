"""The shipped JSON schemas name exactly the values the code's enums can write: a rule,
kind or status added to the code is added to the schema its documents are checked
against (the loader rules once were not, so check --format json with them enabled
did not validate)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from elfpatch.analysis.check import CheckRule
from elfpatch.analysis.effects.summary import StopReason
from elfpatch.analysis.init_order import ClosurePhase
from elfpatch.analysis.initializers import UnitSource
from elfpatch.analysis.policy import Level
from elfpatch.analysis.risks import RiskKind, Severity
from elfpatch.analysis.unique import UniqueKind
from elfpatch.elf.arrays import InitializerKind
from elfpatch.loader.dlopen import BlockerKind, DlopenMode
from elfpatch.plan.bindings import BindingTarget, FixMode
from elfpatch.service.wheel_fix import WheelStatus


def schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(
        resources.files("elfpatch.report").joinpath(name).read_text())
    return loaded


def at(document: dict[str, Any], *path: str) -> list[Any]:
    node: Any = document
    for step in path:
        node = node[step]
    enum: list[Any] = node["enum"]
    return enum


def values(kind: Any) -> set[str]:
    return {member.value for member in kind}


UNIQUE_KIND = ("properties", "files", "items", "properties", "unique", "items", "properties",
               "kind")
RISKS = ("properties", "files", "items", "properties", "risks", "items", "properties")


@pytest.mark.parametrize("name", ["scan.schema.json", "check.schema.json"])
def test_unique_kinds(name: str) -> None:
    assert set(at(schema(name), *UNIQUE_KIND)) == values(UniqueKind)


def test_check_rules_and_finding_levels() -> None:
    finding = ("$defs", "finding", "properties")
    assert set(at(schema("check.schema.json"), *finding, "rule")) == values(CheckRule)
    # A finding is never "ignore": an ignored rule makes none.
    assert set(at(schema("check.schema.json"), *finding, "level")) == \
        values(Level) - {Level.IGNORE.value}


def test_risk_severities_and_kinds() -> None:
    inits = schema("inits.schema.json")
    assert set(at(inits, *RISKS, "severity")) == values(Severity)
    assert set(at(inits, *RISKS, "kind")) == values(RiskKind)


def test_initializer_kinds_sources_and_closure_phases() -> None:
    inits = schema("inits.schema.json")
    assert set(at(inits, "$defs", "entry", "properties", "kind")) == values(InitializerKind)
    # A whole entry is named from DWARF, its STT_FILE symbol or its own name; a part of a
    # merged (-flto) one from DWARF, its name or what it constructs.
    assert set(at(inits, "$defs", "entry", "properties", "translation_unit_source")) == \
        values(UnitSource) - {UnitSource.CONSTRUCTED.value} | {None}
    assert set(at(inits, "$defs", "part", "properties", "translation_unit_source")) == \
        values(UnitSource) - {UnitSource.FILE_SYMBOL.value} | {None}
    phase = ("properties", "closure", "items", "properties", "phase")
    assert set(at(inits, *phase)) == values(ClosurePhase)


def test_stop_reasons() -> None:
    coverage = ("properties", "files", "items", "properties", "coverage", "properties",
                "stopped", "propertyNames")
    assert set(at(schema("inits.schema.json"), *coverage)) == values(StopReason)


def _in_every_verdict(node: Any, *path: str) -> list[set[str]]:
    """The enum at ``path`` of every loader verdict (an object whose properties hold
    ``blockers``) in a schema, wherever it sits."""
    found = []
    if isinstance(node, dict):
        properties = node.get("properties", {})
        if isinstance(properties.get("blockers"), dict):
            found.append(set(at(properties, *path)))
        for value in node.values():
            found += _in_every_verdict(value, *path)
    elif isinstance(node, list):
        for value in node:
            found += _in_every_verdict(value, *path)
    return found


@pytest.mark.parametrize("name", ["scan.schema.json", "check.schema.json"])
def test_load_modes(name: str) -> None:
    modes = _in_every_verdict(schema(name), "mode")
    assert modes and all(found == values(DlopenMode) for found in modes)


def test_fix_modes_and_wheel_statuses() -> None:
    assert set(at(schema("fix.schema.json"), "properties", "mode")) == values(FixMode) | {None}
    wheels = schema("fix_wheels.schema.json")
    assert set(at(wheels, "properties", "mode")) == values(FixMode)
    assert set(at(wheels, "properties", "wheels", "items", "properties", "status")) == \
        values(WheelStatus)


def test_binding_targets() -> None:
    change = ("items", "properties", "changes", "items", "properties", "to")
    assert set(at(schema("fix.schema.json"), "properties", "libraries", *change)) == \
        values(BindingTarget)
    member = ("properties", "wheels", "items", "properties", "members")
    assert set(at(schema("fix_wheels.schema.json"), *member, *change)) == values(BindingTarget)


@pytest.mark.parametrize("name", ["scan.schema.json", "check.schema.json"])
def test_load_blocker_kinds(name: str) -> None:
    kinds = _in_every_verdict(schema(name), "blockers", "items", "properties", "kind")
    assert kinds and all(found == values(BlockerKind) for found in kinds)


@pytest.mark.parametrize("name", ["BindingTarget", "BlockerKind", "CheckRule", "ClosurePhase",
                                  "DestructorScope", "DlopenMode", "FixMode", "HostKind",
                                  "InitializerKind", "Level", "RiskKind", "Severity",
                                  "StopReason", "UniqueKind", "UnitSource", "WheelStatus"])
def test_exported_enums_read_as_their_values(name: str) -> None:
    """Each is exported from elfpatch and is its value wherever a string is written."""
    import elfpatch

    kind = getattr(elfpatch, name)
    assert issubclass(kind, str)
    for member in kind:
        assert member == member.value and str(member) == f"{member}" == member.value
        assert f"{member:>20}" == f"{member.value:>20}"
        assert json.dumps({"v": member}) == json.dumps({"v": member.value})
        assert kind(member.value) is member
