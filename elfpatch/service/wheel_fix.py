"""``fix WHEEL... -w OUTDIR``: repaired wheels, streamed from the originals.

Read: the archive's structure is checked before anything else (``zipread``);
each ELF member is inflated into an anonymous scratch file on OUTDIR's file
system (nothing a wheel says ever becomes a path), checked against its CRC
and its RECORD row, and its deflate block starts are noted
(``wheel.member``).  The members are dealt, the costliest first, into two
halves of about equal cost, and one half runs in a forked child process
(``halves.in_two_halves``; both halves run here, in turn, where forking is
unsafe); threads would share one interpreter lock.

Plan: the members are planned as one set (``fix.plan_inputs``), so a UNIQUE
symbol one member needs from another stays GLOBAL; reports name members.
Meanwhile (not under --dry-run) a forked child checks every other member
against RECORD.

Patch: each member with changes is copied, edited and verified into a
second scratch file (``fix.write_patched_input``), compared with the
original to find the changed ranges, and its new deflate stream is spliced
from the original's untouched blocks and freshly deflated changed regions
(``deflate_splice``) and inflated once to prove it (``wheel.member``).  The
changed members are done in two halves like the reading, one in a forked
child.

Write: a staged temporary file in OUTDIR (``staging``) receives the members
in their original order, with their names, times, attributes and extra
fields; unchanged members are copied as their compressed bytes.  RECORD is
written last with the new hashes and sizes; signatures over the old RECORD
are dropped.  A wheel with nothing to fix is copied byte for byte.

Verify and commit: the staged wheel is read back and checked
(``wheel_verify``); only when every wheel of the run is verified are they
renamed into OUTDIR.  Any error leaves OUTDIR as it was.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from elfpatch.base.regular_file import copy_bytes, new_file_mode, require_space
from elfpatch.base.text_enum import TextEnum
from elfpatch.errors import ElfpatchError, InputError
from elfpatch.patch.staging import (
    ScratchFile,
    Staging,
    destination_problem,
    ensure_descriptors,
    existing_folder,
    user_path,
)
from elfpatch.plan.bindings import FixOptions, FixPlan, LibraryPlan
from elfpatch.service.fix import FixInput, SetPlan, plan_inputs, write_patched_input
from elfpatch.service.halves import in_two_halves
from elfpatch.service.inputs import existing_identities
from elfpatch.service.parallel import run_alongside
from elfpatch.service.wheel_verify import check_members, verify_wheel
from elfpatch.wheel.deflate_splice import BlockStarts
from elfpatch.wheel.member import (
    Inflated,
    Spliced,
    inflate_cost,
    inflate_member,
    record_output,
    rewritten_record,
    splice_member,
)
from elfpatch.wheel.read import (
    RecordEntry,
    elf_members,
    elf_type,
    is_signature,
    open_archive,
    parse_record,
    read_record_text,
    record_entries,
    record_member,
)
from elfpatch.wheel.write import OutputMember, ZipWriter, kept
from elfpatch.wheel.zipread import (
    ZipArchive,
    ZipMember,
)


class WheelStatus(TextEnum):
    """What became of one wheel; the value is the JSON's ``status``."""

    REPAIRED = "repaired"
    UNCHANGED = "unchanged"
    PLANNED = "planned"  # --dry-run
    REFUSED = "refused"  # --strict
    FAILED = "failed"


# ELF members that are neither loaded nor run (relocatable objects, core
# dumps): left as they are, like any other file.
_NOT_LOADED = (1, 4)  # ET_REL, ET_CORE

Progress = Callable[[str], None]


@dataclass(frozen=True)
class MemberFix:
    """One ELF member of a wheel: its plan, and whether its bytes change."""

    member: str
    plan: LibraryPlan
    changed: bool


@dataclass
class _WheelRecord:
    """What one wheel's repair has come to so far (filled in as its job runs)."""

    wheel: str
    destination: str | None  # where the repaired wheel goes (None for --dry-run, failures)
    status: WheelStatus = WheelStatus.FAILED
    written: bool = False  # renamed into place (all wheels of a run are, or none)
    plan: FixPlan | None = None
    members: list[MemberFix] = field(default_factory=list)
    errors: list[ElfpatchError] = field(default_factory=list)
    size_before: int = 0
    size_after: int | None = None

    @property
    def refused(self) -> bool:
        return bool(self.plan and self.plan.refusals)

    def result(self) -> WheelFixResult:
        return WheelFixResult(self.wheel, self.destination, self.status, self.written,
                              self.plan, tuple(self.members), tuple(self.errors),
                              self.size_before, self.size_after)


