"""``fix -w``: what a repaired wheel holds, and how it is made.

A changed member's new deflate stream keeps the original's blocks where
nothing changed near them: checked on its own (random content, edits at
the start, the middle, the end, every zlib level; decoded by zlib and by
ISA-L) and in a real library whose middle is megabytes of data, whose
compressed bytes must reappear verbatim.  Around that: unchanged members
copied as their compressed bytes, RECORD rewritten, signatures dropped, the
same input giving the same bytes, a wheel with nothing to fix copied byte
for byte, several wheels written all or none, the JSON document valid
against its shipped schema, progress only on a terminal, and a splice
gone wrong caught by the verification before anything is renamed.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from elfpatch.fixtures import build as fixture_build
from support.build import invoke
from support.record import assert_record_matches, record_rows
from support.tools import require_module
from support.zipcraft import Entry, build, wheel_entries, with_record

from elfpatch.wheel import deflate_splice, zipread
from elfpatch.wheel.deflate_splice import BlockStarts, build_stream, inflate_blocks, splice_plan

# -- the splice on its own --------------------------------------------------------------


def _text(size: int, seed: int) -> bytes:
    """Compressible, varied content: deflate makes many blocks of it."""
    chooser = random.Random(seed)
    words = [chooser.randbytes(chooser.randint(2, 12)) for _ in range(400)]
    out = bytearray()
    while len(out) < size:
        out += chooser.choice(words)
    return bytes(out[:size])


def _chunks(data: bytes, step: int = 1 << 16) -> Iterator[bytes]:
    for offset in range(0, len(data), step):
        yield data[offset : offset + step]


def _spliced(old: bytes, new: bytes, level: int, tmp_path: Path) -> tuple[bytes, bytes]:
    """(old stream, new stream spliced from it) through files, as the pipeline does."""
    packer = zlib.compressobj(level, zlib.DEFLATED, -15)
    stream = packer.compress(old) + packer.flush()
    starts = BlockStarts()
    inflated = b"".join(bytes(c) for c in inflate_blocks(_chunks(stream), len(old), starts))
    assert inflated == old
    changed = [(i, i + 1) for i in range(len(old)) if old[i] != new[i]]
    plan = splice_plan(starts, len(new), len(stream) * 8, changed)
    files = {name: os.open(tmp_path / name, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
             for name in ("old.z", "new", "fresh")}
    try:
        os.write(files["old.z"], stream)
        os.write(files["new"], new)
        pieces = build_stream(plan, (files["old.z"], 0), files["new"], files["fresh"])
        spliced = b"".join(p if isinstance(p, bytes) else os.pread(p[0], p[2], p[1])
                           for p in pieces)
    finally:
        for descriptor in files.values():
            os.close(descriptor)
    return stream, spliced


def _inflaters() -> list[object]:
    found: list[object] = [zlib]
    try:
        from isal import isal_zlib
    except ImportError:
        return found
    return [*found, isal_zlib]


@pytest.mark.parametrize("level", [1, 6, 9])
@pytest.mark.parametrize("where", ["start", "middle", "end", "several", "everywhere", "none"])
def test_a_spliced_stream_decodes_to_the_new_content(level: int, where: str,
                                                     tmp_path: Path) -> None:
    if not deflate_splice.block_inflate_available():
        pytest.skip("zlib cannot be loaded through ctypes here (apt-get install zlib1g)")
    old = _text(3 << 20, seed=level)
    new = bytearray(old)
    places = {"start": [10], "middle": [len(old) // 2], "end": [len(old) - 3],
              "several": [100_000, 1_500_000, 1_500_300, 2_900_000],
              "everywhere": list(range(0, len(old), 200_000)), "none": []}[where]
    for place in places:
        new[place] ^= 0x5A
    stream, spliced = _spliced(old, bytes(new), level, tmp_path)
    for module in _inflaters():
        inflater = module.decompressobj(-15)  # type: ignore[attr-defined]
        assert inflater.decompress(spliced) == new, module
        assert inflater.eof and not inflater.unused_data
    if where in ("start", "middle", "end", "none"):
        assert abs(len(spliced) - len(stream)) < len(stream) * 0.01
        middle = stream[len(stream) // 4 : len(stream) // 4 + 4096]
        if where != "middle":  # a kept stretch of the old stream is there, byte for byte
            assert middle in spliced


def test_block_starts_are_sampled_not_all_kept() -> None:
    """A stream of tiny blocks does not make a list as long as the content."""
    if not deflate_splice.block_inflate_available():
        pytest.skip("zlib cannot be loaded through ctypes here (apt-get install zlib1g)")
    data = _text(1 << 20, seed=3)
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    stream = b"".join(packer.compress(data[i : i + 64]) + packer.flush(zlib.Z_FULL_FLUSH)
                      for i in range(0, len(data), 64)) + packer.flush()
    starts = BlockStarts()
    assert b"".join(bytes(c) for c in inflate_blocks(_chunks(stream), len(data), starts)) == data
    assert len(starts.bits) <= 2 * len(data) // deflate_splice.MIN_SPACING + 2


@pytest.mark.parametrize(("damage", "words"), [
    (lambda s: s[: len(s) // 2], "ends early"),
    (lambda s: s + b"more", "after the end"),
    (lambda s: b"\xff" * 10 + s, "invalid"),
])
def test_block_inflate_refuses_broken_streams(damage: object, words: str) -> None:
    if not deflate_splice.block_inflate_available():
        pytest.skip("zlib cannot be loaded through ctypes here (apt-get install zlib1g)")
    data = _text(200_000, seed=5)
    stream = damage(zlib.compress(data, 6, -15))  # type: ignore[operator]
    with pytest.raises(deflate_splice.InflateError, match=words):
        for _chunk in inflate_blocks(_chunks(stream), len(data), BlockStarts()):
            pass


def test_block_inflate_caps_output_at_the_declared_size() -> None:
    if not deflate_splice.block_inflate_available():
        pytest.skip("zlib cannot be loaded through ctypes here (apt-get install zlib1g)")
    stream = zlib.compress(bytes(50 << 20), 9, -15)
    produced = 0
    with pytest.raises(deflate_splice.InflateError, match="past its stated 1000 bytes"):
        for chunk in inflate_blocks(_chunks(stream), 1000, BlockStarts()):
            produced += len(chunk)
    assert produced <= 1001


# -- a real library whose middle is large ------------------------------------------------

BIG_SOURCES = {
    "big.cpp": """
