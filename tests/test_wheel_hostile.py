"""Hostile wheels: every way a wheel can lie, and what ``fix -w``, ``scan`` and ``check`` do.

Each case is the real extension wheel of the ``wheel`` fixture with one
lie added: a member name that escapes (absolute, ``..``, backslash), a
control character, a duplicate, a file that is also a folder, headers that
disagree, data before the archive, a central directory out of place,
encryption, an unknown method, a RECORD that is wrong, sizes that lie.
For each, ``fix -w`` ends with one clean line on stderr and exit 2, or
with a correct repaired wheel; never an internal error; and nothing is
written anywhere but OUTDIR (the whole temporary root of the test is
compared before and after, with TMPDIR inside it).  ``scan`` and ``check``
given the bad wheel and a good one report the good one and one error.

The bombs (a member that inflates far past its declared size, a declared
6 GiB member, an honest 1 GiB member) run in a child process whose peak
resident memory must stay under 300 MB.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from support.build import invoke
from support.record import assert_record_matches
from support.zipcraft import (
    UNIX_SYMLINK,
    Entry,
    build,
    hostile_wheel,
    local_record,
    record_name,
    wheel_entries,
    with_record,
)

from elfpatch.wheel.zipread import open_zip

Builder = Callable[[Path, Path, Path], Path]  # (base wheel, destination, test root) -> wheel


@dataclass(frozen=True)
class Case:
    name: str
    make: Builder
    fix_error: str | None  # words of fix -w's one error line; None: a correct repaired wheel
    scan_error: str | None  # the same for scan and check (they read less than fix)


def _elf(base: Path) -> bytes:
    return next(e.data for e in wheel_entries(base) if str(e.name).endswith(".so"))


def _extra(*entries: Callable[[Path, Path], Entry], **options: object) -> Builder:
    """The base wheel plus hostile members (listed in RECORD)."""
    def make(base: Path, destination: Path, root: Path) -> Path:
        return hostile_wheel(base, destination, [entry(base, root) for entry in entries],
                             **options)  # type: ignore[arg-type]
    return make


def _named(name: str | bytes, flags: int | None = None) -> Callable[[Path, Path], Entry]:
    return lambda base, root: Entry(name, _elf(base), flags=flags)


def _each(change: Callable[[Entry], Entry], only: Callable[[Entry], bool] = lambda e: True,
          **options: object) -> Builder:
    """The base wheel with ``change`` applied to its members (RECORD rebuilt first)."""
    def make(base: Path, destination: Path, root: Path) -> Path:
        entries = with_record(wheel_entries(base))
        entries = [change(e) if only(e) else e for e in entries]
        destination.write_bytes(build(entries, **options))  # type: ignore[arg-type]
        return destination
    return make


def _is_elf(entry: Entry) -> bool:
    return entry.data[:4] == b"\x7fELF"


def _record(rows: Callable[[Path], dict[str, str]]) -> Builder:
    def make(base: Path, destination: Path, root: Path) -> Path:
        entries = wheel_entries(base)
        destination.write_bytes(build(with_record(entries, rows(base))))
        return destination
    return make


def _elf_name(base: Path) -> str:
    return next(str(e.name) for e in wheel_entries(base) if str(e.name).endswith(".so"))


def _raw_record(text: bytes) -> Builder:
    def make(base: Path, destination: Path, root: Path) -> Path:
        entries = wheel_entries(base)
        record = record_name(entries)
        entries = [replace(e, data=text) if e.name == record else e for e in with_record(entries)]
        destination.write_bytes(build(entries))
        return destination
    return make


def _bytes(change: Callable[[bytes], bytes]) -> Builder:
    def make(base: Path, destination: Path, root: Path) -> Path:
        destination.write_bytes(change(build(with_record(wheel_entries(base)))))
        return destination
    return make


def _overlapping(base: Path, destination: Path, root: Path) -> Path:
    """Fifield's bomb: a second central entry whose local header lies inside another's data."""
    elf = _elf(base)
    inner = Entry("uniqpkg/inner.so", elf)
    inner_record = local_record(inner, zlib.crc32(elf), len(inner.compressed()), len(elf),
                                inner.compressed())
    outer = Entry("uniqpkg/outer.bin", inner_record, zipfile.ZIP_STORED)
    pointer = replace(inner, central_only=True, offset=30 + len(outer.raw_name))
    entries = with_record([outer, pointer, *wheel_entries(base)])
    destination.write_bytes(build(entries))
    return destination


def _drop(suffix: str) -> Builder:
    def make(base: Path, destination: Path, root: Path) -> Path:
        entries = [e for e in wheel_entries(base) if not str(e.name).endswith(suffix)]
        destination.write_bytes(build(with_record(entries)))
        return destination
    return make


def _zip64_huge(base: Path, destination: Path, root: Path) -> Path:
    entries = with_record(wheel_entries(base))
    entries = [replace(e, zip64=True, size=6 << 30) if _is_elf(e) else e for e in entries]
    destination.write_bytes(build(entries))
    return destination


CASES = [
    # names
    Case("absolute", lambda b, d, r: _extra(_named(f"{r}/escaped/abs.so"))(b, d, r),
         "absolute member name", "absolute member name"),
    Case("double-slash", _extra(_named("//escaped/abs.so")), "absolute", "absolute"),
    Case("dotdot", _extra(_named("../../escaped.so")), "'..' component", "'..' component"),
    Case("dotdot-inside", _extra(_named("uniqpkg/../../../escaped.so")), "'..' component",
         "'..' component"),
    Case("dot", _extra(_named("uniqpkg/./x.so")), "'.' component", "'.' component"),
    Case("empty-component", _extra(_named("uniqpkg//x.so")), "empty component",
         "empty component"),
    Case("backslash", _extra(_named("uniqpkg\\..\\..\\escaped.so")), "backslash", "backslash"),
    Case("nul", _extra(_named(b"uniqpkg/x\x00.so")), "NUL byte", "NUL byte"),
    Case("carriage-return", _extra(_named("uniqpkg/x\r.so")), "control character",
         "control character"),
    Case("escape-sequence", _extra(_named("uniqpkg/\x1b[2Jx.so")), "control character",
         "control character"),
    Case("empty-name", _extra(_named("")), "empty member name", "empty member name"),
    Case("duplicate", _extra(_named("uniqpkg/twice.so"), _named("uniqpkg/twice.so")),
         "two members have this name", "two members have this name"),
    Case("bad-utf8", _extra(_named(b"uniqpkg/\xff.so", flags=0x800)), "not valid UTF-8",
         "not valid UTF-8"),
    Case("cp437", _extra(lambda b, r: Entry(b"uniqpkg/caf\x82.txt", b"cp437 name", flags=0)),
         None, None),
    Case("file-and-folder", _extra(_named("uniqpkg/x"), _named("uniqpkg/x/y.so")),
         "both a file and a folder", "both a file and a folder"),
    Case("folder-entry-and-file",
         _extra(lambda b, r: Entry("uniqpkg/d/", b""), _named("uniqpkg/d")),
         "both a file and a folder", "both a file and a folder"),
    Case("long-name", _extra(_named("a/" * 2100 + "x.so")), "more than 4096",
         "more than 4096"),
    Case("long-component", _extra(_named("uniqpkg/" + "x" * 300 + ".so")),
         "longer than 255", "longer than 255"),
    # structure
    Case("overlapping-entries", _overlapping, "overlaps", "overlaps"),
    Case("data-before-archive", _bytes(lambda z: b"#!/bin/sh\nexit 0\n" * 40 + z),
         "data before the archive", "data before the archive"),
    Case("data-before-first-member",
         _each(lambda e: e, prefix=b"MZ" + bytes(510), offsets_include_prefix=True),
         "data before the first member", "data before the first member"),
    Case("directory-offset-too-far", _each(lambda e: e, directory_shift=7), "past itself",
         "past itself"),
    Case("directory-offset-too-near", _each(lambda e: e, directory_shift=-7), "after where",
         "after where"),
    Case("truncated", _bytes(lambda z: z[: len(z) // 2]), "not a zip archive",
         "not a zip archive"),
    Case("empty-file", _bytes(lambda z: b""), "not a zip archive", "not a zip archive"),
    Case("comment-length-lies", _bytes(lambda z: z[:-2] + b"\x0a\x00abc"), "not a zip archive",
         "not a zip archive"),
    Case("count-lies", _each(lambda e: e, end_count=4000), "more than", "more than"),
    Case("count-too-small", _each(lambda e: e, end_count=2), "bytes after its 2 entries",
         "bytes after its 2 entries"),
    Case("local-name-differs", _each(lambda e: replace(e, local_name=b"uniqpkg/other.so"),
                                     _is_elf),
         "names a different member", "names a different member"),
    Case("local-method-differs", _each(lambda e: replace(e, local_method=0), _is_elf),
         "method or flags differ", "method or flags differ"),
    Case("local-sizes-differ", _each(lambda e: replace(e, local_sizes=(1, 2, 3)), _is_elf),
         "CRC-32 or sizes differ", "CRC-32 or sizes differ"),
    Case("offset-into-directory", _each(lambda e: replace(e, offset=10**6), _is_elf),
         "not before the central directory", "not before the central directory"),
    # members
    Case("wrong-crc-elf", _each(lambda e: replace(e, crc=zlib.crc32(e.data) ^ 1), _is_elf),
         "CRC-32 does not match", "CRC-32 does not match"),
    Case("wrong-crc-other", _each(lambda e: replace(e, crc=zlib.crc32(e.data) ^ 1),
                                  lambda e: str(e.name).endswith("METADATA")),
         "CRC-32 does not match", None),
    Case("corrupt-deflate", _each(lambda e: replace(e, payload=b"\xff" * 4096), _is_elf),
         "corrupt compressed data", "corrupt compressed data"),
    Case("trailing-data", _each(lambda e: replace(e, payload=e.compressed() + b"junk"),
                                _is_elf), "after the end of the compressed stream",
         "after the end of the compressed stream"),
    Case("unsupported-method", _each(lambda e: replace(e, method=93, payload=b"zstd?"),
                                     _is_elf), "compression method 93 (zstd)",
         "compression method 93 (zstd)"),
    Case("encrypted", _each(lambda e: replace(e, flags=0x1), _is_elf), "encrypted", "encrypted"),
    Case("inflates-past-declared", _each(lambda e: replace(e, data=e.data + bytes(1 << 20),
                                                           size=len(e.data)), _is_elf),
         "inflates past its stated", "inflates past its stated"),
    Case("declared-larger", _each(lambda e: replace(e, size=len(e.data) * 50), _is_elf),
         "inflates to", "inflates to"),
    Case("declared-6-gib", _zip64_huge, "more than deflate can produce",
         "more than deflate can produce"),
    Case("stored-size-lies", _each(lambda e: replace(e, method=0, size=len(e.data) + 5),
                                   _is_elf), "claims to hold", "claims to hold"),
    Case("folder-with-content", _extra(lambda b, r: Entry("uniqpkg/dir/", b"data")),
         "folder entry with content", "folder entry with content"),
    # what the archive format allows, and a wheel may carry
    Case("zip64-extras", _each(lambda e: replace(e, zip64=True)), None, None),
    Case("zip64-end-records", _each(lambda e: e, zip64_end=True), None, None),
    Case("data-descriptors", _each(lambda e: replace(e, descriptor=True)), None, None),
    Case("stored-members", _each(lambda e: replace(e, method=0)), None, None),
    Case("symlink-member", _extra(lambda b, r: Entry("uniqpkg/link", b"../../../../etc/passwd",
                                                     external_attr=UNIX_SYMLINK)), None, None),
    Case("version-needed-99", _each(lambda e: replace(e, version_needed=99)), None, None),
    Case("archive-comment", _each(lambda e: e, comment=b"built by hand"), None, None),
    # RECORD
    Case("record-size-not-a-number",
         _record(lambda b: {_elf_name(b): f"{_elf_name(b)},sha256=x,12a"}), "not a number",
         None),
    Case("record-not-utf8", _raw_record(b"uniqpkg/__init__.py,,\n\xff\xfe,,\n"), "not UTF-8",
         None),
    Case("record-wrong-hash",
         _record(lambda b: {_elf_name(b): f"{_elf_name(b)},sha256=AAAA,{len(_elf(b))}"}),
         "broken RECORD", None),
    Case("record-weak-hash",
         _record(lambda b: {_elf_name(b): f"{_elf_name(b)},md5=AAAA,{len(_elf(b))}"}),
         "not sha256 or stronger", None),
    Case("record-missing-elf", _record(lambda b: {_elf_name(b): ""}), "not listed", None),
    Case("record-missing-other", _record(lambda b: {"uniqpkg/__init__.py": ""}), "not listed",
         None),
    Case("record-listed-twice", _raw_record(b"a,,\na,,\n"), "listed twice", None),
    Case("no-wheel-metadata", _drop("/WHEEL"), "not a wheel", "not a wheel"),
]


# -- the run and its checks ----------------------------------------------------------

def snapshot(root: Path) -> dict[str, tuple[int, int, bool]]:
    """Every path under ``root``: (size, mtime, is a link)."""
    found = {}
    for directory, folders, files in os.walk(root):
        for name in folders + files:
            path = Path(directory) / name
            status = path.lstat()
            found[str(path.relative_to(root))] = (status.st_size, status.st_mtime_ns,
                                                  path.is_symlink())
    return found


def one_error_line(stderr: str, wheel: Path, words: str) -> None:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"elfpatch: error: {wheel}"), lines[0]
    assert words in lines[0], lines[0]
    assert "internal error" not in lines[0] and "\x1b" not in lines[0] and "\r" not in lines[0]


def assert_correct_repair(original: Path, repaired: Path) -> None:
    """The repaired wheel reads back in zipfile and in the wheel package, RECORD and all."""
    with zipfile.ZipFile(repaired) as archive:
        assert archive.testzip() is None
        assert all(not info.flag_bits & 0x8 for info in archive.infolist())  # no descriptors
    assert_record_matches(repaired)  # each member against its RECORD row, by wheel and csv
    # The original is read by elfpatch's reader: zipfile refuses some of them.
    with open_zip(original) as before, open_zip(repaired) as after:
        assert [m.name for m in after.members] == [m.name for m in before.members]
        for old, new in zip(before.members, after.members, strict=True):
            assert (old.raw_name, old.dos_time, old.dos_date, old.external_attr) == \
                (new.raw_name, new.dos_time, new.dos_date, new.external_attr)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's whole temporary root, with the system temporary folder inside it."""
    (tmp_path / "tmp").mkdir()
    (tmp_path / "in").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    return tmp_path


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fix_w_refuses_in_one_line_or_repairs(case: Case, wheel: Path, root: Path) -> None:
    bad = case.make(wheel, root / "in" / wheel.name, root)
    out = root / "out"
    before = snapshot(root)
    result = invoke("fix", str(bad), "-w", str(out))
    assert result.exception is None, result.exception
    assert "internal error" not in result.stderr
    if case.fix_error is not None:
        assert result.exit_code == 2, result.stdout
        one_error_line(result.stderr, bad, case.fix_error)
        assert snapshot(root) == before  # OUTDIR not even created
    else:
        assert result.exit_code == 0, result.stderr
        assert_correct_repair(bad, out / wheel.name)
        after = snapshot(root)
        assert set(after) - set(before) == {"out", f"out/{wheel.name}"}
        assert {k: v for k, v in after.items() if k in before} == before
    assert not (root / "escaped").exists() and not (root.parent / "escaped.so").exists()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_scan_and_check_report_the_good_wheel_beside_a_bad_one(case: Case, wheel: Path,
                                                                root: Path) -> None:
    bad = case.make(wheel, root / "in" / wheel.name, root)
    before = snapshot(root)
    scan = invoke("scan", "--json", str(bad), str(wheel))
    check = invoke("check", "--format", "json", "--config", os.devnull, str(bad), str(wheel))
    for result in (scan, check):
        assert result.exception is None, result.exception
        assert "internal error" not in result.stderr
        document = json.loads(result.stdout)
        paths = {record["path"] for record in document["files"]}
        assert str(wheel) in paths  # the good wheel is reported whatever the bad one does
        if case.scan_error is not None:
            assert result.exit_code == 2
            one_error_line(result.stderr, bad, case.scan_error)
            assert [e["path"].startswith(str(bad)) for e in document["errors"]] == [True]
        else:
            assert result.exit_code in (0, 1), result.stderr  # check: 1 is the policy
            assert str(bad) in paths
    # scan unpacks a wheel's ELF members into a folder of TMPDIR for the loader's verdict
    # and removes it: nothing is left, though TMPDIR's own modification time moves.
    after = snapshot(root)
    assert after.keys() == before.keys()
    assert {k: v for k, v in after.items() if k != "tmp"} == \
        {k: v for k, v in before.items() if k != "tmp"}


