"""The ``fix --json`` document (version 1)."""

from __future__ import annotations

from typing import Any

from elfpatch.patch.fix import FixResult, LibraryOutcome
from elfpatch.patch.plan import Refusal
from elfpatch.report.scan_json import SCHEMA_VERSION, error_record, printable_document


def _library(outcome: LibraryOutcome) -> dict[str, Any]:
    plan = outcome.plan
    return {
        "path": outcome.source,
        "destination": outcome.destination,
        "written": outcome.written,
        "changes": [
            {"table": c.table, "index": c.index, "name": c.name, "demangled": c.demangled,
             "from": "UNIQUE", "to": c.target, "reason": c.reason}
            for c in plan.changes
        ],
        "skipped": [{"table": c.table, "index": c.index, "name": c.name} for c in plan.skipped],
    }


def _refusal(refusal: Refusal) -> dict[str, Any]:
    return {"library": refusal.library, "name": refusal.name, "demangled": refusal.demangled,
            "referenced_by": list(refusal.referenced_by),
            "also_defined_by": list(refusal.also_defined_by)}


def fix_document(result: FixResult, dry_run: bool) -> dict[str, Any]:
    plan = result.plan
    return printable_document({
        "version": SCHEMA_VERSION,
        "mode": plan.mode if plan else None,
        "dry_run": dry_run,
        "libraries": [_library(o) for o in result.outcomes],
        "refusals": [_refusal(r) for r in plan.refusals] if plan else [],
        "errors": [error_record(e) for e in result.errors],
    })


def wheel_document(results: list[Any], errors: list[Any], mode: str,
                   dry_run: bool) -> dict[str, Any]:
    """``fix -w --json``: the fix document per wheel, with where each repaired wheel went."""
    return {
        "version": SCHEMA_VERSION,
        "mode": mode,
        "dry_run": dry_run,
        "wheels": [{"wheel": r.wheel, "destination": r.destination,
                    "changed_members": r.changed_members, **fix_document(r.fix, dry_run)}
                   for r in results],
        "errors": [error_record(e) for e in errors],
    }
