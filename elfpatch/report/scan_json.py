"""The ``scan --json`` document (schema: scan.schema.json, version 1)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from elfpatch.analysis.unique import FileScan, UniqueSymbol
from elfpatch.elf.file import printable
from elfpatch.errors import ElfpatchError, InternalError

if TYPE_CHECKING:
    from elfpatch.loader.dlopen import LoadVerdict

SCHEMA_VERSION = 1


def file_record(scan: FileScan) -> dict[str, Any]:
    return {
        "path": scan.path,
        "member": scan.member,
        "machine": scan.machine,
        "elf_class": scan.elf_class,
        "elf_type": scan.elf_type,
        "soname": scan.soname,
        "unique": [_unique_record(symbol) for symbol in scan.unique],
        "unique_definitions": len(scan.dynamic_unique_definitions),
        "unloads_on_dlclose": scan.unloads_on_dlclose,
        "nodelete": scan.nodelete,
        "load": None if scan.load is None else load_record(scan.load),
    }


def _unique_record(symbol: UniqueSymbol) -> dict[str, Any]:
    record = asdict(symbol)
    record["kind"] = symbol.kind.value
    return record


def load_record(verdict: LoadVerdict) -> dict[str, Any]:
    """The loader's verdict: loads, unloads, and every blocker with its evidence and cure."""
    record = asdict(verdict)
    del record["path"]
    return record


def error_record(error: ElfpatchError) -> dict[str, Any]:
    """An input's error; ``internal`` only on elfpatch's own failure (exit code 3)."""
    if isinstance(error, InternalError):
        return {"path": error.path, "error": error.reason, "internal": True}
    return {"path": error.path, "error": error.reason}


def scan_document(scans: list[FileScan], errors: list[ElfpatchError]) -> dict[str, Any]:
    return printable_record({
        "version": SCHEMA_VERSION,
        "files": [file_record(scan) for scan in scans],
        "errors": [error_record(error) for error in errors],
    })


def printable_record(record: dict[str, Any]) -> dict[str, Any]:
    """A JSON object whose strings are all writable as UTF-8 (see ``printable_document``)."""
    return {key: printable_document(item) for key, item in record.items()}


def printable_document(value: Any) -> Any:
    """Every string of the document writable as UTF-8 (names with stray bytes, odd paths)."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {key: printable_document(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable_document(item) for item in value]
    return value
