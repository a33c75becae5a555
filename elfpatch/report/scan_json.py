"""The ``scan --json`` document (schema: scan.schema.json, version 1)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from elfpatch.analysis.unique import FileScan
from elfpatch.errors import ElfpatchError

SCHEMA_VERSION = 1


def file_record(scan: FileScan) -> dict[str, Any]:
    return {
        "path": scan.path,
        "member": scan.member,
        "machine": scan.machine,
        "elf_class": scan.elf_class,
        "elf_type": scan.elf_type,
        "soname": scan.soname,
        "unique": [asdict(symbol) for symbol in scan.unique],
        "unique_definitions": len(scan.dynamic_unique_definitions),
        "unloads_on_dlclose": not (scan.pinned_by_unique or scan.nodelete),
        "nodelete": scan.nodelete,
    }


def error_record(error: ElfpatchError) -> dict[str, str]:
    return {"path": error.path, "error": error.reason}


def scan_document(scans: list[FileScan], errors: list[ElfpatchError]) -> dict[str, Any]:
    return {
        "version": SCHEMA_VERSION,
        "files": [file_record(scan) for scan in scans],
        "errors": [error_record(error) for error in errors],
    }
