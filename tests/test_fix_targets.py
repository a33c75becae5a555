"""`fix` writes only where it was asked to, through the console script.

An output that is an input (by any path: itself, ``.``, a symbolic link, a
hard link, the API) is refused unless the user asked for ``--in-place``;
only regular files and new paths are written (never a device, FIFO,
socket or a symbolic link that leads nowhere); concurrent runs on one file
take turns, and a file that changes under a run is not replaced with a
plan made from its old bytes; no program is started to find a library.
Every case checks the files' inodes and bytes before and after.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support.build import require_tool
from support.fixlib import VARIANTS, built_library, temporary_files

import elfpatch
from elfpatch.errors import InputError
from elfpatch.service import fix as fix_module


@pytest.fixture(scope="module")
def library() -> Path:
    return built_library(VARIANTS["default"])


def console(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``elfpatch ARGS`` as a user runs it: a process of its own."""
    return subprocess.run([sys.executable, "-m", "elfpatch", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def fingerprint(path: Path) -> tuple[int, int, str]:
    """Which file ``path`` leads to, and what it holds."""
    status = path.stat()
    return status.st_dev, status.st_ino, hashlib.sha256(path.read_bytes()).hexdigest()


def assert_refused_in_one_line(result: subprocess.CompletedProcess[str], words: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("elfpatch: error: ")
    assert words in result.stderr and "internal error" not in result.stderr


# -- outputs that are inputs -------------------------------------------------------

@pytest.mark.parametrize("how", ["itself", "dot", "symlink", "hard-link", "folder-of-input"])
def test_an_output_that_is_the_input_is_refused(how: str, library: Path, tmp_path: Path) -> None:
    lib = tmp_path / "libfixme.so"
    shutil.copy2(library, lib)
    (tmp_path / "link.so").symlink_to(lib.name)
    os.link(lib, tmp_path / "hard.so")
    output = {"itself": "libfixme.so", "dot": ".", "symlink": "link.so", "hard-link": "hard.so",
              "folder-of-input": str(tmp_path) + "/"}[how]
    before = fingerprint(lib)
    result = console("fix", "libfixme.so", "-o", output, cwd=tmp_path)
    assert_refused_in_one_line(result, "is one of the inputs")
    assert "--in-place" in result.stderr  # the way to say it was meant
    assert fingerprint(lib) == before
    assert temporary_files(tmp_path) == []


def test_the_api_refuses_an_output_that_is_the_input(library: Path, tmp_path: Path) -> None:
    lib = tmp_path / "libfixme.so"
    shutil.copy2(library, lib)
    before = fingerprint(lib)
    with pytest.raises(InputError, match="is one of the inputs"):
        elfpatch.fix(lib, output=lib)
    assert fingerprint(lib) == before


def test_an_input_elsewhere_in_the_set_is_refused_as_an_output(library: Path,
                                                               tmp_path: Path) -> None:
    """Two inputs into a folder holding one of them: that one would be replaced."""
    (tmp_path / "in").mkdir()
    first, second = tmp_path / "liba.so", tmp_path / "in" / "libb.so"
    shutil.copy2(library, first)
    shutil.copy2(library, second)
    before = fingerprint(first)
    out = tmp_path / "out"
    out.mkdir()
    os.link(first, out / "liba.so")
    result = console("fix", first, second, "-o", out)
    assert_refused_in_one_line(result, "is one of the inputs")
    assert fingerprint(first) == before and not (out / "libb.so").exists()


def test_a_wheel_repaired_into_its_own_folder_is_refused(wheel: Path, tmp_path: Path) -> None:
    given = tmp_path / wheel.name
    shutil.copy2(wheel, given)
    before = fingerprint(given)
    result = console("fix", given.name, "-w", ".", cwd=tmp_path)
    assert_refused_in_one_line(result, "is one of the inputs")
    assert fingerprint(given) == before
    result = console("fix", given, "-w", tmp_path / "repaired")
    assert result.returncode == 0, result.stderr
    assert fingerprint(given) == before and (tmp_path / "repaired" / wheel.name).exists()


def test_in_place_still_replaces_the_input(library: Path, tmp_path: Path) -> None:
    lib = tmp_path / "libfixme.so"
    shutil.copy2(library, lib)
    before = fingerprint(lib)
    assert console("fix", "--in-place", lib).returncode == 0
    assert fingerprint(lib)[2] != before[2]


# -- outputs that are not regular files ----------------------------------------------

def _null_device(path: Path) -> None:
    """A character device like /dev/null at ``path`` (mknod needs CAP_MKNOD)."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("needs root: making a device node (CAP_MKNOD)")


@pytest.mark.parametrize("kind", ["device", "fifo", "socket", "dangling-link",
                                  "link-into-missing-folders"])
def test_only_regular_files_or_new_paths_are_written(kind: str, library: Path,
                                                     tmp_path: Path) -> None:
    target = tmp_path / "out.so"
    held = None
    if kind == "device":
        _null_device(target)
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "socket":
        held = socket.socket(socket.AF_UNIX)
        held.bind(str(target))
    else:
        pointed = tmp_path / ("missing.so" if kind == "dangling-link" else "new/dirs/out.so")
        target.symlink_to(pointed)
    kind_before = target.lstat().st_mode
    try:
        result = console("fix", library, "-o", target)
    finally:
        if held is not None:
            held.close()
    assert_refused_in_one_line(result, "cannot write")
    assert target.lstat().st_mode == kind_before  # the node is still what it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.so"]  # nothing created


NULL_IN_A_NAMESPACE = """
mount -t tmpfs elfpatch-test /dev && mknod -m 666 /dev/null c 1 3 || exit 99
"$@"
echo "exit=$?"
stat -c 'after=%F %t,%T' /dev/null
"""


def test_dev_null_is_never_replaced(library: Path) -> None:
    """As the issue reported it: ``-o /dev/null``, which as root would delete the device.
    Run in a private mount namespace with its own /dev, so that a regression replaces
    that copy, never the machine's."""
    unshare = require_tool("unshare")
    result = subprocess.run([unshare, "--mount", "--propagation", "private", "sh", "-c",
                             NULL_IN_A_NAMESPACE, "sh", sys.executable, "-m", "elfpatch", "fix",
                             str(library), "-o", "/dev/null"], capture_output=True, text=True,
                            timeout=300)
    if result.returncode == 99 or "unshare failed" in result.stderr:
        pytest.skip(f"needs root: a private mount namespace ({result.stderr.strip()})")
    assert "exit=2" in result.stdout, result.stdout + result.stderr
    assert "after=character special file 1,3" in result.stdout
    assert "not a regular file" in result.stderr and result.stderr.count("\n") == 1


# -- runs that meet -----------------------------------------------------------------

@pytest.mark.slow
def test_concurrent_in_place_runs_take_turns(library: Path, tmp_path: Path) -> None:
    """Three runs at once on one file, 50 rounds: always what one run alone makes."""
    reference = tmp_path / "reference.so"
    shutil.copy2(library, reference)
    assert console("fix", "--in-place", reference).returncode == 0
    expected = reference.read_bytes()
    lib = tmp_path / "libfixme.so"
    command = [sys.executable, "-m", "elfpatch", "fix", "--in-place", str(lib)]
    for _round in range(50):
        shutil.copy2(library, lib)
        runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True) for _ in range(3)]
        codes = [(run.wait(timeout=120), run.communicate()[1]) for run in runs]
        assert all(code == 0 for code, _err in codes), codes
        assert lib.read_bytes() == expected
    assert temporary_files(tmp_path) == []


def test_a_file_changed_under_the_run_is_not_replaced(library: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Another program writes the file while it is being fixed: the plan was made from
    the old bytes, so nothing is written, and the other program's bytes stay."""
    lib = tmp_path / "libfixme.so"
    shutil.copy2(library, lib)
    real = fix_module.write_patched_input

    def meanwhile(*args: object) -> None:
        real(*args)  # type: ignore[arg-type]
        with lib.open("r+b") as handle:  # in place, as a careless tool would
            handle.seek(0, 2)
            handle.write(b"\0")

    monkeypatch.setattr(fix_module, "write_patched_input", meanwhile)
    with pytest.raises(InputError, match="changed while elfpatch was fixing it"):
        elfpatch.fix(lib, in_place=True)
    assert lib.read_bytes() == library.read_bytes() + b"\0"
    assert temporary_files(tmp_path) == []


def test_a_run_that_wrote_nothing_does_not_say_it_rewrote(library: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           ) -> None:
    from support.fixlib import fix

    lib = tmp_path / "libfixme.so"
    shutil.copy2(library, lib)
    monkeypatch.setattr(fix_module, "_changed_inputs", lambda held: [
        InputError(str(lib), "changed while elfpatch was fixing it")])
    result = fix("--in-place", lib, as_json=False)
    assert result.exit_code == 2
    assert "rewrote nothing" in result.stdout and "rewrote 1" not in result.stdout
    assert lib.read_bytes() == library.read_bytes()


# -- no program runs ------------------------------------------------------------------

def test_no_program_is_started_to_find_a_library(library: Path, wheel: Path,
                                                 tmp_path: Path) -> None:
    """``strace`` sees one execve, the interpreter's; a ``PATH`` of the current folder with
    a ``gcc``, ``ld`` and ``ldconfig`` that leave a mark is never used."""
    strace = require_tool("strace")
    for name in ("gcc", "ld", "ldconfig", "cc", "objdump"):
        planted = tmp_path / name
        planted.write_text(f"#!/bin/sh\ntouch {tmp_path}/ran-{name}\n")
        planted.chmod(0o755)
    shutil.copy2(wheel, tmp_path / wheel.name)
    environment = {**os.environ, "PATH": f".:{os.environ.get('PATH', '')}"}
    for args in (["fix", wheel.name, "-w", "out"], ["scan", wheel.name],
                 ["fix", str(library), "-o", "lib.so"]):
        trace = tmp_path / "trace"
        result = subprocess.run([strace, "-f", "-qq", "-e", "trace=execve", "-o", str(trace),
                                 sys.executable, "-m", "elfpatch", *args], cwd=tmp_path,
                                env=environment, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        started = [line for line in trace.read_text().splitlines() if "execve(" in line]
        assert len(started) == 1 and sys.executable in started[0], started
    assert not list(tmp_path.glob("ran-*"))


# -- scratch space ----------------------------------------------------------------------

SMALL_FOLDER = """
mount -t tmpfs -o size=100m elfpatch-test "$1" || exit 99
shift
TMPDIR="$SMALL" "$@" scan "$WHEEL"; echo "scan=$?"
"$@" fix "$WHEEL" -w "$SMALL/out"; echo "fix=$?"
echo "used=$(df -B1 --output=used "$SMALL" | tail -1)"
"""


def big_member_wheel(library: Path, folder: Path, size: int) -> Path:
    """A wheel of a few hundred kB whose one ELF member inflates to ``size`` bytes."""
    import base64
    import zipfile

    wheel = folder / "big-1.0-py3-none-linux_x86_64.whl"
    digest = hashlib.sha256()
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("big/libbig.so", "w", force_zip64=True) as member:
            head = library.read_bytes()
            member.write(head)
            digest.update(head)
            zeros = bytes(1 << 20)
            for _ in range((size - len(head)) >> 20):
                member.write(zeros)
                digest.update(zeros)
        archive.writestr("big-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        hashed = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
        archive.writestr("big-1.0.dist-info/RECORD",
                         f"big/libbig.so,sha256={hashed},{archive.getinfo('big/libbig.so').file_size}\n"
                         "big-1.0.dist-info/WHEEL,,\nbig-1.0.dist-info/RECORD,,\n")
    return wheel


def test_scratch_space_is_checked_before_it_is_used(library: Path, tmp_path: Path) -> None:
    """A member that inflates to 200 MiB, and a 100 MiB file system for TMPDIR and -w:
    scan and fix each refuse with one line naming the folder, and write nothing there."""
    unshare = require_tool("unshare")
    wheel = big_member_wheel(library, tmp_path, 200 << 20)
    assert wheel.stat().st_size < 2 << 20
    small = tmp_path / "small"
    small.mkdir()
    result = subprocess.run([unshare, "--mount", "--propagation", "private", "sh", "-c",
                             SMALL_FOLDER, "sh", str(small), sys.executable, "-m", "elfpatch"],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "SMALL": str(small), "WHEEL": str(wheel)})
    if result.returncode == 99:
        pytest.skip(f"needs root: a private mount namespace ({result.stderr.strip()})")
    assert "scan=2" in result.stdout and "fix=2" in result.stdout, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and all(f"free in {small}" in line for line in lines), lines
    used = int(result.stdout.split("used=")[1])
    assert used < 1 << 20, f"{used} bytes written to the small file system"
    # With room, the same wheel reads (the member's tables are in its first bytes).
    scanned = console("scan", wheel)
    assert scanned.returncode == 0, scanned.stderr


FULL_FOLDER = """
mount -t tmpfs -o size=256k elfpatch-test "$1" || exit 99
shift
"$@"; echo "exit=$?"
"""


def test_a_full_file_system_is_named_by_the_users_path(tmp_path: Path) -> None:
    """Writing fails for want of space: the message names the paths the user gave, never
    a temporary file, and nothing is left behind."""
    unshare = require_tool("unshare")
    system = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")  # 2 MB: more than the room
    if not system.exists():
        pytest.skip("no /usr/lib/x86_64-linux-gnu/libstdc++.so.6 (apt-get install libstdc++6)")
    lib = tmp_path / "libstdc++.so.6"
    shutil.copy2(system.resolve(), lib)
    small = tmp_path / "small"
    small.mkdir()
    result = subprocess.run([unshare, "--mount", "--propagation", "private", "sh", "-c",
                             FULL_FOLDER, "sh", str(small), sys.executable, "-m", "elfpatch",
                             "fix", str(lib), "-o", str(small / "out.so")],
                            capture_output=True, text=True, timeout=300)
    if result.returncode == 99:
        pytest.skip(f"needs root: a private mount namespace ({result.stderr.strip()})")
    assert "exit=2" in result.stdout, result.stdout + result.stderr
    assert "No space left" in result.stderr and result.stderr.count("\n") == 1
    assert "elfpatch-tmp" not in result.stderr and "/proc/self/fd" not in result.stderr
    assert str(lib) in result.stderr or str(small / "out.so") in result.stderr
