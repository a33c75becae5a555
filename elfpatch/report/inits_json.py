"""The ``inits --json`` document (version 1)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from elfpatch.analysis.init_order import InitsResult, ObjectReport
from elfpatch.analysis.initializers import InitializerEntry
from elfpatch.report.scan_json import SCHEMA_VERSION, error_record


def _entry(entry: InitializerEntry) -> dict[str, Any]:
    return {
        "kind": entry.kind,
        "index": entry.index,
        "address": entry.address,
        "symbol": entry.symbol,
        "demangled": entry.demangled,
        "translation_unit": entry.translation_unit,
        "translation_unit_source": entry.translation_unit_source,
        "priority": entry.priority,
        "registers_destructor": entry.registers_destructor,
    }


def _object(report: ObjectReport) -> dict[str, Any]:
    return {
        "path": report.path,
        "member": report.member,
        "machine": report.machine,
        "soname": report.soname,
        "initializers": [_entry(e) for e in report.initializers],
        "finalizers": [_entry(e) for e in report.finalizers],
        "risks": [asdict(r) for r in report.risks],
        "effects_complete": report.effects_complete,
    }


def inits_document(result: InitsResult) -> dict[str, Any]:
    document: dict[str, Any] = {
        "version": SCHEMA_VERSION,
        "files": [_object(r) for r in result.objects],
        "errors": [error_record(e) for e in result.errors],
    }
    if result.closure is not None:
        document["closure"] = [{"path": c.path, "soname": c.soname} for c in result.closure]
        document["missing"] = [{"name": n, "needed_by": by} for n, by in result.missing]
    return document
