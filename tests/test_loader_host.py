"""The loader model takes its host as one explicit ``HostProfile``, checked against ld.so.

A program and small C libraries are built with gcc: found through
DT_RPATH, DT_RUNPATH, LD_LIBRARY_PATH, a ``glibc-hwcaps/x86-64-v2/``
subdirectory and the legacy ``tls/`` and ``x86_64/`` subdirectories.  The
oracle is this machine's ld.so: ``LD_DEBUG=libs`` prints every file it
tries for a name (the last one is the one it opened) and "calling init:"
for every object in the order it runs them.  The same closure computed
for glibc 2.37 must leave the legacy subdirectories alone, a foreign
(aarch64) profile must be honoured without reading this machine, and a
glibc older than the model covers is refused.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.build import compile_linked
from support.ldcache import new_cache

from elfpatch.elf.constants import EM_AARCH64
from elfpatch.elf.file import ElfFile
from elfpatch.errors import ElfpatchError
from elfpatch.loader import cache as ldcache
from elfpatch.loader import host as hostmodule
from elfpatch.loader.closure import Closure, dependency_closure, loader_profile
from elfpatch.loader.host import HostProfile, parse_glibc_version, x86_64_level_flags

LIBRARY = r"""
static void __attribute__((constructor)) announce(void) {}
int NAME_used(void) { return 0; }
"""
PROGRAM = "int main(void) { return 0; }\n"


@dataclass(frozen=True)
class Gcc:
    cc: str

    def build(self, output: Path, source: str, *, soname: str | None = None,
              needed: Sequence[Path] = (), flags: Sequence[str] = ()) -> Path:
        return compile_linked(self.cc, "c", output, source, soname=soname, needed=needed,
                              flags=flags)

    def library(self, output: Path, soname: str, **options: object) -> Path:
        return self.build(output, LIBRARY, soname=soname, **options)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def gcc() -> Gcc:
    cc = shutil.which(os.environ.get("CC") or "gcc")
    if cc is None:
        pytest.skip("gcc is not installed (apt-get install gcc); cannot build test programs")
    return Gcc(cc)


def this_host(**changes: object) -> HostProfile:
    return dataclasses.replace(HostProfile.of_this_host(), **changes)  # type: ignore[arg-type]


# -- the layout: one library per way of being found ----------------------------------

@dataclass(frozen=True)
class Layout:
    program: Path
    folder: Path
    env_dir: str

    def at(self, relative: str) -> str:
        return str(self.folder / relative)


@pytest.fixture(scope="session")
def layout(gcc: Gcc, tmp_path_factory: pytest.TempPathFactory) -> Layout:
    """main (DT_RPATH rpath/) needs libR, libE, libH, libT, libX; libR (DT_RUNPATH) needs libU.

    libH has a copy in rpath/glibc-hwcaps/x86-64-v2/, libT in rpath/tls/,
    libX in rpath/x86_64/, each beside a baseline copy in rpath/; libE is
    only on LD_LIBRARY_PATH (env/), libU only on libR's DT_RUNPATH.
    """
    folder = tmp_path_factory.mktemp("loader-host").resolve()
    stubs = folder / "stubs"
    names = ("R", "E", "H", "T", "X", "U")
    for name in names:
        gcc.library(stubs / f"lib{name}.so", f"lib{name}.so")
    gcc.library(folder / "runpath" / "libU.so", "libU.so")
    gcc.library(folder / "rpath" / "libR.so", "libR.so", needed=[stubs / "libU.so"],
                flags=["-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../runpath"])
    gcc.library(folder / "env" / "libE.so", "libE.so")
    for name, special in (("H", "glibc-hwcaps/x86-64-v2"), ("T", "tls"), ("X", "x86_64")):
        gcc.library(folder / "rpath" / f"lib{name}.so", f"lib{name}.so")
        gcc.library(folder / "rpath" / special / f"lib{name}.so", f"lib{name}.so")
    program = gcc.build(folder / "main", PROGRAM,
                        needed=[stubs / f"lib{n}.so" for n in names[:5]],
                        flags=["-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN/rpath"])
    return Layout(program, folder, str(folder / "env"))


# -- the oracle: LD_DEBUG=libs ----------------------------------------------------------

_FIND = re.compile(r"^\s*\d+:\s+find library=(\S+) \[\d+\]; searching$")
_TRYING = re.compile(r"^\s*\d+:\s+trying file=(.*)$")
_INIT = re.compile(r"^\s*\d+:\s+(?:calling init|initialize program): (.*)$")


@dataclass(frozen=True)
class LdDebug:
    opened: dict[str, str]  # needed name -> the file ld.so opened for it
    inits: list[str]  # objects in the order their initializers ran


def run_ld_debug(program: Path, library_path: str) -> LdDebug:
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith("LD_") and key != "GLIBC_TUNABLES"}
    environment.update(LD_DEBUG="libs", LD_LIBRARY_PATH=library_path)
    done = subprocess.run([str(program)], capture_output=True, text=True, env=environment,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    opened: dict[str, str] = {}
    inits: list[str] = []
    current: str | None = None
    for line in done.stderr.splitlines():
        if match := _FIND.match(line):
            current = match.group(1)
        elif (match := _TRYING.match(line)) and current is not None:
            opened[current] = match.group(1)  # the last file tried is the one opened
        elif match := _INIT.match(line):
            inits.append(match.group(1))
    return LdDebug(opened, inits)


def searched(closure: Closure, interpreter: str | None) -> dict[str, str]:
    """Needed name -> path of every object the closure found by searching."""
    return {o.path.name: str(o.path) for o in closure.load_order
            if o is not closure.root and str(o.path) != interpreter}


def interpreter_of(program: Path, host: HostProfile) -> str | None:
    with ElfFile.open(program) as elf:
        return loader_profile(elf.header, host=host).interpreter


def test_closure_opens_what_ld_so_opens(layout: Layout) -> None:
    """Every file ld.so opened, and its init order, equal the closure for this host's profile."""
    host = this_host(ld_library_path=layout.env_dir)
    assert host.glibc < (2, 37), "this check needs a glibc that still searches tls/"
    closure = dependency_closure(layout.program, host=host)
    assert closure.missing == ()
    glibc = run_ld_debug(layout.program, layout.env_dir)
    assert searched(closure, interpreter_of(layout.program, host)) == glibc.opened
    assert [str(o.path) for o in closure.objects] == glibc.inits
    expected = {"libR.so": "rpath/libR.so", "libU.so": "rpath/../runpath/libU.so",
                "libE.so": "env/libE.so", "libT.so": "rpath/tls/libT.so",
                "libX.so": "rpath/x86_64/libX.so"}
    assert {name: glibc.opened[name] for name in expected} == \
        {name: layout.at(where) for name, where in expected.items()}


