"""The closure and initializer order predicted for a program equal what glibc's ld.so does.

Small graphs of libraries are built with g++ (once per session, in a
temporary folder): a diamond, cycles through ``$ORIGIN``, siblings needed
in different orders, DT_RPATH against DT_RUNPATH with LD_LIBRARY_PATH,
``$LIB``/``$PLATFORM``/glibc-hwcaps directories, files of another class or
machine on the path, and a library dlopen'ed with a cycle back to itself.
The oracle is ld.so itself: ``LD_DEBUG=files`` prints "calling init: PATH"
for every object and "initialize program: ARGV0" for the program, in the
order it runs them, under ``glibc.rtld.dynamic_sort=1`` and ``=2``.

/etc/ld.so.cache is checked against ``ldconfig -p`` and against caches
written here in both formats, corrupt ones included.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.build import TORCH_LIBRARY_VARIABLE, compile_linked, opt_in_file
from support.ldcache import new_cache, old_cache

from elfpatch.elf.file import ElfFile
from elfpatch.loader import cache as ldcache
from elfpatch.loader.closure import (
    Closure,
    MissingLibrary,
    dependency_closure,
    loader_profile,
)

ALGORITHMS = (1, 2)
MARKER = "@@dlopen@@"

LIBRARY = r"""
#include <cstdio>
namespace {
struct Announce { Announce() { std::printf("init %s\n", NAME); std::fflush(stdout); } };
Announce announce;
}
"""

PROGRAM = r"""
#include <cstdio>
namespace {
struct Announce { Announce() { std::printf("init main\n"); std::fflush(stdout); } };
Announce announce;
}
int main() { return 0; }
"""

DLOPENER = r"""
#include <dlfcn.h>
#include <unistd.h>
#include <cstdio>
#include <cstring>
int main(int argc, char** argv) {
    const char marker[] = "MARKER\n";
    if (write(2, marker, std::strlen(marker)) < 0) return 2;
    if (dlopen(argv[1], RTLD_NOW) == nullptr) { std::fprintf(stderr, "%s\n", dlerror()); return 1; }
    return 0;
}
""".replace("MARKER", MARKER)


# -- building ----------------------------------------------------------------------

@dataclass(frozen=True)
class Compiler:
    cxx: str

    def build(self, output: Path, source: str, *, name: str = "", soname: str | None = None,
              needed: Sequence[Path] = (), flags: Sequence[str] = ()) -> Path:
        """Compile ``source`` into ``output``; ``needed`` become DT_NEEDED in this order."""
        return compile_linked(self.cxx, "c++", output, source, soname=soname, needed=needed,
                              flags=[f'-DNAME="{name}"', *flags])

    def stub(self, folder: Path, soname: str) -> Path:
        """A library that is only a soname to link against (the real one is built later)."""
        return self.build(folder / soname, "", soname=soname)


@pytest.fixture(scope="session")
def compiler() -> Compiler:
    cxx = shutil.which(os.environ.get("CXX") or "g++")
    if cxx is None:
        pytest.skip("g++ is not installed (apt-get install g++); cannot build test programs")
    return Compiler(cxx)


@pytest.fixture(scope="session")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("closure")


def lib(name: str) -> str:
    return f"lib{name}.so"


def build_graph(compiler: Compiler, folder: Path, graph: Mapping[str, Sequence[str]],
                program_needs: Sequence[str], *, flags: Sequence[str] = (),
                library_flags: Mapping[str, Sequence[str]] | None = None,
                program_soname: str | None = None) -> Path:
    """Libraries ``lib<name>.so`` needing each other as ``graph`` says, and a program.

    Every library is first built as a stub carrying only its soname; the real
    ones link against the stubs, so cycles cost nothing.  All find each
    other through an ``$ORIGIN`` path.  With ``program_soname`` the program
    has that DT_SONAME, and libraries may need it under the name it has in
    ``graph`` (ld.so then finds the program itself).
    """
    stubs = folder / "stubs"
    names = [*graph, *([program_soname] if program_soname else [])]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda name: compiler.stub(stubs, lib(name)), names))
        rpath = ["-Wl,-rpath,$ORIGIN", *flags]
        list(pool.map(lambda item: compiler.build(
            folder / lib(item[0]), LIBRARY, name=lib(item[0]), soname=lib(item[0]),
            needed=[stubs / lib(n) for n in item[1]],
            flags=[*rpath, *(library_flags or {}).get(item[0], ())]), graph.items()))
    program_flags = [*rpath, *([f"-Wl,-soname,{lib(program_soname)}"] if program_soname else [])]
    return compiler.build(folder / "main", PROGRAM, needed=[stubs / lib(n) for n in program_needs],
                          flags=program_flags)


# -- the oracle ----------------------------------------------------------------------

_CALLING_INIT = re.compile(r"^\s*\d+:\s+(?:calling init|initialize program): (.*)$")


def clean_environment(**extra: str) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith("LD_") and key != "GLIBC_TUNABLES"}
    environment.update(extra)
    return environment


@dataclass(frozen=True)
class Run:
    before: list[str]  # objects initialised before the marker (all when none is printed)
    after: list[str]  # objects initialised after it
    stdout: str


def glibc_run(command: Sequence[str], algorithm: int, library_path: str = "") -> Run:
    """Run ``command`` under LD_DEBUG=files; the objects ld.so initialises, in its order."""
    environment = clean_environment(LD_DEBUG="files",
                                    GLIBC_TUNABLES=f"glibc.rtld.dynamic_sort={algorithm}")
    if library_path:
        environment["LD_LIBRARY_PATH"] = library_path
    result = subprocess.run(list(command), capture_output=True, text=True, env=environment,
                            timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    before: list[str] = []
    after: list[str] = []
    current = before
    for line in result.stderr.splitlines():
        if line.strip() == MARKER:
            current = after
        elif match := _CALLING_INIT.match(line):
            current.append(match.group(1))
    return Run(before, after, result.stdout)


def glibc_order(program: Path, algorithm: int, library_path: str = "") -> list[str]:
    return glibc_run([str(program)], algorithm, library_path).before


def real(paths: Sequence[str | Path]) -> list[str]:
    return [os.path.realpath(p) for p in paths]


def predicted(program: Path, algorithm: int, library_path: str = "") -> Closure:
    return dependency_closure(program, ld_library_path=library_path, sort_algorithm=algorithm)


def assert_same_order(program: Path, algorithm: int, library_path: str = "") -> list[str]:
    """The prediction equals ld.so's order, by real path and by the name ld.so gives."""
    closure = predicted(program, algorithm, library_path)
    assert closure.missing == ()
    glibc = glibc_order(program, algorithm, library_path)
    ours = [str(o.path) for o in closure.objects]
    assert real(ours) == real(glibc), f"algorithm {algorithm}\nours:  {ours}\nglibc: {glibc}"
    assert [o.path for o in closure.objects] == [Path(p) for p in glibc]
    assert {o.path for o in closure.load_order} == set(map(Path, glibc))
    return real(glibc)


