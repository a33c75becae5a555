"""Compiling and running what the tests need, and the command line in-process.

The scan and reader tests' library and the symbols it must carry; the
platforms it is built for (host, aarch64, 32-bit, big-endian), each skipped
with a reason when its compiler is missing; a copy of a file without section
headers; wheels; c++filt; the CLI run in-process; and inputs from outside
the repository that opt-in tests read.

Builds go through ``elfpatch.fixtures.build``, which caches them by the
sources, the flags and the compiler's identity.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import threading
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from elfpatch.fixtures import build

from elfpatch.cli import main
from elfpatch.elf.file import ElfFile
from support import tools

# The smaller library the fix tests build (programs linked against it print
# use_all()=17); STATICS below adds thread_local and inline variables to it.
LIBRARY = {
    "statics.h": """
#pragma once
#include <string>
inline int& inline_counter() { static int count = 0; return count; }
inline std::string& inline_name() { static std::string name("n"); return name; }
template <class T> T& template_local() { static T value{}; return value; }
template <class T> struct Holder { static int member; static std::string text; };
template <class T> int Holder<T>::member = 3;
template <class T> std::string Holder<T>::text = "t";
template <class T> int& per_thread() { static thread_local int value = 7; return value; }
struct Config { static inline int level = 2; };
""",
    "statics.cpp": """
#include "statics.h"
template struct Holder<long>;
extern "C" int use_all() {
    return inline_counter() + (int)inline_name().size() + template_local<int>()
        + Holder<int>::member + (int)Holder<int>::text.size() + per_thread<int>()
        + Config::level + Holder<long>::member;
}
""",
}

# The scan tests' library: LIBRARY plus thread_local template members, a
# thread_local std::string and C++17 inline variables at namespace scope.
STATICS = {
    "statics.h": LIBRARY["statics.h"] + """\
template <class T> struct PerThread { static thread_local T slot; };
template <class T> thread_local T PerThread<T>::slot = T(5);
inline std::string& thread_name() { static thread_local std::string name("th"); return name; }
inline int global_inline = 9;
namespace ns { inline std::string named_inline = "x"; }
""",
    "statics.cpp": LIBRARY["statics.cpp"] + """\
template struct PerThread<short>;
extern "C" int use_more() {
    return PerThread<int>::slot + (int)thread_name().size() + global_inline
        + (int)ns::named_inline.size();
}
""",
}

# name -> (kind, type) of the UNIQUE definitions STATICS must carry
EXPECTED = {
    "_ZZ14inline_countervE5count": ("function_local_static", "OBJECT"),
    "_ZZ11inline_nameB5cxx11vE4name": ("function_local_static", "OBJECT"),
    "_ZGVZ11inline_nameB5cxx11vE4name": ("guard_variable", "OBJECT"),
    "_ZZ14template_localIiERT_vE5value": ("function_local_static", "OBJECT"),
    "_ZN6HolderIiE6memberE": ("template_static_member", "OBJECT"),  # implicit instantiation
    "_ZN6HolderIlE6memberE": ("template_static_member", "OBJECT"),  # explicit instantiation
    "_ZN6HolderIiE4textB5cxx11E": ("template_static_member", "OBJECT"),
    "_ZGVN6HolderIiE4textB5cxx11E": ("guard_variable", "OBJECT"),
    "_ZN6HolderIlE4textB5cxx11E": ("template_static_member", "OBJECT"),
    "_ZGVN6HolderIlE4textB5cxx11E": ("guard_variable", "OBJECT"),
    "_ZZ10per_threadIiERivE5value": ("function_local_static", "TLS"),
    "_ZN9PerThreadIiE4slotE": ("template_static_member", "TLS"),
    "_ZN9PerThreadIsE4slotE": ("template_static_member", "TLS"),
    "_ZZ11thread_nameB5cxx11vE4name": ("function_local_static", "TLS"),
    "_ZGVZ11thread_nameB5cxx11vE4name": ("guard_variable", "TLS"),
    "_ZN6Config5levelE": ("inline_variable", "OBJECT"),
    "_ZN2ns12named_inlineB5cxx11E": ("inline_variable", "OBJECT"),
    "_ZGVN2ns12named_inlineB5cxx11E": ("guard_variable", "OBJECT"),
    "global_inline": ("inline_variable", "OBJECT"),
}


# Pointer tables that need many relative relocations: runs of neighbouring
# words (RELR bitmaps) and lone pointers far apart (RELR addresses).
POINTERS = {
    "pointers.cpp": """