#include <string>
inline int& counter() { static int count = 0; return count; }
template <class T> struct Table { static int rows; };
template <class T> int Table<T>::rows = 5;
extern "C" int big_value() { return ++counter() + Table<long>::rows; }
__asm__(".section .rodata.blob,\\"a\\"\\n.incbin \\"BLOB\\"\\n.previous\\n");
""",
}


@pytest.fixture(scope="module")
def big_wheel(tmp_path_factory: pytest.TempPathFactory, cxx: object) -> Path:
    """A wheel whose library holds 12 MB of data between its symbol tables."""
    root = tmp_path_factory.mktemp("big")
    blob = root / "blob.bin"
    blob.write_bytes(_text(12 << 20, seed=11))
    sources = {"big.cpp": BIG_SOURCES["big.cpp"].replace("BLOB", str(blob))}
    library = fixture_build.build_shared(sources, "libbig", ["-O1"]).read_bytes()
    entries = [Entry("bigpkg/__init__.py", b""), Entry("bigpkg/libbig.so", library),
               Entry("bigpkg/data.txt", _text(300_000, seed=2)),
               Entry("bigpkg-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"),
               Entry("bigpkg-1.0.dist-info/RECORD", b"")]
    path = root / "bigpkg-1.0-cp311-cp311-linux_x86_64.whl"
    path.write_bytes(build(with_record(entries)))
    return path


def _raw(path: Path, name: str) -> bytes:
    with zipread.open_zip(path) as archive:
        member = archive.member(name)
        assert member is not None
        return b"".join(archive.raw_chunks(member))


def test_a_large_library_keeps_its_untouched_compressed_blocks(big_wheel: Path,
                                                               tmp_path: Path) -> None:
    if not deflate_splice.block_inflate_available():
        pytest.skip("zlib cannot be loaded through ctypes here (apt-get install zlib1g)")
    out = tmp_path / "out"
    result = invoke("fix", str(big_wheel), "-w", str(out))
    assert result.exit_code == 0, result.stderr
    repaired = out / big_wheel.name
    old, new = _raw(big_wheel, "bigpkg/libbig.so"), _raw(repaired, "bigpkg/libbig.so")
    assert old != new
    assert abs(len(new) - len(old)) < len(old) * 0.01  # about the size it was
    middle = old[len(old) // 2 : len(old) // 2 + (1 << 20)]
    assert middle in new  # a megabyte of the old stream, kept as it was
    assert _raw(repaired, "bigpkg/data.txt") == _raw(big_wheel, "bigpkg/data.txt")
    with zipfile.ZipFile(repaired) as archive:
        assert archive.testzip() is None
    assert_record_matches(repaired)
    assert invoke("scan", "--json", str(repaired)).exit_code == 0
    document = json.loads(invoke("scan", "--json", str(repaired)).stdout)
    assert document["files"][0]["unique_definitions"] == 0


def test_fallbacks_without_zlib_blocks_or_isal(big_wheel: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Without block starts the member is deflated whole; without ISA-L by zlib: the same
    content either way."""
    reference = tmp_path / "reference"
    assert invoke("fix", str(big_wheel), "-w", str(reference)).exit_code == 0
    monkeypatch.setattr(deflate_splice, "_libz", lambda: None)
    monkeypatch.setitem(sys.modules, "isal", None)
    for cached in (deflate_splice._isal, zipread.deflate_module, zipread.decode_failures):
        cached.cache_clear()
    try:
        out = tmp_path / "out"
        result = invoke("fix", str(big_wheel), "-w", str(out))
        assert result.exit_code == 0, result.stderr
    finally:
        for cached in (deflate_splice._isal, zipread.deflate_module, zipread.decode_failures):
            cached.cache_clear()
    with zipfile.ZipFile(out / big_wheel.name) as a, \
            zipfile.ZipFile(reference / big_wheel.name) as b:
        assert a.read("bigpkg/libbig.so") == b.read("bigpkg/libbig.so")
    assert_record_matches(out / big_wheel.name)