def ours_only(order: Sequence[str], folder: Path) -> list[str]:
    """The names of the test's own objects in ``order`` (lib<name>.so, main)."""
    inside = str(folder.resolve())
    return [Path(p).name for p in order if p.startswith(inside)]


# -- a diamond ---------------------------------------------------------------------------

@pytest.fixture(scope="session")
def diamond(compiler: Compiler, workspace: Path) -> Path:
    graph = {"C": [], "A": ["C"], "B": ["C"]}
    return build_graph(compiler, workspace / "diamond", graph, ["A", "B"])


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_diamond_order_is_glibcs(diamond: Path, algorithm: int) -> None:
    order = assert_same_order(diamond, algorithm)
    assert ours_only(order, diamond.parent) == ["libC.so", "libB.so", "libA.so", "main"]
    closure = predicted(diamond, algorithm)
    names = {o.path.name for o in closure.objects}
    assert {"libc.so.6", "libstdc++.so.6"} <= names
    with ElfFile.open(diamond) as elf:
        interpreter = loader_profile(elf.header).interpreter
    assert interpreter is not None and Path(interpreter).name in names  # ld.so prints it too
    # The printed initializers agree with what LD_DEBUG reported.
    printed = glibc_run([str(diamond)], algorithm).stdout.split()
    assert [w for w in printed if w not in ("init",)] == ["libC.so", "libB.so", "libA.so", "main"]