@dataclass(frozen=True)
class WheelFixResult:
    """One wheel: what became of it, its ELF members' plans, and why it failed."""

    wheel: str
    destination: str | None  # where the repaired wheel goes (None for --dry-run, failures)
    status: WheelStatus
    written: bool  # renamed into place (all wheels of a run are, or none)
    plan: FixPlan | None
    members: tuple[MemberFix, ...]
    errors: tuple[ElfpatchError, ...]
    size_before: int
    size_after: int | None

    @property
    def refused(self) -> bool:
        return bool(self.plan and self.plan.refusals)

    @property
    def changed_members(self) -> list[str]:
        return [m.member for m in self.members if m.changed]


@dataclass(frozen=True)
class WheelsResult:
    wheels: tuple[WheelFixResult, ...] = ()
    errors: tuple[ElfpatchError, ...] = ()  # the run's and every wheel's
    interrupted: bool = False

    @property
    def refused(self) -> bool:
        return any(w.refused for w in self.wheels)


def fix_wheels(wheels: list[str], out_dir: str | None, options: FixOptions,
               dry_run: bool = False, progress: Progress | None = None) -> WheelsResult:
    """Repair every wheel into ``out_dir``: all are renamed into place, or none."""
    destinations = {wheel: wheel_destination(wheel, out_dir) for wheel in wheels}
    errors = _destination_errors(destinations, out_dir, dry_run)
    if errors:
        return WheelsResult(errors=tuple(errors))
    records: list[_WheelRecord] = []
    interrupted = False
    scratch_dir = existing_folder(Path(out_dir)) if out_dir else Path(tempfile.gettempdir())
    with Staging() as staging:
        try:
            for wheel in wheels:
                job = _WheelJob(Path(wheel), None if dry_run else destinations[wheel], options,
                                staging, scratch_dir, progress or _silent)
                records.append(job.run())
                errors.extend(records[-1].errors)
            if not dry_run and not errors and not any(r.refused for r in records):
                _commit(staging, records, errors)
        except KeyboardInterrupt:
            interrupted = True
            # The wheels the interrupt came before are reported too: none was written.
            records += [_WheelRecord(wheel, None if dry_run else str(destinations[wheel]))
                        for wheel in wheels[len(records):]]
    return WheelsResult(tuple(r.result() for r in records), tuple(errors), interrupted)


def wheel_destination(wheel: str, out_dir: str | None) -> Path:
    """Where the repaired ``wheel`` is written: its own name, in ``out_dir``."""
    return Path(out_dir or ".") / Path(wheel).name


def _silent(_text: str) -> None:
    pass


def _destination_errors(destinations: dict[str, Path], out_dir: str | None,
                        dry_run: bool) -> list[ElfpatchError]:
    errors: list[ElfpatchError] = []
    if out_dir is None:
        return errors
    folder = Path(out_dir)
    if folder.exists() and not folder.is_dir():
        return [InputError(out_dir, "-w names a file, not a folder")]
    by_target: dict[Path, list[str]] = {}
    for wheel, target in destinations.items():
        by_target.setdefault(target, []).append(wheel)
    inputs = existing_identities(destinations)
    for target, sources in by_target.items():
        if len(sources) > 1:
            errors.append(InputError(str(target), f"{len(sources)} wheels would be written "
                                     f"here: {', '.join(sources[:3])}"))
        elif not dry_run and (problem := destination_problem(target, inputs)) is not None:
            errors.append(InputError(str(target), f"cannot write: {problem}",
                                     hint="-w names the folder for the repaired wheels; give "
                                     "another one" if "inputs" in problem else None))
    return errors


def _commit(staging: Staging, records: list[_WheelRecord], errors: list[ElfpatchError]) -> None:
    """Rename every staged wheel into place; ``written`` says which were, whatever happens
    (an interrupt held back during the renames arrives right after them)."""
    try:
        staging.commit()
    except OSError as error:
        errors.append(InputError(user_path(error, "output"),
                                 f"cannot write: {error.strerror or error}"))
    finally:
        committed = {str(path) for path in staging.committed}
        for record in records:
            record.written = record.destination in committed


# -- one wheel ------------------------------------------------------------------------

