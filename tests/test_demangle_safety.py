"""Demangling never runs code chosen by the inputs, their folders or LD_LIBRARY_PATH.

An impostor ``libstdc++.so.6`` (and ``libgcc_s.so.1``, which the real
runtime needs) is built with gcc: its constructor writes a marker file and
its ``__cxa_demangle`` answers "IMPOSTOR".  ``elfpatch scan`` runs in a
subprocess with the impostor's folder on ``LD_LIBRARY_PATH`` (or as the
current folder): no marker may appear and every name must be demangled by
the real runtime.  A control test shows the impostor does run when the
runtime is opened through the normal search path, so the others prove
something.
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

from elfpatch.cxx import demangle

IMPOSTOR = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((constructor)) static void mark(void) {
    const char *marker = getenv("IMPOSTOR_MARKER");
    FILE *file = marker ? fopen(marker, "w") : NULL;
    if (file) { fputs("impostor constructor ran\n", file); fclose(file); }
}
char *__cxa_demangle(const char *name, char *buffer, size_t *length, int *status) {
    *status = 0;
    return strdup("IMPOSTOR");
}
"""

UNIQUE_LIBRARY = {
    "names.cpp": """
inline int& counter() { static int count = 0; return count; }
template <class T> struct Registry { static int size; };
template <class T> int Registry<T>::size = 4;
int use() { return ++counter() + Registry<long>::size; }
""",
}
EXPECTED = {"_ZZ7countervE5count": "counter()::count",
            "_ZN8RegistryIlE4sizeE": "Registry<long>::size"}


@pytest.fixture(scope="module")
def unique_library(cxx: build.Toolchain) -> Path:
    return build.build_shared(UNIQUE_LIBRARY, "demangle_names", toolchain=cxx)


