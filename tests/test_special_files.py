"""Paths that are not regular files are refused at once, never waited on.

Opening a FIFO for reading blocks until a writer comes, so every test that
hands elfpatch a FIFO runs it in a subprocess with a timeout: a regression
fails the test instead of hanging the suite.  Also here: a ``--baseline``
that does not exist is an error unless ``--update-baseline`` creates it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from elfpatch.fixtures import build

NOT_REGULAR = "not a regular file (a pipe, socket or device)"
TIMEOUT = 60  # seconds; each command below needs a fraction of one

UNIQUE_LIBRARY = {
    "unique.cpp": """
inline int& counter() { static int count = 0; return count; }
int use() { return ++counter(); }
""",
}


@pytest.fixture(scope="module")
def library(cxx: build.Toolchain) -> Path:
    return build.build_shared(UNIQUE_LIBRARY, "special_files_unique", toolchain=cxx)


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def elfpatch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command line in a subprocess; a hang raises TimeoutExpired (a failure)."""
    return subprocess.run([sys.executable, "-m", "elfpatch", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=TIMEOUT)


def python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, cwd=cwd, timeout=TIMEOUT)


def assert_refused(done: subprocess.CompletedProcess[str], path: Path) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [f"elfpatch: error: {path}: {NOT_REGULAR}"]


# -- the command line ---------------------------------------------------------------

def test_inits_closure_refuses_a_fifo_root(fifo: Path, tmp_path: Path) -> None:
    assert_refused(elfpatch("inits", "--closure", str(fifo), cwd=tmp_path), fifo)


def test_check_refuses_a_fifo_config(fifo: Path, library: Path, tmp_path: Path) -> None:
    assert_refused(elfpatch("check", "--config", str(fifo), str(library), cwd=tmp_path), fifo)


def test_check_refuses_a_fifo_baseline(fifo: Path, library: Path, tmp_path: Path) -> None:
    assert_refused(elfpatch("check", "--baseline", str(fifo), str(library), cwd=tmp_path), fifo)


def test_update_baseline_refuses_to_write_into_a_fifo(fifo: Path, library: Path,
                                                      tmp_path: Path) -> None:
    done = elfpatch("check", "--baseline", str(fifo), "--update-baseline", str(library),
                    cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"{fifo}: {NOT_REGULAR}" in done.stderr
    assert fifo.is_fifo()


def test_check_refuses_a_device_as_baseline(library: Path, tmp_path: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    done = elfpatch("check", "--baseline", "/dev/full", "--update-baseline", str(library),
                    cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"elfpatch: error: /dev/full: {NOT_REGULAR}"]


def test_dev_null_is_an_empty_config(library: Path, tmp_path: Path) -> None:
    """``--config /dev/null``: the defaults, as from an empty file (a device, but harmless)."""
    done = elfpatch("check", "--format", "json", "--config", os.devnull, str(library),
                    cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # the default policy fails UNIQUE definitions
    assert json.loads(done.stdout)["passed"] is False


def test_a_missing_baseline_is_an_error(library: Path, tmp_path: Path) -> None:
    missing = tmp_path / "baseline.json"
    done = elfpatch("check", "--baseline", str(missing), str(library), cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert str(missing) in line and "--update-baseline" in line
    assert not missing.exists()


def test_update_baseline_creates_a_missing_baseline(library: Path, tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    done = elfpatch("check", "--baseline", str(baseline), "--update-baseline", str(library),
                    cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(baseline.read_text())["findings"]
    assert elfpatch("check", "--baseline", str(baseline), str(library),
                    cwd=tmp_path).returncode == 0


# -- the readers underneath -----------------------------------------------------------

def test_a_fifo_on_the_search_path_is_reported_not_waited_on(cxx: build.Toolchain,
                                                             tmp_path: Path) -> None:
    """A DT_NEEDED name found as a FIFO (here through $ORIGIN) is a missing library."""
    (tmp_path / "dep.c").write_text("int dep(void) { return 1; }\n")
    (tmp_path / "root.c").write_text("int dep(void);\nint root(void) { return dep(); }\n")
    compile_ = [cxx.cc, "-shared", "-fPIC", "-o"]
    subprocess.run([*compile_, str(tmp_path / "libdep.so"), str(tmp_path / "dep.c")],
                   check=True)
    subprocess.run([*compile_, str(tmp_path / "libroot.so"), str(tmp_path / "root.c"),
                    f"-L{tmp_path}", "-ldep", "-Wl,-rpath,$ORIGIN"], check=True)
    (tmp_path / "libdep.so").unlink()
    os.mkfifo(tmp_path / "libdep.so")
    done = python(f"""
        from elfpatch.loader.closure import dependency_closure
        closure = dependency_closure({str(tmp_path / "libroot.so")!r}, ld_library_path="")
        print([(m.name, m.reason) for m in closure.missing])
    """, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "libdep.so" in done.stdout and NOT_REGULAR in done.stdout


def test_the_loader_cache_reads_a_fifo_as_empty(fifo: Path, tmp_path: Path) -> None:
    done = python(f"""
        from elfpatch.loader.cache import read_ld_cache
        print(len(read_ld_cache({str(fifo)!r})))
    """, tmp_path)
    assert (done.returncode, done.stdout.strip()) == (0, "0"), done.stderr


def test_elf_files_refuse_fifos(fifo: Path, tmp_path: Path) -> None:
    done = python(f"""
        from elfpatch.elf.file import ElfFile
        from elfpatch.errors import InputError
        try:
            ElfFile.open({str(fifo)!r})
        except InputError as error:
            print(error.reason)
    """, tmp_path)
    assert (done.returncode, done.stdout.strip()) == (0, NOT_REGULAR), done.stderr


def test_a_file_swapped_for_a_fifo_after_the_stat_is_still_refused(fifo: Path,
                                                                   tmp_path: Path) -> None:
    """The check that counts is fstat of the open descriptor, not the stat before it."""
    regular = tmp_path / "regular"
    regular.write_bytes(b"x")
    done = python(f"""
        import os
        from elfpatch.base import regular_file
        from elfpatch.errors import InputError
        real_stat = os.stat
        # Between the stat and the open, the path becomes a FIFO.
        os.stat = lambda path, *a, **k: real_stat({str(regular)!r})
        try:
            regular_file.read_regular_bytes({str(fifo)!r})
        except InputError as error:
            print(error.reason)
    """, tmp_path)
    assert (done.returncode, done.stdout.strip()) == (0, NOT_REGULAR), done.stderr


def test_regular_files_are_read_and_written(tmp_path: Path) -> None:
    from elfpatch.base import regular_file

    path = tmp_path / "baseline.json"
    regular_file.write_regular_text(path, "one\n")
    regular_file.write_regular_text(path, "2\n")  # shorter: the old text is truncated
    assert regular_file.read_regular_text(path) == "2\n"
    with pytest.raises(FileNotFoundError):
        regular_file.read_regular_bytes(tmp_path / "missing")