# -- places an attacker may prepare ----------------------------------------------------

def test_a_symlink_planted_where_outputs_go_is_not_followed(wheel: Path, root: Path) -> None:
    out = root / "out"
    out.mkdir()
    victim = root / "victim.txt"
    victim.write_text("precious")
    for name in (f".{wheel.name}.elfpatch", f".{wheel.name}.tmp", wheel.name):
        (out / name).symlink_to(victim)
    result = invoke("fix", str(wheel), "-w", str(out))
    assert result.exit_code == 0, result.stderr
    assert victim.read_text() == "precious"
    assert not (out / wheel.name).is_symlink()  # the link itself was replaced
    assert_correct_repair(wheel, out / wheel.name)


def test_a_fifo_named_as_the_wheel_is_refused_without_waiting(wheel: Path, root: Path) -> None:
    pipe = root / "in" / "pipe-1.0-py3-none-any.whl"
    os.mkfifo(pipe)
    folder = root / "in" / "folder-1.0-py3-none-any.whl"
    folder.mkdir()
    for path, words in ((pipe, "not a regular file"), (folder, "is a directory")):
        try:
            run = subprocess.run([sys.executable, "-m", "elfpatch", "fix", str(path), "-w",
                                  str(root / "out")], capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"fix -w {path} did not finish: it waits on the FIFO")
        assert run.returncode == 2
        one_error_line(run.stderr, path, words)
    assert not (root / "out").exists()


