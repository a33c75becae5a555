"""Output a person reads: a clean wheel is one line, ``fix -w`` of many symbols kept GLOBAL
is a summary with no sentence repeated (``-v`` lists them all), and progress has a count
and the width of the terminal it is drawn on, and is drawn only there."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from collections import Counter
from pathlib import Path

import pytest
from elfpatch.fixtures import build
from support.build import invoke, make_wheel
from support.fixlib import VARIANTS, built_library
from support.zipcraft import record_hash

CLEAN_C = {"clean.c": "int clean_value(void) { return 42; }\n"}


@pytest.fixture(scope="module")
def clean_library(cxx: build.Toolchain) -> Path:
    return build.build_shared(CLEAN_C, "libclean", ["-O1", "-g0"])


@pytest.fixture(scope="module")
def unique_library() -> Path:
    return built_library(VARIANTS["default"])


def test_a_wheel_without_unique_symbols_is_one_line(clean_library: Path,
                                                    tmp_path: Path) -> None:
    data = clean_library.read_bytes()
    wheel = make_wheel(tmp_path / "clean-1.0-cp311-cp311-linux_x86_64.whl",
                       {f"clean/_ext{n}.so": data for n in range(120)})
    result = invoke("scan", str(wheel))
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line]
    assert len(lines) == 2, result.stdout  # the wheel's line, and the summary
    assert "120 ELF members without STB_GNU_UNIQUE symbols" in lines[0]
    assert lines[1].startswith("120 ELF files scanned")
    verbose = invoke("scan", "-v", str(wheel))
    assert verbose.stdout.count("no STB_GNU_UNIQUE symbols") == 120


def test_files_with_unique_symbols_keep_their_block(clean_library: Path,
                                                    unique_library: Path) -> None:
    result = invoke("scan", str(clean_library), str(unique_library))
    assert "for example:" in result.stdout
    assert f"{clean_library}" in result.stdout and "no STB_GNU_UNIQUE symbols" in result.stdout


def shared_wheel(library: Path, folder: Path, copies: int) -> Path:
    """A wheel whose libraries all define the same UNIQUE symbols: each is kept GLOBAL."""
    data = library.read_bytes()
    members = {f"shared/lib{n}.so": data for n in range(copies)}
    members["shared-1.0.dist-info/WHEEL"] = b"Wheel-Version: 1.0\nTag: cp311-cp311-linux_x86_64\n"
    rows = "".join(f"{name},{record_hash(body)},{len(body)}\n" for name, body in members.items())
    members["shared-1.0.dist-info/RECORD"] = (rows + "shared-1.0.dist-info/RECORD,,\n").encode()
    return make_wheel(folder / "shared-1.0-cp311-cp311-linux_x86_64.whl", members,
                      with_metadata=False)


def test_fix_wheel_is_a_summary_without_repeats(unique_library: Path, tmp_path: Path) -> None:
    wheel = shared_wheel(unique_library, tmp_path, 30)
    result = invoke("fix", str(wheel), "-w", str(tmp_path / "out"))
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) <= 40, result.stdout
    assert [line for line, n in Counter(lines).items() if n > 1 and line.strip()] == []
    assert "... and 10 more members rewritten (-v lists them)" in result.stdout
    assert "kept a GLOBAL binding" in result.stdout and "-v lists" in result.stdout

    verbose = invoke("fix", "-v", str(wheel), "-w", str(tmp_path / "out-v"))
    assert verbose.exit_code == 0
    assert "bump_counter()::count" in verbose.stdout
    reasons = [line for line in verbose.stdout.splitlines() if "also defined by" in line]
    assert len(reasons) == 30  # the reason once per member, not once per symbol


def test_fix_of_files_is_a_summary_too(unique_library: Path, tmp_path: Path) -> None:
    folder = tmp_path / "set"
    folder.mkdir()
    for n in range(12):
        (folder / f"lib{n}.so").write_bytes(unique_library.read_bytes())
    result = invoke("fix", str(folder), "-o", str(tmp_path / "out"))
    assert result.exit_code == 0, result.stderr
    assert "also defined by" not in result.stdout
    assert "kept a GLOBAL binding" in result.stdout
    assert len(result.stdout.splitlines()) <= 3 * 12 + 4


# -- progress ----------------------------------------------------------------------------------

def run_on_a_terminal(args: list[str], columns: int) -> tuple[int, str]:
    """The console script with stderr on a pseudo-terminal ``columns`` wide."""
    script = Path(sys.executable).with_name("elfpatch")
    if not script.exists():
        pytest.skip("the elfpatch console script is not installed beside this interpreter")
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    process = subprocess.Popen([str(script), *args], stdout=subprocess.DEVNULL,
                               stderr=follower, env={**os.environ, "NO_COLOR": "1"})
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the other end closed: the process is done
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    return process.wait(timeout=60), seen.decode("utf-8", "replace")


def drawn(stderr: str) -> list[str]:
    """The progress lines drawn (each starts with a carriage return and a clear)."""
    return [part.replace("\x1b[K", "") for part in stderr.split("\r") if part.strip("\x1b[K")]


@pytest.mark.parametrize("command", ["scan", "inits"])
def test_progress_counts_and_fits_the_terminal(command: str, unique_library: Path,
                                               tmp_path: Path) -> None:
    folder = tmp_path / "libs"
    folder.mkdir()
    for n in range(3):
        (folder / f"lib{n:02d}-with-a-name-long-enough-to-be-cut.so").write_bytes(
            unique_library.read_bytes())
    code, stderr = run_on_a_terminal([command, "--list-only" if command == "inits" else "-v",
                                      str(folder)], columns=50)
    assert code == 0, stderr
    lines = drawn(stderr)
    assert any(line.startswith(f"{command}: 3/3 ") for line in lines), lines
    assert all(len(line) <= 49 for line in lines), lines
    quiet = subprocess.run([str(Path(sys.executable).with_name("elfpatch")), command,
                            str(folder)], capture_output=True, text=True)
    assert "\r" not in quiet.stderr  # not a terminal: no progress
