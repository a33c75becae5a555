"""``fix WHEEL -w OUTDIR``: a repaired wheel.

The wheel's ELF members are extracted to a scratch folder and fixed there
as one set (so a UNIQUE symbol one member needs from another stays
GLOBAL), then a new wheel is written: members in the original order with
their original timestamps and permissions, every other member's content
unchanged, RECORD rewritten with the new sha256 and sizes, and signatures
over the old RECORD (RECORD.jws, RECORD.p7s) dropped.  The same input
gives the same bytes.
"""

from __future__ import annotations

import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from elfpatch.errors import ElfpatchError, InputError
from elfpatch.patch.fix import FixResult, fix_paths
from elfpatch.patch.plan import FixOptions
from elfpatch.wheel import (
    elf_members,
    open_archive,
    parse_record,
    record_line,
    record_name,
    verify_record,
)

_SIGNATURES = ("RECORD.jws", "RECORD.p7s")


@dataclass
class WheelFixResult:
    wheel: str
    destination: str | None
    fix: FixResult
    changed_members: list[str] = field(default_factory=list)


def fix_wheel(wheel: Path, out_dir: Path, options: FixOptions,
              dry_run: bool = False) -> WheelFixResult:
    with open_archive(wheel) as archive:
        if not wheel.name.endswith(".whl"):
            raise InputError(str(wheel), "-w takes wheels (*.whl)")
        members = elf_members(archive, str(wheel))
        record = record_name(archive, str(wheel))
        verify_record(archive, record, str(wheel), members)
        with tempfile.TemporaryDirectory(prefix="elfpatch-wheel-") as scratch:
            root = Path(scratch) / "members"
            for member in members:
                target = root / member
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(member))
            result = WheelFixResult(str(wheel), None,
                                    fix_paths([str(root)], options, None, dry_run)
                                    if members else FixResult())
            _relabel(result.fix, root, wheel)
            if dry_run or result.fix.errors or result.fix.refused:
                return result
            replaced = {m: (root / m).read_bytes() for m in members}
            changed = [m for m in members if replaced[m] != archive.read(m)]
            destination = out_dir / wheel.name
            out_dir.mkdir(parents=True, exist_ok=True)
            _write_wheel(archive, destination, record, {m: replaced[m] for m in changed})
            result.destination, result.changed_members = str(destination), changed
    return result


def _relabel(result: FixResult, root: Path, wheel: Path) -> None:
    """Report members as wheel:member rather than as scratch paths."""
    prefix = str(root) + "/"
    for index, outcome in enumerate(result.outcomes):
        member = outcome.source.removeprefix(prefix)
        result.outcomes[index] = type(outcome)(outcome.plan, f"{wheel}:{member}", None,
                                               outcome.written)
    for error in result.errors:
        error.path = error.path.replace(prefix, f"{wheel}:")


def _write_wheel(archive: zipfile.ZipFile, destination: Path, record: str,
                 replaced: dict[str, bytes]) -> None:
    """Write the repaired wheel beside its destination, then rename it into place."""
    lines = parse_record(archive.read(record).decode("utf-8"), record)
    temporary = destination.with_name(f".{destination.name}.elfpatch")
    try:
        with zipfile.ZipFile(temporary, "w") as out:
            for info in archive.infolist():
                name = info.filename
                if name.endswith(_SIGNATURES):
                    continue
                if name == record:
                    data = _new_record(lines, replaced).encode("utf-8")
                else:
                    data = replaced.get(name) or archive.read(name)
                out.writestr(_copy_info(info), data)
        temporary.replace(destination)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _copy_info(info: zipfile.ZipInfo) -> zipfile.ZipInfo:
    copy = zipfile.ZipInfo(info.filename, date_time=info.date_time)
    copy.compress_type = info.compress_type
    copy.external_attr = info.external_attr
    copy.create_system = info.create_system
    copy.comment = info.comment
    return copy


def _new_record(lines: list[tuple[str, str, str]], replaced: dict[str, bytes]) -> str:
    out = []
    for path, digest, size in lines:
        if path.endswith(_SIGNATURES):
            continue
        if path in replaced:
            out.append(record_line(path, replaced[path]))
        else:
            out.append(",".join((path, digest, size)))
    return "\n".join(out) + "\n"


def fix_wheels(wheels: list[str], out_dir: str, options: FixOptions,
               dry_run: bool = False) -> tuple[list[WheelFixResult], list[ElfpatchError]]:
    results, errors = [], []
    for wheel in wheels:
        try:
            results.append(fix_wheel(Path(wheel), Path(out_dir), options, dry_run))
        except ElfpatchError as error:
            errors.append(error)
    return results, errors