class _WheelJob:
    """Everything one wheel's repair needs, and the steps in order."""

    def __init__(self, wheel: Path, destination: Path | None, options: FixOptions,
                 staging: Staging, scratch_dir: Path, progress: Progress) -> None:
        self.wheel, self.destination, self.options = wheel, destination, options
        self.staging, self.scratch_dir = staging, scratch_dir
        self.progress: Progress = lambda text: progress(f"{wheel.name}: {text}")
        self.result = _WheelRecord(str(wheel), str(destination) if destination else None)
        self._scratch: list[ScratchFile] = []

    def run(self) -> _WheelRecord:
        try:
            with open_archive(self.wheel) as archive:
                self.result.size_before = archive.size
                self._repair(archive)
        except ElfpatchError as error:
            self.result.status = WheelStatus.FAILED
            self.result.errors.append(error)
        except OSError as error:
            self.result.status = WheelStatus.FAILED
            self.result.errors.append(InputError(user_path(error, self.destination or
                                                           self.scratch_dir),
                                                 f"cannot write: {error.strerror or error}"))
        finally:
            for scratch in self._scratch:
                scratch.close()
        return self.result

    def _new_scratch(self) -> ScratchFile:
        scratch = self.staging.scratch(self.scratch_dir)
        self._scratch.append(scratch)
        return scratch

    # -- steps -------------------------------------------------------------------------
    def _repair(self, archive: ZipArchive) -> None:
        record = record_member(archive)
        record_text = read_record_text(archive, record)
        rows = record_entries(parse_record(record_text, archive.label(record)),
                              archive.label(record))
        self.progress("looking for ELF members")
        members = [m for m in elf_members(archive) if elf_type(archive, m) not in _NOT_LOADED]
        # Each member holds an inflated and a patched scratch file until the set commits.
        ensure_descriptors(2 * len(members), Path(archive.name))
        # The ELF members are inflated side by side (they are planned as one set),
        # and the new wheel is about as large as this one.
        self._require_space(sum(m.size for m in members)
                            + (archive.size if self.destination else 0), "to inflate its "
                            f"{len(members)} ELF members" + (" and write the new wheel"
                                                             if self.destination else ""))
        inflated = self._inflate_all(archive, members, rows)
        planned = self._plan(archive, inflated, rows, record.name)
        if planned.errors:
            self.result.errors.extend(error.relabelled(f"{archive.name}:{error.path}")
                                      for error in planned.errors)
            return
        self.result.plan = planned.plan
        pairs = planned.pairs()
        self.result.members = [MemberFix(item.label, plan, bool(plan.changes))
                               for item, plan in pairs]
        if self.result.refused:
            self.result.status = WheelStatus.REFUSED
            return
        if self.destination is None:
            self.result.status = WheelStatus.PLANNED
            return
        changed = {i.member.name: (i, plan) for i, (_item, plan) in
                   zip(inflated, pairs, strict=True) if plan.changes}
        for item in inflated:
            if item.member.name not in changed:
                item.scratch.close()  # read and planned: no longer needed
        if changed:
            self._write_repaired(archive, record, record_text, rows, changed)
        else:
            self._write_unchanged(archive, record, record_text)

    def _plan(self, archive: ZipArchive, inflated: list[Inflated],
              rows: dict[str, RecordEntry], record_name: str) -> SetPlan:
        """Plan the set; meanwhile, in a forked half, check every other member against
        RECORD (what the final verification of copied members rests on)."""
        inputs = [FixInput(item.member.name, item.scratch.path) for item in inflated]
        if self.destination is None:  # --dry-run: nothing is copied
            return plan_inputs(inputs, self.options)
        self.progress("planning, and checking the other members against RECORD")
        read = {item.member.name for item in inflated}
        planned, _ = run_alongside(lambda: plan_inputs(inputs, self.options),
                                   lambda: check_members(archive, rows, record_name, read))
        return planned

    def _inflate_all(self, archive: ZipArchive, members: list[ZipMember],
                     rows: dict[str, RecordEntry]) -> list[Inflated]:
        for member in members:
            if member.name not in rows:
                raise InputError(archive.label(member), "broken RECORD: the member is not "
                                 "listed")
        # Made here, before the halves fork: both processes write into them.
        jobs = [(member, self._new_scratch()) for member in members]

        number = {member.name: count for count, (member, _) in enumerate(jobs, 1)}

        def inflate(job: tuple[ZipMember, ScratchFile]) -> BlockStarts | None:
            member, scratch = job
            self.progress(f"reading {number[member.name]}/{len(jobs)} {member.name}")
            return inflate_member(archive, member, rows[member.name], scratch)

        # Only block starts come back from the other half: its copies of the scratch
        # files' objects must not be the ones that close them.
        starts = in_two_halves(jobs, lambda job: inflate_cost(job[0]), inflate)
        return [Inflated(member, scratch, found)
                for (member, scratch), found in zip(jobs, starts, strict=True)]

    def _write_repaired(self, archive: ZipArchive, record: ZipMember, record_text: str,
                        rows: dict[str, RecordEntry],
                        changed: dict[str, tuple[Inflated, LibraryPlan]]) -> None:
        spliced = self._patch_all(archive, rows, changed)
        new_record = rewritten_record(record_text, record,
                                      {n: s.digest for n, s in spliced.items()},
                                      {n: s.output.size for n, s in spliced.items()})
        outputs = []
        for member in archive.members:
            if is_signature(member.name):
                continue
            if member.name == record.name:
                outputs.append(record_output(member, new_record))
            elif member.name in spliced:
                outputs.append(spliced[member.name].output)
            else:
                outputs.append(kept(member, archive.fd))
        self._stage(archive, outputs, record.name, new_record)
        self.result.status = WheelStatus.REPAIRED

    def _require_space(self, needed: int, purpose: str) -> None:
        require_space(self.scratch_dir, needed, str(self.wheel), purpose,
                      hint="-w on a file system with more space (its scratch files go there)")

    def _patch_all(self, archive: ZipArchive, rows: dict[str, RecordEntry],
                   changed: dict[str, tuple[Inflated, LibraryPlan]]) -> dict[str, Spliced]:
        """Patch and splice every changed member, in two halves on two cores."""
        self._require_space(sum(item.member.size for item, _plan in changed.values()),
                            f"for the patched copies of {len(changed)} members")
        # Made here, before the halves fork; one file of fresh data per half, each
        # appended to by one process only.
        fresh = (self._new_scratch(), self._new_scratch())
        jobs = [(name, item, plan, self._new_scratch()) for name, (item, plan) in
                changed.items()]
        owner = os.getpid()

        number = {job[0]: count for count, job in enumerate(jobs, 1)}

        def patch(job: tuple[str, Inflated, LibraryPlan, ScratchFile]) -> Spliced:
            name, item, plan, patched = job
            self.progress(f"fixing {number[name]}/{len(jobs)} {name}")
            try:
                write_patched_input(FixInput(name, item.scratch.path), plan, patched)
            except ElfpatchError as error:  # it names the member; the wheel goes first
                if error.path == name:
                    raise error.relabelled(archive.label(item.member)) from None
                raise
            return splice_member(archive, item, patched, plan, rows[name],
                                 fresh[0] if os.getpid() == owner else fresh[1])

        spliced = in_two_halves(jobs, lambda job: job[1].member.size, patch)
        for _name, item, _plan, _patched in jobs:
            item.scratch.close()
        return {job[0]: result for job, result in zip(jobs, spliced, strict=True)}

    def _write_unchanged(self, archive: ZipArchive, record: ZipMember, record_text: str) -> None:
        """Nothing to fix: the wheel as it is, byte for byte, checked like any other."""
        assert self.destination is not None
        self.progress("nothing to fix: copying")
        staged = self.staging.output(self.destination)
        copy_bytes(archive.fd, 0, archive.size, staged.fd)
        os.fchmod(staged.fd, new_file_mode())
        outputs = [kept(member, archive.fd) for member in archive.members]
        self._verify(staged.path, outputs, record.name, record_text, archive)
        self.result.status = WheelStatus.UNCHANGED
        self.result.size_after = archive.size

    def _stage(self, archive: ZipArchive, outputs: list[OutputMember], record_name: str,
               record_text: str) -> None:
        assert self.destination is not None
        self.progress("writing")
        staged = self.staging.output(self.destination)
        writer = ZipWriter(staged.fd)
        for output in outputs:
            writer.add(output)
        self.result.size_after = writer.finish(archive.comment)
        os.fchmod(staged.fd, new_file_mode())
        self._verify(staged.path, outputs, record_name, record_text, archive)

    def _verify(self, staged: Path, outputs: list[OutputMember], record_name: str,
                record_text: str, source: ZipArchive) -> None:
        assert self.destination is not None
        self.progress("verifying")
        verify_wheel(staged, source, self.destination, outputs, record_name, record_text,
                     self.progress)