def test_two_runs_into_one_outdir_at_once_both_succeed(wheel: Path, root: Path) -> None:
    out = root / "out"
    command = [sys.executable, "-m", "elfpatch", "fix", str(wheel), "-w", str(out)]
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(4)]
    for run in runs:
        _stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stderr
    assert sorted(p.name for p in out.iterdir()) == [wheel.name]
    assert_correct_repair(wheel, out / wheel.name)


# -- bombs, in a child whose peak memory is measured -----------------------------------

_PEAK_LIMIT_MB = 300


# Runs elfpatch in a child of its own and writes that child's peak resident memory
# (KiB) to the file named first.  Linux keeps a process's peak across execve, and a
# process forked (or vforked) from pytest starts with pytest's: so the measured
# process is forked from this small one, never from pytest itself.
_MEASURE = """
import os, sys
report, args = sys.argv[1], sys.argv[2:]
child = os.fork()
if child == 0:
    os.execv(sys.executable, [sys.executable, "-m", "elfpatch", *args])
_pid, status, usage = os.wait4(child, 0)
with open(report, "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_measured(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """``elfpatch ARGS`` in a child: its result and its own peak resident memory in MB
    (with the children it waited for, as wait4 reports it)."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "maxrss"
        run = subprocess.run([sys.executable, "-c", _MEASURE, str(report), *args], cwd=cwd,
                             capture_output=True, text=True, timeout=600)
        return run, int(report.read_text()) / 1024