def test_glibc_hwcaps_subdirectory_is_taken(layout: Layout) -> None:
    host = this_host(ld_library_path=layout.env_dir)
    if host.x86_64_level < 2 or os.uname().machine != "x86_64":
        pytest.skip("this CPU does not reach x86-64-v2: ld.so takes the baseline libH.so")
    closure = dependency_closure(layout.program, host=host)
    wanted = layout.at("rpath/glibc-hwcaps/x86-64-v2/libH.so")
    assert searched(closure, None)["libH.so"] == wanted
    assert run_ld_debug(layout.program, layout.env_dir).opened["libH.so"] == wanted


def test_glibc_2_37_does_not_search_legacy_subdirectories(layout: Layout) -> None:
    """glibc 2.37 removed tls/, $PLATFORM/ and hwcap-name subdirectories: the baselines load."""
    old = this_host(ld_library_path=layout.env_dir)
    new = dataclasses.replace(old, glibc=(2, 37))
    with ElfFile.open(layout.program) as elf:
        old_profile, new_profile = (loader_profile(elf.header, host=h) for h in (old, new))
    assert "tls/" in old_profile.subdirectories and "x86_64/" in old_profile.subdirectories
    hwcaps = tuple(f"glibc-hwcaps/{name}/" for name in new_profile.cache_hwcaps)
    assert new_profile.subdirectories == (*hwcaps, "")
    before = searched(dependency_closure(layout.program, host=old), None)
    after = searched(dependency_closure(layout.program, host=new), None)
    assert after["libT.so"] == layout.at("rpath/libT.so")
    assert after["libX.so"] == layout.at("rpath/libX.so")
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"libT.so", "libX.so"}  # glibc-hwcaps, RPATH, RUNPATH, env: unchanged