@pytest.fixture(scope="module")
def impostors(cxx: build.Toolchain, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding impostor libstdc++.so.6 and libgcc_s.so.1."""
    folder = tmp_path_factory.mktemp("impostors")
    (folder / "impostor.c").write_text(IMPOSTOR)
    for soname in ("libstdc++.so.6", "libgcc_s.so.1"):
        subprocess.run([cxx.cc, "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o",
                        str(folder / soname), str(folder / "impostor.c")], check=True)
    return folder


def _environment(library_path: str, marker: Path) -> dict[str, str]:
    return {**os.environ, "LD_LIBRARY_PATH": library_path, "IMPOSTOR_MARKER": str(marker)}


def test_the_impostor_runs_when_opened_through_the_search_path(
        impostors: Path, tmp_path: Path) -> None:
    """The control: what elfpatch used to do does load the impostor and run it."""
    marker = tmp_path / "marker"
    code = "import ctypes; ctypes.CDLL('libstdc++.so.6')"
    subprocess.run([sys.executable, "-c", code], env=_environment(str(impostors), marker),
                   cwd=tmp_path, check=True, timeout=120)
    assert marker.exists()


@pytest.mark.parametrize("where", ["LD_LIBRARY_PATH", "current folder"])
def test_scan_never_loads_a_runtime_from_ld_library_path(
        where: str, impostors: Path, unique_library: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    library_path, cwd = (str(impostors), tmp_path) if where == "LD_LIBRARY_PATH" else \
        (".", impostors)
    done = subprocess.run([sys.executable, "-m", "elfpatch", "scan", "--json",
                           str(unique_library)], capture_output=True, text=True, cwd=cwd,
                          env=_environment(library_path, marker), timeout=300)
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), "the impostor's constructor ran inside elfpatch"
    (record,) = json.loads(done.stdout)["files"]
    demangled = {u["name"]: u["demangled"] for u in record["unique"]}
    assert {name: demangled.get(name) for name in EXPECTED} == EXPECTED


def test_a_dependency_of_the_runtime_is_not_taken_from_ld_library_path(
        impostors: Path, unique_library: Path, tmp_path: Path) -> None:
    """libstdc++ needs libgcc_s.so.1: it must come from the system too, not the impostor."""
    alone = tmp_path / "only_libgcc"
    alone.mkdir()
    (alone / "libgcc_s.so.1").symlink_to(impostors / "libgcc_s.so.1")
    marker = tmp_path / "marker"
    done = subprocess.run([sys.executable, "-m", "elfpatch", "scan", "--json",
                           str(unique_library)], capture_output=True, text=True, cwd=tmp_path,
                          env=_environment(str(alone), marker), timeout=300)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    (record,) = json.loads(done.stdout)["files"]
    assert {u["name"]: u["demangled"] for u in record["unique"]}.items() >= EXPECTED.items()


def test_an_input_named_like_a_dependency_does_not_pass_for_it(
        cxx: build.Toolchain, impostors: Path, tmp_path: Path) -> None:
    """An input whose DT_SONAME is libgcc_s.so.1 is mapped while scanned, but not loaded.

    Taking it for the loaded libgcc_s.so.1 would leave the loader to search
    for the real one, on LD_LIBRARY_PATH, where the impostor waits.
    """
    disguised = build.build_shared(UNIQUE_LIBRARY, "demangle_disguised",
                                   ["-Wl,-soname,libgcc_s.so.1"], toolchain=cxx)
    alone = tmp_path / "only_libgcc"
    alone.mkdir()
    (alone / "libgcc_s.so.1").symlink_to(impostors / "libgcc_s.so.1")
    done = subprocess.run([sys.executable, "-m", "elfpatch", "scan", "--json", str(disguised)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env=_environment(str(alone), tmp_path / "marker"))
    assert done.returncode == 0, done.stderr
    (record,) = json.loads(done.stdout)["files"]
    assert {u["name"]: u["demangled"] for u in record["unique"]}.items() >= EXPECTED.items()


def test_files_being_read_are_not_taken_for_loaded_objects(cxx: build.Toolchain) -> None:
    from elfpatch.elf.file import ElfFile

    disguised = build.build_shared(UNIQUE_LIBRARY, "demangle_disguised",
                                   ["-Wl,-soname,libgcc_s.so.1"], toolchain=cxx)
    with ElfFile.open(disguised):
        assert str(disguised) in (demangle.mapped_files() or [])
        assert str(disguised) not in (demangle.loaded_sonames() or {}).values()


def test_a_runtime_the_interpreter_already_loaded_is_used(tmp_path: Path) -> None:
    """A runtime already in the process is reused: no second copy is opened."""
    system = next(demangle.trusted_candidates("libstdc++.so.6"), None)
    if system is None or not Path(system).is_file():
        pytest.skip("no system libstdc++.so.6 (apt-get install libstdc++6)")
    private = tmp_path / "private" / "libstdc++.so.6"
    private.parent.mkdir()
    private.write_bytes(Path(system).read_bytes())
    code = textwrap.dedent(f"""
        import ctypes, os
        ctypes.CDLL({str(private)!r})
        from elfpatch.cxx.demangle import demangle, mapped_files
        print(demangle("_ZZ7countervE5count"))
        real = os.path.realpath({system!r})
        print(sum(1 for p in mapped_files() if os.path.realpath(p) == real))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, check=True, timeout=120)
    assert done.stdout.split() == ["counter()::count", "0"]


def test_trusted_candidates_are_absolute_and_ignore_ld_library_path(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{tmp_path}:.:")
    candidates = list(demangle.trusted_candidates("libstdc++.so.6"))
    assert candidates
    assert all(Path(path).is_absolute() for path in candidates)
    assert not any(Path(path).is_relative_to(tmp_path) for path in candidates)
    assert list(demangle.trusted_candidates("sub/libstdc++.so.6")) == []


def test_loaded_objects_are_known_by_soname() -> None:
    sonames = demangle.loaded_sonames()
    assert sonames is not None
    libc = sonames.get("libc.so.6")
    if libc is None:
        pytest.skip("not a glibc system")
    assert Path(libc).is_absolute() and Path(libc).is_file()


def test_the_demangle_cache_is_bounded() -> None:
    assert demangle.demangle.cache_info().maxsize is not None
    assert demangle.demangle("_ZZ7countervE5count") in ("counter()::count",
                                                        "_ZZ7countervE5count")