def test_a_bad_splice_is_caught_before_anything_is_renamed(big_wheel: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    original = deflate_splice.build_stream

    def broken(*args: object, **kwargs: object) -> list[object]:
        pieces = original(*args, **kwargs)  # type: ignore[arg-type]
        return [*pieces[:-1], b"\x00" * 7 + (pieces[-1] if isinstance(pieces[-1], bytes)
                                             else os.pread(pieces[-1][0], pieces[-1][2],
                                                           pieces[-1][1]))]

    import elfpatch.wheel.member as member

    monkeypatch.setattr(member, "build_stream", broken)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("there before")
    result = invoke("fix", str(big_wheel), "-w", str(out))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "libbig.so" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


# -- what a repaired wheel holds --------------------------------------------------------

def _signed(wheel: Path, destination: Path) -> Path:
    """The wheel with RECORD.jws and RECORD.p7s, as a signing tool leaves it."""
    entries = wheel_entries(wheel)
    record = next(i for i, e in enumerate(entries) if str(e.name).endswith("/RECORD"))
    folder = str(entries[record].name).rsplit("/", 1)[0]
    entries[record + 1 : record + 1] = [Entry(f"{folder}/RECORD.jws", b"{}"),
                                        Entry(f"{folder}/RECORD.p7s", b"sig")]
    destination.write_bytes(build(with_record(entries)))
    return destination


def test_the_repaired_wheel_keeps_what_did_not_change(wheel: Path, tmp_path: Path) -> None:
    signed = _signed(wheel, tmp_path / wheel.name)
    out = tmp_path / "out"
    result = invoke("fix", str(signed), "-w", str(out))
    assert result.exit_code == 0, result.stderr
    assert "1 member rewritten, RECORD updated" in result.stdout
    repaired = out / wheel.name
    with zipread.open_zip(signed) as before, zipread.open_zip(repaired) as after:
        kept = [m.name for m in before.members if not m.name.endswith((".jws", ".p7s"))]
        assert [m.name for m in after.members] == kept
        for member in after.members:
            old = before.member(member.name)
            assert old is not None
            assert (member.dos_time, member.dos_date, member.external_attr) == \
                (old.dos_time, old.dos_date, old.external_attr)
            if not member.name.endswith((".so", "/RECORD")):  # copied as compressed bytes
                assert b"".join(after.raw_chunks(member)) == b"".join(before.raw_chunks(old))
    assert_record_matches(repaired)
    assert not any(row[0].endswith((".jws", ".p7s")) for row in record_rows(repaired)[1])
    again = tmp_path / "again"
    assert invoke("fix", str(signed), "-w", str(again)).exit_code == 0
    assert (again / wheel.name).read_bytes() == repaired.read_bytes()  # the same bytes


def test_a_wheel_with_nothing_to_fix_is_copied_byte_for_byte(wheel: Path,
                                                             tmp_path: Path) -> None:
    out = tmp_path / "out"
    fixed = tmp_path / "fixed"
    assert invoke("fix", str(wheel), "-w", str(fixed)).exit_code == 0
    signed = _signed(fixed / wheel.name, tmp_path / wheel.name)  # fixed, then signed
    result = invoke("fix", str(signed), "-w", str(out))
    assert result.exit_code == 0, result.stderr
    assert "unchanged" in result.stdout and "RECORD updated" not in result.stdout
    assert (out / wheel.name).read_bytes() == signed.read_bytes()  # signatures still valid
    document = json.loads(invoke("fix", "--json", str(signed), "-w", str(out)).stdout)
    assert document["wheels"][0]["status"] == "unchanged"


def test_stored_and_bzip2_members(wheel: Path, tmp_path: Path) -> None:
    """A changed stored member stays stored; a bzip2 one is deflated; both read back."""
    for method, expected in ((zipfile.ZIP_STORED, zipfile.ZIP_STORED),
                             (zipfile.ZIP_BZIP2, zipfile.ZIP_DEFLATED)):
        entries = with_record(wheel_entries(wheel))
        import bz2

        entries = [e if not str(e.name).endswith(".so") else
                   Entry(e.name, e.data, method,
                         payload=bz2.compress(e.data) if method == zipfile.ZIP_BZIP2 else None)
                   for e in entries]
        source = tmp_path / f"{method}" / wheel.name
        source.parent.mkdir()
        source.write_bytes(build(entries))
        out = tmp_path / f"out{method}"
        result = invoke("fix", str(source), "-w", str(out))
        assert result.exit_code == 0, result.stderr
        with zipfile.ZipFile(out / wheel.name) as archive:
            info = next(i for i in archive.infolist() if i.filename.endswith(".so"))
            assert info.compress_type == expected
            assert archive.testzip() is None
        assert_record_matches(out / wheel.name)


# -- several wheels: all or none -----------------------------------------------------------

def _copy_as(wheel: Path, name: str, folder: Path) -> Path:
    entries = [Entry(str(e.name).replace("uniqpkg", name), e.data, e.method,
                     external_attr=e.external_attr) for e in wheel_entries(wheel)]
    path = folder / wheel.name.replace("uniqpkg", name)
    path.write_bytes(build(with_record(entries)))
    return path


def test_several_wheels_are_written_all_or_none(wheel: Path, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    good = [_copy_as(wheel, name, folder) for name in ("alpha", "beta")]
    bad = folder / "broken-1.0-py3-none-any.whl"
    bad.write_bytes(good[0].read_bytes()[:-30])
    out = tmp_path / "out"
    out.mkdir()
    (out / good[0].name).write_bytes(b"an older build")
    result = invoke("fix", str(good[0]), str(bad), str(good[1]), "-w", str(out))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and str(bad) in result.stderr
    assert sorted(p.name for p in out.iterdir()) == [good[0].name]
    assert (out / good[0].name).read_bytes() == b"an older build"
    result = invoke("fix", *map(str, good), "-w", str(out))
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in good)
    assert "2 wheels: 2 repaired; 2 wheels written" in result.stdout
    for written in good:
        assert_record_matches(out / written.name)


def test_strict_refusal_and_dry_run_write_nothing(wheel: Path, tmp_path: Path) -> None:
    doubled = tmp_path / "in"
    doubled.mkdir()
    entries = wheel_entries(wheel)
    library = next(e for e in entries if str(e.name).endswith(".so"))
    entries.insert(1, Entry(str(library.name).replace("_native", "_twin"), library.data))
    source = doubled / wheel.name
    source.write_bytes(build(with_record(entries)))
    out = tmp_path / "out"
    strict = invoke("fix", "--strict", str(source), "-w", str(out))
    assert strict.exit_code == 1 and "refused" in strict.stdout
    dry = invoke("fix", "--dry-run", "--json", str(source))
    assert dry.exit_code == 0
    document = json.loads(dry.stdout)
    assert document["wheels"][0]["status"] == "planned"
    reasons = {c["reason"] for m in document["wheels"][0]["members"] for c in m["changes"]}
    assert any("_twin" in reason for reason in reasons)  # reasons name members
    assert not out.exists()


# -- the JSON document ----------------------------------------------------------------------

def _schema() -> dict[str, object]:
    import elfpatch.report

    return json.loads((Path(elfpatch.report.__file__).parent /
                       "fix_wheels.schema.json").read_text())


def test_the_json_document_follows_its_shipped_schema(wheel: Path, tmp_path: Path) -> None:
    jsonschema = require_module("jsonschema")
    broken = tmp_path / "broken-1.0-py3-none-any.whl"
    broken.write_bytes(b"PK\x05\x06" + bytes(18))
    runs = {
        "repaired": ("fix", "--json", str(wheel), "-w", str(tmp_path / "a")),
        "unchanged": ("fix", "--json", "--exclude", ".", str(wheel), "-w", str(tmp_path / "b")),
        "planned": ("fix", "--json", "--dry-run", str(wheel)),
        "failed": ("fix", "--json", str(broken), "-w", str(tmp_path / "c")),
    }
    for status, args in runs.items():
        document = json.loads(invoke(*args).stdout)
        jsonschema.validate(document, _schema())
        assert document["wheels"][0]["status"] == status
    repaired = json.loads(invoke(*runs["repaired"]).stdout)["wheels"][0]
    assert repaired["members"][0]["member"].startswith("uniqpkg/_native")
    assert all("/proc/" not in json.dumps(repaired) and "elfpatch-tmp" not in json.dumps(repaired)
               for _ in [0])


# -- progress ---------------------------------------------------------------------------------

def _stderr_on_a_terminal(*args: str) -> tuple[int, str]:
    import pty

    controller, terminal = pty.openpty()
    try:
        run = subprocess.run([sys.executable, "-m", "elfpatch", *args], stderr=terminal,
                             stdout=subprocess.DEVNULL, timeout=300)
        os.close(terminal)
        terminal = -1
        seen = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if terminal >= 0:
            os.close(terminal)
        os.close(controller)
    return run.returncode, seen.decode(errors="replace")


def test_progress_only_on_a_terminal_and_not_with_quiet(big_wheel: Path,
                                                        tmp_path: Path) -> None:
    code, shown = _stderr_on_a_terminal("fix", str(big_wheel), "-w", str(tmp_path / "a"))
    assert code == 0
    assert "reading" in shown and "bigpkg/libbig.so" in shown and "verifying" in shown
    assert "\r" in shown and shown.endswith("\r\x1b[K")  # the line is cleared at the end
    code, shown = _stderr_on_a_terminal("fix", "--quiet", str(big_wheel), "-w",
                                        str(tmp_path / "b"))
    assert code == 0 and shown == ""
    piped = subprocess.run([sys.executable, "-m", "elfpatch", "fix", str(big_wheel), "-w",
                            str(tmp_path / "c")], capture_output=True, text=True, timeout=300)
    assert piped.returncode == 0 and piped.stderr == ""


# -- a run that dies --------------------------------------------------------------------------

def test_a_killed_run_leaves_nothing_a_later_run_picks_up(big_wheel: Path,
                                                          tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    import signal
    import time

    for delay in (0.2, 0.5, 1.0):
        process = subprocess.Popen([sys.executable, "-m", "elfpatch", "fix", str(big_wheel),
                                    "-w", str(out)], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait()
        leftovers = [p.name for p in out.iterdir() if p.name != big_wheel.name]
        from elfpatch.base.regular_file import is_temporary_name

        assert all(is_temporary_name(name) for name in leftovers), leftovers
    scan = invoke("scan", "--json", str(out))
    assert all(".elfpatch-tmp" not in f["path"] for f in json.loads(scan.stdout)["files"])
    result = invoke("fix", str(big_wheel), "-w", str(out))
    assert result.exit_code == 0, result.stderr
    assert [p.name for p in out.iterdir()] == [big_wheel.name]


def _interrupted_at(wheel: Path, out: Path, stage: str, signal_number: int
                   ) -> tuple[int, str]:
    """Run fix -w with stderr on a terminal; send the signal once ``stage`` shows in its
    progress line.  The exit status, and what it printed on stderr."""
    import pty
    import select

    controller, terminal = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "elfpatch", "fix", str(wheel), "-w",
                                str(out)], stdout=subprocess.DEVNULL, stderr=terminal)
    os.close(terminal)
    seen, sent = b"", False
    try:
        while True:
            ready, _, _ = select.select([controller], [], [], 60)
            if not ready:
                break
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the terminal closed: the process ended
                break
            if not chunk:
                break
            seen += chunk
            if not sent and stage.encode() in seen:
                process.send_signal(signal_number)
                sent = True
    finally:
        os.close(controller)
    return process.wait(timeout=300), seen.decode(errors="replace")


@pytest.mark.parametrize("stage", ["reading", "fixing", "writing", "verifying"])
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_an_interrupted_run_writes_all_or_nothing_and_says_so(big_wheel: Path, tmp_path: Path,
                                                             signal_name: str,
                                                             stage: str) -> None:
    import signal

    out = tmp_path / "out"
    code, stderr = _interrupted_at(big_wheel, out, stage, getattr(signal, signal_name))
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr
    assert code in (0, 130), stderr  # 0: it had finished before the signal came
    if code == 130:
        assert "interrupted" in stderr
    written = sorted(p.name for p in out.iterdir()) if out.exists() else []
    assert written in ([], [big_wheel.name])  # the wheel, or nothing; never a temporary
    if written:
        with zipfile.ZipFile(out / big_wheel.name) as archive:
            assert archive.testzip() is None


def test_an_error_while_fixing_a_member_names_the_wheel_and_member(
        wheel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import elfpatch.service.wheel_fix as wheel_fix
    from elfpatch.patch.verify import VerificationError

    def refuse(item: object, plan: object, target: object) -> None:
        raise VerificationError(item.label, "made to fail")  # type: ignore[attr-defined]

    monkeypatch.setattr(wheel_fix, "write_patched_input", refuse)
    result = invoke("fix", str(wheel), "-w", str(tmp_path / "out"))
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert line.startswith(f"elfpatch: error: {wheel}:uniqpkg/_native") and "made to fail" in line
    assert not (tmp_path / "out").exists()


def test_the_benchmark_script_runs_end_to_end(wheel: Path) -> None:
    """One timed round on the small wheel: the table, both verdicts, the repaired wheel's
    checks (the timings mean nothing at this size)."""
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "wheel_fix.py"
    if subprocess.run(["sh", "-c", "command -v unzip"], capture_output=True).returncode:
        pytest.skip("unzip is not installed (apt-get install unzip)")
    run = subprocess.run([sys.executable, str(script), "--runs", "1", "--warmup", "0",
                          str(wheel)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    for words in ("elfpatch fix -w", "elfpatch check --format json", "unzip -p WHEEL",
                  "elfpatch check of the repaired wheel: exit 0 (passed)",
                  "every one of the"):
        assert words in run.stdout, run.stdout