def test_the_measured_peak_is_the_childs_not_pytests(tmp_path: Path) -> None:
    """However large this test process has grown, a child's figure is its own."""
    ballast = bytearray(400 << 20)
    ballast[:: 4096] = b"x" * len(ballast[:: 4096])  # touch every page: 400 MB resident
    run, peak = run_measured("--version", cwd=tmp_path)
    del ballast
    assert run.returncode == 0, run.stderr
    assert peak < 100, f"{peak:.0f} MB"


_STEP = 1 << 22


def _flushed(data: bytes, level: int = 9) -> bytes:
    """``data`` deflated into blocks that end on a byte and need nothing before them."""
    packer = zlib.compressobj(level, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush(zlib.Z_FULL_FLUSH)


def _zeros_stream(total: int) -> bytes:
    """Deflate blocks of ``total`` zero bytes, made without deflating them all (one
    full-flushed block of 4 MiB of zeros, repeated), not yet ended."""
    whole, rest = divmod(total, _STEP)
    return _flushed(bytes(_STEP)) * whole + (_flushed(bytes(rest)) if rest else b"")


_END = b"\x03\x00"  # a final, empty fixed-code block


def _digests_with_zeros(head: bytes, zeros: int) -> tuple[int, str]:
    """CRC-32 and RECORD hash of ``head`` followed by ``zeros`` zero bytes."""
    import base64
    import hashlib

    crc, hasher = zlib.crc32(head), hashlib.sha256(head)
    whole, rest = divmod(zeros, _STEP)
    block = bytes(_STEP)
    for _ in range(whole):
        crc, _ = zlib.crc32(block, crc), hasher.update(block)
    crc, _ = zlib.crc32(bytes(rest), crc), hasher.update(bytes(rest))
    digest = base64.urlsafe_b64encode(hasher.digest()).rstrip(b"=").decode()
    return crc, f"sha256={digest}"


def test_a_small_member_that_inflates_to_2_gib_is_refused_in_little_memory(
        wheel: Path, root: Path) -> None:
    """15 KB declared, 2 GiB inside: refused as soon as the stream passes 15 KB."""
    stream = _flushed(b"\x7fELF") + _zeros_stream(2 << 30) + _END
    assert len(stream) < 3 << 20
    lie = Entry("uniqpkg/bomb.so", b"\x7fELF" + bytes(15 * 1024 - 4), payload=stream)
    bad = hostile_wheel(wheel, root / "in" / wheel.name, [lie])
    for args in (("fix", str(bad), "-w", str(root / "out")), ("scan", str(bad)),
                 ("check", "--config", os.devnull, str(bad))):
        run, peak = run_measured(*args, cwd=root)
        assert run.returncode == 2, run.stderr
        one_error_line(run.stderr, bad, "inflates past its stated 15360 bytes")
        assert peak < _PEAK_LIMIT_MB, f"{args[0]}: {peak:.0f} MB"
    assert not (root / "out").exists()
    assert list((root / "tmp").iterdir()) == []


def test_a_declared_6_gib_member_costs_nothing(wheel: Path, root: Path) -> None:
    """A wheel that declares a 6 GiB member: refused before anything of that size is
    allocated or mapped, whether the claim is implausible at once (3 KB of data) or
    plausible (7 MiB of stored blocks: deflate could make 6 GiB of that) until the
    stream ends."""
    elf = _elf(wheel)
    plausible = Entry("uniqpkg/huge.so", elf, zip64=True, size=6 << 30,
                      payload=zlib.compress(b"\x7fELF" + bytes(7 << 20), 0, -15))
    implausible = Entry("uniqpkg/huge.so", elf, zip64=True, size=6 << 30)
    for entry, words in ((plausible, f"inflates to {(7 << 20) + 4} bytes, not {6 << 30}"),
                         (implausible, "more than deflate can produce")):
        bad = hostile_wheel(wheel, root / "in" / wheel.name, [entry])
        for args in (("fix", str(bad), "-w", str(root / "out")), ("scan", str(bad)),
                     ("check", "--config", os.devnull, str(bad))):
            run, peak = run_measured(*args, cwd=root)
            assert run.returncode == 2, run.stderr
            one_error_line(run.stderr, bad, words)
            assert peak < _PEAK_LIMIT_MB, f"{args[0]}: {peak:.0f} MB"
    assert not (root / "out").exists()
    assert list((root / "tmp").iterdir()) == []


_PLAIN = {"plain.cpp": 'extern "C" int plain() { return 7; }\n'}


def test_an_honest_1_gib_member_is_read_and_copied_in_little_memory(wheel: Path,
                                                                     root: Path) -> None:
    """An ELF library padded to 1 GiB with zeros (nothing to fix in it): scan and check
    spill it to an anonymous file and map that, fix -w to a scratch file in OUTDIR's
    file system; the wheel is copied unchanged."""
    from elfpatch.fixtures import build as fixture_build

    library = fixture_build.build_shared(_PLAIN, "libplain").read_bytes()
    size = 1 << 30
    stream = _flushed(library, 6) + _zeros_stream(size - len(library)) + _END
    crc, digest = _digests_with_zeros(library, size - len(library))
    big = Entry("uniqpkg/big.so", library, payload=stream, crc=crc, size=size)
    bad = hostile_wheel(wheel, root / "in" / wheel.name, [big],
                        rows={"uniqpkg/big.so": f"uniqpkg/big.so,{digest},{size}"})
    out = root / "out"
    for args in (("scan", str(bad)), ("check", "--config", os.devnull, str(bad)),
                 ("fix", "--exclude", ".", str(bad), "-w", str(out))):
        run, peak = run_measured(*args, cwd=root)
        assert run.returncode in (0, 1), run.stderr  # check: 1 is the policy
        assert "internal error" not in run.stderr
        assert peak < _PEAK_LIMIT_MB, f"{args[0]}: {peak:.0f} MB"
    assert (out / wheel.name).read_bytes() == bad.read_bytes()  # nothing to fix: unchanged
    assert list((root / "tmp").iterdir()) == []
