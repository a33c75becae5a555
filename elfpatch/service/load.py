"""Load and unload verdicts for scanned inputs, in the host each kind of input loads in.

A wheel's members are loaded by the Python interpreter of this environment
(a ``musllinux`` wheel by a musl one, whose dlclose unloads nothing); a loose
file by a plain C program; ``host`` names another for every input.  A
wheel's ELF members are unpacked into one temporary folder first, so that
DT_NEEDED resolves through ``$ORIGIN`` and RPATH as it will once installed;
paths inside it are reported as member names.  Files built for another
machine get no verdict: this machine's loader would not load them.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

from elfpatch.analysis.calls_at_load import PltCalls
from elfpatch.analysis.thread_exit import thread_destructor_at_load
from elfpatch.analysis.unique import FileScan
from elfpatch.base.regular_file import require_space
from elfpatch.elf.file import ElfFile
from elfpatch.errors import PARSE_FAILURES, ElfpatchError
from elfpatch.loader.dlopen import LoadHost, LoadVerdict, dlopen_verdict
from elfpatch.loader.host import HostProfile
from elfpatch.wheel.read import elf_members, open_archive


def with_load_verdicts(scans: list[FileScan], host: LoadHost | None = None,
                       profile: HostProfile | None = None,
                       errors: list[ElfpatchError] | None = None,
                       now: bool = False) -> list[FileScan]:
    """``scans`` with ``load`` filled in wherever this machine's loader can answer.

    ``now``: each host, the default ones too, dlopens with RTLD_NOW.  A wheel
    whose members cannot be unpacked for the model (no room in ``TMPDIR``)
    gets no verdicts, and the reason is added to ``errors``.
    """
    profile = profile or HostProfile.of_this_host()
    by_archive: dict[str, list[int]] = defaultdict(list)
    results = list(scans)
    for position, scan in enumerate(scans):
        if scan.machine != profile.machine or scan.elf_type != "DYN":
            continue
        if scan.member is None:
            verdict = _verdict(Path(scan.path), _mode(host or LoadHost.c_program(), now),
                               profile)
            results[position] = dataclasses.replace(scan, load=verdict)
        else:
            by_archive[scan.path].append(position)
    for archive, positions in by_archive.items():
        wheel_host = _mode(host or _wheel_host(archive), now)
        try:
            verdicts = _archive_verdicts(archive, [scans[p].member or "" for p in positions],
                                         wheel_host, profile)
        except ElfpatchError as error:
            # A member that cannot be read was reported by the scan already.
            if errors is not None and all(str(error) != str(e) for e in errors):
                errors.append(error)
            continue
        for position in positions:
            member = scans[position].member or ""
            results[position] = dataclasses.replace(scans[position], load=verdicts.get(member))
    return results


def _mode(host: LoadHost, now: bool) -> LoadHost:
    """``host`` dlopening with RTLD_NOW when asked (it may ask for it itself)."""
    return dataclasses.replace(host, bind_now=True) if now and not host.bind_now else host


def _wheel_host(archive: str) -> LoadHost:
    python = LoadHost.python()
    if "musllinux" in Path(archive).name:
        return dataclasses.replace(python, name="python (musl)", musl=True)
    return python


def load_verdict(path: Path, host: LoadHost, profile: HostProfile | None = None
                 ) -> LoadVerdict:
    """The loader model's verdict, told which objects' initializers register a
    thread_local destructor while they load, and which functions the initializers
    call (both found by following their code)."""
    with _CodeWalks() as walks:
        return dlopen_verdict(path, host, profile=profile,
                              registers_at_load=thread_destructors_at_load,
                              calls_at_load=walks.calls_from)


class _CodeWalks:
    """One walk of each object's code per verdict, its file held open until the end."""

    def __init__(self) -> None:
        self._walks: dict[str, PltCalls] = {}
        self._files: list[ElfFile] = []

    def calls_from(self, path: str, entries: tuple[str, ...]) -> tuple[str, ...]:
        walk = self._walks.get(path)
        if walk is None:
            elf = ElfFile.open(path)
            self._files.append(elf)
            walk = self._walks[path] = PltCalls(elf, path)
        return walk.calls_from(entries)

    def __enter__(self) -> _CodeWalks:
        return self

    def __exit__(self, *_exception: object) -> None:
        for elf in self._files:
            elf.close()


def thread_destructors_at_load(path: str) -> tuple[str, ...] | None:
    with ElfFile.open(path) as elf:
        return thread_destructor_at_load(elf, path)


def _verdict(path: Path, host: LoadHost, profile: HostProfile) -> LoadVerdict | None:
    try:
        return load_verdict(path, host, profile)
    except (ElfpatchError, *PARSE_FAILURES):
        return None  # the scan itself reports an unreadable file


def _archive_verdicts(archive: str, members: list[str], host: LoadHost,
                      profile: HostProfile) -> dict[str, LoadVerdict | None]:
    """Each member's verdict, with the wheel's ELF members unpacked as they install."""
    folder = Path(tempfile.mkdtemp(prefix="elfpatch-load-"))
    try:
        _unpack_elf_members(Path(archive), folder)
        prefix = str(folder) + "/"
        verdicts: dict[str, LoadVerdict | None] = {}
        for member in members:
            verdict = _verdict(folder / member, host, profile)
            verdicts[member] = None if verdict is None else _renamed(
                verdict, lambda text: _member_names(text, prefix))
        return verdicts
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _member_names(text: str, prefix: str) -> str:
    """``text`` with each path below the unpacked wheel written as its member name."""
    parts = text.split(prefix)
    for k in range(1, len(parts)):
        path, space, rest = parts[k].partition(" ")
        parts[k] = posixpath.normpath(path) + space + rest
    return "".join(parts)


def _unpack_elf_members(archive: Path, folder: Path) -> None:
    """The archive's ELF members below ``folder``, a new private folder.

    The names were checked when the archive was read (no absolute name, no
    ``..``, no file that is also a folder); each file is still created new,
    never through a link, and the space they need is checked first.
    """
    with open_archive(archive) as opened:
        members = elf_members(opened)
        require_space(folder, sum(member.size for member in members), str(archive),
                      "to unpack its ELF members for the loader model",
                      hint="point TMPDIR at a larger file system, or scan --no-loader")
        for member in members:
            target = folder / member.name
            target.parent.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                                 | os.O_CLOEXEC, 0o755)
            with os.fdopen(descriptor, "wb") as handle:  # streamed: no member is held whole
                for chunk in opened.decoded_chunks(member):
                    handle.write(chunk)


def _renamed(verdict: LoadVerdict, rename: Callable[[str], str]) -> LoadVerdict:
    def each(texts: Iterable[str]) -> tuple[str, ...]:
        return tuple(rename(text) for text in texts)

    blockers = tuple(dataclasses.replace(b, detail=rename(b.detail),
                                         via=None if b.via is None else rename(b.via))
                     for b in verdict.blockers)
    return dataclasses.replace(
        verdict, path=rename(verdict.path), blockers=blockers,
        load_errors=each(verdict.load_errors), added=each(verdict.added),
        kept=each(verdict.kept), unique_providers=each(verdict.unique_providers))