def test_diamond_closure_fields(diamond: Path) -> None:
    closure = dependency_closure(diamond, ld_library_path="")
    by_name = {o.path.name: o for o in closure.objects}
    assert closure.root.path == diamond and closure.objects[-1] == closure.root
    assert closure.root.requested_by is None
    assert by_name["libC.so"].requested_by == diamond.parent / "libA.so"
    assert by_name["libA.so"].needed[0] == "libC.so"
    assert by_name["libA.so"].soname == "libA.so"
    assert [o.path.name for o in closure.load_order[:4]] == ["main", "libA.so", "libB.so",
                                                             "libstdc++.so.6"]


def test_sort_algorithm_is_checked(diamond: Path) -> None:
    with pytest.raises(ValueError, match="sort_algorithm"):
        dependency_closure(diamond, sort_algorithm=3)


# -- cycles and siblings ------------------------------------------------------------------

GRAPHS: dict[str, tuple[dict[str, Sequence[str]], Sequence[str]]] = {
    "cycle": ({"X": ["Y"], "Y": ["X"]}, ["X", "Y"]),
    "cycle-reversed": ({"X": ["Y"], "Y": ["X"]}, ["Y", "X"]),
    "cycle-siblings": ({"X": ["Y", "S2", "S1"], "Y": ["X", "S1"], "S1": [], "S2": ["S1"]},
                       ["X", "S1", "Y"]),
    "long-cycle": ({"A": ["B"], "B": ["C"], "C": ["A", "D"], "D": []}, ["A"]),
    "two-cycles": ({"P": ["Q"], "Q": ["R", "P"], "R": ["P"], "T": ["R"]}, ["T", "P", "Q"]),
    "siblings": ({"S1": ["S2", "S3"], "S2": ["S3"], "S3": []}, ["S3", "S1", "S2"]),
    "deep-cycle": ({"A": ["B", "E"], "B": ["C"], "C": ["D"], "D": ["B", "E"], "E": ["F"],
                    "F": []}, ["F", "A", "C"]),
    # where the original algorithm's give-up count decides the order
    "shared-cycle": ({"C": ["D"], "D": ["C", "B"], "B": ["D"]}, ["C"]),
    "shared-cycle-two-entries": ({"A": ["B"], "B": ["C", "A"], "C": ["B"]}, ["A", "C"]),
}


# Graphs built with extra options: the program's own soname, per-library flags.
SPECIAL: dict[str, dict[str, object]] = {
    # libraries that need the program itself: the DFS sort never enters it
    "needs-program": {"program_soname": "M"},
    # -z initfirst: ld.so runs that library's initializers before all others
    "initfirst": {"library_flags": {"I": ["-Wl,-z,initfirst"]}},
}
GRAPHS.update({
    "needs-program": ({"X": ["Y", "M"], "Y": ["M", "X"], "Z": ["X"]}, ["Z", "X", "Y"]),
    "initfirst": ({"A": ["B"], "B": ["I"], "I": ["C"], "C": []}, ["A", "C"]),
})


