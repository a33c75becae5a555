"""``fix WHEEL... -w OUTDIR``: repaired wheels, streamed from the originals.

Read: the archive's structure is checked before anything else (``zipread``);
each ELF member is inflated into an anonymous scratch file on OUTDIR's file
system (nothing a wheel says ever becomes a path), checked against its CRC
and its RECORD row, and its deflate block starts are noted.  Two threads
inflate, the largest members first.

Plan: the members are planned as one set (``fix.plan_inputs``), so a UNIQUE
symbol one member needs from another stays GLOBAL; reports name members.

Patch: each member with changes is copied, edited and verified into a
second scratch file (``fix.write_patched_input``), compared with the
original to find the changed ranges, and its new deflate stream is spliced
from the original's untouched blocks and freshly deflated changed regions
(``deflate_splice``), on a second thread while the next member is patched.

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

import contextlib
import hashlib
import os
import resource
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from elfpatch.base.regular_file import require_space
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import symbol_tables
from elfpatch.errors import PARSE_FAILURES, CorruptElfError, ElfpatchError, InputError
from elfpatch.patch.staging import (
    ScratchFile,
    Staging,
    destination_problem,
    existing_folder,
    user_path,
)
from elfpatch.patch.verify import VerificationError
from elfpatch.plan.bindings import FixOptions, FixPlan, LibraryPlan
from elfpatch.service.fix import FixInput, SetPlan, plan_inputs, write_patched_input
from elfpatch.service.halves import in_two_halves
from elfpatch.service.inputs import existing_identities
from elfpatch.service.parallel import run_alongside
from elfpatch.service.wheel_verify import check_members, verify_wheel
from elfpatch.wheel.deflate_splice import (
    BlockStarts,
    Fresh,
    InflateError,
    Piece,
    block_inflate_available,
    build_stream,
    piece_bytes,
    splice_plan,
)
from elfpatch.wheel.read import (
    RecordEntry,
    elf_members,
    elf_type,
    hash_text,
    is_signature,
    open_archive,
    parse_record,
    read_record_text,
    record_entries,
    record_line,
    record_member,
)
from elfpatch.wheel.write import OutputMember, ZipWriter, copy_range, kept
from elfpatch.wheel.zipread import (
    METHOD_DEFLATED,
    METHOD_STORED,
    ZipArchive,
    ZipMember,
    check_readable,
    decode_failures,
    deflate_module,
    inflate_raw,
)

STATUS_REPAIRED = "repaired"
STATUS_UNCHANGED = "unchanged"
STATUS_PLANNED = "planned"  # --dry-run
STATUS_REFUSED = "refused"  # --strict
STATUS_FAILED = "failed"

# ELF members that are neither loaded nor run (relocatable objects, core
# dumps): left as they are, like any other file.
_NOT_LOADED = (1, 4)  # ET_REL, ET_CORE

Progress = Callable[[str], None]

# Compared at a time when looking for what a fix changed; changed chunks are
# narrowed down to this granularity.
_COMPARE_CHUNK = 4 << 20
_COMPARE_GRAIN = 64 << 10


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
    status: str = STATUS_FAILED
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
    status: str
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

@dataclass
class _Inflated:
    """An ELF member inflated into a scratch file."""

    member: ZipMember
    scratch: ScratchFile
    starts: BlockStarts | None  # None: not deflated, or zlib not at hand


@dataclass
class _Spliced:
    output: OutputMember
    digest: str  # its RECORD hash


class _WheelJob:
    """Everything one wheel's repair needs, and the steps in order."""

    def __init__(self, wheel: Path, destination: Path | None, options: FixOptions,
                 staging: Staging, scratch_dir: Path, progress: Progress) -> None:
        self.wheel, self.destination, self.options = wheel, destination, options
        self.staging, self.scratch_dir = staging, scratch_dir
        self.progress = lambda text: progress(f"{wheel.name}: {text}")
        self.result = _WheelRecord(str(wheel), str(destination) if destination else None)
        self._scratch: list[ScratchFile] = []

    def run(self) -> _WheelRecord:
        try:
            with open_archive(self.wheel) as archive:
                self.result.size_before = archive.size
                self._repair(archive)
        except ElfpatchError as error:
            self.result.status = STATUS_FAILED
            self.result.errors.append(error)
        except OSError as error:
            self.result.status = STATUS_FAILED
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
        _ensure_descriptors(len(members))
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
            self.result.status = STATUS_REFUSED
            return
        if self.destination is None:
            self.result.status = STATUS_PLANNED
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

    def _plan(self, archive: ZipArchive, inflated: list[_Inflated],
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
                     rows: dict[str, RecordEntry]) -> list[_Inflated]:
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
            return _inflate_member(archive, member, rows[member.name], scratch)

        # Only block starts come back from the other half: its copies of the scratch
        # files' objects must not be the ones that close them.
        starts = in_two_halves(jobs, lambda job: _inflate_cost(job[0]), inflate)
        return [_Inflated(member, scratch, found)
                for (member, scratch), found in zip(jobs, starts, strict=True)]

    def _write_repaired(self, archive: ZipArchive, record: ZipMember, record_text: str,
                        rows: dict[str, RecordEntry],
                        changed: dict[str, tuple[_Inflated, LibraryPlan]]) -> None:
        spliced = self._patch_all(archive, rows, changed)
        new_record = _new_record(record_text, record, {n: s.digest for n, s in spliced.items()},
                                 {n: s.output.size for n, s in spliced.items()})
        outputs = []
        for member in archive.members:
            if is_signature(member.name):
                continue
            if member.name == record.name:
                outputs.append(_record_output(member, new_record))
            elif member.name in spliced:
                outputs.append(spliced[member.name].output)
            else:
                outputs.append(kept(member, archive.fd))
        self._stage(archive, outputs, record.name, new_record)
        self.result.status = STATUS_REPAIRED

    def _require_space(self, needed: int, purpose: str) -> None:
        require_space(self.scratch_dir, needed, str(self.wheel), purpose,
                      hint="-w on a file system with more space (its scratch files go there)")

    def _patch_all(self, archive: ZipArchive, rows: dict[str, RecordEntry],
                   changed: dict[str, tuple[_Inflated, LibraryPlan]]) -> dict[str, _Spliced]:
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

        def patch(job: tuple[str, _Inflated, LibraryPlan, ScratchFile]) -> _Spliced:
            name, item, plan, patched = job
            self.progress(f"fixing {number[name]}/{len(jobs)} {name}")
            try:
                write_patched_input(FixInput(name, item.scratch.path), plan, patched)
            except ElfpatchError as error:  # it names the member; the wheel goes first
                if error.path == name:
                    raise error.relabelled(archive.label(item.member)) from None
                raise
            return _splice(archive, item, patched, plan, rows[name],
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
        copy_range(archive.fd, 0, archive.size, staged.fd)
        os.fchmod(staged.fd, _new_file_mode())
        outputs = [kept(member, archive.fd) for member in archive.members]
        self._verify(staged.path, outputs, record.name, record_text, archive)
        self.result.status = STATUS_UNCHANGED
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
        os.fchmod(staged.fd, _new_file_mode())
        self._verify(staged.path, outputs, record_name, record_text, archive)

    def _verify(self, staged: Path, outputs: list[OutputMember], record_name: str,
                record_text: str, source: ZipArchive) -> None:
        assert self.destination is not None
        self.progress("verifying")
        verify_wheel(staged, source, self.destination, outputs, record_name, record_text,
                     self.progress)


def _new_file_mode() -> int:
    """What a new file gets here: 0666 less the umask (the staged file starts at 0600)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def _ensure_descriptors(members: int) -> None:
    """Room for a scratch file per ELF member (they are planned together)."""
    wanted = members * 2 + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        new = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))


# -- reading a member -----------------------------------------------------------------

def _inflate_cost(member: ZipMember) -> int:
    """How long inflating a member takes, roughly: its size, and more for what was squeezed
    more (back-references cost more than literals)."""
    return 2 * member.size - min(member.compressed_size, member.size)


def _inflate_member(archive: ZipArchive, member: ZipMember, row: RecordEntry,
                    scratch: ScratchFile) -> BlockStarts | None:
    """The member's content into ``scratch``, checked against its CRC-32 and RECORD row;
    its deflate block starts (None when it is not deflated or zlib is not at hand)."""
    check_readable(archive, member)
    hasher = row.hasher(archive.label(member), member.name)
    starts = BlockStarts() if member.method == METHOD_DEFLATED and \
        block_inflate_available() else None
    crc32 = deflate_module().crc32
    crc = 0
    try:
        chunks: Iterator[bytes | memoryview]
        if starts is not None:
            from elfpatch.wheel.deflate_splice import inflate_blocks

            chunks = inflate_blocks(archive.raw_chunks(member), member.size, starts)
        else:
            chunks = archive.decoded_chunks(member)
        for chunk in chunks:
            hasher.update(chunk)
            crc = crc32(chunk, crc)
            _write_all(scratch.fd, chunk)
    except InflateError as error:
        reason = f"corrupt compressed data ({error.reason})" if error.corrupt else error.reason
        raise archive.error(member, reason) from None
    if crc != member.crc:
        raise archive.error(member, "CRC-32 does not match the content")
    if not row.matches(hasher, member.size):
        raise InputError(archive.label(member), "broken RECORD: the hash or size does not match "
                         "the content")
    return starts


def _write_all(descriptor: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


# -- a changed member ------------------------------------------------------------------

def _splice(archive: ZipArchive, item: _Inflated, patched: ScratchFile, plan: LibraryPlan,
            row: RecordEntry, fresh: ScratchFile) -> _Spliced:
    """The new compressed stream of a patched member, inflated once to prove it.

    The new stream must inflate to exactly the patched (and verified) file;
    what it inflates to is what RECORD's new hash is computed from.
    """
    member = item.member
    label = archive.label(member)
    _rescan(patched, plan, label)
    hasher = row.hasher(label, member.name)
    stored = member.method == METHOD_STORED
    changed, crc = _compare(item.scratch.fd, patched.fd, member.size,
                            hasher if stored else None)
    if stored:  # stays stored: the patched file is the data
        pieces: tuple[Piece, ...] = ((patched.fd, 0, member.size),) if member.size else ()
    else:
        if item.starts is not None:
            segments = splice_plan(item.starts, member.size, member.compressed_size * 8, changed)
        else:
            segments = [Fresh(0, member.size, None)]
        pieces = tuple(build_stream(segments, (archive.fd, member.data_offset), patched.fd,
                                    fresh.fd))
        _prove_stream(pieces, patched.fd, member.size, hasher, label)
    size = sum(len(p) if isinstance(p, bytes) else p[2] for p in pieces)
    method = METHOD_STORED if stored else METHOD_DEFLATED
    output = OutputMember(member, method, crc, size, member.size, pieces)
    return _Spliced(output, hash_text(hasher))


def _prove_stream(pieces: tuple[Piece, ...], expected: int, size: int,
                  hasher: hashlib._Hash, label: str) -> None:
    """The new stream inflates to the bytes of ``expected``; ``hasher`` is fed them."""
    offset = 0
    failures: tuple[type[BaseException], ...] = (*decode_failures(), ValueError)
    try:
        for chunk in inflate_raw(piece_bytes(pieces), size):
            if os.pread(expected, len(chunk), offset) != chunk:
                raise ValueError(f"it differs from the fixed library from byte {offset} on")
            hasher.update(chunk)
            offset += len(chunk)
    except failures as error:
        raise VerificationError(label, f"the member's new deflate stream does not inflate to "
                                f"the fixed library ({error}); nothing was written") from None


def _compare(old: int, new: int, size: int,
             hasher: hashlib._Hash | None) -> tuple[list[tuple[int, int]], int]:
    """The byte ranges where ``new`` differs from ``old`` (to ``_COMPARE_GRAIN``), and
    ``new``'s CRC-32; ``hasher``, if any, is fed ``new``."""
    crc32 = deflate_module().crc32
    changed: list[tuple[int, int]] = []
    crc = 0
    for offset in range(0, size, _COMPARE_CHUNK):
        after = os.pread(new, _COMPARE_CHUNK, offset)
        before = os.pread(old, _COMPARE_CHUNK, offset)
        if len(after) != min(_COMPARE_CHUNK, size - offset) or len(before) != len(after):
            raise OSError("a scratch file is shorter than the member")
        if hasher is not None:
            hasher.update(after)
        crc = crc32(after, crc)
        if after != before:
            changed.extend(_changed_grains(before, after, offset))
    return _coalesced(changed), crc


def _changed_grains(before: bytes, after: bytes, base: int) -> Iterator[tuple[int, int]]:
    for start in range(0, len(after), _COMPARE_GRAIN):
        end = start + _COMPARE_GRAIN
        if before[start:end] != after[start:end]:
            yield base + start, base + min(end, len(after))


def _coalesced(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in ranges:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _rescan(patched: ScratchFile, plan: LibraryPlan, label: str) -> None:
    """Read the fixed member again: no planned symbol may still be UNIQUE."""
    planned = {change.name for change in plan.changes}
    try:
        with ElfFile.open(patched.path) as elf:
            left = {table.name(i) for table in symbol_tables(elf) for i in table.unique_indices()}
    except ElfpatchError as error:
        raise VerificationError(label, f"the fixed member does not read back: {error.reason}"
                                ) from None
    except PARSE_FAILURES as error:
        raise CorruptElfError(label, f"the fixed member does not read back ({error})") from None
    still = sorted(planned & left)
    if still:
        raise VerificationError(label, f"{len(still)} planned symbols are still UNIQUE in the "
                                f"fixed member (first: {still[0]}); nothing was written")


# -- RECORD ---------------------------------------------------------------------------

def _new_record(text: str, record: ZipMember, digests: dict[str, str],
                sizes: dict[str, int]) -> str:
    """RECORD with the new rows of changed members and without signatures' rows."""
    lines = []
    for path, digest, size in parse_record(text, record.name):
        if is_signature(path):
            continue
        if path in digests:
            digest, size = digests[path], str(sizes[path])
        lines.append(record_line(path, digest, size))
    return "\n".join(lines) + "\n"


def _record_output(entry: ZipMember, text: str) -> OutputMember:
    data = text.encode("utf-8")
    crc = zlib.crc32(data)
    if entry.method == METHOD_STORED:
        return OutputMember(entry, METHOD_STORED, crc, len(data), len(data), (data,))
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    packed = compressor.compress(data) + compressor.flush()
    return OutputMember(entry, METHOD_DEFLATED, crc, len(packed), len(data), (packed,))