def test_ld_library_path_comes_from_the_profile(layout: Layout,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The host's LD_LIBRARY_PATH is used, not this process's environment."""
    monkeypatch.setenv("LD_LIBRARY_PATH", layout.env_dir)
    without = dependency_closure(layout.program, host=this_host(ld_library_path=""))
    assert [m.name for m in without.missing] == ["libE.so"]
    monkeypatch.delenv("LD_LIBRARY_PATH")
    with_env = dependency_closure(layout.program, host=this_host(ld_library_path=layout.env_dir))
    assert with_env.missing == ()


# -- a foreign target, described ------------------------------------------------------

def _as_aarch64(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[18:20] = EM_AARCH64.to_bytes(2, "little")
    path.write_bytes(bytes(data))


@pytest.fixture(scope="session")
def aarch64_layout(gcc: Gcc, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libroot.so (e_machine rewritten to aarch64) needs libA (via $PLATFORM), libB, libS.

    libA is in plat/aarch64/ and plat/aarch64/tls/; libB in env/ and decoy/;
    libS in system/.  Built without the C library, so nothing else is needed.
    """
    folder = tmp_path_factory.mktemp("aarch64-host").resolve()
    stubs = folder / "stubs"
    bare = ["-nostdlib"]
    for name in ("A", "B", "S"):
        gcc.library(stubs / f"lib{name}.so", f"lib{name}.so", flags=bare)
    built = [gcc.library(folder / where / f"lib{name}.so", f"lib{name}.so", flags=bare)
             for name, where in (("A", "plat/aarch64"), ("A", "plat/aarch64/tls"),
                                 ("B", "env"), ("B", "decoy"), ("S", "system"))]
    root = gcc.library(folder / "libroot.so", "libroot.so",
                       needed=[stubs / f"lib{n}.so" for n in ("A", "B", "S")],
                       flags=[*bare, "-Wl,--disable-new-dtags",
                              "-Wl,-rpath,$ORIGIN/plat/$PLATFORM"])
    for path in (*built, root):
        _as_aarch64(path)
    return root


def _no_probing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("this machine was probed")

    monkeypatch.setattr(HostProfile, "of_this_host", refuse)
    monkeypatch.setattr(hostmodule, "_cpuinfo", refuse)
    monkeypatch.setattr(os, "confstr", refuse)
    monkeypatch.setattr(os, "uname", refuse)


@pytest.mark.parametrize(("glibc", "library_a"), [
    ((2, 36), "plat/aarch64/tls/libA.so"),  # legacy tls/ under $PLATFORM's folder
    ((2, 38), "plat/aarch64/libA.so"),
])
def test_foreign_profile_is_honoured_without_probing(
        aarch64_layout: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        glibc: tuple[int, int], library_a: str) -> None:
    folder = aarch64_layout.parent
    monkeypatch.setenv("LD_LIBRARY_PATH", str(folder / "decoy"))
    target = HostProfile(glibc=glibc, machine="aarch64", ld_library_path=str(folder / "env"),
                         cache_path=tmp_path / "no-cache", system_dirs=(str(folder / "system"),))
    _no_probing(monkeypatch)
    closure = dependency_closure(aarch64_layout, host=target)
    assert closure.missing == ()
    assert searched(closure, None) == {"libA.so": str(folder / library_a),
                                       "libB.so": str(folder / "env" / "libB.so"),
                                       "libS.so": str(folder / "system" / "libS.so")}
    with ElfFile.open(aarch64_layout) as elf:
        profile = loader_profile(elf.header, host=target)
    assert profile.platform == "aarch64" and profile.interpreter == "/lib/ld-linux-aarch64.so.1"


def test_described_x86_64_level_picks_glibc_hwcaps(layout: Layout,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """An x86-64-v2 target takes the v2 copy, a baseline one the plain copy, whatever this CPU."""
    def target(level: int) -> HostProfile:
        return HostProfile(glibc=(2, 36), machine="x86_64", cpu_flags=x86_64_level_flags(level),
                           ld_library_path=layout.env_dir)

    _no_probing(monkeypatch)
    assert target(3).x86_64_level == 3
    v2 = searched(dependency_closure(layout.program, host=target(2)), None)
    baseline = searched(dependency_closure(layout.program, host=target(1)), None)
    assert v2["libH.so"] == layout.at("rpath/glibc-hwcaps/x86-64-v2/libH.so")
    assert baseline["libH.so"] == layout.at("rpath/libH.so")


# -- versions -------------------------------------------------------------------------

def test_default_glibc_is_this_hosts() -> None:
    interpreter = "/lib64/ld-linux-x86-64.so.2"
    if not Path(interpreter).is_file():
        pytest.skip(f"no {interpreter} to ask for its version (apt-get install libc6)")
    done = subprocess.run([interpreter, "--version"], capture_output=True, text=True,
                          timeout=60)
    match = re.search(r"version (\d+\.\d+)", done.stdout)
    assert match, done.stdout
    assert HostProfile.of_this_host().glibc == parse_glibc_version(match.group(1))


@pytest.mark.parametrize("version", [(2, 34), (2, 17), (1, 99)])
def test_unmodelled_glibc_is_refused(version: tuple[int, int]) -> None:
    with pytest.raises(ElfpatchError, match=r"older than the loader model covers \(2\.35"):
        HostProfile(glibc=version, machine="x86_64")


def test_a_host_without_glibc_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "confstr", lambda _name: None)
    with pytest.raises(ElfpatchError, match="not glibc"):
        HostProfile.of_this_host()
    assert HostProfile.of_this_host(glibc=(2, 38)).glibc == (2, 38)


def test_glibc_versions_parse() -> None:
    assert parse_glibc_version("glibc 2.36") == (2, 36)
    assert parse_glibc_version("2.41.9000") == (2, 41)
    with pytest.raises(ElfpatchError, match="not a glibc version"):
        parse_glibc_version("musl")


def test_cache_entries_with_legacy_bits_are_skipped_from_glibc_2_40() -> None:
    tls = 1 << 63
    entries = [(0x303, "libt.so", "/tls/libt.so", tls), (0x303, "libt.so", "/plain/libt.so", 0)]
    cache = ldcache.parse_ld_cache(new_cache(entries))
    flags = ldcache.accepted_cache_flags(62, 64)
    assert cache.lookup("libt.so", flags) == "/tls/libt.so"
    assert cache.lookup("libt.so", flags, legacy_entries=False) == "/plain/libt.so"
    assert HostProfile(glibc=(2, 39), machine="x86_64").takes_legacy_cache_entries
    assert not HostProfile(glibc=(2, 40), machine="x86_64").takes_legacy_cache_entries


def test_demangling_works_where_the_closure_model_refuses(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The demangler's trusted places do not depend on the glibc version."""
    from elfpatch.cxx import demangle

    monkeypatch.setattr(os, "confstr", lambda _name: "glibc 2.17")
    with pytest.raises(ElfpatchError):
        HostProfile.of_this_host()
    profile = demangle._interpreter_profile.__wrapped__()
    assert profile.system_dirs and profile.cache_flags


def test_importing_the_loader_probes_nothing() -> None:
    code = ("import os\n"
            "def refuse(*a, **k): raise SystemExit('probed at import time')\n"
            "os.confstr = os.uname = refuse\n"
            "import elfpatch.loader.host, elfpatch.loader.closure, elfpatch.loader.cache\n"
            "import elfpatch.cxx.demangle\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_api_resolves_the_closure_for_the_host_given(layout: Layout) -> None:
    """``elfpatch.inits(..., closure=True, host=...)``: the objects listed are that host's."""
    import elfpatch

    old = this_host(ld_library_path=layout.env_dir)
    new = dataclasses.replace(old, glibc=(2, 37))
    paths = {glibc: {Path(entry.path).relative_to(layout.folder).as_posix()
                     for entry in elfpatch.inits(layout.program, closure=True, host=host,
                                                 follow_code=False).closure or ()
                     if Path(entry.path).is_relative_to(layout.folder)}
             for glibc, host in (("2.36", old), ("2.37", new))}
    assert {"rpath/tls/libT.so", "rpath/x86_64/libX.so"} <= paths["2.36"]
    assert {"rpath/libT.so", "rpath/libX.so"} <= paths["2.37"]
    assert "rpath/tls/libT.so" not in paths["2.37"]