@pytest.fixture(scope="session")
def graphs(compiler: Compiler, workspace: Path) -> dict[str, Path]:
    def one(name: str) -> Path:
        graph, needs = GRAPHS[name]
        options = SPECIAL.get(name, {})
        return build_graph(compiler, workspace / name, graph, needs, **options)  # type: ignore[arg-type]

    with ThreadPoolExecutor(4) as pool:
        return dict(zip(GRAPHS, pool.map(one, GRAPHS), strict=True))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_graph_order_is_glibcs(graphs: dict[str, Path], graph: str, algorithm: int) -> None:
    assert_same_order(graphs[graph], algorithm)


def test_algorithms_differ_on_some_cycle(graphs: dict[str, Path]) -> None:
    """Both algorithms are exercised where they disagree, not only where they agree."""
    differing = [name for name, program in graphs.items()
                 if glibc_order(program, 1) != glibc_order(program, 2)]
    assert differing, "no graph tells the two sort algorithms apart"
    for name in differing:
        first, second = (predicted(graphs[name], a) for a in ALGORITHMS)
        assert first.objects != second.objects


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_initfirst_library_runs_first(graphs: dict[str, Path], algorithm: int) -> None:
    order = assert_same_order(graphs["initfirst"], algorithm)
    assert Path(order[0]).name == lib("I")


# -- one file under several names ----------------------------------------------------------

@pytest.fixture(scope="session")
def aliases(compiler: Compiler, workspace: Path) -> Path:
    """libV.so.1 needed as libV-a.so, libV-b.so (symlinks) and $ORIGIN/libV.so.1.

    No name matches an object already loaded, so only the file's identity
    (device and inode) tells ld.so the three are one object.
    """
    folder = workspace / "aliases"
    stubs = folder / "stubs"
    for soname in ("libV-a.so", "libV-b.so", "$ORIGIN/libV.so.1", lib("X"), lib("Y")):
        compiler.build(stubs / soname.replace("$ORIGIN/", "origin-"), "", soname=soname)
    compiler.build(folder / "libV.so.1", LIBRARY, name="libV.so.1", soname="libV.so.1")
    for alias in ("libV-a.so", "libV-b.so"):
        (folder / alias).symlink_to("libV.so.1")
    rpath = ["-Wl,-rpath,$ORIGIN"]
    compiler.build(folder / lib("X"), LIBRARY, name=lib("X"), soname=lib("X"),
                   needed=[stubs / "libV-a.so"], flags=rpath)
    compiler.build(folder / lib("Y"), LIBRARY, name=lib("Y"), soname=lib("Y"),
                   needed=[stubs / "libV-b.so", stubs / "origin-libV.so.1"], flags=rpath)
    return compiler.build(folder / "main", PROGRAM, needed=[stubs / lib("X"), stubs / lib("Y")],
                          flags=rpath)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_one_file_under_several_names_loads_once(aliases: Path, algorithm: int) -> None:
    order = assert_same_order(aliases, algorithm)
    assert [Path(p).name for p in order].count("libV.so.1") == 1
    closure = predicted(aliases, algorithm)
    assert [o.path.name for o in closure.objects if "libV" in o.path.name] == ["libV-a.so"]


# -- DT_RPATH, DT_RUNPATH and LD_LIBRARY_PATH --------------------------------------------

@dataclass(frozen=True)
class SearchLayout:
    folder: Path
    programs: dict[str, Path]

    @property
    def env_dir(self) -> str:
        return str(self.folder / "env")


