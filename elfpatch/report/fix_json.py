"""The ``fix --json`` document (version 1)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from elfpatch.plan.bindings import FixMode, LibraryPlan, Refusal
from elfpatch.report.scan_json import SCHEMA_VERSION, error_record, printable_record
from elfpatch.service.fix import FixResult, LibraryOutcome

if TYPE_CHECKING:  # for the types only: a loose file's fix does not import the wheel code
    from elfpatch.service.wheel_fix import MemberFix, WheelFixResult, WheelsResult


def _plan_records(plan: LibraryPlan) -> dict[str, Any]:
    """A library's planned changes and skipped symbols, as files and wheel members show them."""
    return {
        "changes": [
            {"table": c.table, "index": c.index, "name": c.name, "demangled": c.demangled,
             "from": c.original, "to": c.target.value, "reason": c.reason}
            for c in plan.changes
        ],
        "skipped": [{"table": c.table, "index": c.index, "name": c.name} for c in plan.skipped],
        "kept_exported": [{"name": name, "reason": reason} for name, reason in plan.kept_exported],
    }


def _library(outcome: LibraryOutcome) -> dict[str, Any]:
    return {
        "path": outcome.source,
        "destination": outcome.destination,
        "written": outcome.written,
        "hard_links_left": outcome.hard_links_left,
        **_plan_records(outcome.plan),
    }


def _refusal(refusal: Refusal) -> dict[str, Any]:
    """The lists name at most a few libraries (see ``crosslib.SAMPLE_SIZE``); the counts all."""
    return {"library": refusal.library, "name": refusal.name, "demangled": refusal.demangled,
            "referenced_by": list(refusal.referenced_by),
            "also_defined_by": list(refusal.also_defined_by),
            "referenced_by_count": refusal.referenced_count,
            "also_defined_by_count": refusal.also_defined_count}


def fix_document(result: FixResult, dry_run: bool) -> dict[str, Any]:
    plan = result.plan
    return printable_record({
        "version": SCHEMA_VERSION,
        "mode": plan.mode.value if plan else None,
        "dry_run": dry_run,
        "libraries": [_library(o) for o in result.outcomes],
        "refusals": [_refusal(r) for r in plan.refusals] if plan else [],
        "errors": [error_record(e) for e in result.errors],
    })


def wheel_document(result: WheelsResult, mode: FixMode, dry_run: bool) -> dict[str, Any]:
    """``fix -w --json`` (schema ``fix_wheels.schema.json``): each wheel, what became of
    it, and the plan of each of its ELF members, named by member."""
    return printable_record({
        "version": SCHEMA_VERSION,
        "mode": mode.value,
        "dry_run": dry_run,
        "interrupted": result.interrupted,
        "wheels": [_wheel(wheel) for wheel in result.wheels],
        "errors": [error_record(e) for e in result.errors],
    })


def _wheel(wheel: WheelFixResult) -> dict[str, Any]:
    plan = wheel.plan
    return {
        "wheel": wheel.wheel,
        "destination": wheel.destination,
        "status": wheel.status.value,
        "written": wheel.written,
        "size_before": wheel.size_before,
        "size_after": wheel.size_after,
        "members": [_member(member) for member in wheel.members],
        "refusals": [_refusal(r) for r in plan.refusals] if plan else [],
    }


def _member(member: MemberFix) -> dict[str, Any]:
    return {"member": member.member, "changed": member.changed, **_plan_records(member.plan)}
