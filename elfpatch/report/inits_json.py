"""The ``inits --json`` document (version 1)."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from elfpatch.analysis.init_order import Coverage, InitsResult, ObjectReport
from elfpatch.analysis.initializers import InitializerEntry
from elfpatch.analysis.risks import Risk
from elfpatch.report.scan_json import SCHEMA_VERSION, error_record

# Risk fields that only some risks have: left out when they do not apply.
_OPTIONAL_RISK_FIELDS = ("reader_part", "constructed_by_part", "read_at_exit",
                         "object_address", "reader_address", "constructed_by_address",
                         "key", "registered_in", "via")


def _entry(entry: InitializerEntry) -> dict[str, Any]:
    record: dict[str, Any] = {
        "kind": entry.kind.value,
        "index": entry.index,
        "address": entry.address,
        "symbol": entry.symbol,
        "demangled": entry.demangled,
        "translation_unit": entry.translation_unit,
        "translation_unit_source": entry.translation_unit_source,
        "priority": entry.priority,
        "registers_destructor": entry.registers_destructor,
        "nearest": entry.nearest,
    }
    if entry.parts:  # a merged initializer (gcc -flto), split in call order
        record["parts"] = [asdict(part) for part in entry.parts]
    return record


# A risk's fields, in order: all flat (``asdict``'s deep copy of each took a tenth
# of the JSON report of libtorch_cpu.so's 4,526 risks).  ``unkeyed`` only joins the
# look-ups paired two ways: a look-up without a key has no ``key``.
_RISK_FIELDS = tuple(field.name for field in fields(Risk) if field.name != "unkeyed")


def _risk(risk: Risk) -> dict[str, Any]:
    record = {name: getattr(risk, name) for name in _RISK_FIELDS}
    record["severity"], record["kind"] = risk.severity.value, risk.kind.value
    for name in _OPTIONAL_RISK_FIELDS:
        if record[name] is None:
            del record[name]
    return record


def _coverage(coverage: Coverage) -> dict[str, Any]:
    record: dict[str, Any] = {
        "initializers": {"followed": coverage.initializers,
                         "complete": coverage.initializers_complete},
        "destructors": {"followed": coverage.destructors,
                        "complete": coverage.destructors_complete},
        "stopped": dict(coverage.stopped),
        "constant_branches": {"decided": coverage.constant_branches[0],
                              "undecided": coverage.constant_branches[1]},
    }
    if coverage.quiet_at_load:
        record["quiet_at_load"] = [{"address": address, "width": width, "object": label}
                                   for address, width, label in coverage.quiet_at_load]
    return record


def _object(report: ObjectReport) -> dict[str, Any]:
    record: dict[str, Any] = {
        "path": report.path,
        "member": report.member,
        "machine": report.machine,
        "soname": report.soname,
        "initializers": [_entry(e) for e in report.initializers],
        "finalizers": [_entry(e) for e in report.finalizers],
        "risks": [_risk(r) for r in report.risks],
        "effects_complete": report.effects_complete,
    }
    if report.coverage is not None:
        record["coverage"] = _coverage(report.coverage)
    return record


def inits_document(result: InitsResult) -> dict[str, Any]:
    document: dict[str, Any] = {
        "version": SCHEMA_VERSION,
        "files": [_object(r) for r in result.objects],
        "errors": [error_record(e) for e in result.errors],
    }
    if result.closure is not None:
        document["closure"] = [{"path": c.path, "soname": c.soname, "phase": c.phase.value}
                               for c in result.closure]
        document["missing"] = [{"name": n, "needed_by": by} for n, by in result.missing]
    return document