@pytest.fixture(scope="session")
def search_layout(compiler: Compiler, workspace: Path) -> SearchLayout:
    """libD.so in two folders (rpath/ and env/); libE.so (in e/) needs it.

    Each program needs libE.so through a path list of its own; which libD.so
    loads, if any, depends on DT_RPATH being inherited and DT_RUNPATH not.
    """
    folder = workspace / "search"
    stubs = folder / "stubs"
    for name in ("D", "E"):
        compiler.stub(stubs, lib(name))
    for where in ("rpath", "env"):
        compiler.build(folder / where / lib("D"), LIBRARY, name=f"libD.so from {where}",
                       soname=lib("D"))
    compiler.build(folder / "e" / lib("E"), LIBRARY, name=lib("E"), soname=lib("E"),
                   needed=[stubs / lib("D")])
    compiler.build(folder / "e-runpath" / lib("E"), LIBRARY, name=lib("E"), soname=lib("E"),
                   needed=[stubs / lib("D")],
                   flags=["-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../env"])
    path = "-Wl,-rpath,$ORIGIN/e:$ORIGIN/rpath"
    programs = {
        "rpath": (path, "-Wl,--disable-new-dtags"),
        "runpath": (path, "-Wl,--enable-new-dtags"),
        "rpath-then-runpath-library": ("-Wl,-rpath,$ORIGIN/e-runpath:$ORIGIN/rpath",
                                       "-Wl,--disable-new-dtags"),
    }
    built = {name: compiler.build(folder / f"main-{name}", PROGRAM, needed=[stubs / lib("E")],
                                  flags=flags) for name, flags in programs.items()}
    return SearchLayout(folder, built)


def _dynamic_tags(path: Path) -> set[str]:
    with ElfFile.open(path) as elf:
        return {name for name, value in (("RPATH", elf.rpath), ("RUNPATH", elf.runpath))
                if value is not None}


def test_the_programs_carry_the_tags_they_claim(search_layout: SearchLayout) -> None:
    assert _dynamic_tags(search_layout.programs["rpath"]) == {"RPATH"}
    assert _dynamic_tags(search_layout.programs["runpath"]) == {"RUNPATH"}
    assert _dynamic_tags(search_layout.folder / "e-runpath" / lib("E")) == {"RUNPATH"}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize(("program", "with_env", "expected"), [
    ("rpath", False, "rpath"),  # inherited DT_RPATH of the program
    ("rpath", True, "rpath"),  # DT_RPATH comes before LD_LIBRARY_PATH
    ("runpath", True, "env"),  # DT_RUNPATH is not inherited: LD_LIBRARY_PATH
    ("rpath-then-runpath-library", False, "env"),  # the requester's DT_RUNPATH hides DT_RPATH
    ("rpath-then-runpath-library", True, "env"),
])
def test_search_order_is_glibcs(search_layout: SearchLayout, program: str, with_env: bool,
                                expected: str, algorithm: int) -> None:
    library_path = search_layout.env_dir if with_env else ""
    order = assert_same_order(search_layout.programs[program], algorithm, library_path)
    found = [p for p in order if Path(p).name == lib("D")]
    assert found == [str((search_layout.folder / expected / lib("D")).resolve())]


def test_missing_library_is_reported_not_fatal(search_layout: SearchLayout) -> None:
    """Without LD_LIBRARY_PATH the DT_RUNPATH program cannot find libD.so; ld.so agrees."""
    program = search_layout.programs["runpath"]
    closure = dependency_closure(program, ld_library_path="")
    requester = search_layout.folder / "e" / lib("E")
    assert closure.missing == (MissingLibrary(lib("D"), requester),)
    assert requester in [o.path for o in closure.objects]
    result = subprocess.run([str(program)], capture_output=True, text=True, timeout=60,
                            env=clean_environment())
    assert result.returncode != 0 and lib("D") in result.stderr


