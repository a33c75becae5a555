"""`fix` on sets of files: all or nothing, hard links, temporary files, interrupts, kills.

A set is written only when every file of it was patched and verified;
elfpatch's temporary files are never inputs and are removed by the next
run once their own run is dead; Ctrl-C and SIGTERM say what was written;
SIGKILL at any moment leaves each file original or fully fixed, and no
process behind.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from elfpatch.fixtures import build
from support.build import invoke
from support.fixlib import VARIANTS, built_library, fix, temporary_files

from elfpatch.base.regular_file import TEMPORARY_MARK
from elfpatch.errors import InputError
from elfpatch.patch.staging import Staging, remove_stale
from elfpatch.service import fix as fix_module


@pytest.fixture(scope="module")
def library() -> Path:
    return built_library(VARIANTS["default"])


@pytest.fixture(scope="module")
def fixed_library(library: Path, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """What `fix` makes of ``library``: the only other content a file may end up with."""
    out = tmp_path_factory.mktemp("reference") / "libfixme.so"
    assert fix("-o", out, library).exit_code == 0
    return out.read_bytes()


def copies(library: Path, folder: Path, *names: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy2(library, folder / name)
    return [folder / name for name in names]


def contents(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def fail_for(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make patching the input called ``name`` fail, as a failed verification would."""
    real = fix_module.write_patched_input

    def patched(item: fix_module.FixInput, *args: object) -> None:
        if Path(item.label).name == name:
            raise InputError(item.label, "verification of the patched copy failed (test)")
        real(item, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(fix_module, "write_patched_input", patched)


# -- all or nothing ---------------------------------------------------------------------

@pytest.mark.parametrize("target", ["-o", "--in-place"])
def test_a_set_with_one_failing_file_writes_nothing(target: str, library: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = copies(library, tmp_path / "in", "liba.so", "libb.so")
    before = contents(tmp_path)
    fail_for("libb.so", monkeypatch)
    args = ["-o", str(tmp_path / "out")] if target == "-o" else ["--in-place"]
    result = fix(*args, *inputs, as_json=False)
    assert result.exit_code == 2
    assert "libb.so" in result.stderr and "Traceback" not in result.stderr
    assert contents(tmp_path) == before  # liba.so untouched, no out/ folder
    assert temporary_files(tmp_path) == []


def test_output_folders_are_created_only_when_the_set_commits(library: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    inputs = copies(library, tmp_path / "in", "liba.so")
    fail_for("liba.so", monkeypatch)
    assert fix("-o", tmp_path / "new" / "deep" / "out.so", *inputs).exit_code == 2
    assert not (tmp_path / "new").exists()


# -- destinations -----------------------------------------------------------------------

def test_trailing_slash_means_a_folder_for_one_input(library: Path, tmp_path: Path) -> None:
    inputs = copies(library, tmp_path / "in", "liba.so")
    assert fix("-o", f"{tmp_path / 'newdir'}/", *inputs).exit_code == 0
    assert (tmp_path / "newdir" / "liba.so").is_file()


@pytest.mark.parametrize("case", ["file-as-folder", "existing-file-many-inputs", "a-folder"])
def test_impossible_destinations_are_one_line(case: str, library: Path, tmp_path: Path) -> None:
    inputs = copies(library, tmp_path / "in", "liba.so", "libb.so")
    (tmp_path / "afile").write_text("not a folder")
    (tmp_path / "adir" / "liba.so").mkdir(parents=True)
    output, given = {
        "file-as-folder": (tmp_path / "afile" / "x.so", inputs[:1]),
        "existing-file-many-inputs": (tmp_path / "afile", inputs),
        "a-folder": (tmp_path / "adir", inputs[:1]),
    }[case]
    before = contents(tmp_path)
    result = fix("-o", output, *given, as_json=False)
    assert result.exit_code == 2
    assert result.stderr.startswith("elfpatch: error: ")
    assert len(result.stderr.splitlines()) == 1
    assert "internal error" not in result.stderr
    assert contents(tmp_path) == before


def test_an_unwritable_output_folder_is_one_line(library: Path, tmp_path: Path) -> None:
    inputs = copies(library, tmp_path / "in", "liba.so")
    result = fix("-o", "/proc/elfpatch-test/liba.so", *inputs, as_json=False)
    assert result.exit_code == 2
    assert "cannot write" in result.stderr and "internal error" not in result.stderr


# -- hard links -------------------------------------------------------------------------

def test_hard_links_are_one_library_and_stay_linked(library: Path, tmp_path: Path) -> None:
    [first] = copies(library, tmp_path, "libfixme.so")
    second = tmp_path / "libalias.so"
    os.link(first, second)
    result = fix("--in-place", first, second)
    assert result.exit_code == 0
    assert result.document is not None
    [only] = result.document["libraries"]  # one file, however many names
    assert {c["to"] for c in only["changes"]} == {"LOCAL"}  # not "also defined by" itself
    assert first.stat().st_ino == second.stat().st_ino
    assert first.stat().st_nlink == 2
    assert first.read_bytes() != library.read_bytes()


def test_a_hard_link_not_given_keeps_the_original(library: Path, fixed_library: bytes,
                                                  tmp_path: Path) -> None:
    """Only the names given are replaced (each by an atomic rename): another name of the
    file, say a package manager's cache entry, is not the user's to change."""
    [first] = copies(library, tmp_path / "a", "libfixme.so")
    elsewhere = tmp_path / "b" / "libfixme.so.1"
    elsewhere.parent.mkdir()
    os.link(first, elsewhere)
    inode = elsewhere.stat().st_ino
    result = fix("--in-place", first)
    assert result.exit_code == 0
    assert result.document is not None
    assert result.document["libraries"][0]["hard_links_left"] == 1
    assert first.read_bytes() == fixed_library
    assert elsewhere.read_bytes() == library.read_bytes()
    assert elsewhere.stat().st_ino == inode and elsewhere.stat().st_nlink == 1
    text = fix("--in-place", elsewhere, as_json=False)
    assert text.exit_code == 0 and elsewhere.read_bytes() == fixed_library


# -- temporary files --------------------------------------------------------------------

def stale_name(name: str) -> str:
    return f".{name}.0123456789abcdef{TEMPORARY_MARK}"


def test_folder_walks_skip_temporary_files(library: Path, tmp_path: Path) -> None:
    """A complete copy left by a killed run is not a second library defining the symbols."""
    copies(library, tmp_path, "libfixme.so", stale_name("libfixme.so"))
    scanned = invoke("scan", "--json", str(tmp_path))
    assert scanned.exit_code == 0
    assert TEMPORARY_MARK not in scanned.stdout
    result = fix("--dry-run", tmp_path)
    assert result.document is not None
    [only] = result.document["libraries"]
    assert {c["to"] for c in only["changes"]} == {"LOCAL"}


def test_the_next_run_removes_stale_temporary_files(library: Path, tmp_path: Path) -> None:
    [source] = copies(library, tmp_path, "libfixme.so")
    stale = tmp_path / stale_name("libfixme.so")
    stale.write_bytes(b"\x7fELF half")
    assert fix("--in-place", source).exit_code == 0
    assert temporary_files(tmp_path) == []


def test_a_live_runs_temporary_file_is_left_alone(tmp_path: Path) -> None:
    live = tmp_path / stale_name("liblive.so")
    live.write_bytes(b"being written")
    descriptor = os.open(live, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)  # as its run holds it
        assert remove_stale(tmp_path) == []
        assert live.exists()
    finally:
        os.close(descriptor)
    assert remove_stale(tmp_path) == [live]


def test_only_own_temporary_files_are_removed(tmp_path: Path) -> None:
    """A link or a folder with a temporary name is not elfpatch's, nor is an ordinary name."""
    target = tmp_path / "precious"
    target.write_text("keep")
    (tmp_path / stale_name("link")).symlink_to(target)
    (tmp_path / stale_name("folder")).mkdir()
    (tmp_path / "libfoo.so.0123456789abcdef.elfpatch").write_text("not ours by name")
    assert remove_stale(tmp_path) == []
    assert target.read_text() == "keep"


def test_staged_outputs_are_never_written_through_a_planted_link(tmp_path: Path) -> None:
    """Staged names are random and made with O_EXCL | O_NOFOLLOW."""
    victim = tmp_path / "victim"
    victim.write_text("keep")
    with Staging() as staging:
        staged = staging.output(tmp_path / "out.so")
        os.write(staged.fd, b"new")
        staging.commit()
    assert (tmp_path / "out.so").read_bytes() == b"new"
    assert victim.read_text() == "keep"
    assert temporary_files(tmp_path) == []


def test_staging_discards_everything_unless_committed(tmp_path: Path) -> None:
    with Staging() as staging:
        staged = staging.output(tmp_path / "out.so")
        os.write(staged.fd, b"new")
        staging.scratch(tmp_path)
    assert sorted(tmp_path.iterdir()) == []


# -- interrupts and kills ------------------------------------------------------------------

# A library of a few megabytes with many UNIQUE symbols: copying, patching and
# verifying it takes long enough to be interrupted at every stage.
BIG_LIBRARY = {
    "big.cpp": "\n".join(
        [f"inline int& v{i}() {{ static int x = {i}; return x; }}" for i in range(3000)]
        + ["char padding[6 << 20] = {1};",
           'extern "C" int use_all() { return 0'
           + "".join(f" + v{i}()" for i in range(3000)) + "; }"]),
}


@pytest.fixture(scope="module")
def big_library(cxx: object) -> Path:
    return build.build_shared(BIG_LIBRARY, "libbig", ["-O1", "-g0"])


@pytest.fixture(scope="module")
def big_fixed(big_library: Path, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    out = tmp_path_factory.mktemp("big") / "libbig.so"
    assert fix("-o", out, big_library).exit_code == 0
    return out.read_bytes()


def start_fix(marker: str, *args: Path | str) -> subprocess.Popen[str]:
    environment = {**os.environ, "ELFPATCH_TEST_MARKER": marker}
    return subprocess.Popen([sys.executable, "-m", "elfpatch", "fix", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=environment, preexec_fn=_interruptible)


def _interruptible() -> None:
    """In the child, before elfpatch starts: Ctrl-C does what it does in a terminal.  A
    test run started in the background of a script inherits SIGINT ignored (POSIX
    shells ignore it in asynchronous commands), and Python then never raises
    KeyboardInterrupt: every fix ran to its end, whatever the delay."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def processes_with(marker: str) -> list[int]:
    """Processes whose environment carries ``marker`` (a fix and any child it forked)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environment = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"ELFPATCH_TEST_MARKER={marker}".encode() in environment:
            found.append(int(entry.name))
    return found


def wait_until_gone(marker: str, seconds: float = 10) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


def _interrupted_interpreter_start(err: str) -> bool:
    """Python's own report of a signal while it initialises (site, standard streams)
    or while ``-m`` looks for the package, before any file of elfpatch runs."""
    if "KeyboardInterrupt" not in err:
        return False
    if err.startswith("Fatal Python error: init_"):
        return True
    frames = [line for line in err.splitlines() if line.lstrip().startswith('File "')]
    return err.startswith("Traceback") and all('File "<frozen ' in f for f in frames)


# Python's report of an interrupt it raised in one of the import system's module-lock
# callbacks, where nothing can catch it: printed, then dropped, and the run goes on.
# From the console script's first statement on, elfpatch sends such an interrupt
# again (test_cli_interrupt); before it, while ``-m`` imports the package, it is lost.
_SWALLOWED_AT_START = re.compile(r'Exception ignored in: [^\n]*\n'
                                 r'Traceback \(most recent call last\):\n'
                                 r'(?:  File "<frozen [^\n]*\n)+KeyboardInterrupt: ?\n')


def _without_interrupt_swallowed_at_start(err: str) -> str:
    return _SWALLOWED_AT_START.sub("", err, count=1)


DELAYS = [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.7, 1.0]


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM],
                         ids=["SIGKILL", "SIGINT", "SIGTERM"])
def test_a_killed_fix_leaves_each_file_original_or_fixed(how: signal.Signals, big_library: Path,
                                                         big_fixed: bytes, library: Path,
                                                         fixed_library: bytes,
                                                         tmp_path: Path) -> None:
    """Odd rounds fix one big library, even rounds a set of two (big and small); the big
    one has another hard link, not given, which keeps the original whatever happens."""
    expected = {"libbig.so": (big_library.read_bytes(), big_fixed),
                "libfixme.so": (library.read_bytes(), fixed_library)}
    outcomes = set()
    for round_number, delay in enumerate(DELAYS):
        folder = tmp_path / f"round{round_number}"
        inputs = copies(big_library, folder, "libbig.so")
        if round_number % 2 == 0:
            inputs += copies(library, folder, "libfixme.so")
        alias = folder / "other-name-of-libbig.so"  # a hard link not given: never touched
        os.link(inputs[0], alias)
        marker = f"{os.getpid()}-{how.name}-{round_number}"
        process = start_fix(marker, "--in-place", *inputs)
        time.sleep(delay)
        process.send_signal(how)
        _out, err = process.communicate(timeout=120)
        assert wait_until_gone(marker) == [], "a forked child outlived its parent"
        err = _without_interrupt_swallowed_at_start(err)
        if _interrupted_interpreter_start(err):
            # The signal came while Python was still starting (importing site),
            # before any elfpatch code ran: Python's own report, nothing written.
            assert all(p.read_bytes() == expected[p.name][0] for p in inputs)
            continue
        assert alias.read_bytes() == expected["libbig.so"][0]
        assert "Traceback" not in err and "internal error" not in err
        for path in inputs:
            content = path.read_bytes()
            original, fixed = expected[path.name]
            assert content in (original, fixed), f"{path.name} is neither original nor fixed"
            outcomes.add(content == fixed)
            if how != signal.SIGKILL and f"{path}" in err:  # the report names it: truthfully
                said_written = f"written: {path}" in err and f"not written: {path}" not in err
                assert said_written == (content == fixed), err
        # The next run finishes the job and leaves no temporary file behind.
        assert fix("--in-place", *inputs).exit_code == 0
        assert temporary_files(folder) == []
    assert outcomes == {False, True}, "the delays should catch both outcomes"


# -- many files -------------------------------------------------------------------------------

LIMITED_FIX = """
import resource, sys
from elfpatch.console import main
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), int(sys.argv[2])))
sys.argv = ["elfpatch", "fix", "-o", sys.argv[3], sys.argv[4]]
main()
"""


@pytest.mark.parametrize(("soft", "hard", "code"), [(100, 4096, 0), (100, 100, 2)])
def test_a_set_larger_than_the_open_file_limit(soft: int, hard: int, code: int, library: Path,
                                               tmp_path: Path) -> None:
    """Staged files stay open until the commit: the soft limit is raised, or the set is
    refused up front with one line; never half-written."""
    names = [f"lib{i:03d}.so" for i in range(150)]
    copies(library, tmp_path / "in", *names)
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-c", LIMITED_FIX, str(soft), str(hard), str(out),
                          str(tmp_path / "in")], capture_output=True, text=True, timeout=300)
    assert run.returncode == code, run.stderr
    if code == 0:
        assert sorted(p.name for p in out.iterdir()) == names
    else:
        assert "open files" in run.stderr and len(run.stderr.splitlines()) == 1
        assert not out.exists()


LIMITED_WHEEL_FIX = """
import resource, sys
from elfpatch.console import main
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), int(sys.argv[2])))
sys.argv = ["elfpatch", "fix", "-w", sys.argv[3], sys.argv[4]]
main()
"""


@pytest.mark.parametrize(("soft", "hard", "code"), [(100, 4096, 0), (100, 100, 2)])
def test_a_wheel_with_more_members_than_the_open_file_limit(
        soft: int, hard: int, code: int, library: Path, tmp_path: Path) -> None:
    """A wheel's ELF members are planned as one set, each holding two scratch files:
    the soft limit is raised, or the wheel is refused up front with one line (it was
    raised silently as far as it went, and the run failed later, on whichever open
    came first past the limit)."""
    from support.zipcraft import Entry, with_record
    from support.zipcraft import build as build_zip

    content = library.read_bytes()
    entries = [Entry(f"pkg/lib{i:02d}.so", content) for i in range(60)]
    entries.append(Entry("pkg-1.0.dist-info/WHEEL",
                         b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"))
    entries.append(Entry("pkg-1.0.dist-info/RECORD", b""))
    wheel = tmp_path / "pkg-1.0-py3-none-linux_x86_64.whl"
    wheel.write_bytes(build_zip(with_record(entries)))
    out = tmp_path / "out"
    out.mkdir()
    run = subprocess.run([sys.executable, "-c", LIMITED_WHEEL_FIX, str(soft), str(hard),
                          str(out), str(wheel)], capture_output=True, text=True, timeout=300)
    assert run.returncode == code, run.stderr
    if code == 0:
        assert [p.name for p in out.iterdir()] == [wheel.name]
    else:
        assert "open files" in run.stderr and len(run.stderr.splitlines()) == 1, run.stderr
        assert f"error: {wheel}: a set of 120+ files" in run.stderr  # named up front
        assert list(out.iterdir()) == []