static int a, b, c;
extern "C" {
int* dense[150] = {
#define P4 &a, &b, &c, &a,
#define P16 P4 P4 P4 P4
P16 P16 P16 P16 P16 P16 P16 P16 P16 &a, &b, &c, &a, &b, &c
};
struct Sparse { int* p; char gap[600]; };
Sparse sparse[5] = {{&a, {}}, {&b, {}}, {&c, {}}, {&a, {}}, {&b, {}}};
}
""",
}


@dataclass(frozen=True)
class Platform:
    """A compiler for one kind of machine, with the flags that select it."""

    name: str
    toolchain: build.Toolchain
    flags: tuple[str, ...] = ()

    @property
    def strip(self) -> str:
        cxx = self.toolchain.cxx
        return cxx[: -len("g++")] + "strip" if cxx.endswith("-g++") else "strip"

    def library(self, flags: tuple[str, ...] | list[str] = (), sources: dict[str, str] = STATICS,
                name: str = "libunique") -> Path:
        return build.build_shared(sources, name, ["-O1", *self.flags, *flags],
                                  toolchain=self.toolchain)


PLATFORMS = ("host", "aarch64", "32bit", "bigendian")


def platform(name: str) -> Platform:
    """The platform ``name`` (one of PLATFORMS), or a skip saying what is missing."""
    found = _find_platform(name)
    if isinstance(found, str):
        pytest.skip(found)
    return found


@functools.cache
def _find_platform(name: str) -> Platform | str:
    if not build.compiler_available():
        return "no C++ compiler (g++) installed (apt-get install g++)"
    if name == "host":
        return Platform("host", build.host_toolchain())
    if name == "aarch64":
        toolchain = build.cross_toolchain("aarch64")
        return Platform(name, toolchain) if toolchain else (
            "aarch64-linux-gnu-g++ is not installed (apt-get install g++-aarch64-linux-gnu)")
    if name == "32bit":
        multilib = Platform(name, build.host_toolchain(), ("-m32",))
        if _builds(multilib):
            return multilib
        toolchain = build.cross_toolchain("i686")
        return (Platform(name, toolchain) if toolchain else
                "neither g++ -m32 (multilib) nor i686-linux-gnu-g++ is usable "
                "(apt-get install g++-i686-linux-gnu)")
    if name == "bigendian":
        for machine in ("s390x", "powerpc64"):
            toolchain = build.cross_toolchain(machine)
            if toolchain is not None:
                return Platform(name, toolchain)
        return ("no big-endian cross g++ (s390x-linux-gnu-g++, powerpc64-linux-gnu-g++) "
                "(apt-get install g++-s390x-linux-gnu)")
    raise ValueError(name)


def _builds(candidate: Platform) -> bool:
    try:
        candidate.library([], {"probe.cpp": "int probe() { return 1; }\n"}, "libprobe")
    except build.BuildError:
        return False
    return True


def require_tool(name: str) -> str:
    return tools.require_tool(name)


# -- files derived from a build -------------------------------------------------

def compile_linked(compiler: str, language: str, output: Path, source: str, *,
                   soname: str | None = None, needed: Sequence[Path] = (),
                   flags: Sequence[str] = ()) -> Path:
    """Compile ``source`` (``language``: c or c++) at -O0 into ``output``, a shared library
    when ``soname`` is given; ``needed`` become DT_NEEDED in this order.

    Built once in the shared build cache, keyed by everything the output depends on,
    and copied to ``output``.
    """
    output.parent.mkdir(parents=True, exist_ok=True)
    arguments = ["-O0", "-x", language, "-", "-x", "none", "-Wl,--no-as-needed",
                 *map(str, needed), *flags]
    if soname is not None:
        arguments += ["-shared", "-fPIC", f"-Wl,-soname,{soname}"]
    cached = _linked_in_cache(compiler, arguments, source, needed)
    shutil.copy2(cached, output)
    return output


def _linked_in_cache(compiler: str, arguments: list[str], source: str,
                     needed: Sequence[Path]) -> Path:
    """The output of ``compiler -o OUT arguments`` with ``source`` on stdin, from the cache."""
    key = json.dumps({"compiler": _identity(compiler), "arguments": arguments,
                      "source": source, "needed": [_needed_key(path) for path in needed]})
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    cached = build.cache_root() / "linked" / digest
    if cached.is_file():
        return cached
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_name(f".{digest}-{os.getpid()}-{threading.get_ident()}")
    command = [compiler, "-o", str(partial), *arguments]
    done = subprocess.run(command, input=source, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{' '.join(command)}\n{done.stderr}"
    partial.replace(cached)  # whole or not at all, whoever builds it at the same time
    return cached


@functools.cache
def _identity(compiler: str) -> str:
    path = shutil.which(compiler) or compiler
    version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    return f"{path}\n{version}"


def _needed_key(path: Path) -> tuple[str, str]:
    """What a needed library puts in the output: its DT_SONAME when it has one (then its
    folder does not matter), else the path as given; and its bytes, for its symbols."""
    data = path.read_bytes()
    with ElfFile(data, str(path)) as elf:
        named = elf.soname is not None
    return (path.name if named else str(path), hashlib.sha256(data).hexdigest())


def remove_section_headers(source: Path, destination: Path) -> Path:
    """A copy with e_shoff, e_shnum and e_shstrndx zeroed: only PT_DYNAMIC is left."""
    data = bytearray(source.read_bytes())
    is_64 = data[4] == 2
    order = "little" if data[5] == 1 else "big"
    shoff, shnum, shstrndx = (0x28, 0x3C, 0x3E) if is_64 else (0x20, 0x30, 0x32)
    data[shoff : shoff + (8 if is_64 else 4)] = bytes(8 if is_64 else 4)
    data[shnum : shnum + 2] = (0).to_bytes(2, order)
    data[shstrndx : shstrndx + 2] = (0).to_bytes(2, order)
    destination.write_bytes(bytes(data))
    return destination


def stripped_copy(source: Path, destination: Path, strip: str = "strip") -> Path:
    require_tool(strip)
    shutil.copy(source, destination)
    subprocess.run([strip, "--strip-all", str(destination)], check=True, capture_output=True)
    return destination


def another_distribution(wheel: Path, folder: Path, name: str = "otherpkg") -> Path:
    """``wheel`` (of distribution ``uniqpkg``) as the wheel of another distribution: the
    same libraries, so each UNIQUE symbol they define clashes between the two."""
    other = folder / wheel.name.replace("uniqpkg", name)
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(other, "w") as target:
        for info in source.infolist():
            target.writestr(info.filename.replace("uniqpkg", name), source.read(info.filename))
    return other


def make_wheel(path: Path, members: dict[str, bytes], with_metadata: bool = True) -> Path:
    """A wheel-shaped zip: ``members`` plus, unless told not to, dist-info WHEEL and RECORD."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        if with_metadata:
            archive.writestr("pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
            record = "".join(f"{name},,\n" for name in members)
            archive.writestr("pkg-1.0.dist-info/RECORD", record + "pkg-1.0.dist-info/RECORD,,\n")
    return path


def cxxfilt(names: list[str]) -> list[str]:
    """c++filt's demangling, without its verbose expansions.

    By default c++filt spells out the standard abbreviations (``std::string``
    becomes ``std::basic_string<char, std::char_traits<char>, ...>``); ``-i``
    keeps them, as ``nm -C``, ``readelf -C`` and ``__cxa_demangle`` do.
    """
    require_tool("c++filt")
    result = subprocess.run(["c++filt", "-i"], input="\n".join(names) + "\n",
                            capture_output=True, text=True, check=True)
    return result.stdout.splitlines()


# -- the command line, in-process ---------------------------------------------------

@dataclass(frozen=True)
class CliResult:
    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None


def invoke(*args: str) -> CliResult:
    """``elfpatch ARGS`` through click's CliRunner, stdout and stderr apart."""
    try:
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        runner = CliRunner()
    result = runner.invoke(main, list(args), catch_exceptions=True)
    exception = result.exception
    if isinstance(exception, SystemExit | click.exceptions.Exit):
        exception = None
    return CliResult(result.exit_code, result.stdout, result.stderr, exception)


def output_of(built: object) -> dict[str, str]:
    """key=value lines a fixture host prints."""
    stdout = built.run().stdout  # type: ignore[attr-defined]
    pairs = (line.split("=", 1) for line in stdout.splitlines() if "=" in line)
    return {key: value for key, value in pairs}


# -- opt-in inputs ------------------------------------------------------------------

# Opt-in tests on real, large inputs (a PyTorch wheel and one of its libraries)
# that are not part of the repository: each runs only when its variable names a file.
TORCH_LIBRARY_VARIABLE = "ELFPATCH_TORCH_LIB"  # e.g. .../torch/lib/libtorch_cpu.so
TORCH_WHEEL_VARIABLE = "ELFPATCH_TORCH_WHEEL"  # e.g. torch-...-manylinux_2_28_x86_64.whl


def opt_in_file(variable: str, what: str) -> Path:
    """The file ``$variable`` names; a skip when it is unset, a failure when it is missing."""
    configured = os.environ.get(variable)
    if not configured:
        pytest.skip(f"set {variable} to {what} to run this")
    path = Path(configured)
    if not path.is_file():
        pytest.fail(f"{variable}={configured}: no such file")
    return path