def test_ld_library_path_defaults_to_the_environment(search_layout: SearchLayout,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    program = search_layout.programs["runpath"]
    monkeypatch.setenv("LD_LIBRARY_PATH", search_layout.env_dir)
    assert dependency_closure(program).missing == ()
    monkeypatch.delenv("LD_LIBRARY_PATH")
    assert dependency_closure(program).missing != ()


# -- $LIB, $PLATFORM, glibc-hwcaps, files of another class or machine ----------------------

@dataclass(frozen=True)
class TokenLayout:
    program: Path
    library_path: str


def _patched_copy(source: Path, destination: Path, offset: int, value: bytes) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    data = bytearray(source.read_bytes())
    data[offset:offset + len(value)] = value
    destination.write_bytes(bytes(data))


@pytest.fixture(scope="session")
def token_layout(compiler: Compiler, workspace: Path) -> TokenLayout:
    folder = workspace / "tokens"
    with ElfFile.open(sys.executable) as elf:
        profile = loader_profile(elf.header)
    if profile.platform is None:
        pytest.skip("no known $PLATFORM for this machine")
    stubs = folder / "stubs"
    names = ("L", "P", "H", "W", "K")
    for name in names:
        compiler.stub(stubs, lib(name))
    places = {"L": f"{profile.lib}", "P": f"plat/{profile.platform}", "H": "base",
              "W": "base", "K": "base"}
    for name, where in places.items():
        compiler.build(folder / where / lib(name), LIBRARY, name=lib(name), soname=lib(name))
    for level in profile.cache_hwcaps[-1:]:  # the most widely supported level, if any
        compiler.build(folder / "base" / "glibc-hwcaps" / level / lib("H"), LIBRARY,
                       name=f"libH.so for {level}", soname=lib("H"))
    # Earlier on LD_LIBRARY_PATH: libW.so for another machine, libK.so of another class.
    wrong = folder / "wrong"
    machine = struct.pack("<H" if profile.little_endian else ">H",
                          183 if profile.machine != 183 else 62)
    _patched_copy(folder / "base" / lib("W"), wrong / lib("W"), 18, machine)
    _patched_copy(folder / "base" / lib("K"), wrong / lib("K"), 4,
                  bytes([1 if profile.elf_class == 64 else 2]))
    rpath = "-Wl,-rpath,$ORIGIN/$LIB:$ORIGIN/plat/$PLATFORM:$ORIGIN/base"
    program = compiler.build(folder / "main", PROGRAM, needed=[stubs / lib(n) for n in names],
                             flags=[rpath, "-Wl,--enable-new-dtags"])
    return TokenLayout(program, str(wrong))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_tokens_hwcaps_and_foreign_files_as_glibc(token_layout: TokenLayout,
                                                  algorithm: int) -> None:
    order = assert_same_order(token_layout.program, algorithm, token_layout.library_path)
    assert not any("/wrong/" in p for p in order)
    folder = token_layout.program.parent.resolve()
    assert {Path(p).name for p in order if p.startswith(str(folder))} >= {
        lib("L"), lib("P"), lib("H"), lib("W"), lib("K")}


def test_search_subdirectories_are_ldsos(token_layout: TokenLayout) -> None:
    """The subdirectories tried under a directory equal those LD_DEBUG=libs lists."""
    environment = clean_environment(LD_DEBUG="libs")
    result = subprocess.run([str(token_layout.program)], capture_output=True, text=True,
                            env=environment, timeout=60)
    line = next(line for line in result.stderr.splitlines() if "search path=" in line)
    listed = line.split("search path=", 1)[1].split("\t")[0].split(":")
    with ElfFile.open(token_layout.program) as elf:
        profile = loader_profile(elf.header)
    first = f"{token_layout.program.parent.resolve()}/{profile.lib}/"  # $ORIGIN/$LIB
    expected = [(first + sub).rstrip("/") for sub in profile.subdirectories]
    assert listed[: len(expected)] == expected


# -- a library dlopen'ed, with a cycle back to itself ---------------------------------------

@pytest.fixture(scope="session")
def dlopen_layout(compiler: Compiler, workspace: Path) -> tuple[Path, Path]:
    folder = workspace / "dlopen"
    graph = {"R": ["Q", "S"], "Q": ["R", "S"], "S": ["U"], "U": []}
    build_graph(compiler, folder, graph, [])
    host = compiler.build(folder / "host", DLOPENER, flags=["-ldl"])
    return host, folder / lib("R")


def assert_dlopen_order(command: Sequence[str], library: Path, algorithm: int) -> None:
    """The objects a dlopen initialises are the new ones of its closure, in its order."""
    run = glibc_run(command, algorithm)
    already = set(real(run.before))
    closure = dependency_closure(library, ld_library_path="", sort_algorithm=algorithm)
    assert closure.missing == ()
    expected = [p for p in real([o.path for o in closure.objects]) if p not in already]
    assert expected == real(run.after), f"ours {expected}\nglibc {run.after}"
    assert expected[-1] == os.path.realpath(library)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_dlopen_with_a_cycle_to_the_root(dlopen_layout: tuple[Path, Path],
                                         algorithm: int) -> None:
    host, library = dlopen_layout
    assert_dlopen_order([str(host), str(library)], library, algorithm)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_libtorch_cpu_as_python_dlopens_it(algorithm: int) -> None:
    torch_cpu = opt_in_file(TORCH_LIBRARY_VARIABLE, "the path of a libtorch_cpu.so")
    script = (f"import ctypes, os; os.write(2, b'{MARKER}\\n'); "
              f"ctypes.CDLL({str(torch_cpu)!r})")
    assert_dlopen_order([sys.executable, "-c", script], torch_cpu, algorithm)


# -- /etc/ld.so.cache ----------------------------------------------------------------------

def test_system_cache_equals_ldconfig_p() -> None:
    ldconfig = shutil.which("ldconfig") or shutil.which("ldconfig", path="/sbin:/usr/sbin")
    if ldconfig is None or not ldcache.DEFAULT_CACHE_PATH.is_file():
        pytest.skip("no ldconfig or no /etc/ld.so.cache here (apt-get install libc-bin)")
    cache = ldcache.read_ld_cache()
    output = subprocess.run([ldconfig, "-p"], capture_output=True, text=True,
                            timeout=60).stdout.splitlines()
    listed = []
    for line in output[1:]:
        if line.startswith("Cache generated by"):
            continue
        match = re.match(r"^\s+(\S+) \(([^)]*)\)(?: OS ABI: [^=]*)? => (.*)$", line)
        assert match, line
        abi = match.group(2).split(", hwcap:")[0]
        listed.append((match.group(1), abi, match.group(3)))
    assert listed == [(e.soname, e.abi, e.path) for e in cache.entries]
    assert output[0].startswith(f"{len(cache)} libs found")


def test_system_cache_lookup_finds_libc() -> None:
    cache = ldcache.read_ld_cache()
    with ElfFile.open(sys.executable) as elf:
        profile = loader_profile(elf.header)
    found = cache.lookup("libc.so.6", profile.cache_flags, profile.cache_hwcaps)
    if len(cache) == 0:
        assert found is None
    else:
        assert found is not None and Path(found).name == "libc.so.6"


X86_64, I386 = 0x303, 0x3
SAME_NAME = [(X86_64, "libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1", 0),
             (I386, "libz.so.1", "/lib/i386-linux-gnu/libz.so.1", 0),
             (X86_64, "libm.so.6", "/lib/x86_64-linux-gnu/libm.so.6", 0),
             (X86_64, "libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6", 0)]


def test_lookup_filters_by_abi() -> None:
    cache = ldcache.parse_ld_cache(new_cache(SAME_NAME))
    assert cache.format == "new" and len(cache) == 4
    x86_64 = ldcache.accepted_cache_flags(62, 64)
    i386 = ldcache.accepted_cache_flags(3, 32)
    aarch64 = ldcache.accepted_cache_flags(183, 64)
    assert cache.lookup("libz.so.1", x86_64) == "/lib/x86_64-linux-gnu/libz.so.1"
    assert cache.lookup("libz.so.1", i386) == "/lib/i386-linux-gnu/libz.so.1"
    assert cache.lookup("libz.so.1", aarch64) is None
    assert cache.lookup("libc.so.6", x86_64) == "/lib/x86_64-linux-gnu/libc.so.6"
    assert cache.lookup("libm.so.6", x86_64) == "/lib/x86_64-linux-gnu/libm.so.6"
    assert cache.lookup("libq.so", x86_64) is None
    assert cache.entries[0].abi == "libc6,x86-64" and cache.entries[1].abi == "libc6"


def test_lookup_prefers_the_best_supported_hwcaps_entry() -> None:
    extension = ldcache.HWCAP_EXTENSION
    entries = [(X86_64, "libh.so", "/v2/libh.so", extension | 0),
               (X86_64, "libh.so", "/v3/libh.so", extension | 1),
               (X86_64, "libh.so", "/plain/libh.so", 0)]
    cache = ldcache.parse_ld_cache(new_cache(entries, ["x86-64-v2", "x86-64-v3"]))
    flags = ldcache.accepted_cache_flags(62, 64)
    assert [e.hwcaps_subdirectory for e in cache.entries] == ["x86-64-v2", "x86-64-v3", None]
    assert cache.lookup("libh.so", flags, ("x86-64-v3", "x86-64-v2")) == "/v3/libh.so"
    assert cache.lookup("libh.so", flags, ("x86-64-v2",)) == "/v2/libh.so"
    assert cache.lookup("libh.so", flags, ()) == "/plain/libh.so"


def test_old_format_and_old_with_new() -> None:
    old = old_cache([(X86_64, name, path) for _f, name, path, _h in SAME_NAME])
    parsed = ldcache.parse_ld_cache(old)
    assert parsed.format == "old"
    assert [(e.soname, e.path) for e in parsed.entries] == [(n, p) for _f, n, p, _h in SAME_NAME]
    combined = ldcache.parse_ld_cache(old_cache([(X86_64, "libold.so", "/old/libold.so")],
                                                 new_cache(SAME_NAME)))
    assert combined.format == "old+new"
    assert [e.soname for e in combined.entries] == [n for _f, n, _p, _h in SAME_NAME]


def test_name_order_compares_numbers_by_value() -> None:
    assert ldcache.compare_names("libfoo.so.10", "libfoo.so.9") > 0
    assert ldcache.names_equal("libfoo.so.01", "libfoo.so.1")
    assert ldcache.compare_names("libz3.so", "libzstd.so") > 0
    assert ldcache.compare_names("liba.so", "liba.so.1") < 0


def test_missing_cache_is_empty(tmp_path: Path) -> None:
    assert len(ldcache.read_ld_cache(tmp_path / "nothing")) == 0
    assert len(ldcache.read_ld_cache(tmp_path)) == 0  # a directory


@pytest.mark.parametrize("cut", [0, 10, 20, 47, 48, 60, 100, 150])
def test_truncated_cache_is_empty_or_shorter(cut: int) -> None:
    image = new_cache(SAME_NAME)
    parsed = ldcache.parse_ld_cache(image[:cut])
    assert len(parsed) == 0 or parsed.entries == ldcache.parse_ld_cache(image).entries


def test_invalid_endianness_is_ignored() -> None:
    image = bytearray(new_cache(SAME_NAME))
    image[28] = 1  # "invalid": ld.so ignores such a cache
    assert len(ldcache.parse_ld_cache(bytes(image))) == 0


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400), st.integers(0, 400), st.sampled_from(["new", "old", "old+new"]))
def test_corrupt_caches_never_raise(noise: bytes, position: int, kind: str) -> None:
    images = {"new": new_cache(SAME_NAME),
              "old": old_cache([(X86_64, n, p) for _f, n, p, _h in SAME_NAME]),
              "old+new": old_cache([], new_cache(SAME_NAME))}
    image = bytearray(images[kind])
    image[position:position + len(noise)] = noise
    parsed = ldcache.parse_ld_cache(bytes(image))
    parsed.lookup("libz.so.1", ldcache.accepted_cache_flags(62, 64), ("x86-64-v2",))
    for blob in (noise, images[kind][:4] + noise):
        ldcache.parse_ld_cache(ldcache.NEW_MAGIC + blob)
        ldcache.parse_ld_cache(ldcache.OLD_MAGIC + blob)
